"""One side of a comparison (Verify page, ``gate``): a benchmark file or console summary, or a server log."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from triage.errors import TriageError
from triage.run import Benchmark
from triage.sources import logs
from triage.sources.logs.series import LogSeries
from triage.verify.comparison import Comparison
from triage.verify.logs import KIND_BENCHMARK, KIND_LOG, LOG_SPECS, compare_logs, mixed_refusal

Side = Benchmark | LogSeries

__all__ = ["KIND_BENCHMARK", "KIND_LOG", "LOG_SPECS", "LogSeries", "Side", "compare_log_sides", "is_log", "kind_of",
           "open_side", "refuse_mixed", "side_bytes", "side_title"]


def open_side(data: bytes, name: str, quote: bool = True) -> Side:
    """A server log when its head holds a log format's lines, else a benchmark file (TriageError if neither)."""
    from triage.errors import UnknownFormat
    from triage.service.uploads import open_benchmark

    fmt = logs.detect_log(data[:logs.HEAD_BYTES])
    if fmt is not None:
        return logs.read_log([data], fmt, name)
    try:
        return open_benchmark(data, name, quote)
    except UnknownFormat as exc:
        raise TriageError(f"{exc.reason}; also tried server logs ({logs.tried()})", where=exc.where,
                          key=exc.key) from None


def is_log(side: object) -> bool:
    return isinstance(side, LogSeries)


def kind_of(side: Side) -> str:
    return KIND_LOG if isinstance(side, LogSeries) else KIND_BENCHMARK


def side_title(side: Side) -> str:
    """What the side was read as: "vLLM V1 server log, 412 stats lines over 68 min, …" or the format's name."""
    from triage.service.uploads import format_title

    return side.summary() if isinstance(side, LogSeries) else format_title(side.format)


def side_bytes(side: Side) -> int:
    """Memory a parsed side holds, for the upload cache's bound (a stats sample is a tuple of ten floats)."""
    from triage.sources.files.parse_cache import benchmark_bytes

    if isinstance(side, LogSeries):
        samples = sum(len(group) for group in side.engines.values())
        return 4096 + samples * (sys.getsizeof(()) + 10 * 32) + len(side.spec) * 200 + len(side.preemption_times) * 32
    return benchmark_bytes(side)


def compare_log_sides(base: Side, cand: Side, technique: str | Sequence[str] | None = None,
                      kb: Any = None) -> Comparison | None:
    """Two logs: their comparison; two benchmarks: None (the caller compares runs); one of each: TriageError."""
    if isinstance(base, LogSeries) and isinstance(cand, LogSeries):
        return compare_logs(base, cand, technique, kb)
    if isinstance(base, LogSeries) or isinstance(cand, LogSeries):
        raise mixed_refusal(kind_of(base), _short_title(base), kind_of(cand), _short_title(cand))
    return None


def _short_title(side: Side) -> str:
    from triage.service.uploads import format_title

    return side.title if isinstance(side, LogSeries) else format_title(side.format)


def refuse_mixed(base: Side, cand: Side) -> None:
    """TriageError when exactly one side is a server log."""
    if isinstance(base, LogSeries) != isinstance(cand, LogSeries):
        raise mixed_refusal(kind_of(base), _short_title(base), kind_of(cand), _short_title(cand))

