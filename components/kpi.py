"""The KPI row: headline numbers of a run, each set against the SLO in force (rows and labels: the metric
catalogue in tree/signals.yaml; text: the one formatter, triage/knowledge/units.py)."""

from __future__ import annotations

import streamlit as st

from components.shell import knowledge, lang, t
from triage.service.display import fmt_against, fmt_value
from triage.service.knowledge import message_text
from triage.service.model import SignalSet


def kpi_row(signals: SignalSet, slo: dict) -> None:
    kb = knowledge()
    assert kb.kpis is not None  # the loader always reads the KPI rows
    with st.container(horizontal=True):
        for name in kb.kpis.benchmark:
            spec = kb.signals[name]
            label = spec.label.get(lang())
            sig = signals.get(name)
            if sig is None:
                st.metric(label, "—", help=t("not_measurable_short"), border=True)
                continue
            value = float(sig.value)
            shown = fmt_value(value, spec.unit)
            limit = slo.get(spec.slo) if spec.slo else None
            if limit is None or isinstance(limit, bool):
                st.metric(label, shown, border=True, help=message_text(sig.source, lang()))
                continue
            delta = fmt_against(value, float(limit), spec.unit, t("vs_slo"))
            st.metric(label, shown, delta=delta, delta_color="inverse" if spec.worse == "higher" else "normal",
                      border=True, help=message_text(sig.source, lang()))
