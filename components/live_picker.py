"""The live page's source picker: returns a function that builds the windows on each refresh."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, time
from functools import partial
from typing import Any

import streamlit as st

from components import live_source, session, upload_store
from components.paste_view import SHOWN, paste_area
from components.shell import lang, t, translated_choice
from triage.service.display import md_escape, plain
from triage.service.model import Slo, TriageError
from triage.service.params import MAX_SCRAPE_INTERVAL_S, parse_live_link
from triage.service.typed_urls import TypedUrls, live_typed_urls
from triage.service.uploads import Held, Refused
from triage.service.windows import Profile, demo_scenarios, prometheus_profiles

SOURCES = ("demo", "scrape", "snapshots", "prometheus")
WINDOWS_MIN = {"5m": 5, "15m": 15, "1h": 60, "6h": 360}
QUERY_TIMEOUT_S = 5.0
RANGES = {"15m": 15, "1h": 60, "6h": 360, "custom": None}  # the time-range picker; "custom" names its end
RANGE_LABELS = {"15m": "15 min", "1h": "1 h", "6h": "6 h"}


def _from_url(widget: session.Widget[Any], param: str, parse: Callable[[str], object], allowed: object = None) -> None:
    """Seed ``widget`` from ``?param=`` once per session (an incident link reopens the same view)."""
    if widget.present() or param not in st.query_params:
        return
    try:
        value = parse(st.query_params[param])
    except ValueError:
        return
    if allowed is None or value in allowed:  # type: ignore[operator]
        widget.seed(value)


# the picker's widgets a page switch must not reset, with the URL parameter that seeds each (a link wins)
_KEPT: tuple[tuple[session.Widget[Any], str | None], ...] = (
    (session.LIVE_KIND, "source"), (session.LIVE_RANGE, "window"), (session.LIVE_CUSTOM_MIN, "minutes"),
    (session.LIVE_CUSTOM_END_DATE, "end"), (session.LIVE_CUSTOM_END_TIME, "end"), (session.LIVE_SCENARIO, "scenario"),
    (session.LIVE_URL, None), (session.SNAP_INTERVAL, None), (session.PROM_PROFILE, None),
    (session.PROM_BASELINE, None), (session.PROM_BASE_END.absolute, None), (session.PROM_BASE_END.day, None),
    (session.PROM_BASE_END.at, None),
)


def restore_choice() -> None:
    """Give the picker back what this session chose on it: Streamlit drops a widget's state when a page without
    it runs, and the navigation link back carries no ``?source=``. A parameter in the URL (a shared link, an
    alert's runbook URL) wins over the session's copy; a new session (a reload) starts from the URL alone."""
    kept = session.LIVE_CHOICE.get() or {}
    for widget, param in _KEPT:
        # None is a default (no baseline), drawn as such: seeded, a select box would show its placeholder instead
        if kept.get(widget.name) is not None and not widget.present() and \
                (param is None or param not in st.query_params):
            widget.seed(kept[widget.name])
    for label, value in (kept.get("match") or {}).items():
        if session.MATCH.value(label) is None:
            session.MATCH.seed(value, label)


def _remember_choice() -> None:
    """Copy the picker's values drawn in this run into the session (a source not drawn keeps its last values)."""
    kept = dict(session.LIVE_CHOICE.get() or {})
    kept.update({widget.name: widget.value() for widget, _ in _KEPT if widget.present()})
    labels = (*MATCH_LABELS, *(session.LIVE_LINK_LABELS.get() or []))
    match = {label: session.MATCH.value(label) for label in labels if session.MATCH.value(label) is not None}
    kept["match"] = {**(kept.get("match") or {}), **match}
    session.LIVE_CHOICE.set(kept)


def _to_url(values: dict[str, str | None]) -> None:
    for param, value in values.items():
        if value is None:
            st.query_params.pop(param, None)
        elif st.query_params.get(param) != value:
            st.query_params[param] = value


def time_range() -> tuple[float, datetime | None]:
    """(minutes, end or None for now) from the range picker: last 15 m / 1 h / 6 h, or a custom span and end."""
    _from_url(session.LIVE_RANGE, "window", str, RANGES)
    choice = translated_choice(st.segmented_control, t("live_range"), list(RANGES), session.LIVE_RANGE,
                               lambda r: t("live_range_custom") if r == "custom" else RANGE_LABELS[r],
                               default="15m", required=True)
    if choice != "custom":
        _to_url({"window": choice, "minutes": None, "end": None})
        return float(RANGES[choice] or 15), None
    _from_url(session.LIVE_CUSTOM_MIN, "minutes", float)
    if "end" in st.query_params and not session.LIVE_CUSTOM_END_DATE.present():
        try:
            end = datetime.fromisoformat(st.query_params["end"]).astimezone(UTC)
            session.LIVE_CUSTOM_END_DATE.seed(end.date())
            session.LIVE_CUSTOM_END_TIME.seed(end.time().replace(tzinfo=None))
        except ValueError:
            pass
    if not session.LIVE_CUSTOM_MIN.present():
        session.LIVE_CUSTOM_MIN.seed(30.0)
    c = st.columns(3)
    minutes = c[0].number_input(t("live_custom_minutes"), min_value=1.0, max_value=7 * 24 * 60.0, step=5.0,
                                key=session.LIVE_CUSTOM_MIN.name)
    day = c[1].date_input(t("live_end_date"), key=session.LIVE_CUSTOM_END_DATE.name)
    at = c[2].time_input(t("live_end_time"), value=time(0, 0), key=session.LIVE_CUSTOM_END_TIME.name, step=300)
    end = datetime.combine(day, at, tzinfo=UTC)
    _to_url({"window": "custom", "minutes": f"{minutes:g}", "end": end.strftime("%Y-%m-%dT%H:%MZ")})
    return float(minutes), end


def _demo(minutes: float, end: datetime | None) -> partial[Any]:
    scenarios = demo_scenarios()
    ids = list(scenarios)
    _from_url(session.LIVE_SCENARIO, "scenario", str, ids)
    if not session.LIVE_SCENARIO.present():
        session.LIVE_SCENARIO.seed("queueing")
    # the scenario's description is its help: the verdict below must start on the first screen at 1024 x 768
    current = session.LIVE_SCENARIO.value()
    current = current if current in scenarios else ids[0]
    scenario = translated_choice(st.selectbox, t("live_scenario"), ids, session.LIVE_SCENARIO,
                                 lambda s: scenarios[s].title.get(lang()),
                                 help=scenarios[current].description.get(lang()) + " " + t("live_demo_now"))
    _to_url({"scenario": scenario})
    return partial(live_source.demo_windows, scenario, minutes)


def _scrape(minutes: float, end: datetime | None) -> partial[Any] | None:
    """A typed /metrics URL: offered only when the app listens on the loopback alone or an allowlist is set
    (else the page would let any visitor reach the server's network); otherwise, only the profiles."""
    try:
        access = live_typed_urls(st.get_option("server.address"))
    except TriageError as exc:  # a malformed allowlist: nothing is typed until it is fixed
        st.error(md_escape(exc.line()))
        return None
    if access is TypedUrls.OFF:
        st.info(t("live_url_off"))
        return None
    url = st.text_input(t("live_url"), placeholder="http://127.0.0.1:8000/metrics", key=session.LIVE_URL.name)
    if not url:
        st.info(t("live_url_hint"))
        return None
    if not url.strip().lower().startswith(("http://", "https://")):
        st.error(t("live_url_scheme"))
        return None
    return partial(live_source.scrape_windows, url.strip(), minutes, QUERY_TIMEOUT_S)


def _snapshots(minutes: float, end: datetime | None, slo: Slo | None = None) -> partial[Any] | None:
    """Two uploaded /metrics snapshots, or (until both are given) text pasted instead: one scrape, a server log
    or a console summary, detected and diagnosed in place like the Benchmark page's paste."""
    cols = st.columns([2, 2, 1])
    before = cols[0].file_uploader(t("live_before"), key=session.SNAP_BEFORE.name)
    after = cols[1].file_uploader(t("live_after"), key=session.SNAP_AFTER.name)
    interval = cols[2].number_input(t("live_interval"), min_value=1.0, max_value=MAX_SCRAPE_INTERVAL_S, value=60.0,
                                    step=5.0, key=session.SNAP_INTERVAL.name)
    # each text is parsed once into the server's bounded snapshot cache and its bytes released; a refresh
    # rebuilds the pair from the digests
    got = [upload_store.take(widget, upload, upload_store.snapshot_cache())
           for widget, upload in ((session.SNAP_BEFORE, before), (session.SNAP_AFTER, after))]
    for item in got:
        if isinstance(item, Refused):
            st.error(t("upload_failed", name=item.name, reason=item.reason))
    held = [item[0] for item in got if isinstance(item, tuple)]
    held = _kept_pair(held, got)
    if len(held) < 2:
        if slo is not None and paste_area(slo, widget=session.LIVE_PASTE) == SHOWN:
            return None
        if None in got:
            st.info(t("live_snapshots_hint"))
        return None
    if held[0].sha256 == held[1].sha256:  # one file twice: its rates all read 0, said rather than left to be read
        st.warning(t("live_snapshots_same", before=held[0].name, after=held[1].name), icon=":material/warning:")
    return partial(live_source.snapshot_windows, held[0].digest, held[1].digest, interval)


def _kept_pair(held: list[Held], got: Sequence[object]) -> list[Held]:
    """The pair to diagnose: the two uploads, else (both uploaders empty, as after a page switch, which empties
    them) the pair this session diagnosed last while the server still has its parses."""
    if len(held) == 2:
        session.LIVE_SNAPSHOTS.set((held[0], held[1]))
        return held
    kept = session.LIVE_SNAPSHOTS.get()
    if any(item is not None for item in got) or kept is None:  # other files on their way: the old pair is done
        session.LIVE_SNAPSHOTS.clear()
        return held
    cache = upload_store.snapshot_cache()
    if cache.get(kept[0].digest) is None or cache.get(kept[1].digest) is None:  # evicted: upload again
        session.LIVE_SNAPSHOTS.clear()
        return held
    left, right = st.columns([4, 1], vertical_alignment="center")
    left.caption(t("live_snapshots_kept", before=kept[0].name, after=kept[1].name))
    # a callback: the run the click starts no longer shows the pair
    right.button(t("live_snapshots_forget"), key=session.SNAP_FORGET.name, on_click=_forget_pair)
    return list(kept)


def _forget_pair() -> None:
    session.LIVE_SNAPSHOTS.clear()


MATCH_LABELS = ("model_name", "namespace", "pod", "instance")


def apply_live_link() -> None:
    """Open the Live page as a deep link says (an alert's runbook URL or a Fleet row): the Prometheus source and
    profile, the window ending at the alert, the replica's labels as filters. Applied once per distinct link."""
    signature = _link_signature()
    if signature is None or session.LIVE_LINK_APPLIED.get() == signature:
        return
    link = parse_live_link(st.query_params.to_dict())
    if link is None:  # (a signature is made only of a link)
        return
    session.LIVE_LINK_APPLIED.set(signature)
    session.LIVE_KIND.seed("prometheus")
    from components.auth import visible_profiles

    if link.profile and link.profile in visible_profiles(list(prometheus_profiles())):
        session.PROM_PROFILE.seed(link.profile)
    # the link's window and end are read from the URL by time_range (?window=, ?end=)
    for label in (*MATCH_LABELS, *(session.LIVE_LINK_LABELS.get() or [])):
        session.MATCH.seed("", label)
    session.LIVE_LINK_LABELS.set([label for label in link.match if label not in MATCH_LABELS])
    for label, value in link.match.items():
        session.MATCH.seed(value, label)


def _link_signature() -> str | None:
    """What the URL's Live link says, without the node open in the tree (a click there is no new link)."""
    link = parse_live_link(st.query_params.to_dict())
    return None if link is None else repr(dataclasses.replace(link, node=None))


def _match_filters() -> dict[str, str]:
    labels = (*MATCH_LABELS, *(session.LIVE_LINK_LABELS.get() or []))
    cols = st.columns(4)
    match = {}
    for i, label in enumerate(labels):
        col = cols[i % 4]
        value = col.text_input(label, key=session.MATCH.key(label))
        if value:
            match[label] = value
    return match


def end_time(picker: session.EndPicker, label_key: str = "live_absolute") -> datetime | None:
    """An absolute UTC end time (reviewing a past incident), or None for 'now'."""
    if not st.toggle(t(label_key), key=picker.absolute.name):
        return None
    return pick_end(picker)


def pick_end(picker: session.EndPicker) -> datetime:
    """An absolute UTC end time: a date and a time of day."""
    c1, c2 = st.columns(2)
    day = c1.date_input(t("live_end_date"), key=picker.day.name)
    at = c2.time_input(t("live_end_time"), value=time(0, 0), key=picker.at.name, step=300)
    return datetime.combine(day, at, tzinfo=UTC)


def _baseline_label(choice: float | str | None) -> str:
    if choice is None:
        return t("live_baseline_none")
    return t("live_baseline_chosen") if choice == "chosen" else f"-{plain(float(choice))} h"


def _baseline_offset(end: datetime | None) -> float | None:
    """Hours between the incident window and its baseline: a preset offset or a chosen baseline end."""
    options = [None, 24.0, 168.0, "chosen"]
    choice = translated_choice(st.selectbox, t("live_baseline"), options, session.PROM_BASELINE, _baseline_label)
    if choice is None or isinstance(choice, float):
        return choice
    base_end = pick_end(session.PROM_BASE_END)
    offset = ((end or datetime.now(UTC)) - base_end).total_seconds() / 3600
    if offset <= 0:
        st.warning(t("live_baseline_after"))
        return None
    return offset


def prometheus_profile() -> Profile | None:
    from components.auth import visible_profiles

    every = prometheus_profiles()  # only names reach the page; URLs and credentials stay on the server
    profiles = {name: every[name] for name in visible_profiles(list(every))}
    if not profiles:
        st.info(t("live_no_profiles"))
        return None
    name = st.selectbox(t("live_profile"), list(profiles), key=session.PROM_PROFILE.name)
    return profiles[name]


def _prometheus(minutes: float, end: datetime | None) -> partial[Any] | None:
    profile = prometheus_profile()
    if profile is None:
        return None
    baseline = _baseline_offset(end)
    return partial(live_source.prometheus_windows, profile, end, minutes, _match_filters(),
                   baseline, profile.timeout or QUERY_TIMEOUT_S)


def source_picker(slo: Slo | None = None) -> tuple[str, Callable | None]:
    """(a key naming the chosen source and its settings, a function building its windows); ``slo`` judges text
    pasted on the snapshot source."""
    restore_choice()
    _from_url(session.LIVE_KIND, "source", str, SOURCES)
    kind = translated_choice(st.segmented_control, t("live_source"), SOURCES, session.LIVE_KIND,
                             lambda k: t(f"live_kind_{k}"), default="demo", required=True)
    _to_url({"source": kind})
    if kind != "demo":
        _to_url({"scenario": None})
    pick = {"demo": _demo, "scrape": _scrape, "snapshots": _snapshots, "prometheus": _prometheus}[kind]
    if kind == "demo":  # range and scenario side by side: the verdict below starts on the first screen
        left, right = st.columns(2)
        with left:
            minutes, end = time_range()
        with right:
            make = pick(minutes, end)
    else:
        minutes, end = time_range() if kind != "snapshots" else (15.0, None)
        make = pick(minutes, end) if kind != "snapshots" else _snapshots(minutes, end, slo)
    _remember_choice()
    # the URL the page just wrote is no new link: only a link from elsewhere (an alert, a Fleet row) resets the
    # picker, else choosing Prometheus would wipe the first filter typed after it
    own = _link_signature()
    if own is not None:
        session.LIVE_LINK_APPLIED.set(own)
    settings = (make.args, tuple(sorted(make.keywords.items()))) if make is not None else ()
    return f"{kind}:{hashlib.sha1(repr(settings).encode()).hexdigest()[:12]}", make
