"""Console summaries of load tests as people paste them: vLLM's and SGLang's "Serving Benchmark Result" blocks,
and (``console_tables``) the console tables of genai-perf, AIPerf and GuideLLM.

Read from the tools' print statements: ``vllm bench serve`` / ``benchmarks/benchmark_serving.py`` print
``"{:<40} {:<10}".format(label, value)`` rows under ``" Serving Benchmark Result "`` centred in 50 "=",
sections "Time to First Token", "Time per Output Token (excl. 1st token)", "Inter-token Latency",
"End-to-end Latency" with "Mean/Median/P<p> <TTFT|TPOT|ITL|E2EL> (ms)" rows, optional "Failed requests",
"Maximum request concurrency", "Request rate configured (RPS)", "Request goodput (req/s)"; older versions print
"Traffic request rate: X" and "Maximum request concurrency: N" before the progress bar instead. SGLang's
``bench_serving`` prints "Backend", "Traffic request rate", "Max request concurrency" ("not set") inside the
block, "Concurrency" (mean in flight) and "Mean/Median/P99 E2E Latency (ms)". A block cut short keeps the rows
it has; every missing row stays not measurable.
"""

from __future__ import annotations

import math
import re

from triage.run import Run
from triage.sources.files import console_tables
from triage.sources.files import sglang as sglang_json
from triage.sources.files import vllm as vllm_json
from triage.sources.files.common import Ctx, build_run, fmt_num
from triage.sources.files.registry import BenchmarkFormat, register

HEADER = re.compile(r"^=+ ?Serving Benchmark Result ?=+\s*$")
END = re.compile(r"^={20,}\s*$")
ROW = re.compile(r"^\s*([A-Za-z][^:]{1,60}):\s+(\S+)")
LATENCY = re.compile(r"^(Mean|Median|P(\d+(?:\.\d+)?)) (TTFT|TPOT|ITL|E2EL|E2E Latency) \(ms\)$")
CANON = {"TTFT": "ttft", "TPOT": "tpot", "ITL": "itl", "E2EL": "e2e", "E2E Latency": "e2e"}
PCT = {"50": "p50", "90": "p90", "99": "p99", "5": "p5"}
ROWS = {
    "Successful requests": "completed", "Failed requests": "failed", "Benchmark duration (s)": "duration_s",
    "Request throughput (req/s)": "req_per_s", "Output token throughput (tok/s)": "out_tok_per_s",
    "Total token throughput (tok/s)": "total_tok_per_s", "Total Token throughput (tok/s)": "total_tok_per_s",
    "Request rate configured (RPS)": "offered_rate", "Traffic request rate": "offered_rate",
    "Maximum request concurrency": "max_concurrency", "Max request concurrency": "max_concurrency",
}
CONTEXT = {"Traffic request rate": "offered_rate", "Maximum request concurrency": "max_concurrency"}
META = {"Request goodput (req/s)": "goodput", "Backend": "backend", "Concurrency": "mean concurrency",
        "Peak concurrent requests": "peak concurrency"}
TOTALS = {"Total input tokens": "prompt_tokens_mean", "Total generated tokens": "output_tokens_mean"}
SGLANG_ROWS = ("Total generated tokens (retokenized)", "Concurrency", "Backend")


def detect(data: bytes) -> bool:
    """A 'Serving Benchmark Result' block, or a genai-perf / AIPerf / GuideLLM console table."""
    return _serving(data) or console_tables.detect(data) is not None


def _serving(data: bytes) -> bool:
    return b"Serving Benchmark Result" in data and HEADER.search(_first_header(data)) is not None


def _first_header(data: bytes) -> str:
    at = data.find(b"Serving Benchmark Result")
    start = data.rfind(b"\n", 0, at) + 1
    end = data.find(b"\n", at)
    return data[start:end if end >= 0 else len(data)].decode("utf-8", "replace").strip()


def _value(text: str) -> float | None:
    low = text.lower()
    if low in ("inf", "infinity"):
        return math.inf
    try:
        return float(text)
    except ValueError:
        return None  # "not set", "trace", a cut number


class _Block:
    def __init__(self, context: dict[str, float]) -> None:
        self.rows: dict[str, str] = {}
        self.context = dict(context)

    def summary(self) -> tuple[dict[str, float], dict[str, str]]:
        out: dict[str, float] = dict(self.context)
        meta: dict[str, str] = {}
        for label, raw in self.rows.items():
            value = _value(raw)
            if label in ROWS and value is not None:
                out[ROWS[label]] = value
            elif label in META:
                meta[META[label]] = raw
            elif m := LATENCY.match(label):
                which = "mean" if m.group(1) == "Mean" else "p50" if m.group(1) == "Median" else PCT.get(m.group(2))
                if which and value is not None:
                    out[f"{CANON[m.group(3)]}_{which}_s"] = value / 1000.0
        completed = out.get("completed")
        for label, key in TOTALS.items():
            total = _value(self.rows.get(label, ""))
            if completed and total is not None:
                out[key] = total / completed
        return out, meta

    @property
    def is_sglang(self) -> bool:
        return any(label in self.rows for label in SGLANG_ROWS)


def _blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    context: dict[str, float] = {}
    current: _Block | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if HEADER.match(stripped):
            current = _Block(context)
            blocks.append(current)
            context = {}
            continue
        if current is not None and END.match(stripped):
            current = None
            continue
        row = ROW.match(line)
        if row is None:
            continue
        label, raw = row.group(1).strip(), row.group(2)
        if current is not None:
            current.rows.setdefault(label, raw)
        elif label in CONTEXT and (value := _value(raw)) is not None:
            context[CONTEXT[label]] = value  # printed before the progress bar by older benchmark_serving.py
    return blocks


def _label(summary: dict[str, float], number: int, total: int) -> str:
    parts = []
    rate, conc = summary.get("offered_rate"), summary.get("max_concurrency")
    if rate is not None:
        parts.append(f"rate {fmt_num(rate)} req/s" if math.isfinite(rate) else "rate inf (all at once)")
    if conc is not None:
        parts.append(f"concurrency {fmt_num(conc)}")
    label = ", ".join(parts) or "console summary"
    return f"run {number}: {label}" if total > 1 else label


def parse(text: str, ctx: Ctx) -> list[Run]:
    if "Serving Benchmark Result" not in text or not _blocks(text):
        tool = console_tables.detect(text.encode("utf-8", "replace"))
        if tool == "guidellm":
            return console_tables.parse_guidellm(text, ctx)
        if tool is not None:
            return console_tables.parse_rich(text, ctx, tool)
    blocks = _blocks(text)
    if not blocks:
        raise ctx.fail("no 'Serving Benchmark Result' block")
    runs = []
    for i, block in enumerate(blocks, start=1):
        summary, meta = block.summary()
        sglang = block.is_sglang
        if "completed" not in summary:
            ctx.notes.append(f"block {i} was cut before 'Successful requests': its request counts are not measurable")
        meta["tool"] = "SGLang bench_serving console" if sglang else "vllm bench serve console"
        defs = dict(sglang_json.DEFINITIONS if sglang else vllm_json.DEFINITIONS)
        key = f"block {i}" if len(blocks) > 1 else ""
        runs.append(build_run(_label(summary, i, len(blocks)), ctx, tool=summary, definitions=defs, meta=meta,
                              key=key))
    return runs


TITLE = "console summary (vLLM / SGLang 'Serving Benchmark Result', genai-perf, AIPerf, GuideLLM)"
register(BenchmarkFormat("serving_console", TITLE, "bytes", detect, parse, payload="text"))
