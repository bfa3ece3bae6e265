"""Parsed uploads (benchmarks, /metrics snapshots) by content hash, within a memory bound: the parse is kept,
never the uploaded bytes.

The pages keep only digests in a session and look the parse up here; when the bound is reached the least
recently used parse goes, so the memory all sessions together hold for uploads stays under ``max_bytes``
whatever they upload.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from triage.run import Benchmark

MB = 1024 * 1024
DEFAULT_MAX_BYTES = 512 * MB
T = TypeVar("T")


def digest_of(data: bytes, name: str = "") -> str:
    """The cache key: the content hash, and the name (it decides the format sniffed and the label shown)."""
    return file_digests(data, name)[0]


def file_digests(data: bytes, name: str = "") -> tuple[str, str]:
    """(the cache key, the SHA-256 of the bytes alone), from one pass over the bytes."""
    h = hashlib.sha256(data)
    whole = h.hexdigest()
    h.update(b"\0" + name.encode("utf-8", "replace"))
    return h.hexdigest()[:24], whole


def benchmark_bytes(bench: Benchmark) -> int:
    """An estimate of the memory a parsed benchmark holds: its per-request tables (deep) plus a little per run."""
    total = 4096
    for run in bench.runs:
        total += 2048 + sum(sys.getsizeof(str(v)) for v in (run.meta or {}).values())
        if run.requests is not None:
            total += int(run.requests.memory_usage(deep=True).sum())
    return total


@dataclass(frozen=True)
class Entry(Generic[T]):
    value: T
    size: int


class BoundedCache(Generic[T]):
    """A thread-safe LRU of parsed uploads keyed by content hash, bounded by their estimated size in bytes.

    ``load(data, name)`` parses (TriageError if it cannot), ``measure(value)`` estimates what a parse holds."""

    def __init__(self, max_bytes: int, load: Callable[[bytes, str], T], measure: Callable[[T], int]) -> None:
        self.max_bytes = max_bytes
        self._load = load
        self._measure = measure
        self._entries: OrderedDict[str, Entry[T]] = OrderedDict()
        self._lock = threading.Lock()
        self.total = 0

    def get(self, digest: str) -> T | None:
        with self._lock:
            entry = self._entries.get(digest)
            if entry is None:
                return None
            self._entries.move_to_end(digest)
            return entry.value

    def parse(self, data: bytes, name: str, digest: str | None = None) -> tuple[str, T]:
        """(digest, the parse): from the cache, else parsed now and kept if it fits the bound (``digest``: the
        key ``digest_of`` gives, when the caller has it). Raises TriageError for a file that does not parse
        (nothing is cached then)."""
        digest = digest or digest_of(data, name)
        cached = self.get(digest)
        if cached is not None:
            return digest, cached
        value = self._load(data, name)
        self.put(digest, value)
        return digest, value

    def put(self, digest: str, value: T) -> bool:
        """Keep ``value``; older entries go until the total fits. False if it alone is larger than the bound."""
        size = self._measure(value)
        with self._lock:
            old = self._entries.pop(digest, None)
            if old is not None:
                self.total -= old.size
            if size > self.max_bytes:
                return False
            while self._entries and self.total + size > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self.total -= dropped.size
            self._entries[digest] = Entry(value, size)
            self.total += size
            return True

    def __contains__(self, digest: object) -> bool:
        with self._lock:
            return digest in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def _load_timed(data: bytes, name: str) -> Benchmark:
    from triage.sources.files import load_benchmark

    started = time.perf_counter()
    bench = load_benchmark(data, name)
    bench.parse_seconds = time.perf_counter() - started
    return bench


class ParseCache(BoundedCache[Benchmark]):
    """Parsed benchmark files (``parse_seconds`` set) within ``max_bytes`` of per-request tables."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        super().__init__(max_bytes, _load_timed, benchmark_bytes)
