"""Client-side signals computed from a benchmark run (per-request table, else the tool's summary)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Literal, cast

import numpy as np
import pandas as pd

from triage.diagnosis.signals import SignalSet
from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.messages import Msg
from triage.knowledge.units import plain
from triage.run import Run
from triage.sources.fast_stats import positions, quantiles

MIN_REQUESTS_FOR_CORRELATION = 30
MIN_REQUESTS_FOR_RATE = 50  # below this, start-up and drain dominate the achieved rate
# Correlations and slopes are read from a fixed-seed sample: 50k requests pin r to ±0.01, and a
# million-row upload stays fast. Percentiles always use every request.
CORRELATION_SAMPLE = 50_000
PARALLEL_FROM = 100_000  # rows; below this a thread pool costs more than it saves
PCTS = {"p5": 0.05, "p50": 0.5, "p90": 0.9, "p99": 0.99}


def _col(df: pd.DataFrame, name: str) -> np.ndarray | None:
    if name not in df.columns:
        return None
    series = df[name]
    if series.dtype == np.float64:  # the parsers' float columns: the frame's own array, not a copy
        values = series.to_numpy()
        values = values.view()
        values.flags.writeable = False  # shared with the frame: the signals only read it
    else:
        values = pd.to_numeric(series, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    return values if _any_finite(values) else None


def _any_finite(values: np.ndarray) -> bool:
    """Whether any value is a number; a column's first values usually answer without a pass over a million."""
    return bool(np.isfinite(values[:4096]).any() or np.isfinite(values).any())


COLUMNS = ("start_s", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s", "tpot_s", "queue_s")


def _successful(values: np.ndarray | None, ok: np.ndarray, failed: int) -> np.ndarray | None:
    """The successful requests' values of one column (None when none of them is a number)."""
    if values is None or not failed:
        return values
    kept = values[ok]
    return kept if _any_finite(kept) else None


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return top / bottom if top is not None and bottom else None


def _pearson(x: np.ndarray | None, y: np.ndarray | None) -> float | None:
    if x is None or y is None:
        return None
    mask = np.isfinite(x) & np.isfinite(y)
    if mask.sum() < MIN_REQUESTS_FOR_CORRELATION or np.std(x[mask]) == 0 or np.std(y[mask]) == 0:
        return None
    return float(np.corrcoef(x[mask], y[mask])[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties share their mean rank) of finite values: pandas' rank(), without a Series."""
    order = np.argsort(x)
    ordered = x[order]
    first = np.empty(x.size, dtype=bool)  # where each run of equal values begins
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, x.size))
    ranks = np.empty(x.size, dtype=np.float64)
    ranks[order] = np.repeat(starts + (counts + 1) / 2.0, counts)  # the mean of ranks start+1 … start+count
    return ranks


def _nanmean(x: np.ndarray) -> float:
    """np.nanmean without its copy when no value is NaN (the same sum and division then)."""
    total = np.add.reduce(x)
    return float(total / x.size) if x.size and not np.isnan(total) else float(np.nanmean(x))


def _ascending(x: np.ndarray) -> bool:
    """Whether values are in order; the first few thousand usually answer for unordered ones."""
    head = x[:4097]
    return bool(np.all(head[1:] >= head[:-1])) and bool(np.all(x[1:] >= x[:-1]))


def _all_finite(x: np.ndarray) -> bool:
    """No NaN or infinity (a finite sum says so without a mask; an overflowing one falls back to the mask)."""
    return math.isfinite(float(np.add.reduce(x))) or bool(np.isfinite(x).all())


def _spearman(x: np.ndarray | None, y: np.ndarray | None, x_ranks: np.ndarray | None = None,
              y_ranks: np.ndarray | None = None) -> float | None:
    """Spearman r; ``x_ranks`` and ``y_ranks`` (the ranks of the whole of ``x``, of ``y``) serve when every pair is
    finite."""
    if x is None or y is None:
        return None
    mask = np.isfinite(x) & np.isfinite(y)
    if mask.sum() < MIN_REQUESTS_FOR_CORRELATION:
        return None
    whole = x_ranks is not None and bool(mask.all())
    rx = x_ranks if whole else _ranks(x[mask])
    return _pearson(rx, (y_ranks if y_ranks is not None else _ranks(y)) if whole else _ranks(y[mask]))


def in_flight_at_arrival(start: np.ndarray, e2e: np.ndarray, at: np.ndarray | None = None) -> np.ndarray:
    """Requests started before and not yet finished at each arrival in ``at`` (default: every arrival)."""
    at = start if at is None else at
    return _count_below(start, at, "left") - _finished_by(start, e2e, at)


def _finished_by(start: np.ndarray, e2e: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Requests that ended at or before each arrival in ``at`` (a NaN end never does)."""
    end = start + e2e
    return _count_below(end if _all_finite(end) else end[np.isfinite(end)], at, "right")


def _count_below(values: np.ndarray, at: np.ndarray, side: Literal["left", "right"]) -> np.ndarray:
    """For each point of ``at``, how many ``values`` lie before it (``side="right"``: at or before it).

    Sorting a million values costs more than the rest of a run's signals; the points asked about are a sample
    (50,000 at most), so each value is placed among the sorted points instead and the counts are summed up.
    Values already in order (a load generator's start times usually are) are searched directly."""
    ascending = _ascending(values)
    if values.size <= at.size or ascending:
        return np.searchsorted(values if ascending else np.sort(values), at, side=side)
    sorted_at = at.size <= 1 or bool(np.all(at[1:] >= at[:-1]))  # a sample of ordered starts is in order
    order = None if sorted_at else np.argsort(at, kind="stable")
    points = at if order is None else at[order]
    # a value v counts for the points p with v < p ("left") or v <= p ("right")
    where: Literal["left", "right"] = "right" if side == "left" else "left"
    first = positions(points, values, where) if _all_finite(values) \
        else np.searchsorted(points, values, side=where)
    counts = np.cumsum(np.bincount(first, minlength=points.size + 1))[: points.size]
    if order is None:
        return counts
    out = np.empty(at.size, dtype=np.int64)
    out[order] = counts
    return out


def _ranked(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """In-flight counts as floats, ranked once for both load correlations (when all are finite)."""
    flight = counts.astype("float64")
    return flight, _ranks(flight) if np.isfinite(flight).all() else None


def _slope_ms_per_ktok(prompt: np.ndarray | None, ttft: np.ndarray | None) -> float | None:
    if prompt is None or ttft is None:
        return None
    mask = np.isfinite(prompt) & np.isfinite(ttft)
    if mask.sum() < MIN_REQUESTS_FOR_CORRELATION or np.std(prompt[mask]) == 0:
        return None
    slope = np.polyfit(prompt[mask], ttft[mask], 1)[0]
    return float(slope * 1000 * 1000)


def _rise_ratio(start: np.ndarray | None, ttft: np.ndarray | None) -> float | None:
    if start is None or ttft is None:
        return None
    mask = np.isfinite(start) & np.isfinite(ttft)
    if mask.sum() < MIN_REQUESTS_FOR_CORRELATION:
        return None
    s, t = start[mask], ttft[mask]
    lo, hi = np.quantile(s, [0.25, 0.75])
    first, last = t[s <= lo], t[s >= hi]
    return _ratio(float(np.median(last)), float(np.median(first))) if first.size and last.size else None


class _Table:
    """The successful requests of a run as float arrays, parsed once, with memoized percentiles."""

    def __init__(self, df: pd.DataFrame, kept: dict[str, dict[float, float]] | None = None) -> None:
        self.all_count = len(df)
        ok = df["ok"].astype(bool).to_numpy() if "ok" in df.columns else np.ones(len(df), dtype=bool)
        self.failed = int((~ok).sum())
        self.n = len(df) - self.failed
        self.ok = ok if self.failed else None
        # each column used, as the frame's own array, and its successful rows only when a signal needs them all:
        # selecting rows of the whole frame copied every column
        self._raw = {c: _col(df, c) for c in COLUMNS}
        self.cols: dict[str, np.ndarray | None] = {} if self.failed else dict(self._raw)
        # the parser's quantiles of the same values (successful requests): each column's are selected once
        self._pcts: dict[str, dict[float, float] | None] = {n: dict(qs) for n, qs in (kept or {}).items()
                                                            if n in self._raw and self._raw[n] is not None}
        rng = np.random.default_rng(0)
        self.idx = np.sort(rng.choice(self.n, CORRELATION_SAMPLE, replace=False)) \
            if self.n > CORRELATION_SAMPLE else None
        # the sampled successful requests' rows of the whole frame
        self._rows = self.idx if self.ok is None or self.idx is None else np.flatnonzero(self.ok)[self.idx]
        self._flight: tuple[np.ndarray, np.ndarray | None] | None = None
        self._flight_done = False
        self._sample_ranks: dict[str, np.ndarray | None] = {}

    def __getitem__(self, name: str) -> np.ndarray | None:
        """The successful requests' values of a column (None when none is a number)."""
        if name not in self.cols:  # only when some request failed: the others were the frame's arrays from the start
            assert self.ok is not None
            self.cols[name] = _successful(self._raw[name], self.ok, self.failed)
        return self.cols[name]

    def has(self, name: str) -> bool:
        """Whether a successful request has a number in this column (the parser's quantiles say so already)."""
        return self._pcts.get(name) is not None or self[name] is not None

    def sample(self, name: str) -> np.ndarray | None:
        if not self.has(name):
            return None
        if self.idx is None:
            return self[name]
        raw = self._raw[name]
        assert raw is not None  # has(name): the column has a number
        return raw[self._rows]

    def raw(self, name: str) -> np.ndarray:
        """Every row's values of a column that ``has`` numbers (failed requests' rows too)."""
        raw = self._raw[name]
        assert raw is not None
        return raw

    def total(self, name: str) -> float:
        """The sum of the successful requests' numbers in a column (np.nansum of them; no copy of the rows)."""
        raw = self._raw[name]
        assert raw is not None
        if self.ok is None:
            total = np.add.reduce(raw)
            return float(total) if not np.isnan(total) else float(np.nansum(raw))
        return float(np.add.reduce(raw, where=self.ok & ~np.isnan(raw)))

    def _percentiles(self, name: str, qs: tuple[float, ...]) -> dict[float, float] | None:
        col = self[name]
        if col is None:
            return None
        finite = np.isfinite(col)
        values = col if finite.all() else col[finite]
        return dict(zip(qs, quantiles(values, qs).tolist(), strict=True)) if values.size else None

    def warm(self, wanted: dict[str, tuple[float, ...]]) -> None:
        """Every percentile the signals read, per column in one pass, and the in-flight counts (numpy releases the
        GIL: in parallel)."""
        # each job selects the successful rows of its own columns (a thread each; distinct keys of self.cols)
        todo = [(n, qs) for n, qs in wanted.items()
                if qs and self._raw.get(n) is not None and not set(qs) <= set(self._pcts.get(n) or {})]
        jobs: list[Callable[[], object]] = []
        # the in-flight counts as two jobs, the longest first: requests ended by each sampled arrival, and those
        # started before it
        starts, at = self["start_s"], self.sample("start_s")
        flight = starts is not None and at is not None and self._raw["e2e_s"] is not None
        if flight:
            assert starts is not None and at is not None
            jobs += [partial(self._finished_by, starts, at), partial(_count_below, starts, at, "left")]
        jobs += [partial(self._percentiles, name, qs) for name, qs in todo]
        ranked = ("ttft_s", "tpot_s") if flight else ()  # the load correlations' other sides
        jobs += [partial(self.sample_ranks, name) for name in ranked]
        if self.n < PARALLEL_FROM or len(jobs) < 2:
            found = [job() for job in jobs]
        else:
            with ThreadPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 1)) as pool:
                found = list(pool.map(lambda job: job(), jobs))
        if flight:
            finished, arrived = found[:2]
            self._flight = None if finished is None else _ranked(cast(np.ndarray, arrived) - finished)
            self._flight_done = True
        for (name, _), more in zip(todo, found[2 if flight else 0:len(found) - len(ranked)], strict=True):
            assert more is None or isinstance(more, dict)
            self._pcts[name] = None if more is None else {**(self._pcts.get(name) or {}), **more}

    def sample_ranks(self, name: str) -> np.ndarray | None:
        """Ranks of a column's sample when every sampled value is a number (None otherwise), ranked once."""
        if name not in self._sample_ranks:
            values = self.sample(name)
            self._sample_ranks[name] = _ranks(values) if values is not None and _all_finite(values) else None
        return self._sample_ranks[name]

    def _finished_by(self, starts: np.ndarray, at: np.ndarray) -> np.ndarray | None:
        e2e = self["e2e_s"]
        return None if e2e is None else _finished_by(starts, e2e, at)

    def flight(self) -> tuple[np.ndarray, np.ndarray | None] | None:
        """Requests in flight at each sampled arrival, and their ranks (None unless every count is finite)."""
        if not self._flight_done:
            starts, e2e, at = self["start_s"], self["e2e_s"], self.sample("start_s")
            self._flight = None if starts is None or e2e is None or at is None \
                else _ranked(in_flight_at_arrival(starts, e2e, at=at))
            self._flight_done = True
        return self._flight

    def pct(self, name: str, q: float) -> float | None:
        """Exact percentile over every request (np.quantile's); the ones warmed were computed together."""
        found = self._pcts.get(name)
        if name not in self._pcts or (found is not None and q not in found):
            more = self._percentiles(name, (q,))
            self._pcts[name] = None if more is None else {**(found or {}), **more}
        found = self._pcts[name]
        return found[q] if found else None


def _latency(kb: KnowledgeBase, out: SignalSet, table: _Table | None, run: Run) -> None:
    for metric in ("ttft", "tpot", "e2e"):
        for pname, q in PCTS.items():
            name = f"{metric}_{pname}_s"
            if name not in kb.signals:
                continue
            if table is not None and table.has(f"{metric}_s"):
                how = Msg("bench.percentile", p=pname, n=table.n)
                out.put(kb, name, table.pct(f"{metric}_s", q), how)
            elif name in run.summary:
                label = run.definitions.get(metric) or Msg("bench.the_tools_summary")
                out.put(kb, name, run.summary[name], Msg("bench.tool_summary_of", definition=label))
    for metric in ("ttft", "tpot", "e2e"):
        p99, p50 = out.get(f"{metric}_p99_s"), out.get(f"{metric}_p50_s")
        if p99 and p50:
            out.put(kb, f"{metric}_tail_ratio", _ratio(p99.value, p50.value), Msg("tail_ratio", metric=metric))
    _floor(kb, out, table, run)


def _floor(kb: KnowledgeBase, out: SignalSet, table: _Table | None, run: Run) -> None:
    """How flat TTFT is (p99 ÷ p5) and how fast one request's prefill runs (prompt tokens ÷ the TTFT floor)."""
    p99, p5 = out.get("ttft_p99_s"), out.get("ttft_p5_s")
    if p99 is None or p5 is None:
        return
    out.put(kb, "ttft_spread", _ratio(p99.value, p5.value), Msg("bench.ttft_over_p5", p="p99"))
    p50 = out.get("ttft_p50_s")
    if p50 is not None:
        out.put(kb, "ttft_median_over_floor", _ratio(p50.value, p5.value), Msg("bench.ttft_over_p5", p="p50"))
    if table is not None and table.has("prompt_tokens"):
        prompt, how = table.pct("prompt_tokens", 0.5), Msg("bench.median_prompt")
    else:
        prompt, how = run.summary.get("prompt_tokens_mean"), Msg("bench.mean_prompt_summary")
    out.put(kb, "prefill_tok_per_s", _ratio(prompt, p5.value), Msg("bench.prefill_rate", prompt=how))


def _shape(kb: KnowledgeBase, out: SignalSet, t: _Table) -> None:
    prompt, output = t["prompt_tokens"], t["output_tokens"]
    p = t.pct
    out.put(kb, "prompt_tail_ratio", _ratio(p("prompt_tokens", 0.99), p("prompt_tokens", 0.5)),
            Msg("tail_ratio", metric="prompt"))
    out.put(kb, "prompt_max_over_p99", _ratio(p("prompt_tokens", 1.0), p("prompt_tokens", 0.99)),
            Msg("bench.prompt_max"))
    out.put(kb, "output_max_over_p99", _ratio(p("output_tokens", 1.0), p("output_tokens", 0.99)),
            Msg("bench.output_max"))
    if prompt is not None and output is not None:
        out.put(kb, "prompt_to_output_ratio", _ratio(_nanmean(prompt), _nanmean(output)),
                Msg("bench.prompt_over_output"))


def _load(kb: KnowledgeBase, out: SignalSet, t: _Table) -> None:
    ttft, start, prompt = t.sample("ttft_s"), t.sample("start_s"), t.sample("prompt_tokens")
    sampled: str | Msg = Msg("bench.sample", n=CORRELATION_SAMPLE) if t.idx is not None else ""
    out.put(kb, "ttft_prompt_corr", _pearson(prompt, ttft), Msg("bench.pearson_prompt", sample=sampled))
    out.put(kb, "ttft_prompt_slope_ms_per_ktok", _slope_ms_per_ktok(prompt, ttft),
            Msg("bench.slope", sample=sampled))
    out.put(kb, "ttft_rise_ratio", _rise_ratio(start, ttft), Msg("bench.rise", sample=sampled))
    found = t.flight()
    if found is not None:
        flight, ranks = found
        out.put(kb, "ttft_load_corr", _spearman(flight, ttft, ranks, t.sample_ranks("ttft_s")),
                Msg("bench.spearman_ttft", sample=sampled))
        out.put(kb, "tpot_load_corr", _spearman(flight, t.sample("tpot_s"), ranks, t.sample_ranks("tpot_s")),
                Msg("bench.spearman_tpot", sample=sampled))
    if t.has("queue_s") and ttft is not None:
        out.put(kb, "queue_share_of_ttft", _ratio(t.pct("queue_s", 0.5), t.pct("ttft_s", 0.5)),
                Msg("bench.queue_share"))


def _throughput(kb: KnowledgeBase, out: SignalSet, t: _Table | None, run: Run, slo: dict) -> None:
    s = run.summary
    completed = s.get("completed", t.n if t else None)
    failed = s.get("failed", t.failed if t else None)
    if completed is not None and failed is not None and completed + failed > 0:
        total = completed + failed
        out.put(kb, "error_rate", failed / total, Msg("bench.failed", failed=int(failed), total=int(total)))
    rate = s.get("req_per_s")
    if rate is None and t is not None and t["start_s"] is not None and t["e2e_s"] is not None:
        span = float(np.nanmax(t["start_s"] + t["e2e_s"]) - np.nanmin(t["start_s"]))
        rate = t.n / span if span > 0 else None
    out.put(kb, "req_per_s", rate, Msg("bench.tool_summary" if "req_per_s" in s else "bench.completed_over_span"))
    _inflight(kb, out, t, s, rate)
    out.put(kb, "out_tok_per_s", s.get("out_tok_per_s"), Msg("bench.tool_summary"))
    offered = s.get("offered_rate")
    enough = (completed or 0) >= MIN_REQUESTS_FOR_RATE
    if rate is not None and offered and np.isfinite(offered) and enough:
        out.put(kb, "achieved_over_offered", rate / offered,
                Msg("bench.achieved", a=plain(rate), b=plain(offered)))
    if t is not None and t.has("ttft_s") and t.all_count:
        # over every row with the failed ones masked out: the successful rows' counts, without copying them
        met = t.raw("ttft_s") <= slo["ttft_p99_s"]
        if t.has("tpot_s"):
            met &= ~(t.raw("tpot_s") > slo["tpot_p99_s"])
        if t.ok is not None:
            met &= t.ok
        out.put(kb, "slo_attainment", float(np.count_nonzero(met)) / t.all_count, Msg("bench.slo_attainment"))


LITTLE = {"inflight_mean": ("e2e", "E2E"), "awaiting_first_token_mean": ("ttft", "TTFT")}


def _inflight(kb: KnowledgeBase, out: SignalSet, t: _Table | None, s: dict, rate: float | None) -> None:
    """Little's law from the client's side: mean requests in flight, and of those still without a first token."""
    if t is not None and t["start_s"] is not None and t["e2e_s"] is not None:
        span = float(np.nanmax(t["start_s"] + t["e2e_s"]) - np.nanmin(t["start_s"]))
        if span <= 0 or t.n < MIN_REQUESTS_FOR_CORRELATION:
            return
        for name, (col, label) in LITTLE.items():
            if t.has(f"{col}_s"):
                out.put(kb, name, t.total(f"{col}_s") / span, Msg("bench.little_requests", metric=label))
        return
    if not rate or (s.get("completed") or 0) < MIN_REQUESTS_FOR_CORRELATION:
        return
    for name, (col, label) in LITTLE.items():
        mean = s.get(f"{col}_mean_s")
        if mean:
            out.put(kb, name, rate * mean, Msg("bench.little_summary", metric=label))


def _wanted(kb: KnowledgeBase) -> dict[str, tuple[float, ...]]:
    """The percentiles each column gives the signals: the latency ones the knowledge base defines, then those
    of the shape and queue signals (prompt p50, p99, max; output p99, max; queue p50)."""
    wanted = {f"{m}_s": tuple(q for p, q in PCTS.items() if f"{m}_{p}_s" in kb.signals)
              for m in ("ttft", "tpot", "e2e")}
    wanted.update({"prompt_tokens": (0.5, 0.99, 1.0), "output_tokens": (0.99, 1.0), "queue_s": (0.5,)})
    return wanted


def benchmark_signals(kb: KnowledgeBase, run: Run, slo: dict) -> SignalSet:
    """Every client-side signal the run can give; the others stay absent."""
    out = SignalSet("benchmark")
    table = _Table(run.requests, run.quantiles) if run.has_requests else None
    if table is not None:
        table.warm(_wanted(kb))
    _latency(kb, out, table, run)
    if table is not None:
        _shape(kb, out, table)
        _load(kb, out, table)
    _throughput(kb, out, table, run, slo)
    return out
