"""The Fleet page body: a row per replica (symptoms, top cause), sortable and filterable, linking to its Live view."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pandas as pd
import streamlit as st

from components import session
from components.evidence import findings_block, symptom_summary
from components.live_picker import WINDOWS_MIN, end_time, prometheus_profile
from components.shell import knowledge, lang, t
from triage.service.fleet import FleetTable, fleet_refresh
from triage.service.model import Diagnosis, Slo, TriageError
from triage.service.windows import Profile

DEFAULT_BY = "instance"


@dataclass(frozen=True)
class FleetRequest:
    profile: Profile
    window: str
    by: tuple[str, ...]
    end: datetime | None


def fleet_controls() -> FleetRequest | None:
    cols = st.columns([2, 1, 2])
    with cols[0]:
        profile = prometheus_profile()
    if profile is None:
        return None
    window = cols[1].selectbox(t("live_window"), list(WINDOWS_MIN), index=1, key=session.FLEET_WINDOW.name)
    by_text = cols[2].text_input(t("fleet_by"), value=DEFAULT_BY, key=session.FLEET_BY.name, help=t("fleet_by_help"))
    by = tuple(label.strip() for label in by_text.split(",") if label.strip())
    if not by:
        st.info(t("fleet_by_help"))
        return None
    return FleetRequest(profile, window, by, end_time(session.FLEET_END))


def refresh(req: FleetRequest, slo: Slo) -> FleetTable:
    """One fleet read and every replica's diagnosis, as table records (triage.service.fleet)."""
    return fleet_refresh(knowledge(), req.profile, WINDOWS_MIN[req.window], req.window, req.by, req.end, slo)


def _table(records: list[dict[str, object]]) -> pd.DataFrame:
    kb = knowledge()
    return pd.DataFrame([{
        t("fleet_replica"): r["replica"],
        t("fleet_symptoms"): ", ".join(str(s) for s in r["symptoms"]) or ("—" if r["empty"] else t("fleet_none")),  # type: ignore[attr-defined]
        t("fleet_top_cause"): kb.causes[str(r["top_cause"])].short.get(lang()) if r["top_cause"] else "",
        t("fleet_cause_id"): r["top_cause"],
        t("fleet_findings"): r["findings"],
        t("fleet_live"): r["link"],
    } for r in records])


def render(table: FleetTable, at: datetime) -> None:
    records = table.records
    if not records:
        st.info(t("fleet_empty"))
        return
    symptoms = sorted({str(s) for r in records for s in r["symptoms"]})  # type: ignore[attr-defined]
    c1, c2 = st.columns([2, 2])
    text = c1.text_input(t("fleet_filter"), key=session.FLEET_FILTER.name, placeholder="instance=…, ttft.queueing")
    wanted = c2.multiselect(t("fleet_symptom_filter"), symptoms, key=session.FLEET_SYMPTOM_FILTER.name)
    shown = [r for r in records
             if (not text or text.lower() in f"{r['replica']} {r['top_cause']}".lower())
             and (not wanted or set(wanted) & set(r["symptoms"]))]  # type: ignore[call-overload]
    sick = sum(1 for r in records if r["findings"])
    st.caption(t("fleet_summary", total=len(records), sick=sick, shown=len(shown),
                 at=at.astimezone().strftime("%H:%M:%S")))
    st.dataframe(_table(shown), hide_index=True, width="stretch", key=session.FLEET_TABLE.name,
                 column_config={t("fleet_live"): st.column_config.LinkColumn(t("fleet_live"),
                                                                            display_text=t("fleet_open"))})
    fleet_causes(table.fleet)
    read = table.read
    if read.path == "recorded":
        st.caption(t("fleet_read_recorded", rules=read.rules, signals=len(read.signals),
                     at=read.end.astimezone().strftime("%H:%M:%S")))
    else:
        st.caption(t("fleet_read_raw", rules=read.rules, reason=read.reason))


def fleet_causes(diag: Diagnosis | None) -> None:
    """The fleet's own diagnosis under the table: the fleet symptom and the causes only a comparison of replicas
    finds (a straggler, routing skew, every replica saturated), with their evidence; one replica is not measurable."""
    if diag is None:
        return
    st.markdown(f"#### {t('fleet_causes')}")
    if diag.empty:
        st.info(t("fleet_causes_unmeasurable", reason=diag.empty))
        return
    symptom_summary(diag)
    findings_block(diag, select=False)


def refresh_and_render(req: FleetRequest, slo: Slo) -> None:
    """Refresh, or keep the last good table under a stale-data banner when the refresh fails."""
    try:
        table, at = refresh(req, slo), datetime.now(UTC)
        session.FLEET_LAST.set((table, at))
    except TriageError as exc:
        st.error(t("live_refresh_failed", reason=exc.line()))
        last = session.FLEET_LAST.get()
        if last is None:
            return
        table, at = last
        st.warning(t("live_stale", at=at.astimezone().strftime("%H:%M:%S")))
    render(table, at)
