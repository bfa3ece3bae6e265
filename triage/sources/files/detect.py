"""Format detection: sniff a benchmark file's bytes and return its format id with the decoded payload."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Any

from triage import safe_load
from triage.sources.files import console, generic, inference_perf
from triage.sources.files.common import Ctx, decode_text, not_utf8_reason, quote_head, type_name

FORMATS: dict[str, str] = {
    "vllm_bench": "vLLM bench serve JSON",
    "sglang_bench": "SGLang bench_serving JSONL",
    "guidellm_json": "GuideLLM JSON",
    "guidellm_yaml": "GuideLLM YAML",
    "guidellm_csv": "GuideLLM CSV",
    "genai_perf_csv": "genai-perf CSV",
    "genai_perf_json": "genai-perf JSON",
    "genai_perf_raw": "genai-perf / perf_analyzer profile_export.json",
    "aiperf_csv": "AIPerf CSV",
    "aiperf_json": "AIPerf JSON",
    "aiperf_jsonl": "AIPerf per-request JSONL",
    "llmperf_summary": "LLMPerf summary JSON",
    "llmperf_requests": "LLMPerf individual responses JSON",
    "inference_perf_summary": "inference-perf lifecycle metrics JSON",
    "inference_perf_requests": "inference-perf per-request lifecycle metrics JSON",
    "generic_csv": "per-request CSV",
    "generic_parquet": "per-request Parquet",
    "serving_console": "console summary (vLLM / SGLang 'Serving Benchmark Result', genai-perf, AIPerf, GuideLLM)",
}

HEAD_BYTES = 65536
MULTI_VALUE = {"vllm_bench", "sglang_bench", "aiperf_jsonl"}  # parsers that take the list of JSON values
_VLLM_KEYS = {"model_id", "num_prompts", "request_throughput"}
_SGLANG_KEYS = ("total_output_tokens_retokenized", "mean_e2e_latency_ms", "concurrency")
_AIPERF_KEYS = ("benchmark_duration", "was_cancelled", "error_summary")
_VLLM_THROUGHPUT = {"elapsed_time", "num_requests", "total_num_tokens", "requests_per_second", "tokens_per_second"}
_AIPERF_CSV_RE = re.compile(r"^Metric,avg,min,max,(sum,)?p1,")
_YAML_KEY_RE = re.compile(r"^[A-Za-z_][\w-]*:(\s|$)")


@dataclass
class Sniffed:
    """A detected file: format id and what its parser reads (JSON values, text, or raw bytes)."""

    fmt: str
    payload: Any


def _unsupported(what: str, ctx: Ctx) -> Exception:
    return ctx.fail(f"recognised as {what}, which this version cannot read; supported: {', '.join(FORMATS.values())}")


def _head_text(data: bytes, ctx: Ctx) -> str:
    head = data[:HEAD_BYTES]
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=len(data) <= HEAD_BYTES)
    except UnicodeDecodeError as exc:
        raise ctx.fail(not_utf8_reason(data, exc.start)) from None
    return text.removeprefix("\ufeff")


def _check_binary(data: bytes, ctx: Ctx) -> None:
    if data[:2] == b"\x1f\x8b":
        raise ctx.fail("gzip-compressed file; decompress it first")
    if data[:4] == b"PK\x03\x04":
        raise ctx.fail("zip archive (an Excel workbook?); export the sheet as CSV or upload the file inside")
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise ctx.fail("text is UTF-16; save the file as UTF-8")


def sniff(data: bytes, name: str, quote: bool = True) -> Sniffed:
    """Detect the format of `data` (section 0.2 of the format notes, in that order). ``quote=False``: the bytes
    came from a path that is not a plain regular file of the user's (a symlink, /proc): no message quotes them."""
    ctx = Ctx(name, quote=quote)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ctx.fail(f"expected the file's bytes, got {type(data).__name__}")
    data = bytes(data) if not isinstance(data, bytes) else data
    if not data or (not data[:HEAD_BYTES].strip() and not data.strip()):
        raise ctx.fail("empty file")
    if data[:4] == b"PAR1":
        return Sniffed("generic_parquet", data)
    _check_binary(data, ctx)
    head = _head_text(data, ctx)
    if console.detect(data):  # a pasted terminal: the block may follow pages of progress output
        return Sniffed("serving_console", decode_text(data, ctx))
    stripped = head.lstrip()
    if stripped[:1] in ("{", "["):
        values = parse_json_values(decode_text(data, ctx), ctx)
        fmt = detect_json(values, ctx)
        return Sniffed(fmt, values if fmt in MULTI_VALUE else values[0])
    first_line = stripped.split("\n", 1)[0].rstrip("\r")
    if _YAML_KEY_RE.match(first_line) or first_line.startswith("---"):
        doc = load_yaml(decode_text(data, ctx), ctx)
        if is_guidellm(doc):
            return Sniffed("guidellm_yaml", doc)
        raise ctx.unknown(f"unknown format: YAML that is not a GuideLLM report ({describe(doc, ctx.quote)})")
    csv_fmt = detect_csv_header(first_line, ctx)
    if csv_fmt == "generic_csv":
        return Sniffed(csv_fmt, data)
    if csv_fmt:
        return Sniffed(csv_fmt, decode_text(data, ctx))
    raise ctx.unknown(f"not a load-test result we read: its {ctx.head('first line', first_line)} is not JSON, YAML or "
                   "a table's column names")


# ---------------------------------------------------------------- JSON


def parse_json_values(text: str, ctx: Ctx) -> list[Any]:
    """One JSON document, or several separated by whitespace/newlines (JSONL, --append-result); size and depth
    bounded by the one safe loader."""
    return safe_load.load_json_values(text, where=ctx.where)


def describe(doc: Any, quote: bool = True) -> str:
    """What a document holds, for an 'unknown format' message: its first keys (short, printable) only when the
    file may be quoted."""
    if isinstance(doc, dict):
        if not quote:
            return f"an object with {len(doc)} keys" if doc else "an empty object"
        keys = [quote_head(str(k), 24)[1:-1] for k in list(doc)[:6]]
        more = ", ..." if len(doc) > 6 else ""
        return f"an object with keys {', '.join(keys)}{more}" if keys else "an empty object"
    if isinstance(doc, list):
        return f"a list of {len(doc)} items" + (f", the first {describe(doc[0], quote)}" if doc else "")
    return type_name(doc)


def is_guidellm(doc: Any) -> bool:
    benches = doc.get("benchmarks") if isinstance(doc, dict) else None
    return isinstance(benches, list) and any(
        isinstance(b, dict) and b.get("type_") == "generative_benchmark" for b in benches)


def is_vllm(doc: Any) -> bool:
    return isinstance(doc, dict) and _VLLM_KEYS <= doc.keys() and ("date" in doc or "tokenizer_id" in doc)


def is_sglang(doc: Any) -> bool:
    return isinstance(doc, dict) and "date" not in doc and any(k in doc for k in _SGLANG_KEYS)


def is_llmperf_summary(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("version") == "2023-08-31" and any(
        isinstance(k, str) and k.startswith("results_") for k in doc)


def is_llmperf_requests(doc: Any) -> bool:
    return (isinstance(doc, list) and bool(doc) and isinstance(doc[0], dict)
            and "ttft_s" in doc[0] and "end_to_end_latency_s" in doc[0])


def is_perf_json(doc: Any) -> bool:
    return isinstance(doc, dict) and "input_config" in doc and any(
        isinstance(v, dict) and "unit" in v and "avg" in v for v in doc.values())


def is_raw_export(doc: Any) -> bool:
    exps = doc.get("experiments") if isinstance(doc, dict) else None
    if not isinstance(exps, list) or not exps or not all(isinstance(e, dict) for e in exps):
        return False
    for exp in exps:
        reqs = exp.get("requests")
        if isinstance(reqs, list) and reqs:
            return isinstance(reqs[0], dict) and "response_timestamps" in reqs[0]
    return any("requests" in e for e in exps)


def is_aiperf_record(doc: Any) -> bool:
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    return isinstance(meta, dict) and "request_start_ns" in meta and "metrics" in doc


def _detect_single(doc: Any, ctx: Ctx) -> str | None:
    checks = (
        (is_guidellm, "guidellm_json"), (is_vllm, "vllm_bench"), (is_sglang, "sglang_bench"),
        (is_llmperf_summary, "llmperf_summary"), (is_llmperf_requests, "llmperf_requests"),
        (inference_perf.is_lifecycle_summary, "inference_perf_summary"),
        (inference_perf.is_request_list, "inference_perf_requests"),
    )
    for check, fmt in checks:
        if check(doc):
            return fmt
    if is_perf_json(doc):
        return "aiperf_json" if any(k in doc for k in _AIPERF_KEYS) else "genai_perf_json"
    if is_raw_export(doc):
        return "genai_perf_raw"
    if is_aiperf_record(doc):
        return "aiperf_jsonl"
    _refuse_known(doc, ctx)
    return None


def _refuse_known(doc: Any, ctx: Ctx) -> None:
    """Formats we recognise but do not read: say so instead of 'unknown'."""
    if isinstance(doc, dict):
        if inference_perf.is_prometheus_report(doc):
            raise ctx.fail("inference-perf Prometheus metrics report (server-side aggregates only); upload "
                           "summary_lifecycle_metrics.json, a stage_N_lifecycle_metrics.json or "
                           "per_request_lifecycle_metrics.json from the same reports folder")
        if isinstance(doc.get("results"), list) and "config" in doc and "summary" in doc:
            raise _unsupported("llm-load-test output", ctx)
        if _VLLM_THROUGHPUT <= doc.keys():
            raise _unsupported("vLLM bench throughput (offline, no latency data)", ctx)
    if isinstance(doc, list) and doc and isinstance(doc[0], dict):
        first = doc[0]
        if {"benchmark", "model", "metric"} <= first.keys():
            raise _unsupported("vLLM PyTorch benchmark records (*.pytorch.json); upload the main result JSON", ctx)


def detect_json(values: list[Any], ctx: Ctx) -> str:
    if not values:
        raise ctx.fail("empty file")
    if len(values) == 1:
        fmt = _detect_single(values[0], ctx)
        if fmt:
            return fmt
        raise ctx.unknown(f"unknown format: JSON holding {describe(values[0], ctx.quote)}; expected one of "
                       f"{', '.join(FORMATS.values())}")
    first = values[0]
    for check, fmt in ((is_vllm, "vllm_bench"), (is_sglang, "sglang_bench"), (is_aiperf_record, "aiperf_jsonl")):
        if check(first):
            return fmt
    raise ctx.unknown(f"unknown format: {len(values)} JSON values, the first {describe(first, ctx.quote)}")


# ---------------------------------------------------------------- YAML


def load_yaml(text: str, ctx: Ctx) -> Any:
    """A YAML upload through the safe loader: depth and aliases checked on libyaml's flat event stream first, so
    100,000 nested brackets are a one-line refusal instead of a C stack overflow that kills the server."""
    return safe_load.load_yaml(text, where=ctx.where)


# ---------------------------------------------------------------- CSV


def detect_csv_header(line: str, ctx: Ctx) -> str | None:
    """Tool CSV signatures by first row; a generic per-request CSV if any known column name is there."""
    if line.startswith("Metric,avg,min,max,p99,"):
        return "genai_perf_csv"
    if _AIPERF_CSV_RE.match(line) and line.rstrip(",").endswith(",std") or line.rstrip(",") == "Metric,Value":
        return "aiperf_csv"  # AIPerf ≥ 0.2 adds `sum`; a run with no request metric writes only Metric,Value
    if line.startswith("Type,Run Id,Id,Name,Start Time") or line.startswith("Run Info,Run Info,"):
        return "guidellm_csv"
    if line.startswith("Type,Name,Request Count,Failure Count") or line.startswith('"Method","Name","# requests"'):
        raise _unsupported("Locust statistics CSV", ctx)
    delimiter = generic.sniff_delimiter(line)
    if delimiter is None:
        return None
    if generic.known_columns(line, delimiter):
        return "generic_csv"
    raise ctx.unknown(f"not a load-test result we read: its {ctx.head('first line', line)} is neither a load-test "
                   "tool's table nor a per-request table (columns such as ttft, e2e_latency, output_tokens; the "
                   "accepted names are in the README, 'Benchmark files')")
