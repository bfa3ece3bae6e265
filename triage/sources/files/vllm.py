"""vLLM `vllm bench serve` / benchmark_serving.py result JSON (one object, or several with --append-result)."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from triage.run import Run
from triage.sources.files.common import (
    Ctx,
    build_run,
    check_lengths,
    describe_missing,
    float_array,
    fmt_num,
    frame,
    num,
    per_item_sum_mean,
    pooled_itl,
    ragged,
    type_name,
)
from triage.sources.files.registry import BenchmarkFormat, register

PERCENTILE_METRICS = (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2el", "e2e"))
DEFINITIONS = {
    "ttft": "vLLM TTFT: first streamed token − request start",
    "tpot": "vLLM TPOT: (e2e − ttft)/(out − 1) per request, requests with out > 1",
    "itl": "vLLM ITL: every streamed chunk gap, pooled over all requests",
    "e2e": "vLLM E2E latency per request",
    "client_wait": "vLLM queue_times: the client's wait for a --max-concurrency slot (request due → sent); "
                   "outside TTFT, not engine queue time",
    "queue": "vLLM server_queue_times: engine queue time the server reported per request "
             "(--enable-per-request-metrics)",
}
REQUIRED_KEYS = ("model_id", "num_prompts", "request_throughput")
ARRAY_NAMES = {"ttft_s": "ttfts", "e2e_s": "latencies", "prompt_tokens": "input_lens", "output_tokens": "output_lens",
               "start_s": "start_times", "client_wait_s": "queue_times", "queue_s": "server_queue_times",
               "itl_s": "itls"}
_DATE_RE = re.compile(r"^(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})$")


def fmt_date(value: Any) -> str | None:
    """vLLM's "20250102-100000" → "2025-01-02 10:00"."""
    if not isinstance(value, str):
        return None
    m = _DATE_RE.match(value.strip())
    return f"{m[1]}-{m[2]}-{m[3]} {m[4]}:{m[5]}" if m else value.strip()[:20] or None


def tool_summary(doc: dict[str, Any]) -> dict[str, Any]:
    """The tool's scalars in canonical units (ms → s)."""
    out: dict[str, Any] = {
        "duration_s": doc.get("duration"), "completed": doc.get("completed"), "failed": doc.get("failed"),
        "req_per_s": doc.get("request_throughput"), "out_tok_per_s": doc.get("output_throughput"),
        "total_tok_per_s": doc.get("total_token_throughput"), "offered_rate": doc.get("request_rate"),
        "max_concurrency": doc.get("max_concurrency"),
    }
    completed, num_prompts = num(doc.get("completed")), num(doc.get("num_prompts"))
    if out["failed"] is None and completed is not None and num_prompts is not None:
        out["failed"] = max(num_prompts - completed, 0.0)
    if completed:
        for key, total in (("prompt_tokens_mean", "total_input_tokens"), ("output_tokens_mean", "total_output_tokens")):
            t = num(doc.get(total))
            if t is not None:
                out[key] = t / completed
    for metric, canon in PERCENTILE_METRICS:
        for src, dst in (("mean", "mean"), ("median", "p50"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99")):
            x = num(doc.get(f"{src}_{metric}_ms"))
            if x is not None:
                out[f"{canon}_{dst}_s"] = x / 1000.0
    return out


def run_label(doc: dict[str, Any]) -> str:
    rate = num(doc.get("request_rate"))
    if isinstance(doc.get("request_rate"), str) and doc["request_rate"].strip().lower() in ("inf", "infinity"):
        rate = math.inf
    conc = num(doc.get("max_concurrency"))
    parts = []
    if rate is not None and math.isfinite(rate):
        parts.append(f"rate {fmt_num(rate)} req/s")
    if conc is not None:
        parts.append(f"concurrency {fmt_num(conc)}")
    if not parts:
        parts.append("rate inf (all at once)" if rate is not None else "run")
    label = doc.get("label")
    return f"{label}: {', '.join(parts)}" if isinstance(label, str) and label.strip() else ", ".join(parts)


def ok_mask(doc: dict[str, Any], ttft: np.ndarray | None, n: int) -> np.ndarray | None:
    """success = errors[i] == "" (or ttfts[i] > 0 when there is no errors array)."""
    errors = doc.get("errors")
    if isinstance(errors, list) and len(errors) == n:
        arr = np.asarray(errors, dtype=object).reshape(n)
        return np.asarray((arr == "") | (arr == None), dtype=bool)  # noqa: E711 - elementwise
    if ttft is not None:
        return ttft > 0
    return None


def per_request_arrays(doc: dict[str, Any], keys: tuple[str, ...], ctx: Ctx, key: str) -> dict[str, list[Any]]:
    """The per-request arrays present in `doc`; each must be a list."""
    arrays = {k: doc[k] for k in keys if doc.get(k) is not None}
    for k, v in arrays.items():
        if not isinstance(v, list):
            raise ctx.fail(f"{k} should be a list of per-request values, found {type_name(v)}", key=key)
    return arrays


def requests_table(doc: dict[str, Any], ctx: Ctx, key: str) -> tuple[Any, dict[str, float]]:
    """Per-request arrays (--save-detailed) → canonical table, plus pooled-ITL overrides."""
    keys = ("input_lens", "output_lens", "ttfts", "latencies", "start_times", "queue_times", "server_queue_times",
            "itls", "errors")
    arrays = per_request_arrays(doc, keys, ctx, key)
    n = check_lengths(arrays, ctx, key)
    cols: dict[str, np.ndarray] = {}
    ttft = float_array(arrays["ttfts"], "ttfts", ctx, key)
    ok = ok_mask(doc, ttft, n)
    overrides: dict[str, float] = {}
    if "input_lens" in arrays:
        cols["prompt_tokens"] = float_array(arrays["input_lens"], "input_lens", ctx, key)
    if "output_lens" in arrays:
        cols["output_tokens"] = float_array(arrays["output_lens"], "output_lens", ctx, key)
    cols["ttft_s"] = ttft
    sums = None
    if "itls" in arrays:
        flat, lengths = ragged(arrays["itls"], "itls", ctx, key)
        sums, cols["itl_s"] = per_item_sum_mean(flat, lengths)
        overrides = pooled_itl(flat, lengths, ok)
    if "latencies" in arrays:
        cols["e2e_s"] = float_array(arrays["latencies"], "latencies", ctx, key)
    elif sums is not None:
        cols["e2e_s"] = ttft + sums
    if "start_times" in arrays:
        start = float_array(arrays["start_times"], "start_times", ctx, key)
        cols["start_s"] = start - np.nanmin(start) if np.isfinite(start).any() else start
    if "queue_times" in arrays:  # the client's semaphore wait (benchmarks/serve.py), not the engine's queue
        cols["client_wait_s"] = float_array(arrays["queue_times"], "queue_times", ctx, key)
    if "server_queue_times" in arrays:  # None where the server sent no per-request metrics
        queue = float_array(arrays["server_queue_times"], "server_queue_times", ctx, key)
        if np.isfinite(queue).any():
            cols["queue_s"] = queue
    if ok is not None:
        for c in ("ttft_s", "e2e_s", "itl_s", "output_tokens"):  # failed requests carry 0 placeholders
            if c in cols:
                cols[c] = np.where(ok, cols[c], np.nan)
        cols["ok"] = ok
    return frame(cols), overrides


def latencies_only(doc: dict[str, Any], summary: dict[str, Any], ctx: Ctx, key: str) -> None:
    """Summary-only files still carry `latencies`: use them for E2E stats when e2el was not asked for."""
    if "e2e_p50_s" in summary or not isinstance(doc.get("latencies"), list):
        return
    x = float_array(doc["latencies"], "latencies", ctx, key)
    x = x[np.isfinite(x) & (x > 0)]
    if x.size:
        p50, p90, p99 = np.percentile(x, (50, 90, 99))
        summary.update({"e2e_mean_s": x.mean(), "e2e_p50_s": p50, "e2e_p90_s": p90, "e2e_p99_s": p99})


def parse_one(doc: dict[str, Any], label: str, ctx: Ctx, key: str) -> Run:
    summary = tool_summary(doc)
    defs = dict(DEFINITIONS)
    goodput = num(doc.get("request_goodput", doc.get("request_goodput:")))
    meta = {"model": doc.get("model_id"), "backend": doc.get("backend"), "tool": "vllm bench serve",
            "date": fmt_date(doc.get("date")), "goodput": f"{fmt_num(goodput)} req/s" if goodput is not None else None}
    if doc.get("ttfts") is not None:
        requests, overrides = requests_table(doc, ctx, key)
        return build_run(label, ctx, requests=requests, tool=summary, definitions=defs, meta=meta,
                         overrides=overrides, key=key, names=ARRAY_NAMES)
    latencies_only(doc, summary, ctx, key)
    return build_run(label, ctx, tool=summary, definitions=defs, meta=meta, key=key)


def parse(values: list[Any], ctx: Ctx) -> list[Run]:
    for i, doc in enumerate(values):
        if not isinstance(doc, dict) or not all(k in doc for k in REQUIRED_KEYS):
            missing = describe_missing(doc, REQUIRED_KEYS)
            raise ctx.fail(f"object {i + 1} of {len(values)} is not a vLLM result ({missing})")
    labels = [run_label(doc) for doc in values]
    if len(set(labels)) < len(labels):
        labels = [f"run {i + 1}" + (f" ({d})" if (d := fmt_date(doc.get('date'))) else "") + f": {lab}"
                  for i, (doc, lab) in enumerate(zip(values, labels, strict=True))]
    return [parse_one(doc, lab, ctx, lab if len(values) > 1 else "") for doc, lab in zip(values, labels, strict=True)]


def is_vllm(doc: Any) -> bool:
    return isinstance(doc, dict) and set(REQUIRED_KEYS) <= doc.keys() and ("date" in doc or "tokenizer_id" in doc)


register(BenchmarkFormat("vllm_bench", "vLLM bench serve JSON", "json", is_vllm, parse, multi_value=True, rank=20))
