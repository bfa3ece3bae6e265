"""Sidebar SLO controls: a preset and optional TTFT / TPOT overrides, resolved by the core."""

from __future__ import annotations

import streamlit as st

from components.shell import knowledge, lang, t
from triage.rules import Slo, resolve_slo


def slo_sidebar() -> Slo:
    kb = knowledge()
    names = list(kb.slo_presets)
    with st.sidebar:
        st.markdown(f"**{t('slo_heading')}**")
        preset = st.selectbox(t("slo_preset"), names, index=names.index(kb.default_slo), key="slo_preset",
                              format_func=lambda n: kb.slo_presets[n].title.get(lang()), persist_state="session")
        st.caption(kb.slo_presets[preset].source)
        custom = st.toggle(t("slo_custom"), key="slo_custom", persist_state="session")
        ttft = tpot = None
        if custom:
            base = kb.slo_presets[preset].values
            ttft = st.number_input(t("slo_ttft"), min_value=0.001, value=float(base["ttft_p99_s"]), step=0.1,
                                   format="%.3f", key="slo_ttft", persist_state="session")
            tpot = st.number_input(t("slo_tpot"), min_value=0.001, value=float(base["tpot_p99_s"]), step=0.01,
                                   format="%.3f", key="slo_tpot", persist_state="session")
    return resolve_slo(kb, preset, ttft_p99_s=ttft, tpot_p99_s=tpot)
