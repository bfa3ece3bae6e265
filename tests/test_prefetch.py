"""Chunks read one ahead on a thread (triage/sources/logs/prefetch.py): same chunks in the same order, the reader's
error raised to the consumer, and a consumer that stops early leaves no thread behind."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from triage.sources.logs.prefetch import prefetched


def _reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "log-prefetch"]


def _ended() -> bool:
    for thread in _reader_threads():
        thread.join(timeout=10)
    return not _reader_threads()


def test_every_chunk_in_order() -> None:
    chunks = [bytes([i]) * (i + 1) for i in range(200)]
    assert list(prefetched(iter(chunks))) == chunks and _ended()
    assert list(prefetched(iter([]))) == [] and _ended()


def test_the_readers_error_is_raised_where_its_chunk_would_be() -> None:
    def failing() -> Iterator[bytes]:
        yield b"a"
        raise OSError(5, "Input/output error")

    got = []
    with pytest.raises(OSError, match="Input/output error"):
        for chunk in prefetched(failing()):
            got.append(chunk)
    assert got == [b"a"] and _ended()


@pytest.mark.parametrize("taken", [0, 1, 3])
def test_a_consumer_that_stops_early_leaves_no_thread(taken: int) -> None:
    reads: list[int] = []

    def endless() -> Iterator[bytes]:
        n = 0
        while True:
            reads.append(n)
            yield b"x" * 10
            n += 1

    stream = prefetched(endless())
    for _ in range(taken):
        next(stream)
    stream.close()  # as a parse that raised would leave it
    assert _ended() and len(reads) <= taken + 3  # at most the one waiting and the one being read, beyond those used
