"""The one workaround for Streamlit's legacy ``pages/`` mode (pinned to STREAMLIT_VERSION; see adopt_navigation).

Why it is still needed (checked against Streamlit 1.67's source): ``PagesManager`` sets the class flag
``uses_pages_directory`` once per server process from whether a folder named ``pages/`` exists beside the entry
script, and while it is set the script runner runs ``_mpa_v1`` (legacy multipage mode) instead of the entry. No
public option or config turns this off; ``st.navigation`` clears the flag only once the entry has run. So a deep
link as a fresh server's first request runs the page file alone. The supported way out is to keep the page modules
in a folder not named ``pages/`` (then nothing here is needed); it is not taken yet because the tests, bench and
README address the pages by their ``pages/*.py`` paths.

tests/test_navigation_workaround.py fails, naming the version, when Streamlit changes what this relies on, and
``test_a_pages_folder_still_makes_the_first_run_skip_the_entry`` fails when Streamlit fixes the behaviour (then
delete this module and its calls).
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
