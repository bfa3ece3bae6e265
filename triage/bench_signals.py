"""Client-side signals computed from a benchmark run (per-request table, else the tool's summary)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from triage.knowledge import KnowledgeBase
from triage.run import Run
from triage.signals import SignalSet

MIN_REQUESTS_FOR_CORRELATION = 30
MIN_REQUESTS_FOR_RATE = 50  # below this, start-up and drain dominate the achieved rate
PCTS = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


def _col(df: pd.DataFrame, name: str) -> np.ndarray | None:
    if name not in df.columns:
        return None
    values = pd.to_numeric(df[name], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    return values if np.isfinite(values).any() else None


def _quantile(values: np.ndarray | None, q: float) -> float | None:
    if values is None:
        return None
    finite = values[np.isfinite(values)]
    return float(np.quantile(finite, q)) if finite.size else None


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return top / bottom if top is not None and bottom else None


def _pearson(x: np.ndarray | None, y: np.ndarray | None) -> float | None:
    if x is None or y is None:
        return None
    mask = np.isfinite(x) & np.isfinite(y)
    if mask.sum() < MIN_REQUESTS_FOR_CORRELATION or np.std(x[mask]) == 0 or np.std(y[mask]) == 0:
        return None
    return float(np.corrcoef(x[mask], y[mask])[0, 1])


def _spearman(x: np.ndarray | None, y: np.ndarray | None) -> float | None:
    if x is None or y is None:
        return None
    mask = np.isfinite(x) & np.isfinite(y)
    if mask.sum() < MIN_REQUESTS_FOR_CORRELATION:
        return None
    rx = pd.Series(x[mask]).rank().to_numpy()
    ry = pd.Series(y[mask]).rank().to_numpy()
    return _pearson(rx, ry)


def in_flight_at_arrival(start: np.ndarray, e2e: np.ndarray) -> np.ndarray:
    """Requests started before and not yet finished at each arrival (vectorized with sorted searches)."""
    end = start + e2e
    starts = np.sort(start)
    ends = np.sort(end[np.isfinite(end)])
    return np.searchsorted(starts, start, side="left") - np.searchsorted(ends, start, side="right")


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
    """The successful requests of a run as float arrays, parsed once."""

    def __init__(self, df: pd.DataFrame) -> None:
        self.all_count = len(df)
        ok = df["ok"].astype(bool).to_numpy() if "ok" in df.columns else np.ones(len(df), dtype=bool)
        self.failed = int((~ok).sum())
        good = df[ok] if not ok.all() else df
        self.n = len(good)
        self.cols = {c: _col(good, c) for c in ("start_s", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s",
                                                "tpot_s", "queue_s")}

    def __getitem__(self, name: str) -> np.ndarray | None:
        return self.cols[name]


def _latency(kb: KnowledgeBase, out: SignalSet, table: _Table | None, run: Run) -> None:
    for metric in ("ttft", "tpot", "e2e"):
        for pname, q in PCTS.items():
            name = f"{metric}_{pname}_s"
            if name not in kb.signals:
                continue
            if table is not None and table[f"{metric}_s"] is not None:
                how = f"{pname} of {table.n:,} successful requests"
                out.put(kb, name, _quantile(table[f"{metric}_s"], q), how)
            elif name in run.summary:
                label = run.definitions.get(metric, "the tool's summary")
                out.put(kb, name, run.summary[name], f"tool summary ({label})")
    for metric in ("ttft", "tpot", "e2e"):
        p99, p50 = out.get(f"{metric}_p99_s"), out.get(f"{metric}_p50_s")
        if p99 and p50:
            out.put(kb, f"{metric}_tail_ratio", _ratio(p99.value, p50.value), f"{metric} p99 ÷ p50")


def _shape(kb: KnowledgeBase, out: SignalSet, t: _Table) -> None:
    prompt, output = t["prompt_tokens"], t["output_tokens"]
    out.put(kb, "prompt_tail_ratio", _ratio(_quantile(prompt, 0.99), _quantile(prompt, 0.5)), "prompt p99 ÷ p50")
    out.put(kb, "prompt_max_over_p99", _ratio(_quantile(prompt, 1.0), _quantile(prompt, 0.99)), "prompt max ÷ p99")
    out.put(kb, "output_max_over_p99", _ratio(_quantile(output, 1.0), _quantile(output, 0.99)), "output max ÷ p99")
    if prompt is not None and output is not None:
        out.put(kb, "prompt_to_output_ratio", _ratio(float(np.nanmean(prompt)), float(np.nanmean(output))),
                "mean prompt ÷ mean output tokens")


def _load(kb: KnowledgeBase, out: SignalSet, t: _Table) -> None:
    ttft, start = t["ttft_s"], t["start_s"]
    out.put(kb, "ttft_prompt_corr", _pearson(t["prompt_tokens"], ttft), "Pearson r, prompt tokens vs TTFT")
    out.put(kb, "ttft_prompt_slope_ms_per_ktok", _slope_ms_per_ktok(t["prompt_tokens"], ttft),
            "least-squares slope of TTFT on prompt tokens")
    out.put(kb, "ttft_rise_ratio", _rise_ratio(start, ttft), "median TTFT, last quarter ÷ first quarter of the run")
    if start is not None and t["e2e_s"] is not None:
        flight = in_flight_at_arrival(start, t["e2e_s"]).astype("float64")
        out.put(kb, "ttft_load_corr", _spearman(flight, ttft), "Spearman r, in-flight requests vs TTFT")
        out.put(kb, "tpot_load_corr", _spearman(flight, t["tpot_s"]), "Spearman r, in-flight requests vs TPOT")
    queue = t["queue_s"]
    if queue is not None and ttft is not None:
        out.put(kb, "queue_share_of_ttft", _ratio(_quantile(queue, 0.5), _quantile(ttft, 0.5)),
                "median queue time ÷ median TTFT")


def _throughput(kb: KnowledgeBase, out: SignalSet, t: _Table | None, run: Run, slo: dict) -> None:
    s = run.summary
    completed = s.get("completed", t.n if t else None)
    failed = s.get("failed", t.failed if t else None)
    if completed is not None and failed is not None and completed + failed > 0:
        total = completed + failed
        out.put(kb, "error_rate", failed / total, f"{int(failed):,} failed of {int(total):,}")
    rate = s.get("req_per_s")
    if rate is None and t is not None and t["start_s"] is not None and t["e2e_s"] is not None:
        span = float(np.nanmax(t["start_s"] + t["e2e_s"]) - np.nanmin(t["start_s"]))
        rate = t.n / span if span > 0 else None
    out.put(kb, "req_per_s", rate, "tool summary" if "req_per_s" in s else "completed ÷ run span")
    out.put(kb, "out_tok_per_s", s.get("out_tok_per_s"), "tool summary")
    offered = s.get("offered_rate")
    enough = (completed or 0) >= MIN_REQUESTS_FOR_RATE
    if rate is not None and offered and np.isfinite(offered) and enough:
        out.put(kb, "achieved_over_offered", rate / offered, f"achieved {rate:.2f} ÷ offered {offered:.2f} req/s")
    if t is not None and t["ttft_s"] is not None and t.all_count:
        ttft_ok = t["ttft_s"] <= slo["ttft_p99_s"]
        tpot = t["tpot_s"]
        tpot_ok = ~(tpot > slo["tpot_p99_s"]) if tpot is not None else np.ones_like(ttft_ok)
        out.put(kb, "slo_attainment", float((ttft_ok & tpot_ok).sum()) / t.all_count,
                "requests within the TTFT and TPOT SLO ÷ all requests")


def benchmark_signals(kb: KnowledgeBase, run: Run, slo: dict) -> SignalSet:
    """Every client-side signal the run can give; the others stay absent."""
    out = SignalSet("benchmark")
    table = _Table(run.requests) if run.has_requests else None
    _latency(kb, out, table, run)
    if table is not None:
        _shape(kb, out, table)
        _load(kb, out, table)
    _throughput(kb, out, table, run, slo)
    return out
