"""NVIDIA genai-perf exports: *_genai_perf.csv / *_genai_perf.json summaries and the raw profile_export.json."""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

import numpy as np

from triage.run import Run
from triage.sources.files.common import (
    Ctx,
    build_run,
    check_formulas,
    deep_get,
    find_key,
    float_array,
    fmt_num,
    frame,
    num,
    pooled_itl,
    ragged,
    ragged_gaps,
    read_csv_rows,
)
from triage.sources.files.registry import BenchmarkFormat, register

TPOT_DEF = "{tool} inter_token_latency: (latency − ttft)/(osl − 1) per request (= vLLM TPOT)"
ITL_DEF = "AIPerf inter_chunk_latency: every gap between streamed chunks, pooled over all requests (≈ vLLM ITL)"
# distribution metric tag → canonical prefix; scalar tag → summary key
DIST_TAGS = {"time_to_first_token": "ttft", "request_latency": "e2e", "inter_token_latency": "tpot",
             "inter_chunk_latency": "itl"}
SCALAR_TAGS = {
    "request_throughput": "req_per_s", "output_token_throughput": "out_tok_per_s", "request_count": "completed",
    "error_request_count": "failed", "benchmark_duration": "duration_s",
    "output_sequence_length": "output_tokens_mean", "input_sequence_length": "prompt_tokens_mean",
}
UNIT_FACTORS = {"ms": 1e-3, "sec": 1.0, "s": 1.0, "second": 1.0, "seconds": 1.0, "ns": 1e-9, "us": 1e-6}
STAT_KEYS = (("avg", "mean"), ("p5", "p5"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99"))
_NAME_RE = re.compile(r"^(.*?)\s*(?:\(([^)]*)\))?$")


def unit_factor(unit: Any) -> float:
    return UNIT_FACTORS.get(str(unit).strip().lower(), 1.0) if unit is not None else 1.0


def tag_of(name: str) -> tuple[str, str]:
    """'Time To First Token (ms)' → ('time_to_first_token', 'ms')."""
    m = _NAME_RE.match(name.strip())
    base, unit = (m[1], m[2] or "") if m else (name, "")
    return re.sub(r"[^a-z0-9]+", "_", base.lower()).strip("_"), unit


def metric_summary(metrics: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """{tag: {unit, avg, p50, ...}} → canonical summary keys in seconds."""
    out: dict[str, Any] = {}
    for tag, stats in metrics.items():
        if not isinstance(stats, dict):
            continue
        factor = unit_factor(stats.get("unit"))
        if tag in DIST_TAGS:
            for src, dst in STAT_KEYS:
                x = num(stats.get(src))
                if x is not None:
                    out[f"{DIST_TAGS[tag]}_{dst}_s"] = x * factor
        elif tag in SCALAR_TAGS:
            x = num(stats.get("avg", stats.get("value")))
            out[SCALAR_TAGS[tag]] = x * factor if x is not None and tag == "benchmark_duration" else x
    return out


def load_from_config(config: Any) -> tuple[str | None, dict[str, Any]]:
    conc = num(find_key(config, ("concurrency",)))
    rate = num(find_key(config, ("request_rate",)))
    if rate is not None and rate > 0:
        return f"rate {fmt_num(rate)} req/s", {"offered_rate": rate}
    if conc is not None and conc > 0:
        return f"concurrency {fmt_num(conc)}", {"max_concurrency": conc}
    return None, {}


def load_from_name(name: str) -> tuple[str | None, dict[str, Any]]:
    """genai-perf artifact folders end in -concurrency<N> or -request_rate<R>."""
    m = re.search(r"concurrency[_-]?(\d+)", name)
    if m:
        return f"concurrency {m[1]}", {"max_concurrency": float(m[1])}
    m = re.search(r"request_rate[_-]?(\d+(?:\.\d+)?)", name)
    if m:
        return f"rate {fmt_num(float(m[1]))} req/s", {"offered_rate": float(m[1])}
    return None, {}


def model_of(config: Any) -> Any:
    return (deep_get(config, "model_names", 0) or deep_get(config, "endpoint", "model_names", 0)
            or find_key(config, ("model", "model_name")))


# ---------------------------------------------------------------- CSV (shared with AIPerf)


def csv_metrics(text: str, ctx: Ctx) -> dict[str, dict[str, Any]]:
    """All 'Metric,…' tables of a genai-perf/AIPerf CSV as {tag: {unit, avg, p99, …, value}}."""
    rows = read_csv_rows(text, ctx)
    check_formulas(rows, ctx, rows[0] if rows else None)
    metrics: dict[str, dict[str, Any]] = {}
    header: list[str] | None = None
    for row in rows:
        if not row or not any(c.strip() for c in row):
            header = None
            continue
        if row[0].strip() == "Metric":
            header = [c.strip().lower() for c in row]
            continue
        if header is None:
            continue
        tag, unit = tag_of(row[0])
        stats: dict[str, Any] = {"unit": unit}
        stats.update({h: c for h, c in zip(header[1:], row[1:], strict=False)})
        metrics.setdefault(tag, stats)
    if not metrics:
        raise ctx.fail("no metric rows found under the 'Metric,…' header")
    return metrics


def parse_csv(text: str, ctx: Ctx) -> list[Run]:
    metrics = csv_metrics(text, ctx)
    summary = metric_summary(metrics)
    label, load = load_from_name(ctx.where)
    return [build_run(label or f"{PurePath(ctx.where).stem or 'genai-perf'} (summary)", ctx, tool={**summary, **load},
                      definitions={"tpot": TPOT_DEF.format(tool="genai-perf")}, meta={"tool": "genai-perf"})]


# ---------------------------------------------------------------- JSON summary


def parse_json(doc: Any, ctx: Ctx) -> list[Run]:
    if not isinstance(doc, dict):
        raise ctx.fail("not a genai-perf JSON export")
    metrics = {k: v for k, v in doc.items() if isinstance(v, dict) and "unit" in v}
    summary = metric_summary(metrics)
    config = doc.get("input_config")
    label, load = load_from_config(config)
    if label is None:
        label, load = load_from_name(ctx.where)
    meta = {"model": model_of(config), "tool": "genai-perf"}
    return [build_run(label or "genai-perf summary", ctx, tool={**summary, **load}, meta=meta,
                      definitions={"tpot": TPOT_DEF.format(tool="genai-perf")})]


# ---------------------------------------------------------------- raw profile_export.json

_USAGE_RE = {k: re.compile(rf'\\?"{k}\\?"\s*:\s*(\d+)') for k in ("completion_tokens", "prompt_tokens")}


def _usage(outputs: Any, key: str) -> float | None:
    """Token counts from an OpenAI `usage` block in the last streamed responses, if the server sent one."""
    if not isinstance(outputs, list):
        return None
    for item in reversed(outputs[-3:]):
        text = item.get("response") if isinstance(item, dict) else None
        if isinstance(text, str):
            m = _USAGE_RE[key].search(text)
            if m:
                return float(m[1])
    return None


_CONTENT_RE = re.compile(r'\\?"(?:content|text|text_output|generated_text)\\?"\s*:\s*\\?"(?!\\?")')


def _token_times(req: dict[str, Any]) -> Any:
    """The response timestamps of the responses that carry generated text. genai-perf drops the others (role
    chunk, usage chunk, [DONE]) before it computes TTFT and latency (llm_profile_data_parser.py
    _preprocess_response); a file without response_outputs keeps every timestamp, and a field that is not a list
    is returned as is, for the caller to report."""
    times, outputs = req.get("response_timestamps"), req.get("response_outputs")
    if not isinstance(times, list) or not isinstance(outputs, list) or len(outputs) != len(times):
        return times
    texts = [o.get("response") if isinstance(o, dict) else None for o in outputs]
    strings = [t for t in texts if isinstance(t, str)]
    if len(strings) != len(texts):
        return times
    return [t for t, text in zip(times, strings, strict=True) if _CONTENT_RE.search(text)]


def raw_requests(reqs: list[Any], ctx: Ctx, key: str) -> tuple[Any, dict[str, float]]:
    """The per-request table and the ITL pooled over every gap between content responses."""
    reqs = [r for r in reqs if isinstance(r, dict)]
    if not reqs:
        return None, {}
    ts = float_array([r.get("timestamp") for r in reqs], "timestamp", ctx, key)
    flat, lengths = ragged([_token_times(r) for r in reqs], "response_timestamps", ctx, key)
    n = len(reqs)
    ends = np.cumsum(lengths)
    has = lengths > 0
    first = np.full(n, np.nan)
    last = np.full(n, np.nan)
    first[has] = flat[(ends - lengths)[has]]
    last[has] = flat[ends[has] - 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        itl = np.where(lengths > 1, (last - first) / np.maximum(lengths - 1, 1), np.nan) * 1e-9
    cols: dict[str, np.ndarray] = {
        "start_s": (ts - np.nanmin(ts)) * 1e-9 if np.isfinite(ts).any() else ts,
        "ttft_s": (first - ts) * 1e-9, "e2e_s": (last - ts) * 1e-9, "itl_s": itl, "ok": has,
    }
    for col, usage in (("output_tokens", "completion_tokens"), ("prompt_tokens", "prompt_tokens")):
        values = [_usage(r.get("response_outputs"), usage) for r in reqs]
        if any(v is not None for v in values):
            cols[col] = np.array([np.nan if v is None else v for v in values])
    if "output_tokens" not in cols:  # no usage: TPOT from the chunk timestamps, one content chunk per token
        cols["tpot_s"] = itl
    gaps, per_request = ragged_gaps(flat, lengths)
    return frame(cols), pooled_itl(gaps * 1e-9, per_request, has)


def parse_raw(doc: Any, ctx: Ctx) -> list[Run]:
    exps = [e for e in doc.get("experiments", []) if isinstance(e, dict)] if isinstance(doc, dict) else []
    runs = []
    for i, exp in enumerate(exps):
        mode, value = deep_get(exp, "experiment", "mode"), num(deep_get(exp, "experiment", "value"))
        if mode == "concurrency" and value is not None:
            label, load = f"concurrency {fmt_num(value)}", {"max_concurrency": value}
        elif mode == "request_rate" and value is not None:
            label, load = f"rate {fmt_num(value)} req/s", {"offered_rate": value}
        else:
            label, load = f"experiment {i + 1}", {}
        key = label if len(exps) > 1 else ""
        raw_reqs = exp.get("requests")
        reqs: list[Any] = raw_reqs if isinstance(raw_reqs, list) else []
        requests, pooled = raw_requests(reqs, ctx, key)
        if requests is None:
            raise ctx.fail(f"experiment {i + 1} has no requests", key=key)
        defs = {"itl": "every gap between streamed content responses, pooled over all requests (raw timestamps)"}
        if "output_tokens" not in requests:
            defs["tpot"] = ("(last − first content response)/(content responses − 1): TPOT from the per-chunk "
                            "timestamps, counting one token per chunk (the responses carry no usage)")
            ctx.notes.append(f"{label}: no token counts in the raw export (responses carry no usage): TPOT is "
                             "computed per streamed chunk, exact when the server sends one token per chunk")
        runs.append(build_run(label, ctx, requests=requests, tool=load, definitions=defs,
                              meta={"tool": f"perf_analyzer {doc.get('version') or ''}".strip(),
                                    "backend": doc.get("service_kind") or doc.get("endpoint")}, key=key,
                              overrides=pooled))
    if not runs:
        raise ctx.fail("profile export has no experiments")
    return runs


AIPERF_KEYS = ("benchmark_duration", "was_cancelled", "error_summary")  # what AIPerf's JSON adds to genai-perf's


def is_perf_json(doc: Any) -> bool:
    """genai-perf's or AIPerf's summary JSON: an input_config and metrics with a unit and an average."""
    return isinstance(doc, dict) and "input_config" in doc and any(
        isinstance(v, dict) and "unit" in v and "avg" in v for v in doc.values())


def is_genai_perf_json(doc: Any) -> bool:
    return is_perf_json(doc) and not any(k in doc for k in AIPERF_KEYS)


def is_raw_export(doc: Any) -> bool:
    exps = doc.get("experiments") if isinstance(doc, dict) else None
    if not isinstance(exps, list) or not exps or not all(isinstance(e, dict) for e in exps):
        return False
    for exp in exps:
        reqs = exp.get("requests")
        if isinstance(reqs, list) and reqs:
            return isinstance(reqs[0], dict) and "response_timestamps" in reqs[0]
    return any("requests" in e for e in exps)


def is_csv_header(line: str) -> bool:
    return line.startswith("Metric,avg,min,max,p99,")


register(BenchmarkFormat("genai_perf_csv", "genai-perf CSV", "header", is_csv_header, parse_csv, payload="text",
                         rank=10))
register(BenchmarkFormat("genai_perf_json", "genai-perf JSON", "json", is_genai_perf_json, parse_json, rank=65))
register(BenchmarkFormat("genai_perf_raw", "genai-perf / perf_analyzer profile_export.json", "json", is_raw_export,
                         parse_raw, rank=70))
