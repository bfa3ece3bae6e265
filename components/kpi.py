"""The KPI row: headline numbers of a run, each set against the SLO in force."""

from __future__ import annotations

import streamlit as st

from components.shell import t
from triage.diagnosis.signals import SignalSet

# (signal, label key, SLO key or None, scale to display unit, display unit)
KPIS = (
    ("ttft_p50_s", "TTFT p50", None, 1000, "ms"),
    ("ttft_p90_s", "TTFT p90", None, 1000, "ms"),
    ("ttft_p99_s", "TTFT p99", "ttft_p99_s", 1000, "ms"),
    ("tpot_p50_s", "TPOT p50", None, 1000, "ms"),
    ("tpot_p99_s", "TPOT p99", "tpot_p99_s", 1000, "ms"),
    ("e2e_p50_s", "E2E p50", None, 1, "s"),
    ("e2e_p99_s", "E2E p99", None, 1, "s"),
    ("req_per_s", "req/s", None, 1, ""),
    ("out_tok_per_s", "out tok/s", None, 1, ""),
    ("error_rate", "kpi_errors", "error_rate_max", 100, "%"),
)


def kpi_row(signals: SignalSet, slo: dict) -> None:
    with st.container(horizontal=True):
        for name, label, slo_key, scale, unit in KPIS:
            label = t(label) if label.startswith("kpi_") else label
            sig = signals.get(name)
            if sig is None:
                st.metric(label, "—", help=t("not_measurable_short"), border=True)
                continue
            value = float(sig.value) * scale
            shown = f"{value:,.0f} {unit}".strip() if value >= 100 else f"{value:.3g} {unit}".strip()
            if slo_key is None:
                st.metric(label, shown, border=True, help=sig.source)
                continue
            limit = float(slo[slo_key]) * scale
            delta = f"{value - limit:+.3g} {unit} vs SLO {limit:g}".strip()
            st.metric(label, shown, delta=delta, delta_color="inverse", border=True, help=sig.source)
