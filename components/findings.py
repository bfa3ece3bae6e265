"""Which nodes to light on the tree: the loaded source's findings, else the bundled sample's."""

from __future__ import annotations

import streamlit as st

from components.bench_source import sample
from components.shell import knowledge, t
from triage.diagnosis.benchmark import diagnose_run
from triage.diagnosis.rules import Diagnosis, resolve_slo

FINDINGS_KEY = "findings"
DIAGNOSIS_KEY = "diagnosis"  # (source label, Diagnosis) of the source opened last


def remember(label: str, diag: Diagnosis) -> None:
    """Pages that diagnose a source share it: the tree lights it, the retro walks it."""
    st.session_state[FINDINGS_KEY] = diag.matched_ids
    st.session_state[DIAGNOSIS_KEY] = (label, diag)


def forget() -> None:
    """Nothing of the user's loaded: the tree and the retro go back to the labelled sample."""
    st.session_state.pop(FINDINGS_KEY, None)
    st.session_state.pop(DIAGNOSIS_KEY, None)


@st.cache_resource(show_spinner=False)
def _sample_diagnosis() -> Diagnosis:
    kb = knowledge()
    return diagnose_run(kb, sample().bench.runs[0], resolve_slo(kb))


def current_diagnosis() -> tuple[str, Diagnosis]:
    """The diagnosis of the source opened last, else the bundled sample's."""
    if DIAGNOSIS_KEY in st.session_state:
        return st.session_state[DIAGNOSIS_KEY]
    return t("sample_label"), _sample_diagnosis()


def current_highlight() -> tuple[list[str], str]:
    """Cause ids to light and a caption saying where they come from."""
    loaded = st.session_state.get(FINDINGS_KEY)
    if loaded is not None:
        return list(loaded), t("highlight_from_source")
    return _sample_diagnosis().matched_ids, t("sample_finding_hint")
