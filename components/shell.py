"""App frame: the cached knowledge base, the current language and the sidebar."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any

import streamlit as st

from components import session
from triage.service.display import md_escape
from triage.service.knowledge import LANGS, KnowledgeBase, active_tree_dir, load_knowledge, tr

LANG_KEY = session.LANG.name
LANG_LABELS = {"en": "English", "zh": "中文"}


def knowledge() -> KnowledgeBase:
    """The active tree's knowledge base (tree/, or the directory ``use_tree_dir`` chose), loaded and validated
    once per directory and server process."""
    return _knowledge(active_tree_dir())


@st.cache_resource(show_spinner=False)
def _knowledge(tree_dir: Path) -> KnowledgeBase:
    return load_knowledge(tree_dir)


def lang() -> str:
    """Current language: the session's choice, first taken from ``?lang=`` (so links keep it), else English."""
    current = session.LANG.get()
    if current not in LANGS:
        wanted = st.query_params.get(LANG_KEY)
        current = wanted if wanted in LANGS else "en"
        session.LANG.set(current)
    return current


def _lang_to_url() -> None:
    st.query_params[LANG_KEY] = lang()


def translated_choice(draw: Callable[..., Any], label: str, options: Sequence[Any], widget: session.Widget[Any],
                      option_label: Callable[[Any], str], **kwargs: Any) -> Any:
    """``draw`` (``st.selectbox``, ``st.multiselect``, ``st.segmented_control``, or a column's or the sidebar's)
    keyed ``widget``, each option labelled in this run's language by ``option_label``; the value it returns.

    Every keyed widget whose option labels are translated is drawn through here. Its key is its identity, so after
    a language switch Streamlit sends the new labels, but the browser's box keeps showing the chosen option's label
    as drawn before (Live's scenario still read "Queueing" in 中文, Log's filters "gain confirmed" and "all"; a
    click elsewhere then emptied the "all" box, whose English label matched no option) until the value is set
    again: drawn in another language than last time, the widget is seeded with its own value, the user's choice
    kept. A None option is drawn as ``session.NO_OPTION``: seeded None, a select box shows its placeholder.
    (The tree's jump box and Benchmark's file picker are set before every draw, so they always show their value.)"""
    shown = [session.NO_OPTION if option is None else option for option in options]
    if _drawn_in_another_language(widget):
        _seed_again(widget, shown)
    got = draw(label, shown, key=widget.name, **kwargs,
               format_func=labels_now(shown, lambda option: option_label(_option(option))))
    return [_option(v) for v in got] if isinstance(got, list) else _option(got)


def _seed_again(widget: session.Widget[Any], shown: list[Any]) -> None:
    """Set ``widget`` to its own value again (its None option as ``session.NO_OPTION``), if still offered."""
    current = widget.value()
    current = session.NO_OPTION if current is None else current
    if all(v in shown for v in (current if isinstance(current, list) else [current])):
        widget.seed(current)


def _option(value: Any) -> Any:
    return None if isinstance(value, str) and value == session.NO_OPTION else value


def _drawn_in_another_language(widget: session.Widget[Any]) -> bool:
    """True when ``widget`` was drawn in this session before, in another language than this run's."""
    drawn = session.LABELS_DRAWN_IN.setdefault(dict)
    before, drawn[widget.name] = drawn.get(widget.name), lang()
    return before is not None and before != lang() and widget.present()


def t(key: str, **fmt: object) -> str:
    """The UI string in the session's language; text filled into it is Markdown-escaped (a file name, a URL,
    an error sentence, an id from the URL can never become a link, an image or emphasis)."""
    return tr(key, lang(), **{k: md_escape(v) if isinstance(v, str) else v for k, v in fmt.items()})


def _localize_builtin_text() -> None:
    """Streamlit's own uploader text ("Upload", "200MB per file") has no translation; in Chinese, CSS swaps it.

    No theme option in .streamlit/config.toml nor any st.file_uploader parameter sets this text (Streamlit 1.67),
    so the CSS is keyed on Streamlit's data-testids, which are not a public API:
    tests/test_browser_uploader_zh.py fails when an upgrade renames them. The originals are hidden with
    ``display: none`` (not a zero font size) so that they leave the page's text,
    for screen readers and copy-paste too; the Chinese words come from ``::after`` content."""
    if lang() != "zh":
        return
    limit = t("upload_limit", mb=st.get_option("server.maxUploadSize"))
    button = t("upload_button")
    zone = '[data-testid="stFileUploaderDropzone"]'
    st.html(f"""<style>
{zone} [data-testid="stFileUploaderDropzoneInstructions"] > * {{ display: none !important; }}
{zone} [data-testid="stFileUploaderDropzoneInstructions"]::after {{ content: "{limit}"; font-size: 0.875rem; }}
{zone} button [data-testid="stMarkdownContainer"] > p {{ display: none !important; }}
{zone} button [data-testid="stMarkdownContainer"]::after {{ content: "{button}"; }}
</style>""")


def sidebar() -> None:
    """Language switch and the decision tree's usage flow as a short guide."""
    lang()
    _localize_builtin_text()
    with st.sidebar:
        st.segmented_control(t("language"), options=list(LANGS), format_func=LANG_LABELS.__getitem__,
                             key=LANG_KEY, on_change=_lang_to_url, required=True)
        kb = knowledge()
        guide = st.expander(t("usage_flow"), key=session.USAGE_FLOW.name, on_change="rerun")
        if not guide.open:  # lazy: the closed guide costs every page's first paint nothing
            return
        with guide:
            for i, step in enumerate(kb.guidance.usage_flow, start=1):
                st.markdown(f"**{i}. {step.title.get(lang())}** — {step.detail.get(lang())}")
            st.caption(t("wrong_usages"))
            for wrong in kb.guidance.wrong_usages:
                st.markdown(f"✗ {wrong.get(lang())}")


def labels_now(options: Iterable[Hashable], label: Callable[[Any], str]) -> Callable[[Any], str]:
    """A widget ``format_func`` whose labels are computed now, in this run's language.

    Streamlit may call a format_func again outside the script run (AppTest does when it re-serializes
    widgets); a lambda that calls ``lang()`` there finds no session and answers in English, so the
    label no longer matches the options the widget was drawn with.
    """
    table = {option: label(option) for option in options}
    return table.__getitem__
