"""Benchmark files in the session: parse once per content hash, keep what loaded, report what did not."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import streamlit as st

from triage.errors import TriageError
from triage.knowledge.loader import DEFAULT_TREE_DIR
from triage.run import Benchmark
from triage.sources.files import load_benchmark

SAMPLE_PATH = DEFAULT_TREE_DIR / "sample" / "benchmark.csv"
SAMPLE_ID = "sample"
STORE_KEY = "bench_files"      # digest → Benchmark, every file that parsed in this session
SEEN_KEY = "bench_seen"        # uploader file id → digest, so a rerun does not hash again
CHOICE_KEY = "bench_choice"    # the file picker's widget key (Streamlit drops it when another page runs)
VIEWED_KEY = "bench_viewed"    # the digest being viewed: kept for the session, across pages
ERRORS_KEY = "bench_errors"    # uploader file id → (file name, message) for every file that did not parse


@dataclass(frozen=True)
class Loaded:
    digest: str
    bench: Benchmark
    is_sample: bool


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


@st.cache_resource(max_entries=16, show_spinner=False)
def parse(digest: str, name: str, _data: bytes) -> Benchmark:
    """Parsed once per key (content hash, or an upload's id) for the whole server; shared read-only."""
    t0 = time.perf_counter()
    bench = load_benchmark(_data, name)
    bench.parse_seconds = time.perf_counter() - t0
    return bench


@st.cache_resource(show_spinner=False)
def _sample_bench() -> Benchmark:
    return parse(SAMPLE_ID, SAMPLE_PATH.name, SAMPLE_PATH.read_bytes())


def sample() -> Loaded:
    return Loaded(SAMPLE_ID, _sample_bench(), True)


def ingest(files: list, status) -> tuple[list[str], list[str]]:
    """Parse newly uploaded files; good ones join the session store and the last becomes the one viewed,
    bad ones get a message. Returns (names loaded, names refused).

    A failed file never removes anything and never becomes the file viewed.
    """
    store: dict[str, Benchmark] = st.session_state.setdefault(STORE_KEY, {})
    seen: dict[str, str] = st.session_state.setdefault(SEEN_KEY, {})
    errors: dict[str, tuple[str, str]] = st.session_state.setdefault(ERRORS_KEY, {})
    good, bad = [], []
    for i, upload in enumerate(files, start=1):
        if upload.file_id in seen or upload.file_id in errors:
            continue
        data = upload.getvalue()
        digest = digest_of(data)
        status.update(label=f"{upload.name} ({len(data) / 1e6:.1f} MB) — {i}/{len(files)}")
        try:
            bench = parse(digest, upload.name, data)
        except TriageError as exc:
            errors[upload.file_id] = (upload.name, exc.line())
            bad.append(upload.name)
            continue
        seen[upload.file_id] = digest
        store[digest] = bench
        view(digest)
        good.append(upload.name)
        status.write(f"{upload.name}: {bench.format}, {len(bench.runs)} run(s), parsed in {bench.parse_seconds:.2f} s")
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
    return st.session_state.get(STORE_KEY, {})


def current() -> Loaded:
    """The benchmark to show: the chosen uploaded file, else the bundled sample."""
    choice = viewed()
    store = loaded()
    if choice in store:
        return Loaded(choice, store[choice], False)
    return sample()
