"""A simulated serving stack: NVIDIA Dynamo's frontend (or llm-d's endpoint picker) in front of several simulated vLLM
replicas, each replica's own vllm: metrics under its ``pod`` label, the router's metrics beside them.

Names, labels and bucket layouts follow each project's source at the version recorded in its engine map
(tree/engines/dynamo.yaml, tree/engines/llm_d_epp.yaml); the PROVENANCE block below says which file says what.
The router sees what it can see from outside an engine: each finished request's arrival, first and last token times
and token counts (Simulator.listeners, so a request's TTFT lands in the router's histogram when it finishes, and
Dynamo's inter-token histogram holds each request's mean gap once per gap), and each replica's queue, running batch
and KV usage when it renders.

PROVENANCE
- Dynamo frontend, ai-dynamo/dynamo @79a21ca4 lib/llm/src/http/service/metrics.rs: ``dynamo_frontend_`` +
  requests_total{model, endpoint, request_type, status}; inflight_requests, queued_requests, output_tokens_total,
  time_to_first_token_seconds, inter_token_latency_seconds, request_duration_seconds, input_sequence_tokens,
  output_sequence_tokens: {model} (the model name lowercased); buckets from generate_log_buckets(min, max, count)
  (0, then log-spaced values rounded to 2 significant figures): TTFT 0.001-480 s × 18, ITL 0.001-2 s × 13,
  duration 1-256 s × 10, input 50-128000 × 12, output 50-32000 × 10. Names: prometheus_names.rs @4415465e.
- Dynamo workers, ai-dynamo/dynamo docs/observability/metrics.md @0b71cf84 and prometheus_names.rs @4415465e:
  dynamo_component_requests_total, _inflight_requests, _request_duration_seconds, _kvstats_active_blocks,
  _kvstats_total_blocks, _kvstats_gpu_cache_usage_percent, _kvstats_gpu_prefix_cache_hit_rate, labelled
  {dynamo_namespace, dynamo_component, dynamo_endpoint} ("dynamo", "backend", "generate": DEFAULT_ENDPOINT
  dyn://dynamo.backend.generate of components/src/dynamo/vllm); the worker passes vLLM's own vllm: metrics through
  unchanged (components/src/dynamo/common/utils/prometheus.py @041ec8b0, docs/backends/vllm/prometheus.md).
- llm-d endpoint picker, llm-d/llm-d-router @ebab6879 (v0.10.0-rc.1+62) pkg/epp/metrics/llm_d_router_metrics.go:
  llm_d_epp_request_total, _request_duration_seconds, _request_ntpot_seconds, _request_running
  {model_name, target_model_name, fairness_id, priority}, _request_ttft_seconds (+ streaming); pool gauges
  average_/std_dev_ kv_cache_utilization, queue_size, running_requests and ready_endpoints {name};
  per_endpoint_queue_size {name, model_server_endpoint}. The legacy twins are still emitted (dual emission, docs/
  metrics.md "Deprecated series"): inference_pool_average_kv_cache_utilization, _average_queue_size,
  _average_running_requests, _ready_pods {name} (pkg/epp/metrics/metrics.go) and inference_pool_per_pod_queue_size
  {name, model_server_pod} (pkg/epp/metrics/collectors/inference_pool.go). Pool statistics as
  pkg/epp/datalayer/logger/logger.go computes them: mean, sample standard deviation (n − 1), both rounded to 2
  decimals; fairness_id "default-flow" (pkg/epp/metadata/consts.go), priority "0".
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from triage.errors import TriageError
from triage.sources.metrics.simulator import MODEL_NAME, Finished, Simulator, _Hist, _om_family_lines

StackKind = Literal["dynamo", "llm_d"]
STACKS: tuple[StackKind, ...] = ("dynamo", "llm_d")
Member = tuple[str, dict[str, Any]]  # (scenario id, parameter overrides) of one replica

POOL = "vllm-llama3-8b-instruct"  # the InferencePool's name
FAIRNESS_ID, PRIORITY = "default-flow", "0"
DYNAMO_LABELS = {"dynamo_namespace": "dynamo", "dynamo_component": "backend", "dynamo_endpoint": "generate"}
# prometheus crate (Rust) default buckets: the work handler's request_duration_seconds sets none of its own
RUST_DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
EPP_LATENCY_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30,
                       45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600)
EPP_TTFT_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45,
                    60, 120)
EPP_NTPOT_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)


def log_buckets(low: float, high: float, count: int) -> list[float]:
    """Dynamo's generate_log_buckets: 0, then ``count - 1`` log-spaced values rounded to 2 significant figures."""
    out = [0.0]
    for i in range(1, count):
        value = math.exp(math.log(low) + (math.log(high) - math.log(low)) * i / (count - 1))
        scale = 10 ** (1 - math.floor(math.log10(abs(value))))
        out.append(round(value * scale) / scale)
    return list(dict.fromkeys(out))


def pod_names(kind: StackKind, n: int) -> tuple[str, list[str]]:
    """(the router's pod, the replicas' pods) as a Kubernetes deployment of the stack names them."""
    if kind == "dynamo":
        return "dynamo-frontend-0", [f"dynamo-vllm-worker-{i}" for i in range(n)]
    return "epp-0", [f"vllm-llama3-8b-instruct-{i}" for i in range(n)]


class Stack:
    """Several simulated vLLM replicas (each its own scenario and overrides) behind a simulated router."""

    def __init__(self, kind: str, members: Sequence[Member], seed: int = 0, start: float | None = None) -> None:
        if kind not in STACKS:
            raise TriageError(f"unknown stack '{kind}'; valid: {', '.join(STACKS)}", key="--stack")
        if not members:
            raise TriageError("a stack needs at least one replica", key="--replicas")
        self.kind: StackKind = "dynamo" if kind == "dynamo" else "llm_d"
        self.router_pod, self.pods = pod_names(self.kind, len(members))
        self.replicas = [Simulator(scenario, seed=seed + i, start=start, overrides=overrides or None)
                         for i, (scenario, overrides) in enumerate(members)]
        self.now = self.replicas[0].now
        self._created = self.now
        self.finished = [0.0] * len(self.replicas)  # requests each replica finished since the router started
        self.output_tokens = 0.0
        self.hists = self._router_hists()
        self.worker_hists = [_Hist(RUST_DEFAULT_BUCKETS) for _ in self.replicas]
        for i, sim in enumerate(self.replicas):
            sim.listeners.append(functools.partial(self._seen, i))
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(_Collector(self))

    # ---- public ------------------------------------------------------------------------------------
    def advance(self, seconds: float) -> None:
        """Simulate ``seconds`` more on every replica (the router sees what they finish)."""
        for sim in self.replicas:
            sim.advance(seconds)
        self.now = self.replicas[0].now

    def render(self) -> str:
        """One scrape of every pod of the stack in one text (the replicas told apart by their ``pod`` label)."""
        return generate_latest(self._registry).decode("utf-8")

    def families(self, created: bool = True, timestamp: float | None = None) -> list[Metric]:
        made = self._created if created else None
        merged: dict[str, Metric] = {}
        for sim, pod in zip(self.replicas, self.pods):
            for fam in sim.families(created, timestamp):
                _add(merged, fam, {"pod": pod})
        own = self._dynamo(made, timestamp) if self.kind == "dynamo" else self._epp(made, timestamp)
        for fam, pod in own:
            _add(merged, fam, {"pod": pod})
        return list(merged.values())

    # ---- what the router sees ----------------------------------------------------------------------
    def _router_hists(self) -> dict[str, _Hist]:
        if self.kind == "dynamo":
            return {"ttft": _Hist(log_buckets(0.001, 480.0, 18)), "itl": _Hist(log_buckets(0.001, 2.0, 13)),
                    "e2e": _Hist(log_buckets(1.0, 256.0, 10)), "isl": _Hist(log_buckets(50.0, 128000.0, 12)),
                    "osl": _Hist(log_buckets(50.0, 32000.0, 10))}
        return {"ttft": _Hist(EPP_TTFT_BUCKETS), "ntpot": _Hist(EPP_NTPOT_BUCKETS), "e2e": _Hist(EPP_LATENCY_BUCKETS)}

    def _seen(self, replica: int, done: Finished) -> None:
        h = self.hists
        e2e, out = done.end - done.arrival, done.output
        self.finished[replica] += e2e.size
        self.output_tokens += float(out.sum())
        h["ttft"].observe(done.first_token - done.arrival)
        h["e2e"].observe(e2e)
        if self.kind == "dynamo":
            # the frontend times each token; here each request's mean gap stands for its out − 1 gaps
            gaps = np.maximum(out - 1, 0)
            h["itl"].observe((done.end - done.first_token) / np.maximum(gaps, 1), gaps)
            h["isl"].observe(done.prompt)
            h["osl"].observe(out)
            self.worker_hists[replica].observe(e2e)
        else:
            h["ntpot"].observe(e2e / np.maximum(out, 1))  # end-to-end latency ÷ output tokens

    def _loads(self) -> list[tuple[int, int, float, int]]:
        """Per replica: (waiting, running, KV usage, requests without their first token yet)."""
        out = []
        for sim in self.replicas:
            # a PD decode replica's requests still receiving their KV wait too (vllm:num_requests_waiting counts them)
            pending = [*sim.waiting, *(rid for _, rid, _ in sim.transferring)]
            ids = np.asarray([*pending, *sim.running], dtype=np.int64)
            no_token = int(np.isnan(sim.tab.first_tok[ids]).sum()) if ids.size else 0
            out.append((len(pending), len(sim.running), sim.used_blocks / sim.p.num_gpu_blocks, no_token))
        return out

    # ---- NVIDIA Dynamo ----------------------------------------------------------------------------
    def _dynamo(self, created: float | None, ts: float | None) -> list[tuple[Metric, str]]:
        model = MODEL_NAME.lower()
        loads = self._loads()
        pod = self.router_pod
        fams: list[tuple[Metric, str]] = []
        requests = CounterMetricFamily("dynamo_frontend_requests_total", "Total number of LLM requests processed",
                                       labels=["model", "endpoint", "request_type", "status"])
        requests.add_metric([model, "chat_completions", "stream", "success"], sum(self.finished), created=created,
                            timestamp=ts)
        fams.append((requests, pod))
        inflight = sum(w + r for w, r, _, _ in loads)
        gauges = (("dynamo_frontend_inflight_requests", "Number of inflight requests", inflight),
                  ("dynamo_frontend_queued_requests", "Number of requests in HTTP processing queue",
                   sum(n for *_, n in loads)))
        for name, doc, value in gauges:
            fam = GaugeMetricFamily(name, doc, labels=["model"])
            fam.add_metric([model], float(value), timestamp=ts)
            fams.append((fam, pod))
        tokens = CounterMetricFamily("dynamo_frontend_output_tokens_total",
                                     "Total number of output tokens generated (updates in real-time)", labels=["model"])
        tokens.add_metric([model], self.output_tokens, created=created, timestamp=ts)
        fams.append((tokens, pod))
        for name, key, doc in (("dynamo_frontend_time_to_first_token_seconds", "ttft",
                                "Time to first token in seconds"),
                               ("dynamo_frontend_inter_token_latency_seconds", "itl", "Inter-token latency in seconds"),
                               ("dynamo_frontend_request_duration_seconds", "e2e", "Duration of LLM requests"),
                               ("dynamo_frontend_input_sequence_tokens", "isl", "Input sequence length in tokens"),
                               ("dynamo_frontend_output_sequence_tokens", "osl", "Output sequence length in tokens")):
            fams.append((_histogram(name, doc, {"model": model}, self.hists[key], ts), pod))
        for i, (sim, worker) in enumerate(zip(self.replicas, self.pods)):
            fams.extend((fam, worker) for fam in self._worker(i, sim, loads[i], created, ts))
        return fams

    def _worker(self, i: int, sim: Simulator, load: tuple[int, int, float, int], created: float | None,
                ts: float | None) -> list[Metric]:
        names, values = list(DYNAMO_LABELS), list(DYNAMO_LABELS.values())
        waiting, running, kv, _ = load
        requests = CounterMetricFamily("dynamo_component_requests_total", "Total requests processed", labels=names)
        requests.add_metric(values, self.finished[i], created=created, timestamp=ts)
        out: list[Metric] = [requests]
        queries = sim.counters["prefix_queries"]
        for name, doc, value in (
                ("dynamo_component_inflight_requests", "Requests currently being processed", waiting + running),
                ("dynamo_component_kvstats_active_blocks", "Number of active KV cache blocks currently in use",
                 sim.used_blocks),
                ("dynamo_component_kvstats_total_blocks", "Total number of KV cache blocks available",
                 sim.p.num_gpu_blocks),
                ("dynamo_component_kvstats_gpu_cache_usage_percent", "GPU cache usage as a percentage (0.0-1.0)", kv),
                ("dynamo_component_kvstats_gpu_prefix_cache_hit_rate",
                 "GPU prefix cache hit rate as a percentage (0.0-1.0)",
                 sim.counters["prefix_hits"] / queries if queries else 0.0)):
            fam = GaugeMetricFamily(name, doc, labels=names)
            fam.add_metric(values, float(value), timestamp=ts)
            out.append(fam)
        out.append(_histogram("dynamo_component_request_duration_seconds", "Request processing time", DYNAMO_LABELS,
                              self.worker_hists[i], ts))
        return out

    # ---- llm-d endpoint picker --------------------------------------------------------------------
    def _epp(self, created: float | None, ts: float | None) -> list[tuple[Metric, str]]:
        loads = self._loads()
        request_labels = {"model_name": MODEL_NAME, "target_model_name": MODEL_NAME, "fairness_id": FAIRNESS_ID,
                          "priority": PRIORITY}
        fams: list[Metric] = []
        total = CounterMetricFamily("llm_d_epp_request_total", "[ALPHA] Total number of processed requests.",
                                    labels=list(request_labels))
        total.add_metric(list(request_labels.values()), sum(self.finished), created=created, timestamp=ts)
        running = GaugeMetricFamily("llm_d_epp_request_running", "[ALPHA] Current number of active running requests.",
                                    labels=list(request_labels))
        running.add_metric(list(request_labels.values()), float(sum(w + r for w, r, _, _ in loads)), timestamp=ts)
        fams += [total, running,
                 _histogram("llm_d_epp_request_duration_seconds",
                            "[ALPHA] End-to-end request latency distribution in seconds.", request_labels,
                            self.hists["e2e"], ts),
                 _histogram("llm_d_epp_request_ntpot_seconds", "[ALPHA] Normalized time per output token in seconds "
                            "(end-to-end latency divided by output token count).", request_labels, self.hists["ntpot"],
                            ts),
                 _histogram("llm_d_epp_request_ttft_seconds", "[ALPHA] Time to first token in seconds, measured from "
                            "request received to first response byte.", {**request_labels, "streaming": "true"},
                            self.hists["ttft"], ts)]
        kv = _pool_stats([k for _, _, k, _ in loads])
        queue = _pool_stats([float(w) for w, _, _, _ in loads])
        run = _pool_stats([float(r) for _, r, _, _ in loads])
        pool = (("average_kv_cache_utilization", "The average kv cache utilization for an inference server pool.",
                 kv[0]),
                ("average_queue_size", "The average number of requests pending in the model server queue.", queue[0]),
                ("average_running_requests", "The average number of running requests across model servers in the "
                 "pool.", run[0]),
                ("std_dev_kv_cache_utilization", "The standard deviation kv cache utilization for an inference "
                 "server pool.", kv[1]),
                ("std_dev_queue_size", "The standard deviation number of requests pending in the model server "
                 "queue.", queue[1]),
                ("std_dev_running_requests", "The standard deviation number of running requests across model "
                 "servers in the pool.", run[1]),
                ("ready_endpoints", "The number of ready endpoints in the inference server pool.",
                 float(len(loads))))
        legacy = {"average_kv_cache_utilization": "inference_pool_average_kv_cache_utilization",
                  "average_queue_size": "inference_pool_average_queue_size",
                  "average_running_requests": "inference_pool_average_running_requests",
                  "ready_endpoints": "inference_pool_ready_pods"}
        for name, doc, value in pool:
            for full in (f"llm_d_epp_{name}", legacy.get(name)):
                if full:
                    fam = GaugeMetricFamily(full, f"[ALPHA] {doc}", labels=["name"])
                    fam.add_metric([POOL], value, timestamp=ts)
                    fams.append(fam)
        for full, label in (("llm_d_epp_per_endpoint_queue_size", "model_server_endpoint"),
                            ("inference_pool_per_pod_queue_size", "model_server_pod")):
            fam = GaugeMetricFamily(full, "[ALPHA] The total number of requests pending in the model server queue "
                                    "for each underlying endpoint.", labels=["name", label])
            for pod, (waiting, *_) in zip(self.pods, loads):
                fam.add_metric([POOL, pod], float(waiting), timestamp=ts)
            fams.append(fam)
        return [(fam, self.router_pod) for fam in fams]


def _pool_stats(values: list[float]) -> tuple[float, float]:
    """(mean, sample standard deviation) rounded to 2 decimals, as the endpoint picker's data-layer logger."""
    mean = sum(values) / len(values)
    ss = sum((v - mean) ** 2 for v in values)
    return round(mean, 2), round(math.sqrt(ss / max(1.0, len(values) - 1)), 2)


def _histogram(name: str, doc: str, labels: dict[str, str], hist: _Hist, ts: float | None) -> Metric:
    fam = HistogramMetricFamily(name, doc, labels=list(labels))
    fam.add_metric(list(labels.values()), hist.buckets(), hist.sum, timestamp=ts)
    return fam


def _add(merged: dict[str, Metric], fam: Metric, extra: dict[str, str]) -> None:
    """Append ``fam``'s samples, with ``extra`` labels, to the family of that name (one block per name)."""
    into = merged.get(fam.name)
    if into is None:
        into = merged[fam.name] = Metric(fam.name, fam.documentation, fam.type, fam.unit)
    for s in fam.samples:
        into.samples.append(s._replace(labels={**s.labels, **extra}))


class _Collector:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack

    def collect(self) -> list[Metric]:
        return self.stack.families()


def write_stack_openmetrics(path: str | Path, kind: str, members: Sequence[Member], minutes: float,
                            step: float = 15.0, end: float | None = None, seed: int = 0) -> int:
    """Write ``minutes`` of the stack, one sample per series every ``step`` s ending at ``end`` (default now), as
    an OpenMetrics file for ``promtool tsdb create-blocks-from openmetrics``; returns the sample count."""
    if minutes <= 0 or step <= 0:
        raise TriageError("--minutes and --step must be positive", key="--minutes")
    end = time.time() if end is None else float(end)
    n_steps = int(minutes * 60 // step)
    stack = Stack(kind, members, seed=seed, start=end - n_steps * step)
    by_name: dict[str, list[tuple[float, Metric]]] = {}
    for i in range(n_steps + 1):
        if i:
            stack.advance(step)
        for fam in stack.families(created=False, timestamp=None):
            by_name.setdefault(fam.name, []).append((stack.now, fam))
    lines: list[str] = []
    for snaps in by_name.values():
        lines.extend(_om_family_lines(snaps))
    Path(path).write_text("\n".join([*lines, "# EOF"]) + "\n", encoding="utf-8")
    return sum(1 for line in lines if not line.startswith("#"))
