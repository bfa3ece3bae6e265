"""Benchmark files in the session: the server-wide parse cache and this session's uploads (triage.service.uploads)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st

from components import session
from triage.run import Benchmark
from triage.service.uploads import SAMPLE_ID, Upload, Uploads, open_benchmark, sample_benchmark

__all__ = ["SAMPLE_ID", "Loaded", "current", "errors", "fresh", "ingest", "loaded", "parse", "sample"]


@dataclass(frozen=True)
class Loaded:
    digest: str
    bench: Benchmark
    is_sample: bool


@st.cache_resource(max_entries=16, show_spinner=False)
def parse(key: str, name: str, _data: bytes) -> Benchmark:
    """Parsed once per key (content hash, or an upload's id) for the whole server; shared read-only."""
    return open_benchmark(_data, name)


@st.cache_resource(show_spinner=False)
def _sample_bench() -> Benchmark:
    return sample_benchmark(parse)


def sample() -> Loaded:
    return Loaded(SAMPLE_ID, _sample_bench(), True)


def _uploads() -> Uploads:
    return session.BENCH_UPLOADS.setdefault(Uploads)


def fresh(files: Sequence[Upload]) -> list[Upload]:
    return _uploads().fresh(files)


def ingest(files: Sequence[Upload], status) -> None:
    """Parse newly uploaded files into the session; the last good one becomes the file viewed."""
    last = _uploads().ingest(files, parse, progress=lambda text: status.update(label=text), loaded=status.write)
    if last is not None:
        session.BENCH_CHOICE.set(last)


def errors() -> dict[str, str]:
    """File name → why it did not load, from the latest upload."""
    return dict(_uploads().errors)


def loaded() -> dict[str, Benchmark]:
    return dict(_uploads().files)


def current() -> Loaded:
    """The benchmark to show: the chosen uploaded file, else the bundled sample."""
    choice = session.BENCH_CHOICE.get()
    store = _uploads().files
    if choice in store:
        return Loaded(choice, store[choice], False)
    return sample()
