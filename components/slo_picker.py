"""Sidebar controls the diagnosis depends on: the SLO preset and overrides, and the serving hardware."""

from __future__ import annotations

import streamlit as st

from components import session
from components.shell import knowledge, lang, t, translated_choice
from triage.service.knowledge import resolve_slo
from triage.service.memory import load_gpus, load_models
from triage.service.model import Hardware, Slo
from triage.service.params import MAX_SLO_S


def slo_sidebar() -> Slo:
    kb = knowledge()
    names = list(kb.slo_presets)
    with st.sidebar:
        st.markdown(f"**{t('slo_heading')}**")
        preset = translated_choice(st.selectbox, t("slo_preset"), names, session.SLO_PRESET,
                                   lambda n: kb.slo_presets[n].title.get(lang()),
                                   index=names.index(kb.default_slo), persist_state="session")
        st.caption(kb.slo_presets[preset].source.get(lang()))
        custom = st.toggle(t("slo_custom"), key=session.SLO_CUSTOM.name, persist_state="session")
        ttft = tpot = None
        if custom:
            base = kb.slo_presets[preset].values
            # at most a day, as the CLI: 1e300 was taken, and the KPI read a 300-digit "vs SLO"
            ttft = st.number_input(t("slo_ttft"), min_value=0.001, max_value=MAX_SLO_S, value=float(base["ttft_p99_s"]),
                                   step=0.1, format="%.3f", key=session.SLO_TTFT.name, persist_state="session")
            tpot = st.number_input(t("slo_tpot"), min_value=0.001, max_value=MAX_SLO_S, value=float(base["tpot_p99_s"]),
                                   step=0.01, format="%.3f", key=session.SLO_TPOT.name, persist_state="session")
    return resolve_slo(kb, preset, ttft_p99_s=ttft, tpot_p99_s=tpot)


def hardware_sidebar() -> Hardware | None:
    """Optional serving hardware, so TPOT can be set against the decode roofline floor."""
    models, gpus = load_models(), load_gpus()
    with st.sidebar:
        st.markdown(f"**{t('hw_heading')}**")
        model_ids, gpu_ids = [None, *models], [None, *gpus]
        model = translated_choice(st.selectbox, t("mem_model"), model_ids, session.HW_MODEL,
                                  lambda m: t("hw_unknown") if m is None else models[m].title, persist_state="session")
        gpu = translated_choice(st.selectbox, t("mem_gpu"), gpu_ids, session.HW_GPU,
                                lambda g: t("hw_unknown") if g is None else gpus[g].title, persist_state="session")
        tp = st.selectbox("TP", [1, 2, 4, 8], key=session.HW_TP.name, persist_state="session")
        if model is None or gpu is None:
            st.caption(t("hw_hint"))
            return None
    return Hardware(model, gpu, tp=int(tp))
