"""SGLang `python -m sglang.bench_serving` JSONL: one run per line, per-request arrays with --output-details."""

from __future__ import annotations

from typing import Any

import numpy as np

from triage.run import Run
from triage.sources.files.common import (
    Ctx,
    build_run,
    check_lengths,
    deep_get,
    describe_missing,
    float_array,
    frame,
    num,
    per_item_sum_mean,
    pooled_itl,
    ragged,
)
from triage.sources.files.registry import BenchmarkFormat, register
from triage.sources.files.vllm import ARRAY_NAMES, ok_mask, per_request_arrays, run_label

PERCENTILE_METRICS = (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2e_latency", "e2e"))
DEFINITIONS = {
    "ttft": "SGLang TTFT: first streamed token − request start",
    "tpot": "SGLang TPOT: (e2e − ttft)/(out − 1) per request (same as vLLM)",
    "itl": "SGLang ITL: every streamed chunk gap, pooled over all requests",
    "e2e": "SGLang E2E latency per request",
}


def tool_summary(doc: dict[str, Any]) -> dict[str, Any]:
    total = doc.get("total_throughput")
    given_in, given_out = num(doc.get("input_throughput")), num(doc.get("output_throughput"))
    if total is None and given_in is not None and given_out is not None:
        total = given_in + given_out
    out: dict[str, Any] = {
        "duration_s": doc.get("duration"), "completed": doc.get("completed"),
        "req_per_s": doc.get("request_throughput"), "out_tok_per_s": doc.get("output_throughput"),
        "total_tok_per_s": total, "offered_rate": doc.get("request_rate"),
        "max_concurrency": doc.get("max_concurrency"),
    }
    completed = num(doc.get("completed"))
    if completed:
        for key, src in (("prompt_tokens_mean", "total_input_tokens"), ("output_tokens_mean", "total_output_tokens")):
            t = num(doc.get(src))
            if t is not None:
                out[key] = t / completed
    for metric, canon in PERCENTILE_METRICS:
        for src, dst in (("mean", "mean"), ("median", "p50"), ("p90", "p90"), ("p99", "p99")):
            x = num(doc.get(f"{src}_{metric}_ms"))
            if x is not None:
                out[f"{canon}_{dst}_s"] = x / 1000.0
    return out


def requests_table(doc: dict[str, Any], ctx: Ctx, key: str) -> tuple[Any, dict[str, float]]:
    """--output-details arrays → canonical table; E2E = ttft + Σ itls (there are no latencies)."""
    keys = ("input_lens", "output_lens", "ttfts", "itls", "errors")
    arrays = per_request_arrays(doc, keys, ctx, key)
    n = check_lengths(arrays, ctx, key)
    ttft = float_array(arrays["ttfts"], "ttfts", ctx, key)
    ok = ok_mask(doc, ttft, n)
    cols: dict[str, np.ndarray] = {}
    overrides: dict[str, float] = {}
    if "input_lens" in arrays:
        cols["prompt_tokens"] = float_array(arrays["input_lens"], "input_lens", ctx, key)
    if "output_lens" in arrays:
        cols["output_tokens"] = float_array(arrays["output_lens"], "output_lens", ctx, key)
    cols["ttft_s"] = ttft
    if "itls" in arrays:
        flat, lengths = ragged(arrays["itls"], "itls", ctx, key)
        sums, cols["itl_s"] = per_item_sum_mean(flat, lengths)
        cols["e2e_s"] = ttft + sums
        overrides = pooled_itl(flat, lengths, ok)
    if ok is not None:
        for c in ("ttft_s", "e2e_s", "itl_s", "output_tokens"):
            if c in cols:
                cols[c] = np.where(ok, cols[c], np.nan)
        cols["ok"] = ok
    return frame(cols), overrides


def parse(values: list[Any], ctx: Ctx) -> list[Run]:
    for i, doc in enumerate(values):
        if not isinstance(doc, dict) or "completed" not in doc and "request_throughput" not in doc:
            raise ctx.fail(f"line {i + 1} is not an SGLang bench_serving result "
                           f"({describe_missing(doc, ('completed', 'request_throughput'))})")
    labels = [_label(doc) for doc in values]
    if len(set(labels)) < len(labels):
        labels = [f"run {i + 1}: {lab}" for i, lab in enumerate(labels)]
    runs = []
    for doc, label in zip(values, labels, strict=True):
        key = label if len(values) > 1 else ""
        meta = {"model": deep_get(doc, "server_info", "model_path"), "backend": doc.get("backend"),
                "tool": "sglang.bench_serving", "dataset": doc.get("dataset_name")}
        summary = tool_summary(doc)
        if doc.get("ttfts") is not None:
            requests, overrides = requests_table(doc, ctx, key)
            runs.append(build_run(label, ctx, requests=requests, tool=summary, definitions=DEFINITIONS, meta=meta,
                                  overrides=overrides, key=key, names=ARRAY_NAMES))
        else:
            runs.append(build_run(label, ctx, tool=summary, definitions=DEFINITIONS, meta=meta, key=key))
    return runs


def _label(doc: dict[str, Any]) -> str:
    if doc.get("request_rate") == "trace":
        return "trace replay"
    tag = doc.get("tag")
    base = run_label({k: doc.get(k) for k in ("request_rate", "max_concurrency")})
    return f"{tag}: {base}" if isinstance(tag, str) and tag.strip() else base


_SGLANG_KEYS = ("total_output_tokens_retokenized", "mean_e2e_latency_ms", "concurrency")


def is_sglang(doc: Any) -> bool:
    return isinstance(doc, dict) and "date" not in doc and any(k in doc for k in _SGLANG_KEYS)


register(BenchmarkFormat("sglang_bench", "SGLang bench_serving JSONL", "json", is_sglang, parse, multi_value=True,
                         rank=30))
