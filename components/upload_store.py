"""Uploaded files past the parse: their bytes are released from the server, the session keeps digests only.

Every uploader of the app goes through here: the Benchmark page's (``bench_source``), Verify's two sides and the
Live page's two /metrics snapshots (``take``). The parses live in caches bounded by TRIAGE_PARSE_CACHE_MB.
"""

from __future__ import annotations

import io
import os
from functools import partial
from typing import Any, TypeVar

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from components import session
from triage.service.uploads import BoundedCache, Held, Refused, SingleUploads, Snapshot, Upload, snapshot_cache_from_env

T = TypeVar("T")


@st.cache_resource(show_spinner=False)
def snapshot_cache() -> BoundedCache[Snapshot]:
    """One cache of parsed /metrics snapshots for the server process (a quarter of TRIAGE_PARSE_CACHE_MB)."""
    return snapshot_cache_from_env(os.environ)


def release(upload: Upload, uploader: session.Widget[Any]) -> None:
    """Drop the bytes of an upload of ``uploader``: from Streamlit's upload store, from the UploadedFile the
    script got, and from the one the widget state keeps (Streamlit hands the script a deep copy).

    The uploader keeps showing the file (the browser holds its name and upload id); its bytes are gone.

    Streamlit 1.67 has no public call to drop an upload's bytes from the server: they stay for the whole session
    (tests/test_streamlit_public.py fails when that changes). The browser's remove button drops them through the
    upload endpoint, and ``st.chat_input`` through the in-memory manager's ``remove_file``, which this calls too;
    with another manager only the script's copies are emptied."""
    ctx = get_script_run_ctx()
    # remove_file is on Streamlit's in-memory manager, not on the UploadedFileManager protocol
    remove = getattr(getattr(ctx, "uploaded_file_mgr", None), "remove_file", None)
    if ctx is not None and callable(remove):
        remove(ctx.session_id, upload.file_id)
    value: Any = uploader.value()
    kept = [f for f in (value if isinstance(value, list) else [value]) if getattr(f, "file_id", None) == upload.file_id]
    for f in (upload, *kept):
        _empty(f)


def _empty(upload: object) -> None:
    """Empty an UploadedFile (a BytesIO over the upload's bytes) in place; its name, id and size stay."""
    if isinstance(upload, io.BytesIO):
        try:
            upload.seek(0)
            upload.truncate(0)
        except ValueError:  # already closed
            pass


def uploader_ids(uploader: session.Widget[Any]) -> set[str]:
    """The upload ids ``uploader`` shows, whether or not the server still has their bytes."""
    value: Any = uploader.value()
    files = value if isinstance(value, list) else [value]
    return {f.file_id for f in files if getattr(f, "file_id", None)}


def take(uploader: session.Widget[Any], upload: Upload | None, cache: BoundedCache[T]
         ) -> tuple[Held, T] | Refused | None:
    """The file of single ``uploader`` (drawn just before): None when empty, (held, parse), or a Refused.

    Parsed once through ``cache``; then its bytes are released and the session keeps a ``Held``."""
    shown = uploader_ids(uploader) if upload is None else {upload.file_id}
    file_id = next(iter(shown), None)
    return session.SINGLE_UPLOADS.setdefault(SingleUploads).take(uploader.name, file_id, upload, cache,
                                                                  partial(release, uploader=uploader))
