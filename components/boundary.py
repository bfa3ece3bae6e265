"""One error boundary per page body (and per fragment): a visitor sees a short message, the log the detail.

Streamlit's own control flow (``st.rerun``, ``st.stop``, ``st.switch_page``) passes through untouched: it raises
BaseExceptions, which ``except Exception`` never catches (tests/test_streamlit_public.py holds Streamlit to it). The
detail goes to the server log under a short reference the message shows, redacted like every log record."""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from components.shell import t
from triage.service.display import install_log_redaction, md_escape
from triage.service.model import TriageError

LOG = logging.getLogger("inference_triage.pages")


@contextmanager
def error_boundary(where: str) -> Iterator[None]:
    """Run a page body (or a fragment); any failure becomes one message on the page, never a traceback."""
    install_log_redaction()
    try:
        yield
    except TriageError as exc:  # input a person can fix, that no component caught: its sentence, escaped
        st.error(md_escape(exc.line()), icon=":material/error:")
    except Exception:  # noqa: BLE001 - the boundary: everything else is logged and shown as one short line
        if os.environ.get("TRIAGE_DEBUG"):  # tests and developers see the failure itself
            raise
        ref = secrets.token_hex(4)
        LOG.exception("page %s failed (ref %s)", where, ref)
        st.error(t("page_error", ref=ref), icon=":material/error:")
