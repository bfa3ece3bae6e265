"""Every st.session_state key the app writes: its name, its type and the one module that writes it.

Components touch ``st.session_state`` only through this module (tests/test_session_keys.py checks it):
a key is written (``set``/``setdefault``/``clear``/``pop``) only by its owner; others may ``get`` it. Keys that
are only widget values (``key=`` of a widget, written by Streamlit) are read with ``widget_value``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import streamlit as st

if TYPE_CHECKING:
    from datetime import datetime

    from triage.diagnosis.rules import Diagnosis
    from triage.report.retro import RetroState
    from triage.service.live import LiveResult
    from triage.service.uploads import SingleUploads, Uploads
    from triage.service.windows import LiveFeeds

T = TypeVar("T")


@dataclass(frozen=True)
class StateKey(Generic[T]):
    """One session key: ``name`` in st.session_state, written only by the module ``owner``."""

    name: str
    owner: str
    doc: str
    widget: bool = False  # also the ``key=`` of a widget (Streamlit writes it too)

    def get(self) -> T | None:
        return cast("T | None", st.session_state.get(self.name))

    def present(self) -> bool:
        return self.name in st.session_state

    def set(self, value: T) -> None:
        st.session_state[self.name] = value

    def setdefault(self, make: Callable[[], T]) -> T:
        if self.name not in st.session_state:
            st.session_state[self.name] = make()
        return cast(T, st.session_state[self.name])

    def clear(self) -> None:
        st.session_state.pop(self.name, None)

    def pop(self) -> T | None:
        """The value, removed (a one-shot request)."""
        return cast("T | None", st.session_state.pop(self.name, None))


LANG: StateKey[str] = StateKey("lang", "components.shell", "the UI language (en, zh)", widget=True)
JUMP: StateKey[str] = StateKey("jump", "components.node_panel", "the node picked in the jump box", widget=True)
TREE_SCROLL: StateKey[str] = StateKey(
    "tree_scroll_to", "components.tree_chart", "node id the next draw of the tree scrolls into view (one-shot)")
FINDINGS: StateKey[list[str]] = StateKey(
    "findings", "components.findings", "cause ids of the source diagnosed last (the tree lights them)")
DIAGNOSIS: StateKey[tuple[str, Diagnosis]] = StateKey(
    "diagnosis", "components.findings", "(source label, Diagnosis) of the source diagnosed last (the retro walks it)")
BENCH_UPLOADS: StateKey[Uploads] = StateKey(
    "bench_uploads", "components.bench_source", "benchmark files that parsed in this session, by content hash")
SINGLE_UPLOADS: StateKey[SingleUploads] = StateKey(
    "single_uploads", "components.upload_store",
    "Verify's and the Live page's single uploaders: upload id, name and digests of each file parsed, no bytes")
BENCH_CHOICE: StateKey[str] = StateKey(
    "bench_choice", "components.bench_source", "content hash of the benchmark file being viewed", widget=True)
LIVE_FEEDS: StateKey[LiveFeeds] = StateKey(
    "live_feeds", "components.live_source", "the demo simulators and scrape ring buffers of this session")
LIVE_LINK_APPLIED: StateKey[str] = StateKey(
    "live_link_applied", "components.live_picker", "the deep link (alert runbook URL, Fleet row) applied last")
LIVE_LINK_LABELS: StateKey[list[str]] = StateKey(
    "live_link_labels", "components.live_picker", "labels a deep link filters on beyond the usual four")
LIVE_BY_SOURCE: StateKey[dict[str, LiveResult]] = StateKey(
    "live_by_source", "components.live_view", "source key → its last good refresh (shown stale when one fails)")
LIVE_CACHE_CONFIG: StateKey[dict[str, str]] = StateKey(
    "live_cache_config", "components.live_view",
    "cache_config_info labels of the live engine refreshed last (the Memory page prefills from them)")
FLEET_LAST: StateKey[tuple[list[dict[str, object]], datetime]] = StateKey(
    "fleet_last", "components.fleet_view", "(table records, time) of the last good Fleet refresh")
VERIFY_VERDICT: StateKey[str] = StateKey(
    "verify_result", "components.verify_view", "overall verdict of the last comparison (the retro's verify step)")
MEMORY_MODEL_SEEN: StateKey[str] = StateKey(
    "_mem_model_seen", "components.memory_view", "the model the Memory inputs were last seeded for")
RETRO: StateKey[RetroState] = StateKey("retro", "components.retro_view", "the retro walk in progress")
RETRO_IMPORTED: StateKey[str] = StateKey(
    "retro_imported", "components.retro_view", "upload id of the report imported last (imported once)")

KEYS: tuple[StateKey[Any], ...] = (
    LANG, JUMP, TREE_SCROLL, FINDINGS, DIAGNOSIS, BENCH_UPLOADS, SINGLE_UPLOADS, BENCH_CHOICE, LIVE_FEEDS,
    LIVE_LINK_APPLIED, LIVE_LINK_LABELS, LIVE_BY_SOURCE, LIVE_CACHE_CONFIG, FLEET_LAST, VERIFY_VERDICT,
    MEMORY_MODEL_SEEN, RETRO, RETRO_IMPORTED,
)


def widget_value(key: str) -> Any:
    """The current value of the widget drawn with ``key=key`` (None before it is drawn)."""
    return st.session_state.get(key)


def has_widget(key: str) -> bool:
    """Whether the widget ``key`` has a value in this session (drawn or seeded)."""
    return key in st.session_state


def seed_widget(key: str, value: Any) -> None:
    """Give the widget ``key`` its value before it is drawn in this run (its owner's module only)."""
    st.session_state[key] = value


def forget_widgets(prefixes: Iterable[str]) -> None:
    """Drop the state of widgets whose key starts with one of ``prefixes`` (they redraw from their defaults)."""
    starts = tuple(prefixes)
    for key in [k for k in st.session_state if str(k).startswith(starts)]:
        del st.session_state[key]
