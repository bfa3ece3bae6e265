"""Uploads: parsed once per content hash into a memory-bounded cache; a session keeps digests only, never bytes.

Benchmark files (the Benchmark page's multi-file uploader, ``Uploads``) and single-file uploaders (Verify's two
sides, the Live page's two /metrics snapshots, ``SingleUploads``) alike: the parse goes into a ``BoundedCache``
shared by the server's sessions, the session keeps the upload id, name and hashes, and the bytes are released.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from triage.errors import TriageError
from triage.knowledge.loader import DEFAULT_TREE_DIR
from triage.run import Benchmark
from triage.safe_text import md_escape
from triage.sources.files.parse_cache import MB, BoundedCache, ParseCache, digest_of, file_digests
from triage.sources.metrics.exposition import Snapshot

__all__ = ["CACHE_MB_ENV", "MB", "SAMPLE_ID", "SAMPLE_PATH", "BoundedCache", "Held", "ParseCache", "Refused",
           "FormatEntry", "SingleUploads", "Snapshot", "Upload", "Uploads", "digest_of", "format_list", "format_title",
           "open_benchmark", "open_text_benchmark", "parse_cache_from_env", "sample_benchmark",
           "snapshot_cache_from_env", "uploadable_formats"]

SAMPLE_PATH = DEFAULT_TREE_DIR / "sample" / "benchmark.csv"
SAMPLE_ID = "sample"
CACHE_MB_ENV = "TRIAGE_PARSE_CACHE_MB"
DEFAULT_CACHE_MB = 512.0
SNAPSHOT_SHARE = 4  # the /metrics snapshot cache gets a quarter of the benchmark cache's bound
T = TypeVar("T")


class Upload(Protocol):
    """What ingest needs of an uploaded file (Streamlit's UploadedFile has it)."""

    @property
    def file_id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def size(self) -> int: ...

    def getvalue(self) -> bytes: ...


def open_benchmark(data: bytes, name: str, quote: bool = True) -> Benchmark:
    """Detect and parse one benchmark file (TriageError only); ``parse_seconds`` says how long it took.
    ``quote=False``: messages quote nothing of the bytes (see ``bounded.quotable``)."""
    from triage.sources.files import load_benchmark

    return load_benchmark(data, name, quote)


def open_text_benchmark(data: bytes, name: str, quote: bool = True) -> Benchmark:
    """``open_benchmark`` for text that was first tried as a server log and a /metrics scrape (a pasted or piped
    text, a FILE of diagnose): an unknown format says those were tried too."""
    from triage.errors import UnknownFormat
    from triage.sources import logs

    try:
        return open_benchmark(data, name, quote)
    except UnknownFormat as exc:
        raise TriageError(f"{exc.reason}; also tried server logs ({logs.tried()}) and a /metrics scrape",
                          where=exc.where, key=exc.key) from None


def sample_benchmark() -> Benchmark:
    """The bundled sample benchmark (tree/sample/benchmark.csv)."""
    return open_benchmark(SAMPLE_PATH.read_bytes(), SAMPLE_PATH.name)


def format_title(fmt: str) -> str:
    """The tool and file kind a format id names (e.g. "vllm_bench" → "vLLM benchmark_serving JSON")."""
    from triage.sources.files.registry import BENCHMARK_FORMATS

    return BENCHMARK_FORMATS.title(fmt)


@dataclass(frozen=True)
class FormatEntry:
    """One format users can upload, as listings show it: benchmark file or server log, its id and title."""

    kind: str   # "benchmark" or "log"
    id: str
    title: str


def uploadable_formats() -> list[FormatEntry]:
    """Every registered format a file, a paste or stdin may be in: benchmark files first, then server logs."""
    from triage.sources import logs
    from triage.sources.files import formats

    return ([FormatEntry("benchmark", f.id, f.title) for f in formats()]
            + [FormatEntry("log", f.id, f.title) for f in logs.formats()])


def format_list() -> str:
    """The benchmark formats' titles, comma-separated (the uploader's hint)."""
    return ", ".join(f.title for f in uploadable_formats() if f.kind == "benchmark")


def parse_cache_from_env(env: Mapping[str, str]) -> ParseCache:
    """A cache bounded by TRIAGE_PARSE_CACHE_MB (default 512 MB of parsed tables, at least 16 MB)."""
    try:
        megabytes = float(env.get(CACHE_MB_ENV, str(DEFAULT_CACHE_MB)))
    except ValueError:
        megabytes = DEFAULT_CACHE_MB
    return ParseCache(int(max(16.0, megabytes) * MB))


def snapshot_cache_from_env(env: Mapping[str, str]) -> BoundedCache[Snapshot]:
    """Parsed /metrics snapshots (the Live page's uploads), bounded by a quarter of TRIAGE_PARSE_CACHE_MB."""
    from triage.service.windows import parse_snapshot, snapshot_bytes

    return BoundedCache(parse_cache_from_env(env).max_bytes // SNAPSHOT_SHARE, parse_snapshot, snapshot_bytes)


def _too_large(cache: BoundedCache[T]) -> str:
    return (f"parsed, but it is larger than the {cache.max_bytes / MB:g} MB this server keeps for uploads "
            f"({CACHE_MB_ENV}); split the file or raise the limit")


@dataclass
class Uploads:
    """A session's benchmark files: digests that parsed (oldest first), the one viewed, the ones refused.

    A failed file never removes anything and never becomes the file viewed.
    """

    digests: list[str] = field(default_factory=list)
    seen: dict[str, str] = field(default_factory=dict)                 # upload id → digest: a rerun parses nothing
    errors: dict[str, tuple[str, str]] = field(default_factory=dict)   # upload id → (file name, message)
    viewed: str | None = None                                          # the digest viewed, on every page

    def fresh(self, uploads: Sequence[Upload]) -> list[Upload]:
        """The uploads neither parsed nor refused yet."""
        return [u for u in uploads if u.file_id not in self.seen and u.file_id not in self.errors]

    def ingest(self, uploads: Sequence[Upload], cache: ParseCache, progress: Callable[[str], None] | None = None,
               loaded: Callable[[str], None] | None = None,
               release: Callable[[Upload], None] | None = None) -> tuple[list[str], list[str]]:
        """Parse the fresh uploads through ``cache``: (names loaded, names refused); the last good one is viewed.

        ``progress`` hears "name (size) — i/n" before each parse, ``loaded`` one line per file that parsed,
        ``release`` gets each upload once it is parsed or refused (its bytes are no longer needed).
        """
        good, bad = [], []
        for i, upload in enumerate(uploads, start=1):
            if upload.file_id in self.seen or upload.file_id in self.errors:
                continue
            if progress:
                progress(f"{md_escape(upload.name)} ({upload.size / 1e6:.1f} MB) — {i}/{len(uploads)}")
            try:
                digest, bench = cache.parse(upload.getvalue(), upload.name)
            except TriageError as exc:  # the error is kept by upload id: the bytes are not needed to show it
                self.errors[upload.file_id] = (upload.name, exc.line_for(upload.name))
                bad.append(upload.name)
                continue
            finally:
                if release:
                    release(upload)
            if digest not in cache:
                self.errors[upload.file_id] = (upload.name, TriageError(_too_large(cache)).line())
                bad.append(upload.name)
                continue
            self.seen[upload.file_id] = digest
            if digest in self.digests:
                self.digests.remove(digest)
            self.digests.append(digest)
            self.viewed = digest
            good.append(upload.name)
            if loaded:
                loaded(f"{md_escape(upload.name)}: {bench.format}, {len(bench.runs)} run(s), parsed in "
                       f"{bench.parse_seconds:.2f} s")
        return good, bad

    def adopt(self, digest: str, cache: ParseCache) -> bool:
        """View a file this server parsed earlier, named by its digest (a reloaded page's ``?file=``); False when
        the cache no longer holds it (the server restarted, or newer uploads pushed it out)."""
        if digest not in cache:
            return False
        if digest not in self.digests:
            self.digests.append(digest)
        self.viewed = digest
        return True

    def refused(self, file_ids: set[str]) -> list[tuple[str, str]]:
        """(name, message) of the files now in the uploader that did not parse."""
        return [v for k, v in self.errors.items() if k in file_ids]

    def loaded(self, cache: ParseCache) -> dict[str, Benchmark]:
        """This session's files still in the cache (the bound may have dropped the oldest)."""
        found = {d: cache.get(d) for d in self.digests}
        return {d: b for d, b in found.items() if b is not None}

    def dropped(self, cache: ParseCache) -> int:
        """How many of this session's files the memory bound has dropped (to upload again if needed)."""
        return sum(d not in cache for d in self.digests)


@dataclass(frozen=True)
class Held:
    """A single uploader's file once parsed, as a session keeps it: ids and hashes, never the bytes."""

    file_id: str   # the upload id the uploader shows
    name: str
    digest: str    # the cache key (content hash and name)
    sha256: str    # of the bytes alone (the experiment log records it)


@dataclass(frozen=True)
class Refused:
    """A single uploader's file that cannot be shown: its name and one line saying why."""

    name: str
    reason: str


@dataclass
class SingleUploads:
    """The files of single-file uploaders, by uploader key: each parsed once through a bounded cache, after
    which the session keeps a ``Held`` (or the refusal) and the bytes are released."""

    held: dict[str, Held] = field(default_factory=dict)
    refused: dict[str, tuple[str, Refused]] = field(default_factory=dict)  # key → (upload id, why)

    def take(self, key: str, file_id: str | None, upload: Upload | None, cache: BoundedCache[T],
             release: Callable[[Upload], None] | None = None) -> tuple[Held, T] | Refused | None:
        """What uploader ``key`` shows: None when it is empty, (held, parse) once it parsed, else a Refused.

        ``file_id`` is the upload id the uploader shows (its bytes may be released already), ``upload`` the
        upload with its bytes while the server has them; ``release`` gets it once parsed or refused."""
        try:
            return self._take(key, file_id, upload, cache)
        finally:
            if upload is not None and release:
                release(upload)

    def _take(self, key: str, file_id: str | None, upload: Upload | None,
              cache: BoundedCache[T]) -> tuple[Held, T] | Refused | None:
        if file_id is None:
            self.held.pop(key, None)
            self.refused.pop(key, None)
            return None
        held = self.held.get(key)
        if held is not None and held.file_id == file_id:
            value = cache.get(held.digest)
            if value is None:
                return Refused(held.name, "dropped from server memory to make room for newer uploads; upload it "
                               "again")
            return held, value
        known = self.refused.get(key)
        if known is not None and known[0] == file_id:
            return known[1]
        self.held.pop(key, None)
        self.refused.pop(key, None)
        if upload is None:
            return Refused("the file", "its bytes are no longer on the server; upload it again")
        data = upload.getvalue()
        digest, whole = file_digests(data, upload.name)
        try:
            digest, value = cache.parse(data, upload.name, digest)
            if digest not in cache:
                raise TriageError(_too_large(cache), where=upload.name)
        except TriageError as exc:
            self.refused[key] = (file_id, Refused(upload.name, exc.line_for(upload.name)))
            return self.refused[key][1]
        self.held[key] = Held(file_id, upload.name, digest, whole)
        return self.held[key], value
