"""App frame: the cached knowledge base, the current language and the sidebar."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

import streamlit as st

from triage.knowledge.i18n import tr
from triage.knowledge.loader import KnowledgeBase, load_knowledge
from triage.knowledge.model import LANGS
from triage.safe_text import md_escape

LANG_KEY = "lang"
LANG_LABELS = {"en": "English", "zh": "中文"}
_ADOPTED = False  # whether this process has already handed its legacy first run to st.navigation


@st.cache_resource(show_spinner=False)
def knowledge() -> KnowledgeBase:
    """The knowledge base, loaded and validated once per server process."""
    return load_knowledge()


def lang() -> str:
    """Current language: the session's choice, first taken from ``?lang=`` (so links keep it), else English."""
    if st.session_state.get(LANG_KEY) not in LANGS:
        wanted = st.query_params.get(LANG_KEY)
        st.session_state[LANG_KEY] = wanted if wanted in LANGS else "en"
    return st.session_state[LANG_KEY]


def _lang_to_url() -> None:
    st.query_params[LANG_KEY] = st.session_state[LANG_KEY]


def t(key: str, **fmt: object) -> str:
    """The UI string in the session's language; text filled into it is Markdown-escaped (a file name, a URL,
    an error sentence, an id from the URL can never become a link, an image or emphasis)."""
    return tr(key, lang(), **{k: md_escape(v) if isinstance(v, str) else v for k, v in fmt.items()})


def _localize_builtin_text() -> None:
    """Streamlit's own uploader text ("200MB per file") has no translation; in Chinese, CSS swaps it."""
    if lang() != "zh":
        return
    limit = t("upload_limit", mb=st.get_option("server.maxUploadSize"))
    st.html(f"""<style>
[data-testid="stFileUploaderDropzoneInstructions"] * {{ font-size: 0 !important; }}
[data-testid="stFileUploaderDropzoneInstructions"] > *::after {{ content: "{limit}"; font-size: 0.875rem; }}
</style>""")


def sidebar() -> None:
    """Language switch and the decision tree's usage flow as a short guide."""
    lang()
    _localize_builtin_text()
    with st.sidebar:
        st.segmented_control(t("language"), options=list(LANGS), format_func=LANG_LABELS.__getitem__,
                             key=LANG_KEY, on_change=_lang_to_url, required=True)
        kb = knowledge()
        with st.expander(t("usage_flow"), expanded=False):
            for i, step in enumerate(kb.guidance.usage_flow, start=1):
                st.markdown(f"**{i}. {step.title.get(lang())}** — {step.detail.get(lang())}")
            st.caption(t("wrong_usages"))
            for wrong in kb.guidance.wrong_usages:
                st.markdown(f"✗ {wrong.get(lang())}")


def adopt_navigation() -> None:
    """Hand a legacy first run over to ``st.navigation``; call at the top of every page file.

    With a ``pages/`` folder beside app.py, Streamlit 1.67 serves the first request of a fresh server
    through its legacy multipage mode: a deep link (``/benchmark``) runs the page file alone, without
    app.py's navigation, sidebar or page config, and the server stays in that mode until app.py runs.
    Clearing the (internal, pinned-version) flag and rerunning lets app.py frame the same page. The
    flag is set once per server process, so one rerun per process is all a real server needs; AppTest
    resets it before every run, where a rerun each time would swallow button clicks.
    """
    global _ADOPTED
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        if not _ADOPTED:
            _ADOPTED = True
            st.rerun()


def labels_now(options: Iterable[Hashable], label: Callable[[Any], str]) -> Callable[[Any], str]:
    """A widget ``format_func`` whose labels are computed now, in this run's language.

    Streamlit may call a format_func again outside the script run (AppTest does when it re-serializes
    widgets); a lambda that calls ``lang()`` there finds no session and answers in English, so the
    label no longer matches the options the widget was drawn with.
    """
    table = {option: label(option) for option in options}
    return table.__getitem__
