"""The one workaround for Streamlit's legacy ``pages/`` mode (pinned to STREAMLIT_VERSION; see adopt_navigation).

tests/test_navigation_workaround.py fails, naming the version, when Streamlit changes what this relies on.
"""

from __future__ import annotations

import streamlit as st

STREAMLIT_VERSION = "1.67.0"  # the version whose internals adopt_navigation was written against
_ADOPTED = False  # whether this process has already handed its legacy first run to st.navigation


def adopt_navigation() -> None:
    """Hand a legacy first run over to ``st.navigation``; call at the top of every page file.

    With a ``pages/`` folder beside app.py, Streamlit 1.67 serves the first request of a fresh server
    through its legacy multipage mode: a deep link (``/benchmark``) runs the page file alone, without
    app.py's navigation, sidebar or page config, and the server stays in that mode until app.py runs.
    Clearing the (internal, pinned-version) flag ``PagesManager.uses_pages_directory`` and rerunning lets
    app.py frame the same page. The flag is set once per server process, so one rerun per process is all
    a real server needs; AppTest resets it before every run, where a rerun each time would swallow clicks.
    """
    global _ADOPTED
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        if not _ADOPTED:
            _ADOPTED = True
            st.rerun()
