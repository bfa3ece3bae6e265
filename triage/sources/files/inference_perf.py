"""inference-perf (kubernetes-sigs) reports: *_lifecycle_metrics.json summaries and per_request_lifecycle_metrics.json.

Field meanings from the tool's source (inference_perf/reportgen/base.py, v0.7.0):
- every distribution is ``{mean, min, max, median, p0.1, p1, p5, …, p99, p99.9}`` in seconds (tokens for lengths);
- ``time_to_first_token`` = first output-token time − start; ``time_per_output_token`` = (last − first token
  time)/(output tokens − 1) (= vLLM TPOT); ``normalized_time_per_output_token`` = latency/output tokens (includes
  TTFT, not used); ``inter_token_latency`` pools every gap between token times of every request;
- per request, ``start_time``/``end_time`` are ``time.perf_counter()`` seconds (only differences mean anything) and
  ``output_token_times`` are the content-bearing SSE chunk times (per token when a tokenizer was configured).
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

import numpy as np

from triage.run import Run
from triage.sources.files.common import Ctx, build_run, deep_get, float_array, fmt_num, frame, num, pooled_itl
from triage.sources.files.registry import BenchmarkFormat, register

TPOT_DEF = "inference-perf time_per_output_token: (last − first token time)/(output tokens − 1) (= vLLM TPOT)"
ITL_DEF = "inference-perf inter_token_latency: every gap between token times, pooled over requests"
DISTS = {"time_to_first_token": "ttft", "time_per_output_token": "tpot", "request_latency": "e2e",
         "inter_token_latency": "itl"}
STATS = (("mean", "mean"), ("median", "p50"), ("p5", "p5"), ("p90", "p90"), ("p99", "p99"))
_STAGE_RE = re.compile(r"stage_(\d+)_lifecycle")


def is_lifecycle_summary(doc: Any) -> bool:
    succ = doc.get("successes") if isinstance(doc, dict) else None
    return isinstance(succ, dict) and "load_summary" in doc and "failures" in doc and not is_prometheus_report(doc)


def is_prometheus_report(doc: Any) -> bool:
    succ = doc.get("successes") if isinstance(doc, dict) else None
    return isinstance(succ, dict) and "load_summary" in doc and "latency" not in succ and any(
        k in succ for k in ("kv_cache_usage_percentage", "num_preemptions_total", "queue_len"))


def is_request_list(doc: Any) -> bool:
    first = doc[0] if isinstance(doc, list) and doc else None
    return isinstance(first, dict) and {"start_time", "end_time", "info"} <= first.keys() and "error" in first


# ---------------------------------------------------------------- summary


def _mean(d: Any) -> Any:
    return d.get("mean") if isinstance(d, dict) else None


def lifecycle_summary(doc: dict[str, Any]) -> dict[str, Any]:
    succ, fail, load = doc.get("successes") or {}, doc.get("failures") or {}, doc.get("load_summary") or {}
    out: dict[str, Any] = {}
    for name, canon in DISTS.items():
        dist = deep_get(succ, "latency", name)
        if isinstance(dist, dict):
            for src, dst in STATS:
                out[f"{canon}_{dst}_s"] = dist.get(src)
    raw_thr = succ.get("throughput")
    thr: dict[str, Any] = raw_thr if isinstance(raw_thr, dict) else {}
    count = num(succ.get("count"))
    out.update({
        "completed": count, "failed": fail.get("count") if isinstance(fail, dict) else None,
        "duration_s": doc.get("benchmark_time_seconds") if count else None,
        "req_per_s": thr.get("requests_per_sec") if count else None,
        "out_tok_per_s": thr.get("output_tokens_per_sec") if count else None,
        "total_tok_per_s": thr.get("total_tokens_per_sec") if count else None,
        "prompt_tokens_mean": _mean(succ.get("prompt_tokens")) or _mean(succ.get("prompt_len")),
        "output_tokens_mean": _mean(succ.get("output_tokens")) or _mean(succ.get("output_len")),
        "offered_rate": load.get("requested_rate") if isinstance(load, dict) else None,
        "max_concurrency": load.get("concurrency") if isinstance(load, dict) else None,
    })
    return out


def _label(name: str, summary: dict[str, Any]) -> str:
    stage = _STAGE_RE.search(name)
    where = f"stage {stage[1]}" if stage else "whole run"
    rate, conc = num(summary.get("offered_rate")), num(summary.get("max_concurrency"))
    if conc is not None:
        return f"{where}: concurrency {fmt_num(conc)}"
    if rate is not None:
        return f"{where}: rate {fmt_num(rate)} req/s"
    return where


def parse_summary(doc: Any, ctx: Ctx) -> list[Run]:
    if not isinstance(doc, dict):
        raise ctx.fail("not an inference-perf lifecycle report")
    summary = lifecycle_summary(doc)
    return [build_run(_label(PurePath(ctx.where).name, summary), ctx, tool=summary, meta={"tool": "inference-perf"},
                      definitions={"tpot": TPOT_DEF, "itl": ITL_DEF})]


# ---------------------------------------------------------------- per request


def _info_value(info: Any, key: str) -> Any:
    """``key`` wherever the version put it: info (v0.3–0.4), info.response_info (v0.5), info.response_metrics."""
    for path in ((key,), ("response_metrics", key), ("response_info", key)):
        value = deep_get(info, *path)
        if value is not None:
            return value
    return None


def _tokens(rec: dict[str, Any], usage_key: str, *paths: tuple[str, ...]) -> Any:
    info = rec.get("info")
    usage = _info_value(info, "server_usage")
    if isinstance(usage, dict) and usage.get(usage_key) is not None:
        return usage[usage_key]
    for path in paths:
        value = deep_get(info, *path)
        if value is not None:
            return value
    return None


def _token_times(recs: list[dict[str, Any]], ctx: Ctx) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(first token time, last token time, number of token times, every gap between token times) per request;
    NaN / no gaps when not streamed."""
    n = len(recs)
    first, last, count = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n)
    gaps: list[np.ndarray] = []
    for i, rec in enumerate(recs):
        times = _info_value(rec.get("info"), "output_token_times")
        if isinstance(times, list) and times:
            arr = float_array(times, "output_token_times", ctx)
            first[i], last[i], count[i] = arr[0], arr[-1], arr.size
            gaps.append(np.diff(arr))
        else:
            gaps.append(np.empty(0))
    return first, last, count, np.concatenate(gaps) if gaps else np.empty(0)


def parse_requests(doc: Any, ctx: Ctx) -> list[Run]:
    recs = [r for r in doc if isinstance(r, dict)] if isinstance(doc, list) else []
    if not recs:
        raise ctx.fail("no inference-perf request records in the list")
    start = float_array([r.get("start_time") for r in recs], "start_time", ctx)
    end = float_array([r.get("end_time") for r in recs], "end_time", ctx)
    ok = np.array([r.get("error") is None for r in recs], dtype=bool)
    first, last, count, gaps = _token_times(recs, ctx)
    output = float_array([_tokens(r, "completion_tokens", ("response_metrics", "output_tokens"), ("output_tokens",))
                          for r in recs], "output_tokens", ctx)
    prompt = float_array([_tokens(r, "prompt_tokens", ("request_metrics", "text", "input_tokens"), ("input_tokens",))
                          for r in recs], "input_tokens", ctx)
    origin = np.nanmin(start)
    cols: dict[str, np.ndarray] = {"start_s": start - origin, "e2e_s": end - start, "ok": ok}
    if np.isfinite(first).any():
        cols["ttft_s"] = first - start
        with np.errstate(invalid="ignore", divide="ignore"):
            cols["itl_s"] = np.where(count > 1, (last - first) / np.maximum(count - 1, 1), np.nan)
            # the tool's own TPOT: to the last token, not to the end of the stream (usage chunk, [DONE])
            cols["tpot_s"] = np.where(ok & (output > 1), (last - first) / (output - 1), np.nan)
    else:
        ctx.notes.append("no output_token_times (not streamed): no TTFT or TPOT, only end-to-end latency")
    if np.isfinite(prompt).any():
        cols["prompt_tokens"] = prompt
    if np.isfinite(output).any():
        cols["output_tokens"] = np.where(ok, output, np.nan)
    # inference-perf's own inter_token_latency: np.percentile over the gaps of every successful streamed request
    pooled = pooled_itl(gaps, np.maximum(count, 1).astype(np.int64) - 1, ok)
    order = np.argsort(cols["start_s"], kind="stable")
    requests = frame({k: v[order] for k, v in cols.items()})
    return [build_run(f"per-request lifecycle ({len(recs):,} requests)", ctx, requests=requests, overrides=pooled,
                      meta={"tool": "inference-perf"},
                      names={"start_s": "start_time", "e2e_s": "end_time − start_time",
                             "ttft_s": "output_token_times[0] − start_time"},
                      definitions={"itl": ITL_DEF, "tpot": TPOT_DEF})]


register(BenchmarkFormat("inference_perf_summary", "inference-perf lifecycle metrics JSON", "json",
                         is_lifecycle_summary, parse_summary, rank=50))
register(BenchmarkFormat("inference_perf_requests", "inference-perf per-request lifecycle metrics JSON", "json",
                         is_request_list, parse_requests, rank=55))
