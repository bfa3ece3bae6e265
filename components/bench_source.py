"""Benchmark files in the session: the server's bounded parse cache, this session's uploads
(triage.service.uploads); an upload's bytes are released as soon as it is parsed (components.upload_store)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import streamlit as st

from components import session
from components.upload_store import release, uploader_ids
from triage.service.model import Benchmark
from triage.service.uploads import SAMPLE_ID, ParseCache, Upload, Uploads, parse_cache_from_env, sample_benchmark

__all__ = ["SAMPLE_ID", "Loaded", "adopt", "current", "dropped", "fresh", "ingest", "loaded", "parse_cache", "picked",
           "refused", "sample", "sync_picker", "view", "viewed"]


@dataclass(frozen=True)
class Loaded:
    digest: str
    bench: Benchmark
    is_sample: bool


@st.cache_resource(show_spinner=False)
def parse_cache() -> ParseCache:
    """One cache for the server process, bounded by TRIAGE_PARSE_CACHE_MB (default 512 MB of parsed tables)."""
    return parse_cache_from_env(os.environ)


@st.cache_resource(show_spinner=False)
def _sample_bench() -> Benchmark:
    return sample_benchmark()


def sample() -> Loaded:
    return Loaded(SAMPLE_ID, _sample_bench(), True)


def _uploads() -> Uploads:
    return session.BENCH_UPLOADS.setdefault(Uploads)


def fresh(files: Sequence[Upload]) -> list[Upload]:
    return _uploads().fresh(files)


def ingest(files: Sequence[Upload], status, uploader: session.Widget[Any]) -> tuple[list[str], list[str]]:
    """Parse newly uploaded files of ``uploader``: (names loaded, names refused); the last good one becomes
    the file viewed. Each file's bytes are released once it is parsed or refused."""
    uploads = _uploads()
    result = uploads.ingest(files, parse_cache(), progress=lambda text: status.update(label=text),
                            loaded=status.write, release=partial(release, uploader=uploader))
    if uploads.viewed is not None:
        view(uploads.viewed)
    return result


def adopt(digest: str) -> bool:
    """Reopen a file this server parsed earlier by its digest (a reload's ``?file=``); False when it is gone."""
    if _uploads().adopt(digest, parse_cache()):
        view(digest)
        return True
    return False


def refused(uploader: session.Widget[Any]) -> list[tuple[str, str]]:
    """(name, message) of the files now in ``uploader`` that did not parse (their bytes already released)."""
    return _uploads().refused(uploader_ids(uploader))


def view(digest: str) -> None:
    """Make ``digest`` (or the sample) the file viewed, on every page, for the rest of the session."""
    _uploads().viewed = digest
    session.BENCH_CHOICE.set(digest)


def viewed() -> str | None:
    return _uploads().viewed


def sync_picker(options: list[str]) -> None:
    """Before the file picker is drawn: it shows the file viewed (Streamlit drops its key on other pages)."""
    shown = viewed()
    session.BENCH_CHOICE.set(shown if shown in options else options[-1])


def picked() -> None:
    """The file picker's on_change: the file picked becomes the file viewed."""
    choice = session.BENCH_CHOICE.get()
    if choice is not None:
        view(choice)


def loaded() -> dict[str, Benchmark]:
    """This session's files still in the cache (the bound may have dropped the oldest; see ``dropped()``)."""
    return _uploads().loaded(parse_cache())


def dropped() -> int:
    """How many of this session's files the memory bound has dropped (to upload again if needed)."""
    return _uploads().dropped(parse_cache())


def current() -> Loaded:
    """The benchmark to show: the chosen uploaded file, else the bundled sample."""
    choice = viewed()
    store = loaded()
    if choice in store:
        return Loaded(choice, store[choice], False)
    return sample()
