"""Server-log formats as data: one ``LogFormat`` per engine's log, registered by the engine's own module."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from triage.sources.logs.series import LogSeries
from triage.sources.registry import Registry


@dataclass(frozen=True)
class LogFormat:
    """One engine's server log: recognised by the head of the text, parsed line by line into a LogSeries."""

    id: str
    title: str
    detect: Callable[[bytes], bool]
    parse: Callable[[Iterable[bytes]], LogSeries]
    parse_chunks: Callable[[Iterable[bytes]], LogSeries] | None = None  # reads byte chunks directly (faster)
    rank: int = 100  # detection order (lower first)


LOG_FORMATS: Registry[LogFormat] = Registry("server-log format")


def register(fmt: LogFormat) -> LogFormat:
    """Add a server-log format (its module calls this when imported)."""
    return LOG_FORMATS.register(fmt)


def in_detection_order() -> list[LogFormat]:
    return sorted(LOG_FORMATS.all(), key=lambda f: f.rank)
