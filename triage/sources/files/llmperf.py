"""LLMPerf (ray-project/llmperf) token_benchmark_ray.py outputs: *_summary.json and *_individual_responses.json."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np

from triage.run import Run
from triage.sources.files.common import Ctx, build_run, float_array, fmt_num, frame, num
from triage.sources.files.registry import BenchmarkFormat, register

ITL_NOTE = ("LLMPerf inter_token_latency_s INCLUDES TTFT (≈ e2e / chunks); not comparable to vLLM TPOT or ITL, "
            "so it is not used")
DIST_METRICS = {"ttft_s": "ttft", "end_to_end_latency_s": "e2e"}


def _label(doc: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    conc = num(doc.get("num_concurrent_requests"))
    if conc is not None:
        return f"concurrency {fmt_num(conc)}", {"max_concurrency": conc}
    return "llmperf run", {}


def summary_of(doc: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for metric, canon in DIST_METRICS.items():
        pre = f"results_{metric}"
        for src, dst in (("mean", "mean"), ("quantiles_p50", "p50"), ("quantiles_p90", "p90"),
                         ("quantiles_p99", "p99")):
            out[f"{canon}_{dst}_s"] = doc.get(f"{pre}_{src}")
    per_min = num(doc.get("results_num_completed_requests_per_min"))
    out.update({
        "completed": doc.get("results_num_completed_requests"), "failed": doc.get("results_number_errors"),
        "out_tok_per_s": doc.get("results_mean_output_throughput_token_per_s"),
        "req_per_s": per_min / 60.0 if per_min is not None else None,
        "prompt_tokens_mean": doc.get("results_number_input_tokens_mean"),
        "output_tokens_mean": doc.get("results_number_output_tokens_mean"),
    })
    return out


def _date(value: Any) -> str | None:
    x = num(value)
    if x is None or not 0 < x < 1e11:
        return None
    return datetime.fromtimestamp(x, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def parse_summary(doc: Any, ctx: Ctx) -> list[Run]:
    if not isinstance(doc, dict):
        raise ctx.fail("not an LLMPerf summary")
    label, load = _label(doc)
    meta = {"model": doc.get("model"), "tool": "llmperf", "date": _date(doc.get("timestamp"))}
    return [build_run(label, ctx, tool={**summary_of(doc), **load}, meta=meta,
                      definitions={"tpot": ITL_NOTE, "e2e": "LLMPerf end_to_end_latency_s"})]


def parse_requests(doc: Any, ctx: Ctx) -> list[Run]:
    recs = [r for r in doc if isinstance(r, dict)] if isinstance(doc, list) else []
    if not recs:
        raise ctx.fail("no LLMPerf responses in the list")

    def col(key: str) -> np.ndarray:
        return float_array([r.get(key) for r in recs], key, ctx)

    ok = np.array([r.get("error_code") is None and not r.get("error_msg") for r in recs], dtype=bool)
    cols = {"prompt_tokens": col("number_input_tokens"), "output_tokens": col("number_output_tokens"),
            "ttft_s": col("ttft_s"), "e2e_s": col("end_to_end_latency_s")}
    cols = {k: np.where(ok, v, np.nan) if k != "prompt_tokens" else v for k, v in cols.items()}
    cols["ok"] = ok
    ctx.notes.append("LLMPerf responses have no timestamps: no timeline or queueing view")
    return [build_run(f"individual responses ({len(recs):,})", ctx, requests=frame(cols), meta={"tool": "llmperf"},
                      names={"ttft_s": "ttft_s", "e2e_s": "end_to_end_latency_s",
                             "output_tokens": "number_output_tokens", "prompt_tokens": "number_input_tokens"},
                      definitions={"itl": ITL_NOTE})]


def is_summary(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("version") == "2023-08-31" and any(
        isinstance(k, str) and k.startswith("results_") for k in doc)


def is_requests(doc: Any) -> bool:
    return (isinstance(doc, list) and bool(doc) and isinstance(doc[0], dict)
            and "ttft_s" in doc[0] and "end_to_end_latency_s" in doc[0])


register(BenchmarkFormat("llmperf_summary", "LLMPerf summary JSON", "json", is_summary, parse_summary, rank=40))
register(BenchmarkFormat("llmperf_requests", "LLMPerf individual responses JSON", "json", is_requests,
                         parse_requests, rank=45))
