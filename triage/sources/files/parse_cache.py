"""Parsed benchmarks by content hash, within a memory bound: the parse is kept, never the uploaded bytes.

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
from dataclasses import dataclass

from triage.run import Benchmark

MB = 1024 * 1024
DEFAULT_MAX_BYTES = 512 * MB


def digest_of(data: bytes, name: str = "") -> str:
    """The cache key: the content hash, and the name (it decides the format sniffed and the label shown)."""
    h = hashlib.sha256(data)
    h.update(b"\0" + name.encode("utf-8", "replace"))
    return h.hexdigest()[:24]


def benchmark_bytes(bench: Benchmark) -> int:
    """An estimate of the memory a parsed benchmark holds: its per-request tables (deep) plus a little per run."""
    total = 4096
    for run in bench.runs:
        total += 2048 + sum(sys.getsizeof(str(v)) for v in (run.meta or {}).values())
        if run.requests is not None:
            total += int(run.requests.memory_usage(deep=True).sum())
    return total


@dataclass(frozen=True)
class Entry:
    bench: Benchmark
    size: int


class ParseCache:
    """A thread-safe LRU of parsed benchmarks bounded by their estimated size in bytes."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.total = 0

    def get(self, digest: str) -> Benchmark | None:
        with self._lock:
            entry = self._entries.get(digest)
            if entry is None:
                return None
            self._entries.move_to_end(digest)
            return entry.bench

    def parse(self, data: bytes, name: str) -> tuple[str, Benchmark]:
        """(digest, the parsed benchmark): from the cache, else parsed now and kept if it fits the bound.
        Raises TriageError for a file that does not parse (nothing is cached then)."""
        from triage.sources.files import load_benchmark

        digest = digest_of(data, name)
        cached = self.get(digest)
        if cached is not None:
            return digest, cached
        started = time.perf_counter()
        bench = load_benchmark(data, name)
        bench.parse_seconds = time.perf_counter() - started
        self.put(digest, bench)
        return digest, bench

    def put(self, digest: str, bench: Benchmark) -> bool:
        """Keep ``bench``; older entries go until the total fits. False if it alone is larger than the bound."""
        size = benchmark_bytes(bench)
        with self._lock:
            old = self._entries.pop(digest, None)
            if old is not None:
                self.total -= old.size
            if size > self.max_bytes:
                return False
            while self._entries and self.total + size > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self.total -= dropped.size
            self._entries[digest] = Entry(bench, size)
            self.total += size
            return True

    def __contains__(self, digest: object) -> bool:
        with self._lock:
            return digest in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
