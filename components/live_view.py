"""The live page body: KPI deltas, panels over time, the lit tree and evidence; refreshed in a fragment."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Literal

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from components import findings, session
from components.chart_style import LEGEND_ABOVE, show
from components.evidence import diagnosis_panel
from components.shell import knowledge, lang, t
from components.verdict import verdict_block
from triage.service.display import fmt_delta, fmt_value, md_escape, signed, time_axis
from triage.service.knowledge import Panel, Text, line_points, message_text
from triage.service.live import LiveResult, evidence_group, refresh
from triage.service.model import SignalDelta, Slo, TriageError
from triage.service.windows import WindowPair


def delta_text(d: SignalDelta | None, unit: str) -> str | None:
    """The change against the baseline in the unit of the value (None when it rounds away)."""
    if d is None or d.delta is None or d.current is None or isinstance(d.current, bool):
        return None
    change = fmt_delta(d.delta, unit, like=float(d.current))
    if change == "0":
        return None
    pct = f" ({signed(d.pct, ' %', 0)})" if d.pct is not None else ""
    return f"{change} {t('vs_baseline')}{pct}"


NOISE_PCT = 5.0  # a change within 5 % of the baseline is drawn grey: noise is not an alarm


def delta_color(d: SignalDelta | None, higher_is_better: bool) -> Literal["normal", "inverse", "off"]:
    """Red or green by which way is worse, grey for a change too small to mean anything."""
    if d is None or not d.delta or (d.pct is not None and abs(d.pct) < NOISE_PCT):
        return "off"  # (no percentage when the baseline is 0: any change from nothing counts)
    return "normal" if higher_is_better else "inverse"


def kpi_deltas(result: LiveResult) -> None:
    signals = result.live.diagnosis.signals
    by_name = {d.name: d for d in result.deltas}
    kb = knowledge()
    assert kb.kpis is not None  # the loader always reads the KPI rows
    with st.container(horizontal=True):
        for name in kb.kpis.live:
            spec = kb.signals[name]
            sig = signals.get(name)
            meaning = spec.meaning.get(lang())
            label = spec.label.get(lang())
            if sig is None:
                st.metric(label, "—", help=f"{meaning} — {t('not_measurable_short')}", border=True)
                continue
            st.metric(label, fmt_value(sig.value, spec.unit), delta=delta_text(by_name.get(name), spec.unit),
                      delta_color=delta_color(by_name.get(name), spec.higher_is_better), border=True,
                      help=f"{meaning} · {message_text(sig.source, lang())}")


def all_deltas(result: LiveResult) -> None:
    """Every signal of the window beside the baseline's, with the change."""
    if not result.deltas:
        return
    box = st.expander(t("live_all_deltas"), key=session.LIVE_ALL_DELTAS.name, on_change="rerun")
    if not box.open:  # lazy: the table (and the browser's grid code) only once it is opened
        return
    rows = [{t("ev_signal"): d.name, t("live_current"): fmt_value(d.current, d.unit),
             t("live_baseline_col"): fmt_value(d.baseline, d.unit),
             t("verify_change"): _change(d)} for d in result.deltas]
    with box:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def _change(d: SignalDelta) -> str:
    if d.delta is None or d.current is None or isinstance(d.current, bool):
        return "—"
    change = fmt_delta(d.delta, d.unit, like=float(d.current))
    if change == "0":
        return "±0"  # rounds away in the value's own digits
    return change if d.pct is None else f"{change} ({signed(d.pct, ' %', 0)})"


def _panel_figure(panel: Panel, result: LiveResult) -> go.Figure | None:
    drawn = [(line.label, points) for line in panel.lines if (points := line_points(line, result.series))]
    if not drawn:
        return None
    # a latency axis in ms under a second, else s, as its card and every number on the page
    factor, unit = time_axis(max(abs(p.value) for _, points in drawn for p in points), panel.unit)
    fig = go.Figure()
    for label, points in drawn:
        fig.add_trace(go.Scatter(x=[datetime.fromtimestamp(p.t) for p in points],
                                 y=[p.value * factor for p in points], mode="lines", name=label))
    # plotly picks distinct time ticks for the span (a fixed "%H:%M" repeated one minute under 20 s ticks);
    # counts, rates, latencies and usage are drawn from zero so a small wobble does not look like a cliff
    fig.update_layout(height=240, margin=dict(l=10, r=10, t=10, b=10), yaxis_title=unit,
                      legend=LEGEND_ABOVE, xaxis=dict(nticks=6),
                      yaxis=dict(rangemode="tozero"))
    return fig


@lru_cache(maxsize=8)
def _missing_texts(tree_dir: Path) -> dict[str, Text]:
    """Each engine metric's "why it is missing" text by its English wording (the core reports English), from
    the engine maps of the active tree, whose directory is ``tree_dir`` (the cache key)."""
    return {m.missing.en: m.missing for engine in knowledge().engines.values() for m in engine.metrics}


def _why_missing(panel: Panel, result: LiveResult) -> str:
    known = _missing_texts(knowledge().source_dir)
    reasons = {known[r].get(lang()) if r in known else r
               for r in (result.missing[n] for n in panel.needs() if n in result.missing)}
    return " ".join(sorted(reasons)) or t("panel_no_data")


def _group_labels(lit: str) -> dict[str, str]:
    """Each panel group's tab label: its title and how many panels it holds; ● marks the evidence's group."""
    kb = knowledge()
    counts = {g.id: sum(1 for p in kb.panels if p.group == g.id) for g in kb.panel_groups}
    return {g.id: t("live_group_lit_tab" if g.id == lit else "live_group_tab", title=t(g.title_key), n=counts[g.id])
            for g in kb.panel_groups}


def panels(result: LiveResult) -> None:
    """The panels, one group per tab; only the open tab's panels are drawn (the browser draws three charts, not
    nine, before the first shows). The group holding the top finding's evidence opens by default."""
    kb = knowledge()
    lit = evidence_group(kb, result.live.diagnosis)
    labels = _group_labels(lit)
    st.caption(t("live_group_hint"))
    tabs = st.tabs(list(labels.values()), default=labels[lit], key=session.LIVE_GROUP.name, on_change="rerun")
    for group, tab in zip(kb.panel_groups, tabs, strict=True):
        if not tab.open:
            continue
        with tab:
            # three columns at any width left plots 70 px wide beside a sidebar at 1024 px; a panel now keeps
            # 260 px and the row wraps (two, then one below)
            st.html(f"<style>.st-key-{session.LIVE_PANELS.name} > div {{ min-width: 260px; }}</style>")
            row = st.container(horizontal=True, key=session.LIVE_PANELS.name)
            for panel in (p for p in kb.panels if p.group == group.id):
                with row, st.container(border=True):
                    st.markdown(f"**{panel.title.get(lang())}**")
                    fig = _panel_figure(panel, result)
                    if fig is None:
                        st.info(_why_missing(panel, result), icon=":material/info:")
                    else:
                        show(fig, width="stretch", key=session.LIVE_PANEL.key(panel.id))


def render(result: LiveResult) -> None:
    verdict_block(result.live.diagnosis, result.live.engine)
    st.caption(t("live_source_line", label=result.label, engine=result.live.engine,
                 at=datetime.fromtimestamp(result.at).strftime("%H:%M:%S")))
    for err in result.live.readings.errors:  # may quote a server's error text
        st.warning(md_escape(err))
    kpi_deltas(result)
    all_deltas(result)
    panels(result)
    diagnosis_panel(result.live.diagnosis, result.label, result.live.engine)


def refresh_and_render(make_pair: Callable[[], WindowPair], slo: Slo, source_key: str) -> None:
    """Refresh, or keep this source's last good result under a stale-data banner when it fails."""
    stale = session.LIVE_BY_SOURCE.setdefault(dict)
    try:
        result = stale[source_key] = refresh(knowledge(), make_pair(), slo)
        session.LIVE_CACHE_CONFIG.set(result.cache_config)
    except TriageError as exc:
        last = stale.get(source_key)
        st.error(t("live_refresh_failed", reason=exc.line()))
        if last is None:  # nothing of this source to show: no other source's diagnosis stands for it
            findings.forget()
            return
        st.warning(t("live_stale", at=datetime.fromtimestamp(last.at).strftime("%H:%M:%S")))
        result = last
    findings.remember(result.label, result.live.diagnosis, result.live.engine)  # before anything is drawn of it
    render(result)
