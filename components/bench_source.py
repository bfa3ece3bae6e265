"""Benchmark files in the session: parsed once per content hash into a memory-bounded cache shared by all
sessions; a session keeps digests only, and an upload's bytes are released as soon as it is parsed."""

from __future__ import annotations

import os
from dataclasses import dataclass

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from triage.errors import TriageError
from triage.knowledge.loader import DEFAULT_TREE_DIR
from triage.run import Benchmark
from triage.safe_text import md_escape
from triage.sources.files import load_benchmark
from triage.sources.files.parse_cache import MB, ParseCache

SAMPLE_PATH = DEFAULT_TREE_DIR / "sample" / "benchmark.csv"
SAMPLE_ID = "sample"
STORE_KEY = "bench_files"      # digests of every file that parsed in this session, oldest first
SEEN_KEY = "bench_seen"        # uploader file id → digest, so a rerun does not parse again
CHOICE_KEY = "bench_choice"    # the file picker's widget key (Streamlit drops it when another page runs)
VIEWED_KEY = "bench_viewed"    # the digest being viewed: kept for the session, across pages
ERRORS_KEY = "bench_errors"    # uploader file id → (file name, message) for every file that did not parse
CACHE_MB_ENV = "TRIAGE_PARSE_CACHE_MB"


@dataclass(frozen=True)
class Loaded:
    digest: str
    bench: Benchmark
    is_sample: bool


@st.cache_resource(show_spinner=False)
def parse_cache() -> ParseCache:
    """One cache for the server process, bounded by TRIAGE_PARSE_CACHE_MB (default 512 MB of parsed tables)."""
    try:
        megabytes = float(os.environ.get(CACHE_MB_ENV, "512"))
    except ValueError:
        megabytes = 512.0
    return ParseCache(int(max(16.0, megabytes) * MB))


def parse(name: str, data: bytes) -> tuple[str, Benchmark]:
    """(digest, parsed benchmark) of an upload, through the bounded cache; TriageError if it does not parse."""
    return parse_cache().parse(data, name)


def release(upload) -> None:
    """Drop an upload's bytes from Streamlit's upload store: the parse is all the page needs from now on.

    The uploader keeps showing the file (the browser holds its name); its bytes are gone from the server."""
    ctx = get_script_run_ctx()
    # remove_file is on Streamlit's in-memory manager, not on the UploadedFileManager protocol
    remove = getattr(getattr(ctx, "uploaded_file_mgr", None), "remove_file", None)
    if ctx is not None and callable(remove):
        remove(ctx.session_id, upload.file_id)


@st.cache_resource(show_spinner=False)
def _sample_bench() -> Benchmark:
    return load_benchmark(SAMPLE_PATH.read_bytes(), SAMPLE_PATH.name)


def sample() -> Loaded:
    return Loaded(SAMPLE_ID, _sample_bench(), True)


def ingest(files: list, status) -> tuple[list[str], list[str]]:
    """Parse newly uploaded files; good ones join the session store and the last becomes the one viewed,
    bad ones get a message. Returns (names loaded, names refused).

    A failed file never removes anything and never becomes the file viewed.
    """
    store: list[str] = st.session_state.setdefault(STORE_KEY, [])
    seen: dict[str, str] = st.session_state.setdefault(SEEN_KEY, {})
    errors: dict[str, tuple[str, str]] = st.session_state.setdefault(ERRORS_KEY, {})
    good, bad = [], []
    for i, upload in enumerate(files, start=1):
        if upload.file_id in seen or upload.file_id in errors:
            continue
        status.update(label=f"{md_escape(upload.name)} ({upload.size / 1e6:.1f} MB) — {i}/{len(files)}")
        try:
            digest, bench = parse(upload.name, upload.getvalue())
        except TriageError as exc:  # the bytes stay while the file is in the uploader, so its error shows
            errors[upload.file_id] = (upload.name, exc.line())
            bad.append(upload.name)
            continue
        release(upload)
        if digest not in parse_cache():
            errors[upload.file_id] = (upload.name, TriageError(
                f"parsed, but its tables are larger than the {parse_cache().max_bytes / MB:g} MB this server keeps "
                f"for uploads ({CACHE_MB_ENV}); split the file or raise the limit").line())
            bad.append(upload.name)
            continue
        seen[upload.file_id] = digest
        if digest in store:
            store.remove(digest)
        store.append(digest)
        view(digest)
        good.append(upload.name)
        status.write(f"{md_escape(upload.name)}: {bench.format}, {len(bench.runs)} run(s), parsed in "
                     f"{bench.parse_seconds:.2f} s")
    return good, bad


def refused(file_ids: set[str]) -> list[tuple[str, str]]:
    """(name, message) of the files now in the uploader that did not parse."""
    return [v for k, v in st.session_state.get(ERRORS_KEY, {}).items() if k in file_ids]


def view(digest: str) -> None:
    """Make ``digest`` (or the sample) the file viewed, on every page, for the rest of the session."""
    st.session_state[VIEWED_KEY] = digest
    st.session_state[CHOICE_KEY] = digest


def viewed() -> str | None:
    return st.session_state.get(VIEWED_KEY)


def loaded() -> dict[str, Benchmark]:
    """This session's files still in the cache (the bound may have dropped the oldest; they are named in
    ``dropped()``)."""
    cache = parse_cache()
    found = {d: cache.get(d) for d in st.session_state.get(STORE_KEY, [])}
    return {d: b for d, b in found.items() if b is not None}


def dropped() -> int:
    """How many of this session's files the memory bound has dropped (to upload again if needed)."""
    cache = parse_cache()
    return sum(d not in cache for d in st.session_state.get(STORE_KEY, []))


def current() -> Loaded:
    """The benchmark to show: the chosen uploaded file, else the bundled sample."""
    choice = viewed()
    store = loaded()
    if choice in store:
        return Loaded(choice, store[choice], False)
    return sample()
