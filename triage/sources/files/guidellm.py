"""GuideLLM benchmark reports: JSON/YAML (v0.2–v0.3 and v0.4+, per-request data) and CSV (one or three header rows)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np

from triage import safe_load
from triage.errors import TriageError
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
    read_csv_rows,
)
from triage.sources.files.registry import BenchmarkFormat, register

TPOT_V2 = ("GuideLLM inter_token_latency (= vLLM TPOT); its time_per_output_token leaves TTFT out and divides by N, "
           "not used")
TPOT_V4 = "GuideLLM inter_token_latency (= vLLM TPOT); its time_per_output_token INCLUDES TTFT, not used as TPOT"
ITL_NONE = ("not measurable: GuideLLM keeps the first and last token times of a request, not each token's, and its "
            "inter_token_latency_ms is each request's mean gap weighted by its gaps (= TPOT), not pooled gaps")
# metric key → (canonical prefix, factor to seconds)
DIST_METRICS = {
    "request_latency": ("e2e", 1.0),
    "time_to_first_token_ms": ("ttft", 1e-3),
    "inter_token_latency_ms": ("tpot", 1e-3),
}
RATE_METRICS = {"requests_per_second": "req_per_s", "output_tokens_per_second": "out_tok_per_s",
                "tokens_per_second": "total_tok_per_s"}
TOKEN_METRICS = {"prompt_token_count": "prompt_tokens_mean", "output_token_count": "output_tokens_mean"}
# "[min, p0.1, p1, p5, p10, p25, p75, p90, p95, p99, max]" (guidellm benchmark/outputs/csv.py, 0.4–0.8)
PCT_LIST_INDEX = {"p5": 3, "p90": 7, "p99": 9}


def fmt_epoch(value: Any) -> str | None:
    x = num(value)
    if x is None or not 0 < x < 1e11:
        return None
    return datetime.fromtimestamp(x, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


# ---------------------------------------------------------------- labels


def strategy_label(strategy: Any, index: int) -> tuple[str, dict[str, Any]]:
    """Run label and offered load from a GuideLLM strategy object."""
    if not isinstance(strategy, dict):
        return f"benchmark {index + 1}", {}
    kind = str(strategy.get("type_") or strategy.get("type") or "")
    rate, streams = num(strategy.get("rate")), num(strategy.get("streams"))
    if kind == "synchronous":
        return "synchronous (concurrency 1)", {"max_concurrency": 1}
    if kind == "concurrent" and streams is not None:
        return f"concurrency {fmt_num(streams)}", {"max_concurrency": streams}
    if kind in ("constant", "poisson") and rate is not None:
        return f"rate {fmt_num(rate)} req/s ({kind})", {"offered_rate": rate}
    if kind == "throughput":
        conc = num(strategy.get("max_concurrency"))
        return "max throughput", {"max_concurrency": conc}
    return (kind or f"benchmark {index + 1}"), {}


def name_label(name: str, index: int) -> tuple[str, dict[str, Any]]:
    """v0.2/v0.3 CSV names: synchronous, concurrent@4, constant@2.00, poisson@2.00, throughput."""
    kind, _, value = name.partition("@")
    key = {"concurrent": "streams", "constant": "rate", "poisson": "rate"}.get(kind.strip())
    return strategy_label({"type_": kind.strip(), **({key: value} if key else {})}, index) if name else (
        f"benchmark {index + 1}", {})


# ---------------------------------------------------------------- JSON / YAML summary


def _dist(metrics: Any, name: str) -> dict[str, Any]:
    d = deep_get(metrics, name, "successful")
    return d if isinstance(d, dict) else {}


def json_summary(bench: dict[str, Any]) -> dict[str, Any]:
    raw_metrics = bench.get("metrics")
    metrics: dict[str, Any] = raw_metrics if isinstance(raw_metrics, dict) else {}
    out: dict[str, Any] = {"duration_s": bench.get("duration")}
    for name, (canon, factor) in DIST_METRICS.items():
        d = _dist(metrics, name)
        for src, dst in (("mean", "mean"), ("median", "p50")):
            x = num(d.get(src))
            if x is not None:
                out[f"{canon}_{dst}_s"] = x * factor
        for p, key in (("p5", "p05"), ("p90", "p90"), ("p99", "p99")):
            x = num(deep_get(d, "percentiles", key))
            if x is not None:
                out[f"{canon}_{p}_s"] = x * factor
    for name, key in {**RATE_METRICS, **TOKEN_METRICS}.items():
        out[key] = _dist(metrics, name).get("mean")
    totals = bench.get("request_totals") or metrics.get("request_totals")
    if isinstance(totals, dict):
        out["completed"], out["failed"] = totals.get("successful"), totals.get("errored")
    return out


# ---------------------------------------------------------------- JSON / YAML requests


def _col(recs: list[Any], key: str, path: tuple[str, ...], ctx: Ctx, run: str) -> np.ndarray:
    return float_array([deep_get(r, *path) for r in recs], key, ctx, run)


def _first_of(*arrays: np.ndarray) -> np.ndarray:
    out = arrays[0]
    for alt in arrays[1:]:
        out = np.where(np.isnan(out), alt, out)
    return out


def requests_table(bench: dict[str, Any], v4: bool, ctx: Ctx, run: str) -> Any:
    reqs = bench.get("requests")
    if not isinstance(reqs, dict):
        return None
    good = [r for r in (reqs.get("successful") or []) if isinstance(r, dict)]
    bad = [r for r in (reqs.get("errored") or []) if isinstance(r, dict)]
    incomplete = reqs.get("incomplete") or []
    if isinstance(incomplete, list) and incomplete:
        ctx.notes.append(f"{run or 'run'}: {len(incomplete)} incomplete requests (cancelled at the end) left out")
    recs = good + bad
    if not recs:
        return None
    timing = ("info", "timings") if v4 else ("scheduler_info",)
    targeted = "targeted_start" if v4 else "targeted_start_time"

    def col(key: str, *path: str) -> np.ndarray:
        return _col(recs, key, path or (key,), ctx, run)

    sched_start = col("request_start", *timing, "request_start")
    start = _first_of(col("request_start_time" if v4 else "start_time"), sched_start)
    first_token = col("first_token_iteration", *timing, "first_token_iteration") if v4 else col("first_token_time")
    ttft = _first_of(col("time_to_first_token_ms") * 1e-3, first_token - start)
    e2e = _first_of(col("request_latency"), col("request_end_time" if v4 else "end_time") - start)
    # request_start − targeted_start: the client's dispatch delay (schemas/base/request_stats.py
    # request_dispatch_delay), outside TTFT; not the engine's queue.
    client_wait = sched_start - col(targeted, *timing, targeted)
    cols = {
        "start_s": start - np.nanmin(start) if np.isfinite(start).any() else start,
        "prompt_tokens": col("prompt_tokens"), "output_tokens": col("output_tokens"),
        "ttft_s": ttft, "e2e_s": e2e,
        "ok": np.concatenate([np.ones(len(good), dtype=bool), np.zeros(len(bad), dtype=bool)]),
    }
    if np.isfinite(client_wait).any():
        cols["client_wait_s"] = np.clip(client_wait, 0.0, None)
    if v4:  # (last − first token iteration)/(out − 1): TPOT on token timestamps, without the stream's tail
        tpot = col("inter_token_latency_ms") * 1e-3
        if np.isfinite(tpot).any():
            cols["tpot_s"] = tpot
    order = np.argsort(cols["start_s"], kind="stable")
    return frame({k: v[order] for k, v in cols.items()})


def parse_doc(doc: Any, ctx: Ctx) -> list[Run]:
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise ctx.fail("not a GuideLLM report: no 'benchmarks' list")
    benches = [b for b in doc["benchmarks"] if isinstance(b, dict) and b.get("type_") == "generative_benchmark"]
    if not benches:
        raise ctx.fail("GuideLLM report has no generative benchmarks")
    version = deep_get(doc, "metadata", "guidellm_version")
    runs = []
    for i, bench in enumerate(benches):
        v4 = "scheduler_metrics" in bench or any(k in doc for k in ("args", "config", "metadata"))
        strategy = deep_get(bench, "config", "strategy") if v4 else deep_get(bench, "args", "strategy")
        label, load = strategy_label(strategy, i)
        key = label if len(benches) > 1 else ""
        summary = {**json_summary(bench), **load}
        meta = {"model": find_key(bench.get("worker") or bench.get("config"), ("backend_model", "model")),
                "tool": f"guidellm {version}" if version else ("guidellm ≥0.4" if v4 else "guidellm 0.2–0.3"),
                "date": fmt_epoch(bench.get("start_time"))}
        defs = {"tpot": TPOT_V4 if v4 else TPOT_V2, "itl": ITL_NONE, "ttft": "GuideLLM time_to_first_token",
                "e2e": "GuideLLM request_latency"}
        requests = requests_table(bench, v4, ctx, key)
        overrides = _sampled_counts(requests, summary, ctx, label)
        runs.append(build_run(label, ctx, requests=requests, tool=summary, definitions=defs, meta=meta,
                              overrides=overrides, key=key))
    return runs


def _sampled_counts(requests: Any, summary: dict[str, Any], ctx: Ctx, label: str) -> dict[str, float]:
    """With --output-sampling the request lists are cut down: keep the tool's counts then."""
    completed = num(summary.get("completed"))
    if requests is None or completed is None:
        return {}
    kept = int(requests["ok"].sum())
    if kept < completed:
        ctx.notes.append(f"{label}: requests were sampled ({kept} of {int(completed)} successful kept)")
        return {k: v for k in ("completed", "failed") if (v := num(summary.get(k))) is not None}
    return {}


def parse_json(doc: Any, ctx: Ctx) -> list[Run]:
    return parse_doc(doc, ctx)


def parse_yaml(doc: Any, ctx: Ctx) -> list[Run]:
    return parse_doc(doc, ctx)


# ---------------------------------------------------------------- CSV


def pct_list(cell: Any) -> dict[str, float]:
    if not isinstance(cell, str) or not cell.strip().startswith("["):
        return {}
    items = [num(x) for x in cell.strip().strip("[]").split(",")]
    if len(items) != 11:
        return {}
    return {p: x for p, i in PCT_LIST_INDEX.items() if (x := items[i]) is not None}


def csv_v2_summary(row: dict[str, str]) -> dict[str, Any]:
    """v0.2/v0.3: '<Status> <Metric> mean|median|std dev|[min, 0.1, ...]' columns."""
    names = {"Request latency": ("e2e", 1.0), "Time to first token ms": ("ttft", 1e-3),
             "Inter token latency ms": ("tpot", 1e-3)}
    out: dict[str, Any] = {"duration_s": row.get("Duration"), "completed": row.get("Successful Requests"),
                           "failed": row.get("Errored Requests")}
    for metric, (canon, factor) in names.items():
        pre = f"Successful {metric}"
        for src, dst in (("mean", "mean"), ("median", "p50")):
            x = num(row.get(f"{pre} {src}"))
            if x is not None:
                out[f"{canon}_{dst}_s"] = x * factor
        lists = [v for k, v in row.items() if k.startswith(f"{pre} [")]
        for p, x in (pct_list(lists[0]) if lists else {}).items():
            out[f"{canon}_{p}_s"] = x * factor
    for metric, key in (("Requests per second", "req_per_s"), ("Output tokens per second", "out_tok_per_s"),
                        ("Tokens per second", "total_tok_per_s"), ("Prompt token count", "prompt_tokens_mean"),
                        ("Output token count", "output_tokens_mean")):
        out[key] = row.get(f"Successful {metric} mean")
    return out


def csv_v4_summary(row: dict[tuple[str, str, str], str]) -> dict[str, Any]:
    """v0.4+: (group, 'Successful <unit>', Mean|Median|Percentiles) columns."""
    out: dict[str, Any] = {"duration_s": row.get(("Timings", "Duration", "Sec")),
                           "completed": row.get(("Request Counts", "Successful", "")),
                           "failed": row.get(("Request Counts", "Errored", ""))}
    for group, unit, canon, factor in (("Request Latency", "Sec", "e2e", 1.0),
                                       ("Time to First Token", "ms", "ttft", 1e-3),
                                       ("Inter Token Latency", "ms", "tpot", 1e-3)):
        sub = (group, f"Successful {unit}")
        for src, dst in (("Mean", "mean"), ("Median", "p50")):
            x = num(row.get((*sub, src)))
            if x is not None:
                out[f"{canon}_{dst}_s"] = x * factor
        for p, x in pct_list(row.get((*sub, "Percentiles"))).items():
            out[f"{canon}_{p}_s"] = x * factor
    for group, field, key in (("Server Throughput", "Requests/Sec", "req_per_s"),
                              ("Token Throughput", "Output Tokens/Sec", "out_tok_per_s"),
                              ("Token Throughput", "Total Tokens/Sec", "total_tok_per_s"),
                              ("Token Metrics", "Input Tokens", "prompt_tokens_mean"),
                              ("Token Metrics", "Output Tokens", "output_tokens_mean")):
        out[key] = row.get((group, f"Successful {field}", "Mean"))
    return out


def _json_cell(cell: Any) -> Any:
    try:
        return safe_load.load_json(cell) if isinstance(cell, str) and cell.strip()[:1] in "{[" else None
    except TriageError:
        return None


def v4_label(row: dict[tuple[str, str, str], str], index: int) -> tuple[str, dict[str, Any]]:
    kind = (row.get(("Benchmark", "Strategy", "")) or "").strip()
    profile = _json_cell(row.get(("Run Info", "Profile", "")))
    run_index = num(row.get(("Run Info", "Run Index", "")))
    i = int(run_index) if run_index is not None and 0 <= run_index < 1e6 else index
    strategy: dict[str, Any] = {"type_": kind}
    for key, field in (("rates", "rate"), ("streams", "streams")):
        values = profile.get(key) if isinstance(profile, dict) else None
        if isinstance(values, list) and 0 <= i < len(values):
            strategy[field] = values[i]
    label, load = strategy_label(strategy, index)
    if label == kind or not kind:
        label = f"{kind or 'benchmark'} #{index + 1}"
    return label, load


def parse_csv(text: str, ctx: Ctx) -> list[Run]:
    rows = read_csv_rows(text, ctx)
    check_formulas(rows, ctx, rows[0] if rows else None)
    rows = [r for r in rows if any(c.strip() for c in r)]
    if rows and rows[0][:2] == ["Run Info", "Run Info"]:
        return _parse_v4(rows, ctx)
    return _parse_v2(rows, ctx)


def _parse_v2(rows: list[list[str]], ctx: Ctx) -> list[Run]:
    header, data = rows[0], rows[1:]
    if not data:
        raise ctx.fail("GuideLLM CSV has a header but no benchmark rows")
    runs = []
    for i, cells in enumerate(data):
        if len(cells) != len(header):
            raise ctx.fail(f"row {i + 2} has {len(cells)} cells but the header has {len(header)}")
        row = dict(zip(header, cells, strict=True))
        label, load = name_label(row.get("Name", ""), i)
        worker = _json_cell(row.get("Worker"))
        meta = {"model": find_key(worker, ("backend_model", "model")), "tool": "guidellm 0.2–0.3",
                "date": row.get("Start Time")}
        runs.append(build_run(label, ctx, tool={**csv_v2_summary(row), **load}, meta=meta,
                              definitions={"tpot": TPOT_V2, "itl": ITL_NONE}, key=label if len(data) > 1 else ""))
    return runs


def _parse_v4(rows: list[list[str]], ctx: Ctx) -> list[Run]:
    if len(rows) < 4:
        raise ctx.fail("GuideLLM CSV has the three header rows but no benchmark rows")
    width = len(rows[0])
    if len(rows[1]) != width or len(rows[2]) != width:
        raise ctx.fail(f"GuideLLM CSV header rows have different lengths ({width}, {len(rows[1])}, {len(rows[2])})")
    keys = [(rows[0][c].strip(), rows[1][c].strip(), rows[2][c].strip()) for c in range(width)]
    runs = []
    for i, cells in enumerate(rows[3:]):
        if len(cells) != width:
            ctx.notes.append(f"benchmark row {i + 1} has {len(cells)} cells but the header has {width} (GuideLLM "
                             "0.4–0.6 writes the first benchmark's header only); skipped, use the JSON output")
            continue
        row = dict(zip(keys, cells, strict=True))
        label, load = v4_label(row, i)
        meta_json = _json_cell(row.get(("Runtime Info", "Metadata", "")))
        version = meta_json.get("guidellm_version") if isinstance(meta_json, dict) else None
        meta = {"model": find_key(_json_cell(row.get(("Run Info", "Backend", ""))), ("model",)),
                "tool": f"guidellm {version}" if version else "guidellm ≥0.4",
                "date": row.get(("Timings", "Start Time", ""))}
        runs.append(build_run(label, ctx, tool={**csv_v4_summary(row), **load}, meta=meta,
                              definitions={"tpot": TPOT_V4, "itl": ITL_NONE}, key=label if len(rows) > 4 else ""))
    if not runs:
        raise ctx.fail("no GuideLLM CSV row matches its header; upload the JSON output instead")
    return runs


def is_guidellm(doc: Any) -> bool:
    benches = doc.get("benchmarks") if isinstance(doc, dict) else None
    return isinstance(benches, list) and any(
        isinstance(b, dict) and b.get("type_") == "generative_benchmark" for b in benches)


def is_csv_header(line: str) -> bool:
    return line.startswith("Type,Run Id,Id,Name,Start Time") or line.startswith("Run Info,Run Info,")


register(BenchmarkFormat("guidellm_json", "GuideLLM JSON", "json", is_guidellm, parse_json, rank=10))
register(BenchmarkFormat("guidellm_yaml", "GuideLLM YAML", "yaml", is_guidellm, parse_yaml))
register(BenchmarkFormat("guidellm_csv", "GuideLLM CSV", "header", is_csv_header, parse_csv, payload="text", rank=30))
