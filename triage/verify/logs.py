"""Verify a change with two server logs: medians of the stats lines over each window, and what a log cannot say.

A log holds the engine's periodic stats lines (running, waiting, KV usage, token throughput), never one row per
request: it gives no latency percentile (TTFT, TPOT, E2E), no error rate and no request to resample, so no
bootstrap interval. What it does give is compared as the median over each window's stats times (engines summed,
ratios the fullest engine), against the summary tolerance, and the comparison says which conclusions it cannot
reach.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from triage.errors import TriageError
from triage.knowledge.units import count, percent, plain
from triage.sources.logs.series import LogSeries, per_second
from triage.verify.comparison import (
    GAIN,
    NOT_COMPARABLE,
    REGRESSION,
    SUMMARY_TOLERANCE_PCT,
    SUMMARY_TOLERANCE_PP,
    Comparison,
    MetricDelta,
    MetricSpec,
    Note,
    _delta,
    _judge,
    _overall,
    _technique,
    fmt_change,
)

MIN_STATS_TIMES = 6  # stats times per side below which a median over the window says little (≈ 1 min of vLLM's)
MAX_PROMPT_DIFF = 0.10  # prompt tokens/s: a log's only trace of the offered load
MAX_SPAN_RATIO = 2.0  # one window more than twice as long as the other: different phases of the load
KIND_LOG, KIND_BENCHMARK = "server log", "benchmark file"

# what two logs cannot tell, said with every log comparison (tree/ui.yaml verify_note_log_limits)
LIMITS = "log_limits"

LOG_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("log_gen_tps", "Generation tokens/s (median)", "higher", "tok/s", primary=True),
    MetricSpec("log_decode_speed", "Decode tokens/s per running request (median)", "higher", "tok/s", primary=True),
    MetricSpec("log_waiting", "Waiting requests (median)", "lower", "", primary=True),
    MetricSpec("log_preemptions", "Preemptions per second", "lower", "1/s"),
    MetricSpec("log_kv", "KV cache usage (median)", "lower", "fraction", counts=False, scale="pp"),
    MetricSpec("log_running", "Running requests (median)", "higher", "", counts=False),
    MetricSpec("log_prompt_tps", "Prompt tokens/s (median)", "higher", "tok/s", counts=False),
    MetricSpec("log_prefix_hit", "Prefix cache hit rate (median)", "higher", "fraction", counts=False, scale="pp"),
)
LOG_SPECS: dict[str, MetricSpec] = {m.id: m for m in LOG_METRICS}


def _by_time(log: LogSeries) -> list[dict[str, float]]:
    """One row per stats time: counts and token rates summed over engines, ratios the fullest engine."""
    return list(per_second(log).values())


def _median(rows: list[dict[str, float]], pick: Callable[[dict[str, float]], float | None]) -> float | None:
    values = [v for row in rows if (v := pick(row)) is not None]
    return statistics.median(values) if values else None


def _decode_speed(row: dict[str, float]) -> float | None:
    """Generated tokens/s ÷ running requests at one stats time: each running request's decode speed."""
    running, gen = row.get("running"), row.get("gen_tps")
    return gen / running if running and gen is not None else None


def _preemption_rate(log: LogSeries) -> float | None:
    if not log.preemptions_logged or log.span_s <= 0:
        return None
    counted = sum(s.preemptions or 0.0 for s in log.samples) + len(log.preemption_times) + log.retractions
    return counted / log.span_s


def log_values(log: LogSeries) -> dict[str, float | None]:
    """Each LOG_METRICS value of one log (None: its stats lines do not print it)."""
    rows = _by_time(log)
    return {"log_gen_tps": _median(rows, lambda r: r.get("gen_tps")),
            "log_decode_speed": _median(rows, _decode_speed),
            "log_waiting": _median(rows, lambda r: r.get("waiting")),
            "log_preemptions": _preemption_rate(log),
            "log_kv": _median(rows, lambda r: r.get("kv")),
            "log_running": _median(rows, lambda r: r.get("running")),
            "log_prompt_tps": _median(rows, lambda r: r.get("prompt_tps")),
            "log_prefix_hit": (log.prefix_hit_total if log.prefix_hit_total is not None
                               else _median(rows, lambda r: r.get("prefix_hit")))}


def _metric(spec: MetricSpec, base: float, cand: float) -> MetricDelta:
    delta = _delta(spec, base, cand)
    margin = SUMMARY_TOLERANCE_PP if spec.scale == "pp" else SUMMARY_TOLERANCE_PCT
    verdict = _judge(spec, delta, None, margin)
    if delta is None and base == 0 and cand != 0:  # from none to some (waiting, preemptions): no ratio, a clear change
        verdict = REGRESSION if (cand > 0) == (spec.direction == "lower") else GAIN
    unit = "pp" if spec.scale == "pp" else "%"
    basis = f"median over each log's stats lines, no interval: change against a ±{plain(margin)} {unit} tolerance"
    return MetricDelta(spec.id, spec.direction, base, cand, (cand / base - 1) * 100 if base else None, None, verdict,
                       basis, spec.label, spec.unit, spec.scale, delta)


def _soundness(base: LogSeries, cand: LogSeries, rows: tuple[list, list], values: tuple[dict, dict],
               techniques: list[str]) -> tuple[list[Note], list[Note]]:
    refused: list[Note] = []
    warnings: list[Note] = []
    if len(techniques) > 1:
        refused.append(Note("techniques", {"n": len(techniques), "names": ", ".join(techniques)}))
    for side, times in (("baseline", rows[0]), ("candidate", rows[1])):
        if len(times) < MIN_STATS_TIMES:
            refused.append(Note("log_short", {"side": side, "n": len(times), "need": MIN_STATS_TIMES}))
        if times and not any(r.get("running") or r.get("waiting") for r in times):
            refused.append(Note("log_idle", {"side": side}))
    if base.engine_id != cand.engine_id or base.fmt != cand.fmt:
        warnings.append(Note("log_formats", {"base": base.title, "cand": cand.title}))
    a, b = values[0]["log_prompt_tps"], values[1]["log_prompt_tps"]
    if a is not None and b is not None and max(a, b) > 0 and abs(a - b) / max(a, b) > MAX_PROMPT_DIFF:
        warnings.append(Note("log_load", {"base": count(a), "cand": count(b),
                                          "limit": percent(MAX_PROMPT_DIFF)}))
    spans = sorted((base.span_s, cand.span_s))
    if spans[0] > 0 and spans[1] / spans[0] > MAX_SPAN_RATIO:
        warnings.append(Note("log_spans", {"base": plain(base.span_s / 60), "cand": plain(cand.span_s / 60)}))
    warnings.append(Note(LIMITS, {"tol": plain(SUMMARY_TOLERANCE_PCT)}))
    return refused, warnings


def _headline(metrics: list[MetricDelta], overall: str, expected: str | None) -> str:
    shown = [m for m in metrics if m.verdict in (GAIN, REGRESSION) and LOG_SPECS[m.metric].counts]
    shown.sort(key=lambda m: (m.verdict != REGRESSION, not LOG_SPECS[m.metric].primary))
    measured = "; ".join(fmt_change(m) if m.delta is not None
                         else f"{m.label} {plain(m.baseline)} → {plain(m.candidate)}"
                         for m in shown[:4]) or "no stats-line median changed beyond the tolerance"
    lead = f"expected: {expected} (seed); " if expected else ""
    return f"{lead}measured from server logs ({overall}): {measured}"


def log_workload(log: LogSeries) -> dict[str, Any]:
    return {"log": log.title, "stats_lines": log.stats_lines, "minutes": round(log.span_s / 60, 2),
            "engines": len([e for e in log.engines if e != "aggregated"]) or 1}


BASIS = (f"server logs: medians of the stats lines over each window, no per-request data, so no latency "
         f"percentile and no bootstrap interval; verdicts compare the change against a "
         f"±{plain(SUMMARY_TOLERANCE_PCT)} % tolerance")


def compare_logs(baseline: LogSeries, candidate: LogSeries, technique: str | Sequence[str] | None = None,
                 kb: Any = None) -> Comparison:
    """Every LOG_METRICS value both logs print, baseline → candidate, with the comparison's soundness checks."""
    techniques, expected, tech_warnings = _technique(technique, kb)
    rows = (_by_time(baseline), _by_time(candidate))
    values = (log_values(baseline), log_values(candidate))
    refused, warnings = _soundness(baseline, candidate, rows, values, techniques)
    metrics: list[MetricDelta] = []
    for spec in LOG_METRICS:
        a, b = values[0][spec.id], values[1][spec.id]
        if a is None or b is None:
            if (a is None) != (b is None):
                side = "baseline" if a is not None else "candidate"
                warnings.append(Note("one_side", {"metric": spec.label, "side": side, "id": spec.id}))
            continue
        metrics.append(_metric(spec, float(a), float(b)))
    overall = _overall(metrics, refused, LOG_SPECS)
    notes = tech_warnings + warnings
    work = {"baseline": log_workload(baseline), "candidate": log_workload(candidate)}
    return Comparison(metrics, overall, [n.text() for n in notes], [n.text() for n in refused],
                      techniques[0] if techniques else None, expected, BASIS, _headline(metrics, overall, expected),
                      work, notes, refused)


def mixed_refusal(base_kind: str, base_title: str, cand_kind: str, cand_title: str) -> TriageError:
    """One side a server log, the other a benchmark file: nothing they hold measures the same thing."""
    return TriageError(f"cannot compare a {base_kind} ({base_title}, the baseline) with a {cand_kind} ({cand_title}, "
                       "the candidate): a log holds the engine's stats lines, a benchmark file the requests' "
                       "latencies; give two server logs or two benchmark files / console summaries")


__all__ = ["BASIS", "KIND_BENCHMARK", "KIND_LOG", "LIMITS", "LOG_METRICS", "LOG_SPECS", "NOT_COMPARABLE",
           "compare_logs", "log_values", "log_workload", "mixed_refusal"]
