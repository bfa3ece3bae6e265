"""Format detection: sniff a benchmark file's bytes and return its format id with the decoded payload."""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from triage import safe_load
from triage.sources.files.common import Ctx, decode_text, not_utf8_reason, quote_head, type_name
from triage.sources.files.generic import sniff_delimiter
from triage.sources.files.inference_perf import is_prometheus_report
from triage.sources.files.registry import BENCHMARK_FORMATS, BenchmarkFormat, candidates

HEAD_BYTES = 65536
# A file whose first line is a table's column names is looked at only this far (its head) for a pasted console
# block: a terminal paste does not start with a table header, and scanning a million-row table for one cost 0.03 s
# of CPU a parse.
TABLE_PROBE_BYTES = HEAD_BYTES
_VLLM_THROUGHPUT = {"elapsed_time", "num_requests", "total_num_tokens", "requests_per_second", "tokens_per_second"}
_YAML_KEY_RE = re.compile(r"^[A-Za-z_][\w-]*:(\s|$)")


@dataclass
class Sniffed:
    """A detected file: format id and what its parser reads (JSON values, text, or raw bytes)."""

    fmt: str
    payload: Any


def _unsupported(what: str, ctx: Ctx) -> Exception:
    return ctx.fail(f"recognised as {what}, which this version cannot read; supported: {BENCHMARK_FORMATS.titles()}")


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
    raw = _first(candidates("bytes"), data, lambda f: f.payload == "bytes")
    if raw:  # binary formats (Parquet) before the checks that refuse other binary files
        return Sniffed(raw.id, data)
    _check_binary(data, ctx)
    head = _head_text(data, ctx)
    stripped = head.lstrip()
    first_line = stripped.split("\n", 1)[0].rstrip("\r")
    probe = data[:TABLE_PROBE_BYTES] if _table_header(first_line) else data
    text_fmt = _first(candidates("bytes"), probe, lambda f: f.payload != "bytes")
    if text_fmt:  # a pasted terminal: the block may follow pages of progress output
        return Sniffed(text_fmt.id, _payload(text_fmt, data, ctx))
    if stripped[:1] in ("{", "["):
        values = parse_json_values(decode_text(data, ctx), ctx)
        fmt = detect_json(values, ctx)
        return Sniffed(fmt.id, values if fmt.multi_value else values[0])
    if _YAML_KEY_RE.match(first_line) or first_line.startswith("---"):
        doc = load_yaml(decode_text(data, ctx), ctx)
        yaml_fmt = _first(candidates("yaml"), doc)
        if yaml_fmt:
            return Sniffed(yaml_fmt.id, doc)
        names = " or ".join(f.title for f in candidates("yaml")) or "a benchmark format"
        raise ctx.unknown(f"unknown format: YAML, but not {names} ({describe(doc, ctx.quote)})")
    table = detect_csv_header(first_line, ctx)
    if table:
        return Sniffed(table.id, _payload(table, data, ctx))
    consoles = ", ".join(f.title for f in candidates("bytes") if f.payload != "bytes")
    raise ctx.unknown(f"not a load-test result we read: its {ctx.head('first line', first_line)} is not JSON, YAML or "
                      f"a table's column names, and the text holds no {consoles or 'console summary'}")


def _table_header(line: str) -> bool:
    """Whether a first line is the column names of a table we read (a tool's CSV or a per-request table)."""
    return bool(_first(candidates("header"), line) or _first(candidates("header", fallback=True), line))


def _first(formats: list[BenchmarkFormat], sample: Any,
           where: Callable[[BenchmarkFormat], bool] = lambda f: True) -> BenchmarkFormat | None:
    return next((f for f in formats if where(f) and f.sniff(sample)), None)


def _payload(fmt: BenchmarkFormat, data: bytes, ctx: Ctx) -> Any:
    return data if fmt.payload == "bytes" else decode_text(data, ctx)


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


def _detect_single(doc: Any, ctx: Ctx) -> BenchmarkFormat | None:
    fmt = _first(candidates("json"), doc)
    if fmt:
        return fmt
    _refuse_known(doc, ctx)
    return None


def _refuse_known(doc: Any, ctx: Ctx) -> None:
    """Formats we recognise but do not read: say so instead of 'unknown'."""
    if isinstance(doc, dict):
        if is_prometheus_report(doc):
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


def detect_json(values: list[Any], ctx: Ctx) -> BenchmarkFormat:
    if not values:
        raise ctx.fail("empty file")
    if len(values) == 1:
        fmt = _detect_single(values[0], ctx)
        if fmt:
            return fmt
        raise ctx.unknown(f"unknown format: JSON holding {describe(values[0], ctx.quote)}; expected one of "
                       f"{BENCHMARK_FORMATS.titles()}")
    first = values[0]
    several = _first(candidates("json"), first, lambda f: f.multi_value)
    if several:
        return several
    raise ctx.unknown(f"unknown format: {len(values)} JSON values, the first {describe(first, ctx.quote)}")


# ---------------------------------------------------------------- YAML


def load_yaml(text: str, ctx: Ctx) -> Any:
    """A YAML upload through the safe loader: depth and aliases checked on libyaml's flat event stream first, so
    100,000 nested brackets are a one-line refusal instead of a C stack overflow that kills the server."""
    return safe_load.load_yaml(text, where=ctx.where)


# ---------------------------------------------------------------- CSV


def detect_csv_header(line: str, ctx: Ctx) -> BenchmarkFormat | None:
    """Tool CSV signatures by first row; then the tables refused by name; then a generic per-request table if any
    known column name is there."""
    tool = _first(candidates("header"), line)
    if tool:
        return tool
    if line.startswith("Type,Name,Request Count,Failure Count") or line.startswith('"Method","Name","# requests"'):
        raise _unsupported("Locust statistics CSV", ctx)
    fallback = _first(candidates("header", fallback=True), line)
    if fallback:
        return fallback
    if sniff_delimiter(line) is None:
        return None
    raise ctx.unknown(f"not a load-test result we read: its {ctx.head('first line', line)} is neither a load-test "
                   "tool's table nor a per-request table (columns such as ttft, e2e_latency, output_tokens; the "
                   "accepted names are in the README, 'Benchmark files')")
