"""Every st.session_state key the app writes: its name, its type and the one module that writes it.

Components touch ``st.session_state`` only through this module (tests/test_layers.py checks it):
a key is written (``set``/``setdefault``/``clear``/``pop``) only by its owner; others may ``get`` it.

Every widget's ``key=`` is declared here too, with the type of its value and the module that draws it: a
``Widget`` (one widget), a ``WidgetFamily`` (one widget per item: ``match:instance``, ``retro_chk:step:0``) or
an ``EndPicker`` (the date and time of an absolute end). Pages and components pass ``KEY.name`` /
``FAMILY.key(item)``; only the drawing module seeds a widget (``seed``); anyone may read ``value()``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import streamlit as st

if TYPE_CHECKING:
    from datetime import date, datetime, time

    from triage.service.fleet import FleetTable
    from triage.service.live import LiveResult
    from triage.service.model import Diagnosis
    from triage.service.retro import RetroState
    from triage.service.uploads import Held, SingleUploads, Uploads
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
LABELS_DRAWN_IN: StateKey[dict[str, str]] = StateKey(
    "labels_drawn_in", "components.shell", "widget key -> the language its option labels were last drawn in")
JUMP: StateKey[str] = StateKey("jump", "components.node_panel", "the node picked in the jump box", widget=True)
TREE_SCROLL: StateKey[str] = StateKey(
    "tree_scroll_to", "components.tree_chart", "node id the next draw of the tree scrolls into view (one-shot)")
FINDINGS: StateKey[list[str]] = StateKey(
    "findings", "components.findings", "cause ids of the source diagnosed last (the tree lights them)")
DIAGNOSIS: StateKey[tuple[str, Diagnosis]] = StateKey(
    "diagnosis", "components.findings", "(source label, Diagnosis) of the source diagnosed last (the retro walks it)")
DIAGNOSIS_UNFINISHED: StateKey[str] = StateKey(
    "diagnosis_unfinished", "components.findings",
    "ui key of the page (nav_benchmark, nav_live) whose run began diagnosing what it shows and has not finished: "
    "until it does, no page shows the session's diagnosis (it may be the replaced data's)")
DIAGNOSIS_ENGINE: StateKey[str] = StateKey(
    "diagnosis_engine", "components.findings", "engine id (vllm, sglang, tgi) of the source diagnosed last, when known")
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
LIVE_CHOICE: StateKey[dict[str, Any]] = StateKey(
    "live_choice", "components.live_picker",
    "the Live page's picker values as last drawn (source, URL, window, scenario, profile, filters): a page switch "
    "drops the widgets' state, this brings them back; the session's only, never the URL's (a typed URL may hold "
    "credentials)")
LIVE_SNAPSHOTS: StateKey[tuple[Held, Held]] = StateKey(
    "live_snapshots", "components.live_picker",
    "the two /metrics snapshots the Live page diagnosed last (digests, no bytes): a page switch empties the "
    "uploaders, the pair stays in use until other files are uploaded or it is put away")
REFRESH_KEPT: StateKey[dict[str, int]] = StateKey(
    "refresh_kept", "components.refresh_picker",
    "each page's refresh interval by widget key, kept across a page switch")
LIVE_BY_SOURCE: StateKey[dict[str, LiveResult]] = StateKey(
    "live_by_source", "components.live_view", "source key → its last good refresh (shown stale when one fails)")
LIVE_CACHE_CONFIG: StateKey[dict[str, str]] = StateKey(
    "live_cache_config", "components.live_view",
    "cache_config_info labels of the live engine refreshed last (the Memory page prefills from them)")
FLEET_LAST: StateKey[tuple[FleetTable, datetime]] = StateKey(
    "fleet_last", "components.fleet_view", "(table and how it was read, time) of the last good Fleet refresh")
VERIFY_VERDICT: StateKey[str] = StateKey(
    "verify_result", "components.verify_view", "overall verdict of the last comparison (the retro's verify step)")
MEMORY_MODEL_SEEN: StateKey[str] = StateKey(
    "_mem_model_seen", "components.memory_view", "the model the Memory inputs were last seeded for")
PASTED_TEXTS: StateKey[dict[str, str]] = StateKey(
    "pasted_texts", "components.paste_view",
    "each paste area's text by its widget key: a page switch drops the widget's state, this brings it back")
LOG_KEPT: StateKey[dict[str, Any]] = StateKey(
    "log_kept", "components.log_view",
    "the Log page's filters and page number as last drawn: a page switch drops the widgets' state, this brings "
    "them back")
RETRO: StateKey[RetroState] = StateKey("retro", "components.retro_view", "the retro walk in progress")
RETRO_IMPORTED: StateKey[str] = StateKey(
    "retro_imported", "components.retro_view", "upload id of the report imported last (imported once)")

KEYS: tuple[StateKey[Any], ...] = (
    LANG, LABELS_DRAWN_IN, JUMP, TREE_SCROLL, FINDINGS, DIAGNOSIS, DIAGNOSIS_UNFINISHED, DIAGNOSIS_ENGINE,
    BENCH_UPLOADS, SINGLE_UPLOADS, BENCH_CHOICE, LIVE_FEEDS,
    LIVE_LINK_APPLIED, LIVE_LINK_LABELS, LIVE_CHOICE, LIVE_SNAPSHOTS, REFRESH_KEPT, LIVE_BY_SOURCE, LIVE_CACHE_CONFIG,
    FLEET_LAST, VERIFY_VERDICT,
    MEMORY_MODEL_SEEN, PASTED_TEXTS, LOG_KEPT, RETRO, RETRO_IMPORTED,
)


# ---------------------------------------------------------------- widget keys


# A choice widget's None option ("all", "none") as stored in its state (components.shell.translated_choice draws it
# so): a select box seeded None shows its placeholder, not the option's label. ``Widget.value()`` reads it as None.
NO_OPTION = "\u2205"


@dataclass(frozen=True)
class Widget(Generic[T]):
    """The ``key=`` of one widget: Streamlit writes its value; only ``owner`` (the module drawing it) seeds it."""

    name: str
    owner: str
    doc: str

    def value(self) -> T | None:
        """The widget's current value (None before it is drawn or seeded, or when its None option is chosen)."""
        value = st.session_state.get(self.name)
        return None if isinstance(value, str) and value == NO_OPTION else cast("T | None", value)

    def present(self) -> bool:
        return self.name in st.session_state

    def seed(self, value: T) -> None:
        """Give the widget its value before it is drawn in this run."""
        st.session_state[self.name] = value


@dataclass(frozen=True)
class WidgetFamily(Generic[T]):
    """One widget per item, keyed ``prefix`` + the item's parts joined by ':' (``key("ttft.queueing")``)."""

    prefix: str
    owner: str
    doc: str

    def key(self, *parts: object) -> str:
        return self.prefix + ":".join(str(p) for p in parts)

    def value(self, *parts: object) -> T | None:
        return cast("T | None", st.session_state.get(self.key(*parts)))

    def seed(self, value: T, *parts: object) -> None:
        st.session_state[self.key(*parts)] = value


@dataclass(frozen=True)
class EndPicker:
    """The widgets of one absolute end time (drawn by components.live_picker): a toggle, a date, a time of day."""

    absolute: Widget[bool]
    day: Widget[date]
    at: Widget[time]


def _end_picker(prefix: str, doc: str) -> EndPicker:
    owner = "components.live_picker"
    return EndPicker(Widget(f"{prefix}_absolute", owner, f"{doc}: at a chosen time (else now)"),
                     Widget(f"{prefix}_end_date", owner, f"{doc}: end date (UTC)"),
                     Widget(f"{prefix}_end_time", owner, f"{doc}: end time of day (UTC)"))


def forget(*widgets: Widget[Any] | WidgetFamily[Any]) -> None:
    """Drop the state of these widgets (every member of a family): they redraw from their defaults."""
    names = {w.name for w in widgets if isinstance(w, Widget)}
    prefixes = tuple(w.prefix for w in widgets if isinstance(w, WidgetFamily))
    for key in [k for k in st.session_state if k in names or (prefixes and str(k).startswith(prefixes))]:
        del st.session_state[key]


_SHELL, _NODE, _TREE, _EVIDENCE = "components.shell", "components.node_panel", "components.tree_chart", \
    "components.evidence"
_LIVE_PICKER, _LIVE_VIEW, _RETRO, _LOG = "components.live_picker", "components.live_view", \
    "components.retro_view", "components.log_view"
_VERIFY, _TECH, _SLO, _FLEET = "components.verify_view", "components.technique_view", "components.slo_picker", \
    "components.fleet_view"
_BENCH, _MEM = "components.bench_view", "components.memory_view"

# the frame
USAGE_FLOW: Widget[bool] = Widget("usage_flow", _SHELL, "the sidebar's usage-flow expander is open")
CHART_WARMUP: Widget[Any] = Widget(
    "chart_warmup", "components.chart_code", "the hidden empty chart that starts loading the chart code")

# the tree, the node panel, the findings
TREE_CHART: Widget[Any] = Widget("tree", _TREE, "the tree chart's point selection (a click picks a node)")
GOTO: WidgetFamily[bool] = WidgetFamily("goto:", _NODE, "button opening a node, per node id")
SHOW_CAUSE: WidgetFamily[bool] = WidgetFamily("select:", _EVIDENCE, "button showing a finding's cause, per cause id")
VERDICT: Widget[Any] = Widget(
    "verdict", "components.verdict", "the verdict block at the top of Live, Benchmark and Diagnose (a keyed container)")
NODE_DETAILS: Widget[Any] = Widget(
    "node_details", _EVIDENCE, "the selected node's panel above the tree beside findings (a keyed container)")
SHOW_NOTE_CAUSE: WidgetFamily[bool] = WidgetFamily(
    "select-note:", _EVIDENCE, "button showing a noted cause in the tree, per cause id")
TECH_CHECK: WidgetFamily[bool] = WidgetFamily(
    "check:", _TECH, "a technique's checklist box, per (technique id, line)")
TECH_KNOBS: Widget[Any] = Widget("tech_knobs", _TECH, "a technique's knob tables (their CSS fits them to the page)")

# the Live page
LIVE_REFRESH: Widget[int] = Widget("live_refresh", "components.refresh_picker", "seconds between Live refreshes")
LIVE_KIND: Widget[str] = Widget("live_kind", _LIVE_PICKER, "the Live source: demo, scrape, snapshots, prometheus")
LIVE_RANGE: Widget[str] = Widget("live_range", _LIVE_PICKER, "the time range: 15m, 1h, 6h or custom")
LIVE_CUSTOM_MIN: Widget[float] = Widget("live_custom_min", _LIVE_PICKER, "minutes of a custom range")
LIVE_CUSTOM_END_DATE: Widget[date] = Widget("live_custom_end_date", _LIVE_PICKER, "end date of a custom range (UTC)")
LIVE_CUSTOM_END_TIME: Widget[time] = Widget("live_custom_end_time", _LIVE_PICKER, "end time of a custom range (UTC)")
LIVE_SCENARIO: Widget[str] = Widget("live_scenario", _LIVE_PICKER, "the demo simulator's scenario id")
LIVE_URL: Widget[str] = Widget("live_url", _LIVE_PICKER, "the /metrics URL polled")
SNAP_BEFORE: Widget[Any] = Widget("snap_before", _LIVE_PICKER, "the earlier /metrics snapshot (an UploadedFile)")
SNAP_AFTER: Widget[Any] = Widget("snap_after", _LIVE_PICKER, "the later /metrics snapshot (an UploadedFile)")
SNAP_FORGET: Widget[bool] = Widget("snap_forget", _LIVE_PICKER,
                                   "button putting away the snapshot pair kept from before a page switch")
SNAP_INTERVAL: Widget[float] = Widget("snap_interval", _LIVE_PICKER, "seconds between the two snapshots")
MATCH: WidgetFamily[str] = WidgetFamily("match:", _LIVE_PICKER, "a label filter of the Prometheus source, per label")
PROM_PROFILE: Widget[str] = Widget("prom_profile", _LIVE_PICKER, "the Prometheus profile name")
PROM_BASELINE: Widget[float | str | None] = Widget(
    "prom_baseline", _LIVE_PICKER, "baseline offset in hours (24, 168), 'chosen' or None")
PROM_BASE_END = _end_picker("prom_base", "the chosen baseline's end")
LIVE_PANEL: WidgetFamily[Any] = WidgetFamily("panel:", _LIVE_VIEW, "a Live panel chart, per panel id")
LIVE_PANELS: Widget[Any] = Widget(
    "live_panels", _LIVE_VIEW, "the row of Live panels (its CSS wraps a panel narrower than 260 px to the next line)")
LIVE_GROUP: Widget[str] = Widget(
    "live_group", _LIVE_VIEW, "the label of the Live panel group (tab) open; only its panels are drawn")
LIVE_ALL_DELTAS: Widget[bool] = Widget("live_all_deltas", _LIVE_VIEW, "the expander of every signal's delta is open")

# the Fleet page
FLEET_REFRESH: Widget[int] = Widget("fleet_refresh", "components.refresh_picker", "seconds between Fleet refreshes")
FLEET_WINDOW: Widget[str] = Widget("fleet_window", _FLEET, "the Fleet window: 5m, 15m, 1h, 6h")
FLEET_BY: Widget[str] = Widget("fleet_by", _FLEET, "labels the fleet is grouped by, comma-separated")
FLEET_FILTER: Widget[str] = Widget("fleet_filter", _FLEET, "free-text row filter (label=value, cause id)")
FLEET_SYMPTOM_FILTER: Widget[list[str]] = Widget("fleet_symptom_filter", _FLEET, "symptoms a row must show")
FLEET_TABLE: Widget[Any] = Widget("fleet_table", _FLEET, "the fleet table's row selection")
FLEET_END = _end_picker("fleet", "the Fleet window's end")

# the Benchmark page
BENCH_UPLOAD: Widget[Any] = Widget("bench_upload", _BENCH, "the benchmark files uploaded (UploadedFiles)")
BENCH_RUN: WidgetFamily[int] = WidgetFamily("run:", _BENCH, "the run picked in a file, per file digest")
BENCH_TAB: Widget[str] = Widget("bench_tab", _BENCH, "the chart tab open (only its charts are drawn)")
BENCH_PASTE: Widget[str] = Widget("bench_paste", "components.paste_view",
                                  "text pasted instead of a file (a server log, a console summary, a /metrics scrape)")
LIVE_PASTE: Widget[str] = Widget("live_paste", "components.paste_view",
                                 "text pasted on the Live page's snapshot source (a scrape, a server log, a summary)")
PASTE_SERIES: Widget[Any] = Widget(
    "paste_series", "components.paste_view", "the row of a pasted log's charts (its CSS wraps one under 260 px)")

# the Verify page
VERIFY_MODE: Widget[str] = Widget("verify_mode", _VERIFY, "compare two files or two Prometheus windows")
VERIFY_BASE: Widget[Any] = Widget("verify_base", _VERIFY, "the baseline file (an UploadedFile)")
VERIFY_CAND: Widget[Any] = Widget("verify_cand", _VERIFY, "the candidate file (an UploadedFile)")
VERIFY_BASE_RUN: Widget[int] = Widget("verify_base_run", _VERIFY, "the run picked in the baseline file")
VERIFY_CAND_RUN: Widget[int] = Widget("verify_cand_run", _VERIFY, "the run picked in the candidate file")
VERIFY_WINDOW: Widget[str] = Widget("verify_window", _VERIFY, "length of the two compared Prometheus windows")
VERIFY_BASE_END = _end_picker("verify_base_end", "the baseline window's end")
VERIFY_CAND_END = _end_picker("verify_cand_end", "the candidate window's end")
VERIFY_TECHNIQUE: Widget[str | None] = Widget("verify_technique", _VERIFY, "the technique the change applied")
VERIFY_WHO: Widget[str] = Widget("verify_who", _VERIFY, "who ran the experiment (saved to the log)")
VERIFY_NOTE: Widget[str] = Widget("verify_note", _VERIFY, "a note saved with the experiment")
VERIFY_SAVE: Widget[bool] = Widget("verify_save", _VERIFY, "button saving the comparison to the log")
VERIFY_DELTAS: Widget[Any] = Widget("verify_deltas", _VERIFY, "the per-metric change chart")
VERIFY_DIST: WidgetFamily[Any] = WidgetFamily("verify_dist_", _VERIFY, "a distribution chart, per metric id")

# the experiment log
LOG_TECHNIQUE: Widget[str | None] = Widget("log_technique", _LOG, "log filter: technique")
LOG_VERDICT: Widget[str | None] = Widget("log_verdict", _LOG, "log filter: verdict")
LOG_PAGE: Widget[int] = Widget("log_page", _LOG, "the page of the log shown (1 is the newest), also ?page=")
LOG_OPEN: Widget[int] = Widget("log_open", _LOG, "the experiment opened")
LOG_EXPORT: Widget[bool] = Widget("log_export", _LOG, "button downloading the log as CSV")

# the retro
RETRO_TITLE: Widget[str] = Widget("retro_title", _RETRO, "the incident's name")
RETRO_SYMPTOM: Widget[str] = Widget("retro_symptom", _RETRO, "the symptom the walk confirmed")
RETRO_CAUSE: Widget[str] = Widget("retro_cause", _RETRO, "the cause the walk confirmed")
RETRO_TECHNIQUES: Widget[list[str]] = Widget("retro_techniques", _RETRO, "the techniques decided on")
RETRO_CHANGE: Widget[str] = Widget("retro_change", _RETRO, "the change made")
RETRO_CHECK: WidgetFamily[bool] = WidgetFamily("retro_chk:", _RETRO, "a step's checklist box, per (step id, line)")
RETRO_NOTE: WidgetFamily[str] = WidgetFamily("retro_note:", _RETRO, "a step's notes, per step id")
RETRO_EXPORT: Widget[bool] = Widget("retro_export", _RETRO, "button downloading the Markdown report")
RETRO_IMPORT: Widget[Any] = Widget("retro_import", _RETRO, "a Markdown report to re-import (an UploadedFile)")
RETRO_BACK: Widget[bool] = Widget("retro_back", _RETRO, "button: previous step")
RETRO_NEXT: Widget[bool] = Widget("retro_next", _RETRO, "button: next step")

# the SLO and hardware pickers of the sidebar
SLO_PRESET: Widget[str] = Widget("slo_preset", _SLO, "the SLO preset name")
SLO_CUSTOM: Widget[bool] = Widget("slo_custom", _SLO, "own TTFT/TPOT targets instead of the preset's")
SLO_TTFT: Widget[float] = Widget("slo_ttft", _SLO, "own TTFT p99 target, seconds")
SLO_TPOT: Widget[float] = Widget("slo_tpot", _SLO, "own TPOT p99 target, seconds")
HW_MODEL: Widget[str | None] = Widget("hw_model", _SLO, "the served model for the roofline")
HW_GPU: Widget[str | None] = Widget("hw_gpu", _SLO, "the GPU for the roofline")
HW_TP: Widget[int] = Widget("hw_tp", _SLO, "tensor parallel degree for the roofline")

# the Memory calculator
MEM_MODEL: Widget[str] = Widget("mem_model", _MEM, "the model preset (or custom)")
MEM_GPU: Widget[str] = Widget("mem_gpu", _MEM, "the GPU preset")
MEM_WEIGHTS_DTYPE: Widget[str] = Widget("mem_weights_dtype", _MEM, "the weights' data type")
MEM_KV_DTYPE: Widget[str] = Widget("mem_kv_dtype", _MEM, "the KV cache's data type")
MEM_UTIL: Widget[float] = Widget("mem_util", _MEM, "gpu_memory_utilization")
MEM_TP: Widget[int] = Widget("mem_tp", _MEM, "tensor parallel degree")
MEM_PP: Widget[int] = Widget("mem_pp", _MEM, "pipeline parallel degree")
MEM_MAX_LEN: Widget[int] = Widget("mem_max_len", _MEM, "max_model_len")
MEM_CONCURRENCY: Widget[int] = Widget("mem_concurrency", _MEM, "concurrent sequences")
MEM_LAYERS: Widget[int] = Widget("mem_layers", _MEM, "a custom model's layers")
MEM_KV_HEADS: Widget[int] = Widget("mem_kv_heads", _MEM, "a custom model's KV heads")
MEM_HEAD_DIM: Widget[int] = Widget("mem_head_dim", _MEM, "a custom model's head dimension")
MEM_PARAMS: Widget[float] = Widget("mem_params", _MEM, "a custom model's parameters, billions")
MEM_CONFIG: Widget[str] = Widget("mem_config", _MEM, "a pasted config.json")
MEM_CHART: Widget[Any] = Widget("mem_chart", _MEM, "the memory breakdown chart")
MEM_DETAILS: Widget[bool] = Widget("mem_details", _MEM, "the expander of the memory details is open")

# sign-in (components/auth.py)
AUTH_SIGN_IN: Widget[bool] = Widget("auth_sign_in", "components.auth", "the sign-in page's button (st.login)")
AUTH_SIDEBAR_SIGN_IN: Widget[bool] = Widget("auth_sidebar_sign_in", "components.auth",
                                            "the sidebar's sign-in in the anonymous demo")
AUTH_SIGN_OUT: Widget[bool] = Widget("auth_sign_out", "components.auth", "sign-out (st.logout)")


def widgets() -> list[Widget[Any]]:
    """Every single widget declared here (end pickers' three each)."""
    found: list[Widget[Any]] = []
    for value in list(globals().values()):
        if isinstance(value, Widget):
            found.append(value)
        elif isinstance(value, EndPicker):
            found += [value.absolute, value.day, value.at]
    return found


def families() -> list[WidgetFamily[Any]]:
    return [v for v in list(globals().values()) if isinstance(v, WidgetFamily)]
