"""Benchmark files of LLM load-test tools → canonical `Benchmark`: detect the format, parse it, check it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from triage.errors import TriageError
from triage.run import Benchmark, Run
from triage.sources.files import (
    aiperf,
    console,
    genai_perf,
    generic,
    guidellm,
    inference_perf,
    llmperf,
    sglang,
    vllm,
)
from triage.sources.files.common import Ctx, dedupe_labels
from triage.sources.files.detect import FORMATS, sniff

__all__ = ["FORMATS", "detect_format", "load_benchmark"]

PARSERS: dict[str, Callable[[Any, Ctx], list[Run]]] = {
    "vllm_bench": vllm.parse,
    "sglang_bench": sglang.parse,
    "guidellm_json": guidellm.parse_json,
    "guidellm_yaml": guidellm.parse_yaml,
    "guidellm_csv": guidellm.parse_csv,
    "genai_perf_csv": genai_perf.parse_csv,
    "genai_perf_json": genai_perf.parse_json,
    "genai_perf_raw": genai_perf.parse_raw,
    "aiperf_csv": aiperf.parse_csv,
    "aiperf_json": aiperf.parse_json,
    "aiperf_jsonl": aiperf.parse_jsonl,
    "llmperf_summary": llmperf.parse_summary,
    "llmperf_requests": llmperf.parse_requests,
    "inference_perf_summary": inference_perf.parse_summary,
    "inference_perf_requests": inference_perf.parse_requests,
    "generic_csv": generic.parse_csv,
    "generic_parquet": generic.parse_parquet,
    "serving_console": console.parse,
}


def _wrap(exc: BaseException, name: str, fmt: str | None) -> TriageError:
    """Any non-TriageError becomes one, naming the file and the format we tried."""
    if isinstance(exc, TriageError):
        return exc if exc.where else type(exc)(exc.reason, where=name, key=exc.key)
    if isinstance(exc, RecursionError):
        return TriageError("data is nested too deeply to read", where=name)
    if isinstance(exc, MemoryError):
        return TriageError("file is too large to read in memory", where=name)
    what = f"as {FORMATS[fmt]}" if fmt else "the file"
    detail = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
    return TriageError(f"could not read {what}: {type(exc).__name__}{': ' + detail if detail else ''}", where=name)


def detect_format(data: bytes, name: str, quote: bool = True) -> str:
    """The format id of a benchmark file (see FORMATS); TriageError if it is not one we read."""
    try:
        return sniff(data, name, quote).fmt
    except Exception as exc:  # noqa: BLE001 - everything becomes a TriageError
        raise _wrap(exc, name, None) from exc


def load_benchmark(data: bytes, name: str, quote: bool = True) -> Benchmark:
    """Detect and parse a benchmark file into runs in canonical units; raises TriageError only. ``quote=False``
    when the bytes came from a path that is not a plain regular file of the user's: no message quotes them."""
    started = time.perf_counter()
    fmt: str | None = None
    ctx = Ctx(name, quote=quote)
    try:
        sniffed = sniff(data, name, quote)
        fmt = sniffed.fmt
        runs = PARSERS[fmt](sniffed.payload, ctx)
        if not runs:
            raise ctx.fail(f"no runs found in this {FORMATS[fmt]}")
        dedupe_labels(runs)
    except Exception as exc:  # noqa: BLE001 - everything becomes a TriageError
        raise _wrap(exc, name, fmt) from exc
    return Benchmark(source=name, format=fmt, runs=runs, parse_seconds=time.perf_counter() - started, notes=ctx.notes)
