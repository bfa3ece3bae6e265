"""The live page's source picker: returns a function that builds the windows on each refresh."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime, time
from functools import partial
from typing import Any

import streamlit as st

from components import live_source, session, upload_store
from components.shell import labels_now, lang, t
from triage.report.links import parse_live_link
from triage.service.uploads import Refused
from triage.service.windows import Profile, demo_scenarios, prometheus_profiles

SOURCES = ("demo", "scrape", "snapshots", "prometheus")
WINDOWS_MIN = {"5m": 5, "15m": 15, "1h": 60, "6h": 360}
QUERY_TIMEOUT_S = 5.0
RANGES = {"15m": 15, "1h": 60, "6h": 360, "custom": None}  # the time-range picker; "custom" names its end
RANGE_LABELS = {"15m": "15 min", "1h": "1 h", "6h": "6 h"}


def _from_url(key: str, param: str, parse: Callable[[str], object], allowed: object = None) -> None:
    """Seed widget ``key`` from ``?param=`` once per session (an incident link reopens the same view)."""
    if session.has_widget(key) or param not in st.query_params:
        return
    try:
        value = parse(st.query_params[param])
    except ValueError:
        return
    if allowed is None or value in allowed:  # type: ignore[operator]
        session.seed_widget(key, value)


def _to_url(values: dict[str, str | None]) -> None:
    for param, value in values.items():
        if value is None:
            st.query_params.pop(param, None)
        elif st.query_params.get(param) != value:
            st.query_params[param] = value


def time_range() -> tuple[float, datetime | None]:
    """(minutes, end or None for now) from the range picker: last 15 m / 1 h / 6 h, or a custom span and end."""
    _from_url("live_range", "window", str, RANGES)
    choice = st.segmented_control(t("live_range"), list(RANGES), default="15m", key="live_range", required=True,
                                  format_func=labels_now(list(RANGES), lambda r: t("live_range_custom")
                                                         if r == "custom" else RANGE_LABELS[r]))
    if choice != "custom":
        _to_url({"window": choice, "minutes": None, "end": None})
        return float(RANGES[choice] or 15), None
    _from_url("live_custom_min", "minutes", float)
    if "end" in st.query_params and not session.has_widget("live_custom_end_date"):
        try:
            end = datetime.fromisoformat(st.query_params["end"]).astimezone(UTC)
            session.seed_widget("live_custom_end_date", end.date())
            session.seed_widget("live_custom_end_time", end.time().replace(tzinfo=None))
        except ValueError:
            pass
    if not session.has_widget("live_custom_min"):
        session.seed_widget("live_custom_min", 30.0)
    c = st.columns(3)
    minutes = c[0].number_input(t("live_custom_minutes"), min_value=1.0, max_value=7 * 24 * 60.0, step=5.0,
                                key="live_custom_min")
    day = c[1].date_input(t("live_end_date"), key="live_custom_end_date")
    at = c[2].time_input(t("live_end_time"), value=time(0, 0), key="live_custom_end_time", step=300)
    end = datetime.combine(day, at, tzinfo=UTC)
    _to_url({"window": "custom", "minutes": f"{minutes:g}", "end": end.strftime("%Y-%m-%dT%H:%MZ")})
    return float(minutes), end


def _demo(minutes: float, end: datetime | None) -> partial[Any]:
    scenarios = demo_scenarios()
    ids = list(scenarios)
    _from_url("live_scenario", "scenario", str, ids)
    if not session.has_widget("live_scenario"):
        session.seed_widget("live_scenario", "queueing")
    scenario = st.selectbox(t("live_scenario"), ids, key="live_scenario",
                            format_func=labels_now(ids, lambda s: scenarios[s].title.get(lang())))
    _to_url({"scenario": scenario})
    st.caption(scenarios[scenario].description.get(lang()) + " " + t("live_demo_now"))
    return partial(live_source.demo_windows, scenario, minutes)


def _scrape(minutes: float, end: datetime | None) -> partial[Any] | None:
    url = st.text_input(t("live_url"), placeholder="http://127.0.0.1:8000/metrics", key="live_url")
    if not url:
        st.info(t("live_url_hint"))
        return None
    return partial(live_source.scrape_windows, url, minutes, QUERY_TIMEOUT_S)


def _snapshots(minutes: float, end: datetime | None) -> partial[Any] | None:
    cols = st.columns([2, 2, 1])
    before = cols[0].file_uploader(t("live_before"), key="snap_before")
    after = cols[1].file_uploader(t("live_after"), key="snap_after")
    interval = cols[2].number_input(t("live_interval"), min_value=1.0, value=60.0, step=5.0, key="snap_interval")
    # each text is parsed once into the server's bounded snapshot cache and its bytes released; a refresh
    # rebuilds the pair from the digests
    got = [upload_store.take(key, upload, upload_store.snapshot_cache())
           for key, upload in (("snap_before", before), ("snap_after", after))]
    for item in got:
        if isinstance(item, Refused):
            st.error(t("upload_failed", name=item.name, reason=item.reason))
    held = [item[0] for item in got if isinstance(item, tuple)]
    if len(held) < 2:
        if None in got:
            st.info(t("live_snapshots_hint"))
        return None
    return partial(live_source.snapshot_windows, held[0].digest, held[1].digest, interval)


MATCH_LABELS = ("model_name", "namespace", "pod", "instance")


def apply_live_link() -> None:
    """Open the Live page as a deep link says (an alert's runbook URL or a Fleet row): the Prometheus source and
    profile, the window ending at the alert, the replica's labels as filters. Applied once per distinct link."""
    link = parse_live_link(st.query_params.to_dict())
    if link is None:
        return
    signature = repr(link)
    if session.LIVE_LINK_APPLIED.get() == signature:
        return
    session.LIVE_LINK_APPLIED.set(signature)
    session.seed_widget("live_kind", "prometheus")
    if link.profile and link.profile in prometheus_profiles():
        session.seed_widget("prom_profile", link.profile)
    if link.window in WINDOWS_MIN:
        session.seed_widget("prom_window", link.window)
    if link.end is not None:
        session.seed_widget("prom_absolute", True)
        session.seed_widget("prom_end_date", link.end.date())
        session.seed_widget("prom_end_time", time(link.end.hour, link.end.minute))
    for label in (*MATCH_LABELS, *(session.LIVE_LINK_LABELS.get() or [])):
        session.seed_widget(f"match:{label}", "")
    session.LIVE_LINK_LABELS.set([label for label in link.match if label not in MATCH_LABELS])
    for label, value in link.match.items():
        session.seed_widget(f"match:{label}", value)


def _match_filters() -> dict[str, str]:
    labels = (*MATCH_LABELS, *(session.LIVE_LINK_LABELS.get() or []))
    cols = st.columns(4)
    match = {}
    for i, label in enumerate(labels):
        col = cols[i % 4]
        value = col.text_input(label, key=f"match:{label}")
        if value:
            match[label] = value
    return match


def end_time(prefix: str, label_key: str = "live_absolute") -> datetime | None:
    """An absolute UTC end time (reviewing a past incident), or None for 'now'."""
    if not st.toggle(t(label_key), key=f"{prefix}_absolute"):
        return None
    return pick_end(prefix)


def pick_end(prefix: str) -> datetime:
    """An absolute UTC end time: a date and a time of day."""
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
    if choice is None or isinstance(choice, float):
        return choice
    base_end = pick_end("prom_base")
    offset = ((end or datetime.now(UTC)) - base_end).total_seconds() / 3600
    if offset <= 0:
        st.warning(t("live_baseline_after"))
        return None
    return offset


def prometheus_profile() -> Profile | None:
    profiles = prometheus_profiles()
    if not profiles:
        st.info(t("live_no_profiles"))
        return None
    name = st.selectbox(t("live_profile"), list(profiles), key="prom_profile")
    return profiles[name]


def _prometheus(minutes: float, end: datetime | None) -> partial[Any] | None:
    profile = prometheus_profile()
    if profile is None:
        return None
    baseline = _baseline_offset(end)
    return partial(live_source.prometheus_windows, profile, end, minutes, _match_filters(),
                   baseline, profile.timeout or QUERY_TIMEOUT_S)


def source_picker() -> tuple[str, Callable | None]:
    """(a key naming the chosen source and its settings, a function building its windows)."""
    _from_url("live_kind", "source", str, SOURCES)
    kind = st.segmented_control(t("live_source"), SOURCES, default="demo", key="live_kind", required=True,
                                format_func=labels_now(SOURCES, lambda k: t(f"live_kind_{k}")))
    _to_url({"source": kind})
    if kind != "demo":
        _to_url({"scenario": None})
    minutes, end = time_range() if kind != "snapshots" else (15.0, None)
    pick = {"demo": _demo, "scrape": _scrape, "snapshots": _snapshots, "prometheus": _prometheus}[kind]
    make = pick(minutes, end)
    settings = (make.args, tuple(sorted(make.keywords.items()))) if make is not None else ()
    return f"{kind}:{hashlib.sha1(repr(settings).encode()).hexdigest()[:12]}", make
