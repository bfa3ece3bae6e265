"""Readings only a log's stats lines allow: per-request decode speed, a concurrency cap, prefill stalls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from triage.sources.logs.series import Columns, LogSeries, Sample, columns, fmean, printed, running_sum
from triage.sources.running_plateau import AT_PEAK, plateau, queued_rows

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


def _busy_values(log: LogSeries, *names: str) -> list[np.ndarray]:
    """Per name, the busy lines' values over every group in order."""
    out: list[list[np.ndarray]] = [[] for _ in names]
    for group in log.groups:
        cols = columns(group)
        busy = _busy(cols)
        for values, name in zip(out, names, strict=True):
            values.append(cols[name][busy])
    return [np.concatenate(v) if v else np.empty(0) for v in out]


def decode_speed(log: LogSeries) -> list[LogReading]:
    """Generated tokens/s ÷ running requests over the busy lines: tokens per second each request receives; its
    inverse approximates the mean TPOT (it includes prefill time shared in the same steps)."""
    gen, running = _busy_values(log, "gen_tps", "running")
    if not len(gen):
        return []
    per_request = running_sum(gen) / running_sum(running)  # the lines' order of addition, as sum() had it
    if per_request <= 0:
        return []
    how = f"generation tokens/s ÷ running requests over {len(gen)} busy stats lines"
    return [LogReading("decode_tok_per_s_per_request", per_request, "tok/s",
                       f"each running request receives ≈ {per_request:.1f} tokens/s ({how})"),
            LogReading("tpot_mean_estimate_s", 1 / per_request, "s",
                       f"mean TPOT ≈ {1000 / per_request:.3g} ms, the inverse of that speed (a mean, not a "
                       "percentile: p99 is not measurable from a log)")]


def running_waiting(cols: Columns) -> np.ndarray:
    """(running, waiting) of the stats lines that print both, one row each in order: a running plateau's samples."""
    both = ~np.isnan(cols["running"]) & ~np.isnan(cols["waiting"])
    return np.column_stack((cols["running"][both], cols["waiting"][both]))


def concurrency_cap(log: LogSeries, samples: Sequence[np.ndarray] | None = None) -> list[LogReading]:
    """Requests wait while the running count stays pinned at one value (the plateau the verdict's running cap
    reads) and the KV cache has room: the batch is held by a cap on concurrency, not by memory. ``samples``: each
    group's ``running_waiting``, when the caller has them already."""
    for i, group in enumerate(log.groups):
        cols = columns(group)
        found = plateau(samples[i] if samples is not None else running_waiting(cols))
        if found is None:
            continue
        queued = queued_rows(cols["running"], cols["waiting"])  # the plateau's samples, as it chose them
        running = cols["running"][queued]
        peak = found.peak
        at_peak = peak - running < AT_PEAK  # the lines that hold it, by the plateau's rule
        kv_at_peak = cols["kv"][queued][at_peak]
        kv_values = kv_at_peak[~np.isnan(kv_at_peak)]
        if not len(kv_values) or float(kv_values.max()) >= CAP_KV_BELOW:
            continue
        flag = CAP_FLAG.get(log.engine_id, "the engine's concurrency limit")
        known = log.config.get("max_num_seqs")
        named = (f"{flag} {known:g} in the startup log" if known == peak
                 else f"{flag} (or the client's own concurrency) is probably {peak:g}")
        if log.engine_id == "sglang":
            named += (" — or SGLang admits too conservatively (token usage < 0.9 with a queue: lower "
                      "--schedule-conservativeness, per its tuning guide)")
        waiting = cols["waiting"][queued]
        low, high, first, last = (float(x) for x in (waiting.min(), waiting.max(), waiting[0], waiting[-1]))
        text = (f"running held at {peak:g} requests in {found.held} of {found.queued} stats lines with a "
                f"queue (waiting {low:g}–{high:g}, first {first:g}, last {last:g}) "
                f"while KV cache usage stayed ≤ {float(kv_values.max()):.1%}: a cap on concurrency — {named}")
        return [LogReading("running_cap", peak, "req", text)]
    return []


def prefill_stalls(log: LogSeries) -> list[LogReading]:
    """Generation throughput in intervals that also prefilled prompts against intervals that did not, at the
    same running count: long prefills pausing decode show as a drop."""
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for group in log.groups:
        cols = columns(group)
        busy = _busy(cols)
        per_request = cols["gen_tps"][busy] / cols["running"][busy]  # busy: both printed, running not 0
        prompt = cols["prompt_tps"][busy]
        parts.append((per_request[_given(prompt)], per_request[prompt == 0], np.nan_to_num(prompt, nan=0.0)))
    if not parts:
        return []
    with_prefill, without, prompts = (np.concatenate(p) for p in zip(*parts, strict=True))
    if len(with_prefill) < 2 or len(without) < 2:
        return []
    ratio = fmean(with_prefill) / fmean(without)
    if ratio >= STALL_RATIO:
        return []
    peak = float(prompts.max())
    return [LogReading("decode_during_prefill_ratio", ratio, "fraction",
                       f"per-request generation speed falls to {ratio:.0%} in the {len(with_prefill)} intervals "
                       f"that also prefilled prompts (up to {peak:,.0f} prompt tokens/s) against the {len(without)} "
                       "that did not: prefills stall decode (chunked prefill bounds each step)")]


def _printed(samples: Sequence[Sample], name: str) -> np.ndarray:
    return printed(columns(samples)[name])


def kv_full_share(log: LogSeries) -> list[LogReading]:
    kv = _printed(log.samples, "kv")
    full = int(np.count_nonzero(kv >= 0.95))
    if not full:
        return []
    share = full / len(kv)
    return [LogReading("kv_full_share", share, "fraction",
                       f"KV cache usage ≥ 95 % in {full} of {len(kv)} stats lines ({share:.0%}), peak "
                       f"{float(kv.max()):.1%}")]


def swapped(log: LogSeries) -> list[LogReading]:
    values = _printed(log.samples, "swapped")
    if not len(values) or float(values.max()) <= 0:
        return []
    peak = float(values.max())
    return [LogReading("swapped_max", peak, "req",
                       f"up to {peak:g} requests swapped out to CPU memory (preempted by swapping)")]


def retractions(log: LogSeries) -> list[LogReading]:
    out = []
    if log.retractions:
        out.append(LogReading("retracted_requests", log.retractions, "req",
                              f"{log.retractions:g} requests retracted because the KV cache pool was full (SGLang's "
                              "preemption: their KV is dropped and recomputed)"))
    if log.oom_lines:
        out.append(LogReading("out_of_memory_lines", log.oom_lines, "",
                              f"{log.oom_lines} out-of-memory line(s) (CUDA out of memory / OutOfMemoryError)"))
    return out


def log_readings(log: LogSeries, cap_samples: Sequence[np.ndarray] | None = None) -> list[LogReading]:
    """Every reading the log allows, in the order a person reads them (``cap_samples``: see ``concurrency_cap``)."""
    return [*kv_full_share(log), *swapped(log), *retractions(log), *concurrency_cap(log, cap_samples),
            *decode_speed(log), *prefill_stalls(log)]
