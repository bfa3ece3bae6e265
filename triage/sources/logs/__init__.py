"""Server logs as a source: detected by content, parsed line by line into a LogSeries and a LogWindow."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from triage.errors import TriageError
from triage.sources.logs import sglang, vllm
from triage.sources.logs.lines import iter_lines
from triage.sources.logs.series import LogSeries

HEAD_BYTES = 65536


@dataclass(frozen=True)
class LogFormat:
    id: str
    title: str
    detect: Callable[[bytes], bool]
    parse: Callable[[Iterable[bytes]], LogSeries]
    parse_chunks: Callable[[Iterable[bytes]], LogSeries] | None = None  # reads byte chunks directly (faster)


LOG_FORMATS: list[LogFormat] = [
    LogFormat("vllm_log", "vLLM server log", vllm.detect, vllm.parse, vllm.parse_chunks),
    LogFormat("sglang_log", "SGLang server log", sglang.detect, sglang.parse),
]


def tried() -> str:
    """The log formats this version reads, for an 'unknown format' message."""
    return ", ".join(f.title for f in LOG_FORMATS)


def detect_log(head: bytes) -> LogFormat | None:
    """The log format whose lines the head of a text holds, or None."""
    return next((f for f in LOG_FORMATS if f.detect(head)), None)


def read_log(chunks: Iterable[bytes], fmt: LogFormat, name: str) -> LogSeries:
    """Parse a log streamed as byte chunks; TriageError when it holds no stats line to diagnose."""
    log = fmt.parse_chunks(chunks) if fmt.parse_chunks is not None else fmt.parse(iter_lines(chunks))
    if not log.stats_lines:
        raise TriageError(f"recognised as a {fmt.title}, but it holds no periodic stats line ({log.lines} lines "
                          "read): the engine prints one every 5–10 s while requests run, unless stats logging is "
                          "off (--disable-log-stats) or the log was cut before traffic", where=name)
    return log
