"""Simulated vLLM V1 engine whose Prometheus metrics evolve like a real server in a named scenario."""

from __future__ import annotations

import heapq
import http.server
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.utils import floatToGoString

from triage.errors import TriageError
from triage.knowledge.loader import DEFAULT_TREE_DIR, load_knowledge
from triage.knowledge.scenarios import Params, Scenario

MODEL_NAME = "meta-llama/Llama-3.1-8B-Instruct"
ENGINE = "0"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TICK_S = 0.2           # simulation step; engine steps inside a tick are modelled as a fluid
WARMUP_TICKS = 600     # 120 s simulated before t0, so the first render is already in steady state
MAX_CATCHUP_S = 600.0  # serve(): after a longer pause the clock jumps instead of simulating every tick
REASONS = ("stop", "length", "abort")

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)
LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                   240.0, 480.0, 960.0, 1920.0, 7680.0)
# vllm:nixl_xfer_time_seconds (NixlPromMetrics: buckets[1:] of 0.001 … 5.0; vllm-project/vllm
# vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py, the version tree/engines/vllm.yaml records)
NIXL_XFER_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0)
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")


def load_scenarios(tree_dir: Path | None = None) -> dict[str, Scenario]:
    """Scenarios by id from tree/scenarios.yaml (validated with the rest of the tree)."""
    return load_knowledge(tree_dir).scenarios


# The repository's scenarios (tests and benches parametrize over them). A run reads the active tree's instead
# (load_scenarios(), get_scenario()), so --tree-dir holds.
SCENARIOS: dict[str, Scenario] = load_scenarios(DEFAULT_TREE_DIR)


def get_scenario(name: str) -> Scenario:
    """A scenario of the active tree by id; TriageError naming the valid ones."""
    scenarios = load_scenarios()
    if name not in scenarios:
        raise TriageError(f"unknown scenario '{name}'; valid: {', '.join(scenarios)}", key="--scenario")
    return scenarios[name]


def build_1_2_5_buckets(max_value: int) -> list[float]:
    """vLLM's token-count buckets: 1, 2, 5, 10, 20, 50, … up to ``max_value``."""
    out: list[float] = []
    exponent = 0
    while True:
        for m in (1, 2, 5):
            value = m * 10**exponent
            if value > max_value:
                return out
            out.append(float(value))
        exponent += 1


def prefix_cache_hit(p: Params, rng: np.random.Generator, counters: dict[str, float], tokens: int) -> int:
    """Prompt tokens served from the prefix cache (whole blocks, never the last token), counted like vLLM does."""
    if not p.prefix_caching:
        return 0
    share = float(np.clip(rng.normal(p.prefix_hit, 0.1), 0.0, 0.98))
    cached = min(int(tokens * share) // p.block_size * p.block_size, tokens - 1)
    counters["prefix_queries"] += tokens
    counters["prefix_hits"] += cached
    return cached


class _Hist:
    """A Prometheus histogram kept as per-bucket counts; observations may carry a count (weight)."""

    def __init__(self, bounds: Iterable[float]) -> None:
        self.bounds = np.asarray(list(bounds), dtype=float)
        self.counts = np.zeros(len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, values: Any, weights: Any = None) -> None:
        values = np.atleast_1d(np.asarray(values, dtype=float))
        if values.size == 0:
            return
        w = np.ones_like(values) if weights is None else np.broadcast_to(np.asarray(weights, dtype=float), values.shape)
        idx = np.searchsorted(self.bounds, values, side="left")
        self.counts += np.bincount(idx, weights=w, minlength=len(self.counts))
        self.sum += float(np.dot(values, w))

    def buckets(self) -> list[tuple[str, float]]:
        cum = np.cumsum(self.counts)
        les = [floatToGoString(b) for b in self.bounds] + ["+Inf"]
        return list(zip(les, (float(c) for c in cum)))


class _Table:
    """Per-request state in numpy columns; finished rows are reused."""

    FLOATS = ("arrival", "sched", "admitted", "first_tok", "last_tok", "generated", "steps", "prefill_left")
    INTS = ("prompt", "out_len", "reason", "blocks")
    arrival: np.ndarray
    sched: np.ndarray
    admitted: np.ndarray
    first_tok: np.ndarray
    last_tok: np.ndarray
    generated: np.ndarray
    steps: np.ndarray
    prefill_left: np.ndarray
    prompt: np.ndarray
    out_len: np.ndarray
    reason: np.ndarray
    blocks: np.ndarray

    def __init__(self, capacity: int = 256) -> None:
        for name in self.FLOATS:
            setattr(self, name, np.zeros(capacity))
        for name in self.INTS:
            setattr(self, name, np.zeros(capacity, dtype=np.int64))
        self.free = list(range(capacity - 1, -1, -1))

    def new(self) -> int:
        if not self.free:
            self._grow()
        return self.free.pop()

    def release(self, ids: np.ndarray) -> None:
        self.free.extend(int(i) for i in ids)

    def _grow(self) -> None:
        old = len(self.arrival)
        for name in self.FLOATS + self.INTS:
            col = getattr(self, name)
            setattr(self, name, np.concatenate([col, np.zeros_like(col)]))
        self.free = list(range(2 * old - 1, old - 1, -1))


@dataclass(frozen=True)
class Finished:
    """Requests that finished in one engine step, one entry per request: what a router in front of the engine sees
    of them (arrival, first token and last token times, prompt and output tokens)."""

    arrival: np.ndarray
    first_token: np.ndarray
    end: np.ndarray
    prompt: np.ndarray
    output: np.ndarray


class Simulator:
    """A deterministic discrete-time model of one vLLM V1 engine (continuous batching, chunked prefill,
    paged KV cache with recompute preemption, optional speculative decoding, optionally a PD decode instance that
    reads each prompt's KV over NIXL first) and its /metrics."""

    def __init__(self, scenario: str, seed: int = 0, start: float | None = None,
                 overrides: dict[str, Any] | None = None) -> None:
        self.scenario = get_scenario(scenario)
        # ``overrides``: parameters changed from the scenario's (one replica of a fleet on a slower node, with more
        # traffic …), validated as the scenario file's are
        self.p = Params.model_validate({**self.scenario.params.model_dump(), **overrides}) if overrides \
            else self.scenario.params
        self.rng = np.random.default_rng(seed)
        self.now = time.time() if start is None else float(start)
        self._origin = self.now - WARMUP_TICKS * TICK_S
        self._created = self._origin
        self._k = 0
        self.tab = _Table()
        self.waiting: deque[int] = deque()
        # PD decode instance: requests whose KV is still arriving, as (ready time, request, failed) in a heap;
        # vLLM keeps them in its waiting queue (WAITING_FOR_REMOTE_KVS), counted with reason="deferred"
        self.transferring: list[tuple[float, int, bool]] = []
        self.running: list[int] = []
        self.used_blocks = 0
        self._carry = 0.0  # prefill tokens already done in a step that spans ticks
        self._took: dict[int, float] = {}  # PD: each transferring request's transfer time
        self._failed: set[int] = set()     # PD: requests whose transfer failed (prefilled here)
        self.counters = dict.fromkeys(("preemptions", "prefix_queries", "prefix_hits", "prompt_tokens",
                                       "generation_tokens", "spec_drafts", "spec_draft_tokens",
                                       "spec_accepted_tokens", "xfer_failed", *PROMPT_SOURCES), 0.0)
        self.success = np.zeros(len(REASONS))
        self.hists = self._new_hists()
        self.listeners: list[Callable[[Finished], None]] = []  # a simulated router's view of finished requests
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(_Collector(self))
        self._run_until(self.now)

    # ---- public ------------------------------------------------------------------------------------
    def advance(self, seconds: float) -> None:
        """Simulate ``seconds`` more; ``now`` moves by exactly that, the engine in whole ticks."""
        if seconds < 0:
            raise ValueError("cannot advance by a negative time")
        self.now += seconds
        self._run_until(self.now)

    def render(self) -> str:
        """Prometheus text exposition (format 0.0.4) of the current state, as vLLM's /metrics serves it."""
        return generate_latest(self._registry).decode("utf-8")

    def families(self, created: bool = True, timestamp: float | None = None) -> list[Metric]:
        """The current state as prometheus_client metric families (optionally timestamped)."""
        return _families(self, created, timestamp)

    def jump(self, to: float) -> None:
        """Move the clock to ``to`` without simulating the gap (after a long pause in serving)."""
        if to > self.now:
            self._origin += to - self.now
            self.now = to

    # ---- engine loop --------------------------------------------------------------------------------
    def _new_hists(self) -> dict[str, _Hist]:
        tokens = build_1_2_5_buckets(self.p.max_model_len)
        hists = {"ttft": TTFT_BUCKETS, "itl": ITL_BUCKETS, "tpot": ITL_BUCKETS, "e2e": LATENCY_BUCKETS,
                 "queue": LATENCY_BUCKETS, "inference": LATENCY_BUCKETS, "prefill": LATENCY_BUCKETS,
                 "decode": LATENCY_BUCKETS, "prompt_len": tokens, "output_len": tokens}
        return {**{k: _Hist(v) for k, v in hists.items()}, "xfer": _Hist(NIXL_XFER_BUCKETS)}

    @property
    def pd_decode(self) -> bool:
        """Whether this engine is a PD decode instance reading its prompts' KV over NIXL."""
        return self.p.kv_transfer_s > 0

    def _run_until(self, t: float) -> None:
        while self._origin + (self._k + 1) * TICK_S <= t + 1e-9:
            start = self._origin + self._k * TICK_S
            self._arrive(start, TICK_S)
            self._admit(start)
            self._compute(start, TICK_S)
            self._admit(start + TICK_S)  # the scheduler refills freed slots before the gauges are read
            self._k += 1

    def _arrive(self, t0: float, dt: float) -> None:
        n = int(self.rng.poisson(self.p.rate * dt))
        if n == 0:
            return
        times = np.sort(t0 + self.rng.random(n) * dt)
        prompts = self._draw_prompts(n)
        outs, reasons = self._draw_outputs(n, prompts)
        for i in range(n):
            if len(self.waiting) + len(self.transferring) + len(self.running) >= self.p.max_concurrency:
                break  # the load generator is at its concurrency cap: this request is not sent
            self._enqueue(float(times[i]), int(prompts[i]), int(outs[i]), int(reasons[i]))

    def _enqueue(self, t: float, prompt: int, out_len: int, reason: int) -> None:
        tab = self.tab
        rid = tab.new()
        tab.arrival[rid], tab.prompt[rid], tab.out_len[rid], tab.reason[rid] = t, prompt, out_len, reason
        tab.sched[rid] = tab.first_tok[rid] = np.nan
        tab.generated[rid] = tab.steps[rid] = tab.prefill_left[rid] = 0.0
        tab.blocks[rid] = 0
        if not self.pd_decode:
            self.waiting.append(rid)
            return
        # the decode instance pulls the prompt's KV first: the request waits for it in the queue (deferred)
        p = self.p
        took = float(self.rng.lognormal(math.log(p.kv_transfer_s), p.kv_transfer_sigma))
        heapq.heappush(self.transferring, (t + took, rid, bool(self.rng.random() < p.kv_transfer_fail_frac)))
        if took:
            self._took[rid] = took

    def _transfers_done(self, t: float) -> None:
        """Requests whose KV transfer ended by ``t`` join the queue in that order: a transfer that worked is
        observed in the NIXL histogram, a failed one is counted, and its prompt will be prefilled here."""
        while self.transferring and self.transferring[0][0] <= t + 1e-9:
            _, rid, failed = heapq.heappop(self.transferring)
            took = self._took.pop(rid, 0.0)
            if failed:
                self.counters["xfer_failed"] += 1
                self._failed.add(rid)
            else:
                self.hists["xfer"].observe(took)
            self.waiting.append(rid)

    def _draw_prompts(self, n: int) -> np.ndarray:
        p = self.p
        short = self.rng.lognormal(math.log(p.prompt_median), p.prompt_sigma, n)
        long = self.rng.lognormal(math.log(p.long_prompt_median), p.long_prompt_sigma, n)
        prompts = np.where(self.rng.random(n) < p.long_frac, long, short)
        return np.clip(np.rint(prompts), 1, p.max_model_len - 1).astype(np.int64)

    def _draw_outputs(self, n: int, prompts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = self.p
        wanted = np.maximum(np.rint(self.rng.lognormal(math.log(p.output_median), p.output_sigma, n)), 1)
        cap = np.minimum(p.max_tokens, p.max_model_len - prompts)
        reasons = np.where(wanted > cap, 1, 0)
        outs = np.minimum(wanted, cap)
        aborted = self.rng.random(n) < p.abort_frac
        cut = np.maximum(np.rint(outs * self.rng.random(n)), 1)
        return np.where(aborted, cut, outs).astype(np.int64), np.where(aborted, 2, reasons)

    def _admit(self, t0: float) -> None:
        """FCFS admission while a batch slot and enough free KV blocks (above the reserve) exist."""
        p, tab = self.p, self.tab
        self._transfers_done(t0)
        limit = p.num_gpu_blocks * (1.0 - p.admit_reserve)
        while self.waiting and len(self.running) < p.max_num_seqs:
            rid = self.waiting[0]
            tokens = int(tab.prompt[rid] + math.floor(tab.generated[rid]))
            need = -(-(tokens + 1) // p.block_size)
            if self.running and self.used_blocks + need > limit:
                break
            self.waiting.popleft()
            self._start(rid, max(t0, tab.arrival[rid]), tokens, need)

    def _start(self, rid: int, t: float, tokens: int, blocks: int) -> None:
        tab = self.tab
        if np.isnan(tab.sched[rid]):
            tab.sched[rid] = t
        tab.admitted[rid] = t
        cached = self._cached_tokens(tokens)
        if self.pd_decode:
            cached = self._by_source(rid, tokens, cached)
        tab.prefill_left[rid] = tokens - cached
        tab.blocks[rid] = blocks
        self.used_blocks += blocks
        self.running.append(rid)

    def _cached_tokens(self, tokens: int) -> int:
        return prefix_cache_hit(self.p, self.rng, self.counters, tokens)

    def _by_source(self, rid: int, tokens: int, hit: int) -> int:
        """PD decode instance: the local prefix-cache hit, then the KV received over NIXL (whole blocks, never the
        last token, as vLLM's connector loads them), the rest prefilled here; a failed transfer received nothing.
        Counted as vllm:prompt_tokens_by_source_total once per request (a preempted one is not counted again);
        returns the tokens this request need not prefill."""
        if rid in self._failed or not np.isnan(self.tab.first_tok[rid]):
            got = 0  # a failed transfer, or a preempted request (its KV freed here) recomputed locally
            self._failed.discard(rid)
        else:
            got = max((tokens - 1) // self.p.block_size * self.p.block_size - hit, 0)
        if np.isnan(self.tab.first_tok[rid]):
            self.counters["local_cache_hit"] += hit
            self.counters["external_kv_transfer"] += got
            self.counters["local_compute"] += tokens - hit - got
        return hit + got

    def _step_time(self, ids: np.ndarray) -> float:
        p, tab = self.p, self.tab
        ctx = float(np.sum(tab.prompt[ids] + tab.generated[ids])) if ids.size else 0.0
        base = p.step_base_s + p.step_per_seq_s * ids.size + p.step_per_kv_token_s * ctx
        return base * (1.0 + p.spec_overhead) if p.spec_tokens else base

    def _compute(self, t0: float, dt: float) -> None:
        """One tick of engine steps: a chunked-prefill phase (prefill + decode) then a decode-only phase."""
        if not self.running:
            return
        ids = np.asarray(self.running, dtype=np.int64)
        prefilling = self.tab.prefill_left[ids] > 0
        dec_ids, pre_ids = ids[~prefilling], ids[prefilling]
        noise = math.exp(self.rng.normal(0.0, self.p.step_jitter))
        s1 = self._step_time(dec_ids) * noise
        t1 = 0.0
        new_ids, new_t = np.empty(0, dtype=np.int64), np.empty(0)
        if pre_ids.size:
            pending = float(np.sum(self.tab.prefill_left[pre_ids]))
            chunk = min(pending + self._carry, max(self.p.max_num_batched_tokens - dec_ids.size, 1))
            s1 += self.p.prefill_per_token_s * chunk * noise
            t1 = min(dt, pending / chunk * s1)
            done = chunk * t1 / s1
            self._carry = (self._carry + done) % chunk if t1 >= dt else 0.0
            new_ids, new_t = self._prefill(pre_ids, t0, dt, s1, chunk, done)
        all_dec = np.concatenate([dec_ids, new_ids])
        s2 = self._step_time(all_dec) * noise
        starts = np.concatenate([np.full(dec_ids.size, t0), new_t])
        self._decode(all_dec, starts, t0 + t1, t0 + dt, s1, s2)
        self._grow_kv()

    def _prefill(self, pre_ids: np.ndarray, t0: float, dt: float, s1: float, chunk: float,
                 done: float) -> tuple[np.ndarray, np.ndarray]:
        """Spend ``done`` prefill tokens FCFS; returns the requests whose prefill finished and when."""
        tab = self.tab
        left = tab.prefill_left[pre_ids]
        cum = np.cumsum(left)
        finished = cum <= done + 1e-6
        prev = cum - left
        partial = ~finished & (prev < done)
        tab.prefill_left[pre_ids[partial]] -= done - prev[partial]
        fin = pre_ids[finished]
        t = np.minimum(np.maximum(t0 + cum[finished] / chunk * s1, tab.admitted[fin] + s1), t0 + dt)
        tab.prefill_left[fin] = 0.0
        self._first_tokens(fin, t)
        return fin, t

    def _first_tokens(self, ids: np.ndarray, t: np.ndarray) -> None:
        """A finished prefill emits a token: the first one (TTFT), or the next after a preemption stall."""
        if not ids.size:
            return
        tab = self.tab
        first = np.isnan(tab.first_tok[ids])
        self.hists["ttft"].observe(t[first] - tab.arrival[ids[first]])
        self.counters["prompt_tokens"] += float(np.sum(tab.prompt[ids[first]]))
        tab.first_tok[ids[first]] = t[first]
        self.hists["itl"].observe(t[~first] - tab.last_tok[ids[~first]])
        tab.generated[ids] = np.floor(tab.generated[ids]) + 1.0
        tab.last_tok[ids] = t
        self.counters["generation_tokens"] += ids.size

    def _decode(self, ids: np.ndarray, starts: np.ndarray, t1: float, t2: float, s1: float, s2: float) -> None:
        """Advance decoding requests by the steps they got in [start, t1] (slow, with prefill) and [.., t2]."""
        if not ids.size:
            return
        p, tab = self.p, self.tab
        per_step = 1.0 + p.spec_tokens * p.spec_acceptance
        steps1 = np.clip(t1 - starts, 0.0, None) / s1
        steps2 = (t2 - np.maximum(starts, t1)) / s2
        gen0, st0 = tab.generated[ids], tab.steps[ids]
        remaining = np.maximum(tab.out_len[ids] - gen0, 0.0) / per_step
        total = np.minimum(steps1 + steps2, remaining)
        a1 = np.minimum(steps1, total)
        e1 = np.floor(st0 + a1) - np.floor(st0)
        e2 = np.floor(st0 + total) - np.floor(st0 + a1)
        self.hists["itl"].observe([s1, s2], [e1.sum(), e2.sum()])
        finishing = remaining <= steps1 + steps2
        gen = np.where(finishing, tab.out_len[ids], gen0 + total * per_step)
        self.counters["generation_tokens"] += float(np.sum(np.floor(gen) - np.floor(gen0)))
        tab.generated[ids], tab.steps[ids] = gen, st0 + total
        emitted = (e1 + e2) > 0
        tab.last_tok[ids[emitted]] = t2
        self._count_spec(float(e1.sum() + e2.sum()))
        done = ids[finishing]
        if done.size:
            start, rem, st1 = starts[finishing], remaining[finishing], steps1[finishing]
            self._finish(done, np.where(rem <= st1, start + rem * s1, np.maximum(start, t1) + (rem - st1) * s2))

    def _count_spec(self, steps: float) -> None:
        p = self.p
        if not p.spec_tokens or steps <= 0:
            return
        drafted = int(steps) * p.spec_tokens
        self.counters["spec_drafts"] += int(steps)
        self.counters["spec_draft_tokens"] += drafted
        self.counters["spec_accepted_tokens"] += int(self.rng.binomial(drafted, p.spec_acceptance))

    def _finish(self, ids: np.ndarray, t: np.ndarray) -> None:
        if not ids.size:
            return
        tab, h = self.tab, self.hists
        arrival, sched, first = tab.arrival[ids], tab.sched[ids], tab.first_tok[ids]
        out = tab.out_len[ids].astype(float)
        h["e2e"].observe(t - arrival)
        h["queue"].observe(sched - arrival)
        h["prefill"].observe(first - sched)
        h["decode"].observe(t - first)
        h["inference"].observe(t - sched)
        h["tpot"].observe(np.where(out > 1, (t - first) / np.maximum(out - 1, 1), 0.0))
        h["prompt_len"].observe(tab.prompt[ids])
        h["output_len"].observe(out)
        self.success += np.bincount(tab.reason[ids], minlength=len(REASONS))
        if self.listeners:
            done = Finished(arrival.copy(), first.copy(), np.asarray(t, dtype=float).copy(),
                            tab.prompt[ids].astype(float), out)
            for listener in self.listeners:
                listener(done)
        self.used_blocks -= int(np.sum(tab.blocks[ids]))
        gone = set(ids.tolist())
        self.running = [r for r in self.running if r not in gone]
        tab.release(ids)

    def _grow_kv(self) -> None:
        """Decoding requests take a new block every block_size tokens; if none is free, the newest
        running request is preempted (its blocks freed, recomputed later) — vLLM V1 behaviour."""
        if not self.running:
            return
        p, tab = self.p, self.tab
        ids = np.asarray(self.running, dtype=np.int64)
        decoding = ids[tab.prefill_left[ids] <= 0]
        need = -(-(tab.prompt[decoding] + np.floor(tab.generated[decoding]).astype(np.int64) + 1) // p.block_size)
        grow = np.maximum(need - tab.blocks[decoding], 0)
        tab.blocks[decoding] += grow
        self.used_blocks += int(grow.sum())
        while self.used_blocks > p.num_gpu_blocks and len(self.running) > 1:
            self._preempt(self.running.pop())

    def _preempt(self, rid: int) -> None:
        tab = self.tab
        self.used_blocks -= int(tab.blocks[rid])
        tab.blocks[rid] = 0
        tab.prefill_left[rid] = 0.0
        self.waiting.appendleft(rid)
        self.counters["preemptions"] += 1


# ---- exposition ---------------------------------------------------------------------------------------
ENGINE_LABELS = ["model_name", "engine"]
_GAUGES = (("vllm:num_requests_running", "Number of requests in model execution batches."),
           ("vllm:num_requests_waiting", "Number of requests waiting to be processed."),
           ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."))
_COUNTERS = (("vllm:num_preemptions", "preemptions", "Cumulative number of preemption from the engine."),
             ("vllm:prefix_cache_queries", "prefix_queries",
              "Prefix cache queries, in terms of number of queried tokens."),
             ("vllm:prefix_cache_hits", "prefix_hits", "Prefix cache hits, in terms of number of cached tokens."),
             ("vllm:prompt_tokens", "prompt_tokens", "Number of prefill tokens processed."),
             ("vllm:generation_tokens", "generation_tokens", "Number of generation tokens processed."))
_SPEC_COUNTERS = (("vllm:spec_decode_num_drafts", "spec_drafts", "Number of spec decoding drafts."),
                  ("vllm:spec_decode_num_draft_tokens", "spec_draft_tokens", "Number of draft tokens."),
                  ("vllm:spec_decode_num_accepted_tokens", "spec_accepted_tokens", "Number of accepted tokens."))
_HISTS = (("vllm:time_to_first_token_seconds", "ttft", "Histogram of time to first token in seconds."),
          ("vllm:inter_token_latency_seconds", "itl", "Histogram of inter-token latency in seconds."),
          ("vllm:request_time_per_output_token_seconds", "tpot",
           "Histogram of time_per_output_token_seconds per request."),
          ("vllm:e2e_request_latency_seconds", "e2e", "Histogram of e2e request latency in seconds."),
          ("vllm:request_queue_time_seconds", "queue", "Histogram of time spent in WAITING phase for request."),
          ("vllm:request_inference_time_seconds", "inference",
           "Histogram of time spent in RUNNING phase for request."),
          ("vllm:request_prefill_time_seconds", "prefill", "Histogram of time spent in PREFILL phase for request."),
          ("vllm:request_decode_time_seconds", "decode", "Histogram of time spent in DECODE phase for request."),
          ("vllm:request_prompt_tokens", "prompt_len", "Number of prefill tokens processed."),
          ("vllm:request_generation_tokens", "output_len", "Number of generation tokens processed."))


def _cache_config_labels(p: Params) -> dict[str, str]:
    return {"block_size": str(p.block_size), "cache_dtype": "auto", "enable_prefix_caching": str(p.prefix_caching),
            "engine": ENGINE, "gpu_memory_utilization": "0.92",
            "kv_cache_max_concurrency": f"{round(p.kv_max_concurrency, 2):g}",
            "kv_cache_size_tokens": str(p.num_gpu_blocks * p.block_size), "num_gpu_blocks": str(p.num_gpu_blocks)}


def _gauge_families(sim: Simulator, ts: float | None) -> list[Metric]:
    # requests waiting for their KV are in vLLM's waiting queue too: num_requests_waiting is capacity + deferred
    waiting = len(sim.waiting) + len(sim.transferring)
    values = (len(sim.running), waiting, sim.used_blocks / sim.p.num_gpu_blocks)
    out: list[Metric] = []
    for (name, doc), value in zip(_GAUGES, values):
        fam = GaugeMetricFamily(name, doc, labels=ENGINE_LABELS)
        fam.add_metric([MODEL_NAME, ENGINE], float(value), timestamp=ts)
        out.append(fam)
    if sim.pd_decode:
        fam = GaugeMetricFamily("vllm:num_requests_waiting_by_reason", "Number of requests waiting, by reason.",
                                labels=[*ENGINE_LABELS, "reason"])
        fam.add_metric([MODEL_NAME, ENGINE, "capacity"], float(len(sim.waiting)), timestamp=ts)
        fam.add_metric([MODEL_NAME, ENGINE, "deferred"], float(len(sim.transferring)), timestamp=ts)
        out.append(fam)
    info = _cache_config_labels(sim.p)
    fam = GaugeMetricFamily("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=list(info))
    fam.add_metric(list(info.values()), 1.0, timestamp=ts)
    return [*out, fam]


def _counter_families(sim: Simulator, created: float | None, ts: float | None) -> list[Metric]:
    table = _COUNTERS + (_SPEC_COUNTERS if sim.p.spec_tokens else ())
    out: list[Metric] = []
    for name, key, doc in table:
        fam = CounterMetricFamily(name, doc, labels=ENGINE_LABELS)
        fam.add_metric([MODEL_NAME, ENGINE], float(sim.counters[key]), created=created, timestamp=ts)
        out.append(fam)
    fam = CounterMetricFamily("vllm:request_success", "Count of successfully processed requests.",
                              labels=[*ENGINE_LABELS, "finished_reason"])
    for reason, value in zip(REASONS, sim.success):
        fam.add_metric([MODEL_NAME, ENGINE, reason], float(value), created=created, timestamp=ts)
    out.append(fam)
    if sim.pd_decode:  # the NIXL connector's failures and the prompt tokens by where their KV came from
        fam = CounterMetricFamily("vllm:nixl_num_failed_transfers", "Number of failed NIXL KV Cache transfers.",
                                  labels=ENGINE_LABELS)
        fam.add_metric([MODEL_NAME, ENGINE], sim.counters["xfer_failed"], created=created, timestamp=ts)
        out.append(fam)
        fam = CounterMetricFamily("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.",
                                  labels=[*ENGINE_LABELS, "source"])
        for source in PROMPT_SOURCES:
            fam.add_metric([MODEL_NAME, ENGINE, source], sim.counters[source], created=created, timestamp=ts)
        out.append(fam)
    return out


def _hist_families(sim: Simulator, ts: float | None) -> list[Metric]:
    xfer = (("vllm:nixl_xfer_time_seconds", "xfer", "Histogram of transfer duration for NIXL KV Cache transfers."),)
    out: list[Metric] = []
    for name, key, doc in _HISTS + (xfer if sim.pd_decode else ()):
        fam = HistogramMetricFamily(name, doc, labels=ENGINE_LABELS)
        fam.add_metric([MODEL_NAME, ENGINE], sim.hists[key].buckets(), sim.hists[key].sum, timestamp=ts)
        out.append(fam)
    return out


def _families(sim: Simulator, created: bool, ts: float | None) -> list[Metric]:
    made = sim._created if created else None
    return [*_gauge_families(sim, ts), *_counter_families(sim, made, ts), *_hist_families(sim, ts)]


class _Collector:
    def __init__(self, sim: Simulator) -> None:
        self.sim = sim

    def collect(self) -> Iterable[Metric]:
        return self.sim.families()


# ---- HTTP server ----------------------------------------------------------------------------------------
def _handler(sim: Simulator, lock: threading.Lock) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server API)
            if self.path.split("?")[0] != "/metrics":
                self._send(404, b"not found; try /metrics\n")
                return
            with lock:
                wall = time.time()
                sim.advance(max(0.0, min(wall - sim.now, MAX_CATCHUP_S)))
                sim.jump(wall)
                body = sim.render().encode("utf-8")
            self._send(200, body, CONTENT_TYPE)

        def _send(self, code: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server API)
            return

    return Handler


def serve(scenario: str, port: int, host: str = "127.0.0.1", seed: int = 0) -> http.server.ThreadingHTTPServer:
    """A server for GET /metrics that advances the simulation to wall-clock time on each request.
    The caller runs ``serve_forever()`` (or does so in a thread) and ``server_close()``."""
    sim = Simulator(scenario, seed=seed)
    try:
        server = http.server.ThreadingHTTPServer((host, port), _handler(sim, threading.Lock()))
    except (OSError, OverflowError) as exc:
        raise TriageError(f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}",
                          key="--port") from exc
    server.daemon_threads = True
    server.simulator = sim  # type: ignore[attr-defined]
    return server


# ---- OpenMetrics backfill ---------------------------------------------------------------------------------
def _om_value(value: float) -> str:
    return floatToGoString(value)


def _om_labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    esc = (v.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"") for v in labels.values())
    return "{" + ",".join(f'{k}="{v}"' for k, v in zip(labels, esc)) + "}"


def _om_family_lines(snapshots: list[tuple[float, Metric]]) -> list[str]:
    """One family over time: each series' points contiguous and in time order (what promtool wants)."""
    first = snapshots[0][1]
    lines = [f"# HELP {first.name} {first.documentation}", f"# TYPE {first.name} {first.type}"]
    rows: list[tuple[tuple, float, int, str]] = []
    for ts, fam in snapshots:
        for i, s in enumerate(fam.samples):
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            rows.append((key, ts, i, f"{s.name}{_om_labels(s.labels)} {_om_value(s.value)} {ts:.3f}"))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    return lines + [r[3] for r in rows]


def write_openmetrics(path: str | Path, scenario: str, minutes: float, step: float = 15.0,
                      end: float | None = None, seed: int = 0, overrides: dict[str, Any] | None = None) -> int:
    """Write ``minutes`` of the scenario, one sample per series every ``step`` s ending at ``end`` (default
    now), as an OpenMetrics file for ``promtool tsdb create-blocks-from openmetrics``; returns sample count."""
    if minutes <= 0 or step <= 0:
        raise TriageError("--minutes and --step must be positive", key="--minutes")
    end = time.time() if end is None else float(end)
    n_steps = int(minutes * 60 // step)
    sim = Simulator(scenario, seed=seed, start=end - n_steps * step, overrides=overrides)
    by_name: dict[str, list[tuple[float, Metric]]] = {}
    for i in range(n_steps + 1):
        if i:
            sim.advance(step)
        for fam in sim.families(created=False):
            by_name.setdefault(fam.name, []).append((sim.now, fam))
    lines: list[str] = []
    for snaps in by_name.values():
        lines.extend(_om_family_lines(snaps))
    Path(path).write_text("\n".join([*lines, "# EOF"]) + "\n", encoding="utf-8")
    return sum(1 for line in lines if not line.startswith("#"))
