"""A MetricWindow over a parsed server log: the same needs a Prometheus window answers, where a log can."""

from __future__ import annotations

import statistics

import numpy as np

from triage.knowledge.engines import EngineSpec, load_engines
from triage.knowledge.needs import Need, SeriesPoint
from triage.sources.logs.series import LogSeries, columns, fmean, per_second, printed, running_sum
from triage.sources.readings import Readings

NOT_IN_LOG = "not measurable from a log: the {title} has no {what}"
WHAT = {  # why a need has no answer from a log, by metric key
    "ttft": "time to first token (it is a per-request histogram, exported on /metrics only)",
    "tpot_req": "per-request time per output token (a /metrics histogram)",
    "itl": "inter-token latency (a /metrics histogram)",
    "e2e": "request latency (a /metrics histogram)",
    "queue_time": "queue time per request (a /metrics histogram)",
    "prefill_time": "prefill time per request (a /metrics histogram)",
    "prompt_len": "prompt-length distribution (a /metrics histogram)",
    "request_success": "count of finished requests",
    "cache_config": "cache configuration in its stats lines",
    "served_model": "served model name in its stats lines",
    "prefix_queries": "prefix-cache token counters (only a hit-rate percentage)",
    "prefix_hits": "prefix-cache token counters (only a hit-rate percentage)",
    "prefix_hit_rate": "prefix-cache hit rate (this version's stats lines print none)",
    "running": "running-request count", "waiting": "waiting-request count", "kv_usage": "KV cache usage",
    "prompt_tokens": "prompt throughput", "generation_tokens": "generation throughput",
}
Pick = str  # the Sample field a need reads
GAUGES: dict[str, Pick] = {"running": "running", "waiting": "waiting", "kv_usage": "kv",
                           "prefix_hit_rate": "prefix_hit"}
RATES: dict[str, Pick] = {"prompt_tokens": "prompt_tps", "generation_tokens": "gen_tps"}
MAX_KEYS = frozenset({"kv_usage", "prefix_hit_rate"})  # ratios: the fullest engine, never a sum


class LogWindow:
    """MetricWindow over a LogSeries: gauges are the stats lines' values (summed across engines for counts, the
    fullest engine for ratios), token rates the lines' own per-interval averages, preemptions counted lines."""

    def __init__(self, log: LogSeries, engines: dict[str, EngineSpec] | None = None) -> None:
        self.log = log
        self.engine = (engines or load_engines())[log.engine_id]
        self.addons: list[EngineSpec] = []
        self.window_seconds = log.span_s
        self._seen: dict[str, list[np.ndarray]] = {}
        self._means: dict[str, list[float]] = {}

    def _per_engine(self, pick: Pick) -> list[np.ndarray]:
        """Per engine, the values of one field that the log printed (a version without the field has none)."""
        if pick not in self._seen:
            values = (printed(columns(g)[pick]) for g in self.log.groups)
            self._seen[pick] = [v for v in values if len(v)]
        return self._seen[pick]

    def _engine_means(self, pick: Pick) -> list[float]:
        """Per engine, the mean of one field's printed values (statistics.fmean's value)."""
        if pick not in self._means:
            self._means[pick] = [fmean(v) for v in self._per_engine(pick)]
        return self._means[pick]

    def _why(self, key: str) -> str:
        return NOT_IN_LOG.format(title=self.log.title, what=WHAT.get(key, f"'{key}'"))

    def _gauge(self, need: Need) -> float | None:
        if need.key == "prefix_hit_rate" and self.log.prefix_hit_total is not None:
            return self.log.prefix_hit_total  # cached ÷ all prompt tokens, summed over every prefill batch
        per_engine = self._per_engine(GAUGES[need.key])
        if not per_engine:
            return None
        if need.kind == "gauge_max":
            return max(float(v.max()) for v in per_engine)
        if need.kind == "gauge_last":
            last = [float(v[-1]) for v in per_engine]
            return sum(last) if need.key not in MAX_KEYS else max(last)
        means = self._engine_means(GAUGES[need.key])
        return max(means) if need.key in MAX_KEYS else sum(means)

    def _rate(self, need: Need) -> tuple[float | None, str]:
        log = self.log
        if need.key == "prompt_tokens" and log.prompt_tokens is not None:
            if log.span_s <= 0:
                return None, "not measurable from a log: one batch line has no time span for a rate"
            return log.prompt_tokens / log.span_s, ""
        if need.key in RATES:
            means = self._engine_means(RATES[need.key])
            return (sum(means), "") if means else (None, self._why(need.key))
        span = log.span_s
        if need.key == "preemptions":
            if not log.preemptions_logged:
                return None, (f"not measurable from a log: this {log.title} prints no preemptions (vLLM V1 adds "
                              "'Preemptions: N' to its stats line only in newer versions, and only when N > 0)")
            if span <= 0:
                return None, "not measurable from a log: one stats line has no time span for a rate"
            printed = np.nan_to_num(columns(log.samples)["preemptions"], nan=0.0)
            counted = running_sum(printed) + len(log.preemption_times) + log.retractions
            return counted / span, ""
        if need.key in ("spec_draft_tokens", "spec_accepted_tokens"):
            attr = "drafted" if need.key == "spec_draft_tokens" else "accepted"
            counts = [v for x in log.spec if (v := getattr(x, attr)) is not None]
            if not counts:
                return None, "not measurable from a log: no SpecDecoding metrics lines (speculation off?)"
            return (sum(counts) / span, "") if span > 0 else (None, "one SpecDecoding line has no time span")
        return None, self._why(need.key)

    def _answer(self, need: Need) -> tuple[float | None, str]:
        if need.engine:
            return None, f"not measurable from a log: {need.engine} metrics are not in a server log"
        if need.kind in ("gauge_mean", "gauge_max", "gauge_last") and need.key in GAUGES:
            value = self._gauge(need)
            return value, "" if value is not None else self._why(need.key)
        if need.kind == "gauge_mean" and need.key == "spec_accept_rate":
            rates = [x.rate for x in self.log.spec if x.rate is not None]
            return (statistics.fmean(rates), "") if rates else (None, "not measurable from a log: no "
                                                                         "SpecDecoding metrics lines")
        if need.kind == "rate":
            return self._rate(need)
        return None, self._why(need.key)

    def read(self, needs: list[Need]) -> Readings:
        out = Readings(window_seconds=self.window_seconds)
        for need in needs:
            value, why = self._answer(need)
            out.values[need] = value
            if value is None:
                out.missing[need] = why
        return out

    def series(self, needs: list[Need], points: int = 60) -> dict[Need, list[SeriesPoint]]:
        """Per gauge or token-rate need, the log's values over time (engines summed, ratios maxed, per second
        of log time), thinned to about ``points`` by averaging neighbours; other needs get no points."""
        out: dict[Need, list[SeriesPoint]] = {}
        for need in needs:
            pick = GAUGES.get(need.key) if need.kind.startswith("gauge") else RATES.get(need.key)
            out[need] = [] if pick is None or need.engine else self._points(need.key, pick, points)
        return out

    def _points(self, key: str, pick: Pick, points: int) -> list[SeriesPoint]:
        """One value per second of log time (series.per_second: one engine's lines in a second are one state,
        engines combined), thinned to about ``points``."""
        by_time = {t: row[pick] for t, row in per_second(self.log, (pick,)).items() if pick in row}
        rows = sorted(by_time.items())
        step = max(1, -(-len(rows) // max(points, 1)))
        return [SeriesPoint(t=float(chunk[-1][0]), value=statistics.fmean(v for _, v in chunk))
                for chunk in (rows[i:i + step] for i in range(0, len(rows), step))]
