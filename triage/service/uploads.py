"""Benchmark files: parse once per content hash, keep what loaded, report what did not."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from triage.errors import TriageError
from triage.knowledge.loader import DEFAULT_TREE_DIR
from triage.run import Benchmark

SAMPLE_PATH = DEFAULT_TREE_DIR / "sample" / "benchmark.csv"
SAMPLE_ID = "sample"
Parse = Callable[[str, str, bytes], Benchmark]  # (key, file name, bytes) → Benchmark; the UI passes a cached one


class Upload(Protocol):
    """What ingest needs of an uploaded file (Streamlit's UploadedFile has it)."""

    @property
    def file_id(self) -> str: ...

    @property
    def name(self) -> str: ...

    def getvalue(self) -> bytes: ...


def digest_of(data: bytes) -> str:
    """The content key of a file: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(data).hexdigest()[:16]


def open_benchmark(data: bytes, name: str) -> Benchmark:
    """Detect and parse one benchmark file (TriageError only); ``parse_seconds`` says how long it took."""
    from triage.sources.files import load_benchmark

    return load_benchmark(data, name)


def parse_keyed(key: str, name: str, data: bytes) -> Benchmark:
    """``open_benchmark`` with the key the UI caches it by (a content hash or an upload id)."""
    return open_benchmark(data, name)


def sample_benchmark(parse: Parse = parse_keyed) -> Benchmark:
    """The bundled sample benchmark (tree/sample/benchmark.csv)."""
    return parse(SAMPLE_ID, SAMPLE_PATH.name, SAMPLE_PATH.read_bytes())


def format_title(fmt: str) -> str:
    """The tool and file kind a format id names ("vllm_bench" → "vLLM benchmark_serving JSON")."""
    from triage.sources.files.detect import FORMATS

    return FORMATS.get(fmt, fmt)


@dataclass
class Uploads:
    """A session's benchmark files: each file that parsed, by content hash; what failed in the latest upload.

    A failed file never removes anything: what loaded before stays.
    """

    files: dict[str, Benchmark] = field(default_factory=dict)   # digest → Benchmark
    seen: dict[str, str] = field(default_factory=dict)          # upload id → digest, so a rerun does not hash again
    errors: dict[str, str] = field(default_factory=dict)        # file name → message, from the latest ingest

    def fresh(self, uploads: Sequence[Upload]) -> list[Upload]:
        """The uploads not ingested yet."""
        return [u for u in uploads if u.file_id not in self.seen]

    def ingest(self, uploads: Sequence[Upload], parse: Parse = parse_keyed,
               progress: Callable[[str], None] | None = None, loaded: Callable[[str], None] | None = None,
               ) -> str | None:
        """Parse the fresh uploads (a content already held is not parsed again); the digest of the last good one.

        ``progress`` hears "name (size) — i/n" before each parse, ``loaded`` one line per file that parsed.
        """
        fresh = self.fresh(uploads)
        self.errors = {}
        last = None
        for i, upload in enumerate(fresh, start=1):
            data = upload.getvalue()
            digest = digest_of(data)
            if progress:
                progress(f"{upload.name} ({len(data) / 1e6:.1f} MB) — {i}/{len(fresh)}")
            try:
                bench = self.files.get(digest) or parse(digest, upload.name, data)
            except TriageError as exc:
                self.errors[upload.name] = exc.line()
                continue
            self.seen[upload.file_id] = digest
            self.files[digest] = bench
            last = digest
            if loaded:
                loaded(f"{upload.name}: {bench.format}, {len(bench.runs)} run(s), "
                       f"parsed in {bench.parse_seconds:.2f} s")
        return last
