"""Readings only a log's stats lines allow: per-request decode speed, a concurrency cap, prefill stalls."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from triage.sources.logs.series import Columns, LogSeries, Sample, columns
from triage.sources.running_plateau import Samples, holds, plateau

CAP_KV_BELOW = 0.9     # ... while KV usage stays below this: the KV cache is not what holds the batch
STALL_RATIO = 0.7      # generation throughput while prompts are prefilled ÷ without, below this = stalls
CAP_FLAG = {"vllm": "--max-num-seqs", "sglang": "--max-running-requests"}


@dataclass(frozen=True)
class LogReading:
    """A number the log's text gives beyond the window's needs, with the sentence that says how."""

    name: str
    value: float
    unit: str
    text: str

    def as_json(self) -> dict:
        return {"name": self.name, "value": self.value, "unit": self.unit, "text": self.text}


def _given(col: np.ndarray) -> np.ndarray:
    """Where a column holds a value that is truthy as a Sample field: printed (not NaN) and not zero."""
    return ~np.isnan(col) & (col != 0)


def _busy(cols: Columns) -> np.ndarray:
    """Lines with requests running and tokens generated (a mask over a group's columns)."""
    return _given(cols["running"]) & (cols["gen_tps"] > 0)


def _busy_values(log: LogSeries, *names: str) -> list[list[float]]:
    """Per name, the busy lines' values over every group in order (Python floats: the sums stay as they were)."""
    out: list[list[float]] = [[] for _ in names]
    for group in log.groups:
        cols = columns(group)
        busy = _busy(cols)
        for values, name in zip(out, names, strict=True):
            values.extend(cols[name][busy].tolist())
    return out


def decode_speed(log: LogSeries) -> list[LogReading]:
    """Generated tokens/s ÷ running requests over the busy lines: tokens per second each request receives; its
    inverse approximates the mean TPOT (it includes prefill time shared in the same steps)."""
    gen, running = _busy_values(log, "gen_tps", "running")
    if not gen:
        return []
    per_request = sum(gen) / sum(running)
    if per_request <= 0:
        return []
    how = f"generation tokens/s ÷ running requests over {len(gen)} busy stats lines"
    return [LogReading("decode_tok_per_s_per_request", per_request, "tok/s",
                       f"each running request receives ≈ {per_request:.1f} tokens/s ({how})"),
            LogReading("tpot_mean_estimate_s", 1 / per_request, "s",
                       f"mean TPOT ≈ {1000 / per_request:.3g} ms, the inverse of that speed (a mean, not a "
                       "percentile: p99 is not measurable from a log)")]


def running_waiting(cols: Columns) -> Samples:
    """(running, waiting) of the stats lines that print both, in order: the samples of a running plateau."""
    both = ~np.isnan(cols["running"]) & ~np.isnan(cols["waiting"])
    return list(zip(cols["running"][both].tolist(), cols["waiting"][both].tolist(), strict=True))


def concurrency_cap(log: LogSeries) -> list[LogReading]:
    """Requests wait while the running count stays pinned at one value (the plateau the verdict's running cap
    reads) and the KV cache has room: the batch is held by a cap on concurrency, not by memory."""
    for group in log.groups:
        cols = columns(group)
        found = plateau(running_waiting(cols))
        if found is None:
            continue
        queued = _given(cols["waiting"]) & _given(cols["running"])
        running = cols["running"][queued]
        peak = float(running.max())
        at_peak = np.array([holds(r, peak) for r in running.tolist()], dtype=bool)
        kv_at_peak = cols["kv"][queued][at_peak]
        kv_values = kv_at_peak[~np.isnan(kv_at_peak)].tolist()
        if not kv_values or max(kv_values) >= CAP_KV_BELOW:
            continue
        flag = CAP_FLAG.get(log.engine_id, "the engine's concurrency limit")
        known = log.config.get("max_num_seqs")
        named = (f"{flag} {known:g} in the startup log" if known == peak
                 else f"{flag} (or the client's own concurrency) is probably {peak:g}")
        if log.engine_id == "sglang":
            named += (" — or SGLang admits too conservatively (token usage < 0.9 with a queue: lower "
                      "--schedule-conservativeness, per its tuning guide)")
        waiting = cols["waiting"][queued].tolist()
        text = (f"running held at {peak:g} requests in {found.held} of {found.queued} stats lines with a "
                f"queue (waiting {min(waiting):g}–{max(waiting):g}, first {waiting[0]:g}, last {waiting[-1]:g}) "
                f"while KV cache usage stayed ≤ {max(kv_values):.1%}: a cap on concurrency — {named}")
        return [LogReading("running_cap", peak, "req", text)]
    return []


def prefill_stalls(log: LogSeries) -> list[LogReading]:
    """Generation throughput in intervals that also prefilled prompts against intervals that did not, at the
    same running count: long prefills pausing decode show as a drop."""
    with_prefill: list[float] = []
    without: list[float] = []
    prompts: list[float] = []
    for group in log.groups:
        cols = columns(group)
        busy = _busy(cols)
        per_request = cols["gen_tps"][busy] / cols["running"][busy]  # busy: both printed, running not 0
        prompt = cols["prompt_tps"][busy]
        with_prefill.extend(per_request[_given(prompt)].tolist())
        without.extend(per_request[prompt == 0].tolist())
        prompts.extend(np.nan_to_num(prompt, nan=0.0).tolist())
    if len(with_prefill) < 2 or len(without) < 2:
        return []
    ratio = statistics.fmean(with_prefill) / statistics.fmean(without)
    if ratio >= STALL_RATIO:
        return []
    peak = max(prompts)
    return [LogReading("decode_during_prefill_ratio", ratio, "fraction",
                       f"per-request generation speed falls to {ratio:.0%} in the {len(with_prefill)} intervals "
                       f"that also prefilled prompts (up to {peak:,.0f} prompt tokens/s) against the {len(without)} "
                       "that did not: prefills stall decode (chunked prefill bounds each step)")]


def _printed(samples: Sequence[Sample], name: str) -> list[float]:
    col = columns(samples)[name]
    return col[~np.isnan(col)].tolist()


def kv_full_share(log: LogSeries) -> list[LogReading]:
    kv = _printed(log.samples, "kv")
    full = [v for v in kv if v >= 0.95]
    if not full:
        return []
    share = len(full) / len(kv)
    return [LogReading("kv_full_share", share, "fraction",
                       f"KV cache usage ≥ 95 % in {len(full)} of {len(kv)} stats lines ({share:.0%}), peak "
                       f"{max(kv):.1%}")]


def swapped(log: LogSeries) -> list[LogReading]:
    values = _printed(log.samples, "swapped")
    if not values or max(values) <= 0:
        return []
    return [LogReading("swapped_max", max(values), "req",
                       f"up to {max(values):g} requests swapped out to CPU memory (preempted by swapping)")]


def retractions(log: LogSeries) -> list[LogReading]:
    out = []
    if log.retractions:
        out.append(LogReading("retracted_requests", log.retractions, "req",
                              f"{log.retractions:g} requests retracted because the KV cache pool was full (SGLang's "
                              "preemption: their KV is dropped and recomputed)"))
    if log.oom_lines:
        out.append(LogReading("out_of_memory_lines", log.oom_lines, "lines",
                              f"{log.oom_lines} out-of-memory line(s) (CUDA out of memory / OutOfMemoryError)"))
    return out


def log_readings(log: LogSeries) -> list[LogReading]:
    """Every reading the log allows, in the order a person reads them."""
    return [*kv_full_share(log), *swapped(log), *retractions(log), *concurrency_cap(log), *decode_speed(log),
            *prefill_stalls(log)]
