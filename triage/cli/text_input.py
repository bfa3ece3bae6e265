"""FILE or ``-`` (standard input) for diagnose / report: a server log streamed line by line, else a benchmark."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from triage.bounded import CHUNK, MAX_BENCHMARK_BYTES, MB, check_regular
from triage.errors import TriageError
from triage.sources import logs
from triage.sources.logs.prefetch import prefetched
from triage.sources.logs.series import LogSeries
from triage.sources.metrics.exposition import Snapshot
from triage.sources.metrics.since_start import looks_like_metrics

STDIN = "-"
MAX_LOG_BYTES = 64 * 1024 * 1024 * 1024  # a log is streamed, never held whole: only absurd sizes are refused
# A log's chunks are its blocks (vllm._spans reads them in place): 2 MB halves the per-block steps of 1 MB ones and,
# with the one chunk read ahead (prefetch.py), keeps test_log_memory's bound
LOG_CHUNK = 2 * MB


def _chunks(head: bytes, stream: BinaryIO) -> Iterator[bytes]:
    yield head
    while chunk := stream.read(LOG_CHUNK):
        yield chunk


def _head(stream: BinaryIO) -> bytes:
    head = b""
    while len(head) < logs.HEAD_BYTES and (chunk := stream.read(logs.HEAD_BYTES - len(head))):
        head += chunk
    return head


def _benchmark(data: bytes, name: str, quote: bool = False) -> Benchmark:
    """The benchmark in ``data``; ``quote``: messages may quote a short head of it (a plain file of the user's)."""
    from triage.service.uploads import open_text_benchmark

    return open_text_benchmark(data, name, quote)


def _rest(stream: BinaryIO, head: bytes, name: str) -> bytes:
    parts, size = [head], len(head)
    while chunk := stream.read(CHUNK):
        size += len(chunk)
        if size > MAX_BENCHMARK_BYTES:
            raise TriageError(f"more than {MAX_BENCHMARK_BYTES // (1024 * 1024)} MB of benchmark data; not read",
                              where=name)
        parts.append(chunk)
    return b"".join(parts)


if TYPE_CHECKING:  # pandas and pyarrow load only when a benchmark file is read (``_benchmark``)
    from triage.run import Benchmark

    Source = LogSeries | Benchmark | Snapshot


def _scrape(data: bytes, name: str, taken_at: float) -> Snapshot:
    from dataclasses import replace

    from triage.service.windows import parse_snapshot

    return replace(parse_snapshot(data, name), taken_at=taken_at)


def read_source(path: Path) -> Source:
    """The log (streamed), the single /metrics scrape or the benchmark file that ``path`` names; ``-`` reads
    standard input. A scrape's time is the file's modification time (now for standard input)."""
    if str(path) == STDIN:
        return _read_stream(sys.stdin.buffer, "stdin")
    info = check_regular(path, MAX_LOG_BYTES)
    try:
        stream = open(path, "rb")  # noqa: SIM115 - closed below, after the streamed parse
    except OSError as exc:
        raise TriageError(f"cannot read: {exc.strerror or exc}", where=str(path)) from None
    with stream:
        head = _head(stream)
        fmt = logs.detect_log(head)
        if fmt is not None:
            return logs.read_log(prefetched(_chunks(head, stream)), fmt, path.name)
    from triage.bounded import MAX_METRICS_BYTES, quotable, read_bounded

    if looks_like_metrics(head):
        return _scrape(read_bounded(path, MAX_METRICS_BYTES), path.name, info.st_mtime)
    check_regular(path, MAX_BENCHMARK_BYTES)
    data = read_bounded(path)
    return _benchmark(data, path.name, quotable(path, data))


def _read_stream(stream: BinaryIO, name: str) -> Source:
    import time

    head = _head(stream)
    if not head.strip():
        raise TriageError("empty input: nothing arrived on standard input", where=name)
    fmt = logs.detect_log(head)
    if fmt is not None:
        return logs.read_log(prefetched(_chunks(head, stream)), fmt, name)
    data = _rest(stream, head, name)
    if looks_like_metrics(head):
        return _scrape(data, name, time.time())
    return _benchmark(data, name, quote=True)  # the shell opened it with the reader's own rights
