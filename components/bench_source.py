"""Benchmark files in the session: the server's bounded parse cache, this session's uploads
(triage.service.uploads), and releasing an upload's bytes as soon as it is parsed."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from components import session
from triage.run import Benchmark
from triage.service.uploads import SAMPLE_ID, ParseCache, Upload, Uploads, parse_cache_from_env, sample_benchmark

__all__ = ["SAMPLE_ID", "Loaded", "current", "dropped", "fresh", "ingest", "loaded", "parse", "picked", "refused",
           "sample", "sync_picker", "view", "viewed"]


@dataclass(frozen=True)
class Loaded:
    digest: str
    bench: Benchmark
    is_sample: bool


@st.cache_resource(show_spinner=False)
def parse_cache() -> ParseCache:
    """One cache for the server process, bounded by TRIAGE_PARSE_CACHE_MB (default 512 MB of parsed tables)."""
    return parse_cache_from_env(os.environ)


def parse(name: str, data: bytes) -> tuple[str, Benchmark]:
    """(digest, parsed benchmark) of an upload, through the bounded cache; TriageError if it does not parse."""
    return parse_cache().parse(data, name)


def release(upload: Upload) -> None:
    """Drop an upload's bytes from Streamlit's upload store: the parse is all the page needs from now on.

    The uploader keeps showing the file (the browser holds its name); its bytes are gone from the server."""
    ctx = get_script_run_ctx()
    # remove_file is on Streamlit's in-memory manager, not on the UploadedFileManager protocol
    remove = getattr(getattr(ctx, "uploaded_file_mgr", None), "remove_file", None)
    if ctx is not None and callable(remove):
        remove(ctx.session_id, upload.file_id)


@st.cache_resource(show_spinner=False)
def _sample_bench() -> Benchmark:
    return sample_benchmark()


def sample() -> Loaded:
    return Loaded(SAMPLE_ID, _sample_bench(), True)


def _uploads() -> Uploads:
    return session.BENCH_UPLOADS.setdefault(Uploads)


def fresh(files: Sequence[Upload]) -> list[Upload]:
    return _uploads().fresh(files)


def ingest(files: Sequence[Upload], status) -> tuple[list[str], list[str]]:
    """Parse newly uploaded files: (names loaded, names refused); the last good one becomes the file viewed."""
    uploads = _uploads()
    result = uploads.ingest(files, parse_cache(), progress=lambda text: status.update(label=text),
                            loaded=status.write, release=release)
    if uploads.viewed is not None:
        view(uploads.viewed)
    return result


def refused(file_ids: set[str]) -> list[tuple[str, str]]:
    """(name, message) of the files now in the uploader that did not parse."""
    return _uploads().refused(file_ids)


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
