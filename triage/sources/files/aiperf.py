"""NVIDIA AIPerf exports: profile_export_aiperf.csv / .json summaries and the per-request profile_export.jsonl."""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

import numpy as np

from triage.run import Run
from triage.sources.files.common import (
    Ctx,
    build_run,
    deep_get,
    float_array,
    frame,
    per_item_sum_mean,
    pooled_itl,
    ragged,
)
from triage.sources.files.genai_perf import (
    AIPERF_KEYS,
    ITL_DEF,
    TPOT_DEF,
    csv_metrics,
    is_perf_json,
    load_from_config,
    load_from_name,
    metric_summary,
    model_of,
    unit_factor,
)
from triage.sources.files.registry import BenchmarkFormat, register

DEFINITIONS = {"tpot": TPOT_DEF.format(tool="AIPerf"), "itl": ITL_DEF}


def parse_csv(text: str, ctx: Ctx) -> list[Run]:
    summary = metric_summary(csv_metrics(text, ctx))
    label, load = load_from_name(ctx.where)
    return [build_run(label or f"{PurePath(ctx.where).stem or 'aiperf'} (summary)", ctx, tool={**summary, **load},
                      definitions=DEFINITIONS, meta={"tool": "aiperf"})]


def parse_json(doc: Any, ctx: Ctx) -> list[Run]:
    if not isinstance(doc, dict):
        raise ctx.fail("not an AIPerf JSON export")
    metrics = {k: v for k, v in doc.items() if isinstance(v, dict) and "unit" in v}
    summary = metric_summary(metrics)
    config = doc.get("input_config")
    label, load = load_from_config(config)
    if label is None:
        label, load = load_from_name(ctx.where)
    if doc.get("was_cancelled") is True:
        ctx.notes.append("the AIPerf run was cancelled before it finished")
    start = doc.get("start_time")
    date = start[:19].replace("T", " ") if isinstance(start, str) else None
    meta = {"model": model_of(config), "tool": "aiperf", "date": date}
    return [build_run(label or "aiperf summary", ctx, tool={**summary, **load}, definitions=DEFINITIONS, meta=meta)]


def _metric(recs: list[dict[str, Any]], tag: str, ctx: Ctx) -> np.ndarray:
    """metrics.<tag>.value in seconds (ms/ns → s by each record's unit); NaN when absent."""
    values = float_array([deep_get(r, "metrics", tag, "value") for r in recs], f"metrics.{tag}", ctx)
    units = {str(u) for r in recs if (u := deep_get(r, "metrics", tag, "unit")) is not None}
    if len(units) <= 1:
        return values * unit_factor(next(iter(units), None))
    return values * np.array([unit_factor(deep_get(r, "metrics", tag, "unit")) for r in recs])


def parse_jsonl(values: list[Any], ctx: Ctx) -> list[Run]:
    recs = [r for r in values if isinstance(r, dict) and isinstance(r.get("metadata"), dict)]
    if len(recs) < len(values):
        ctx.notes.append(f"{len(values) - len(recs)} lines are not AIPerf request records; skipped")
    warm = [r for r in recs if deep_get(r, "metadata", "benchmark_phase") == "warmup"]
    if warm:
        ctx.notes.append(f"{len(warm)} warmup requests left out")
        recs = [r for r in recs if deep_get(r, "metadata", "benchmark_phase") != "warmup"]
    if not recs:
        raise ctx.fail("no AIPerf request records (lines with metadata.request_start_ns)")
    start = float_array([deep_get(r, "metadata", "request_start_ns") for r in recs], "request_start_ns", ctx)
    failed = np.array([r.get("error") is not None or deep_get(r, "metadata", "was_cancelled") is True for r in recs])
    prompt = _metric(recs, "input_sequence_length", ctx)
    prompt = np.where(np.isnan(prompt), _metric(recs, "error_isl", ctx), prompt)
    output = _metric(recs, "output_sequence_length", ctx)
    output = np.where(np.isnan(output), _metric(recs, "output_token_count", ctx), output)
    cols: dict[str, np.ndarray] = {
        "start_s": (start - np.nanmin(start)) * 1e-9 if np.isfinite(start).any() else start,
        "prompt_tokens": prompt, "output_tokens": output,
        "ttft_s": _metric(recs, "time_to_first_token", ctx), "e2e_s": _metric(recs, "request_latency", ctx),
        "ok": ~failed,
    }
    chunks = [deep_get(r, "metrics", "inter_chunk_latency", "value") for r in recs]
    pooled: dict[str, float] = {}
    if any(isinstance(c, list) for c in chunks):
        flat, lengths = ragged([c if isinstance(c, list) else None for c in chunks], "inter_chunk_latency", ctx)
        unit = next((u for r in recs if (u := deep_get(r, "metrics", "inter_chunk_latency", "unit"))), "ms")
        flat = flat * unit_factor(unit)
        cols["itl_s"] = per_item_sum_mean(flat, lengths)[1]
        # AIPerf's own inter_chunk_latency statistics extend one array with every record's list (MetricArray)
        pooled = pooled_itl(flat, lengths, ~failed)
    order = np.argsort(cols["start_s"], kind="stable")
    requests = frame({k: v[order] for k, v in cols.items()})
    return [build_run(f"{PurePath(ctx.where).stem or 'aiperf'} ({len(recs):,} requests)", ctx, requests=requests,
                      definitions={"itl": ITL_DEF}, meta={"tool": "aiperf"}, overrides=pooled)]


_CSV_RE = re.compile(r"^Metric,avg,min,max,(sum,)?p1,")


def is_csv_header(line: str) -> bool:
    # AIPerf ≥ 0.2 adds `sum`; a run with no request metric writes only Metric,Value
    return bool(_CSV_RE.match(line)) and line.rstrip(",").endswith(",std") or line.rstrip(",") == "Metric,Value"


def is_aiperf_json(doc: Any) -> bool:
    return is_perf_json(doc) and any(k in doc for k in AIPERF_KEYS)


def is_record(doc: Any) -> bool:
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    return isinstance(meta, dict) and "request_start_ns" in meta and "metrics" in doc


register(BenchmarkFormat("aiperf_csv", "AIPerf CSV", "header", is_csv_header, parse_csv, payload="text", rank=20))
register(BenchmarkFormat("aiperf_json", "AIPerf JSON", "json", is_aiperf_json, parse_json, rank=60))
register(BenchmarkFormat("aiperf_jsonl", "AIPerf per-request JSONL", "json", is_record, parse_jsonl,
                         multi_value=True, rank=80))
