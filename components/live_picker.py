"""The live page's source picker: returns a function that builds the windows on each refresh."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime, time
from functools import partial

import streamlit as st

from components import live_source
from components.shell import labels_now, lang, t
from triage.report.links import parse_live_link
from triage.sources.metrics.profiles import Profile, list_profiles
from triage.sources.metrics.simulator import SCENARIOS

SOURCES = ("demo", "scrape", "snapshots", "prometheus")
WINDOWS_MIN = {"5m": 5, "15m": 15, "1h": 60, "6h": 360}
QUERY_TIMEOUT_S = 5.0


def _demo() -> Callable:
    ids = list(SCENARIOS)
    scenario = st.selectbox(t("live_scenario"), ids, index=ids.index("queueing"), key="live_scenario",
                            format_func=labels_now(ids, lambda s: SCENARIOS[s].title.get(lang())))
    st.caption(SCENARIOS[scenario].description.get(lang()))
    return partial(live_source.demo_windows, scenario, 10)


def _scrape() -> Callable | None:
    url = st.text_input(t("live_url"), placeholder="http://127.0.0.1:8000/metrics", key="live_url")
    if not url:
        st.info(t("live_url_hint"))
        return None
    return partial(live_source.scrape_windows, url, 15, QUERY_TIMEOUT_S)


def _snapshots() -> Callable | None:
    cols = st.columns([2, 2, 1])
    before = cols[0].file_uploader(t("live_before"), key="snap_before")
    after = cols[1].file_uploader(t("live_after"), key="snap_after")
    interval = cols[2].number_input(t("live_interval"), min_value=1.0, value=60.0, step=5.0, key="snap_interval")
    if before is None or after is None:
        st.info(t("live_snapshots_hint"))
        return None
    return partial(live_source.snapshot_windows, before.getvalue(), after.getvalue(), (before.name, after.name),
                   interval)


MATCH_LABELS = ("model_name", "namespace", "pod", "instance")
EXTRA_LABELS_KEY = "live_link_labels"  # labels a deep link filters on beyond MATCH_LABELS (engine, job …)
LINK_KEY = "live_link_applied"


def apply_live_link() -> None:
    """Open the Live page as a deep link says (an alert's runbook URL or a Fleet row): the Prometheus source and
    profile, the window ending at the alert, the replica's labels as filters. Applied once per distinct link."""
    link = parse_live_link(st.query_params.to_dict())
    if link is None:
        return
    signature = repr(link)
    if st.session_state.get(LINK_KEY) == signature:
        return
    st.session_state[LINK_KEY] = signature
    st.session_state["live_kind"] = "prometheus"
    if link.profile and link.profile in list_profiles():
        st.session_state["prom_profile"] = link.profile
    if link.window in WINDOWS_MIN:
        st.session_state["prom_window"] = link.window
    if link.end is not None:
        st.session_state["prom_absolute"] = True
        st.session_state["prom_end_date"] = link.end.date()
        st.session_state["prom_end_time"] = time(link.end.hour, link.end.minute)
    for label in (*MATCH_LABELS, *st.session_state.get(EXTRA_LABELS_KEY, [])):
        st.session_state[f"match:{label}"] = ""
    st.session_state[EXTRA_LABELS_KEY] = [label for label in link.match if label not in MATCH_LABELS]
    for label, value in link.match.items():
        st.session_state[f"match:{label}"] = value


def _match_filters() -> dict[str, str]:
    labels = (*MATCH_LABELS, *st.session_state.get(EXTRA_LABELS_KEY, []))
    cols = st.columns(4)
    match = {}
    for i, label in enumerate(labels):
        col = cols[i % 4]
        value = col.text_input(label, key=f"match:{label}")
        if value:
            match[label] = value
    return match


def end_time(prefix: str, label_key: str = "live_absolute", always: bool = False) -> datetime | None:
    """An absolute UTC end time (reviewing a past incident), or None for 'now'."""
    if not always and not st.toggle(t(label_key), key=f"{prefix}_absolute"):
        return None
    c1, c2 = st.columns(2)
    day = c1.date_input(t("live_end_date"), key=f"{prefix}_end_date")
    at = c2.time_input(t("live_end_time"), value=time(0, 0), key=f"{prefix}_end_time", step=300)
    return datetime.combine(day, at, tzinfo=UTC)


def _baseline_label(choice: float | str | None) -> str:
    if choice is None:
        return t("live_baseline_none")
    return t("live_baseline_chosen") if choice == "chosen" else f"−{choice:g} h"


def _baseline_offset(end: datetime | None) -> float | None:
    """Hours between the incident window and its baseline: a preset offset or a chosen baseline end."""
    options = [None, 24.0, 168.0, "chosen"]
    choice = st.selectbox(t("live_baseline"), options, key="prom_baseline",
                          format_func=labels_now(options, _baseline_label))
    if choice != "chosen":
        return choice
    base_end = end_time("prom_base", always=True)
    offset = ((end or datetime.now(UTC)) - base_end).total_seconds() / 3600
    if offset <= 0:
        st.warning(t("live_baseline_after"))
        return None
    return offset


def prometheus_profile() -> Profile | None:
    profiles = list_profiles()
    if not profiles:
        st.info(t("live_no_profiles"))
        return None
    name = st.selectbox(t("live_profile"), list(profiles), key="prom_profile")
    return profiles[name]


def _prometheus() -> Callable | None:
    cols = st.columns([2, 1])
    with cols[0]:
        profile = prometheus_profile()
    if profile is None:
        return None
    window = cols[1].selectbox(t("live_window"), list(WINDOWS_MIN), index=1, key="prom_window")
    end = end_time("prom")
    baseline = _baseline_offset(end)
    return partial(live_source.prometheus_windows, profile, end, WINDOWS_MIN[window], _match_filters(),
                   baseline, profile.timeout or QUERY_TIMEOUT_S)


def source_picker() -> tuple[str, Callable | None]:
    """(a key naming the chosen source and its settings, a function building its windows)."""
    kind = st.segmented_control(t("live_source"), SOURCES, default="demo", key="live_kind", required=True,
                                format_func=labels_now(SOURCES, lambda k: t(f"live_kind_{k}")))
    make = {"demo": _demo, "scrape": _scrape, "snapshots": _snapshots, "prometheus": _prometheus}[kind]()
    settings = (make.args, tuple(sorted(make.keywords.items()))) if make is not None else ()
    return f"{kind}:{hashlib.sha1(repr(settings).encode()).hexdigest()[:12]}", make
