"""Server logs as a source: detected by content, parsed line by line into a LogSeries and a LogWindow."""

from __future__ import annotations

from collections.abc import Iterable

from triage.errors import TriageError
from triage.sources.logs import sglang, vllm  # noqa: F401 - the shipped formats register on import
from triage.sources.logs.lines import iter_lines
from triage.sources.logs.registry import LOG_FORMATS, LogFormat, in_detection_order
from triage.sources.logs.series import LogSeries

__all__ = ["HEAD_BYTES", "LOG_FORMATS", "LogFormat", "detect_log", "formats", "read_log", "tried"]

HEAD_BYTES = 65536


def formats() -> list[LogFormat]:
    """Every server-log format this process reads, in detection order."""
    return in_detection_order()


def tried() -> str:
    """The log formats this version reads, for an 'unknown format' message."""
    return ", ".join(f.title for f in in_detection_order())


def detect_log(head: bytes) -> LogFormat | None:
    """The log format whose lines the head of a text holds, or None."""
    return next((f for f in in_detection_order() if f.detect(head)), None)


def read_log(chunks: Iterable[bytes], fmt: LogFormat, name: str) -> LogSeries:
    """Parse a log streamed as byte chunks; TriageError when it holds no stats line to diagnose."""
    log = fmt.parse_chunks(chunks) if fmt.parse_chunks is not None else fmt.parse(iter_lines(chunks))
    if not log.stats_lines:
        raise TriageError(f"recognised as a {fmt.title}, but it holds no periodic stats line ({log.lines} lines "
                          "read): the engine prints one every 5–10 s while requests run, unless stats logging is "
                          "off (--disable-log-stats) or the log was cut before traffic", where=name)
    return log
