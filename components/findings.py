"""Which nodes to light on the tree: the loaded source's findings, else the bundled sample's."""

from __future__ import annotations

import streamlit as st

from components.shell import knowledge, t
from triage.diagnosis import diagnose_run
from triage.rules import resolve_slo

FINDINGS_KEY = "findings"


@st.cache_resource(show_spinner=False)
def _sample_findings() -> list[str]:
    from components.bench_source import sample

    kb = knowledge()
    return diagnose_run(kb, sample().bench.runs[0], resolve_slo(kb)).matched_ids


def current_highlight() -> tuple[list[str], str]:
    """Cause ids to light and a caption saying where they come from."""
    loaded = st.session_state.get(FINDINGS_KEY)
    if loaded is not None:
        return list(loaded), t("highlight_from_source")
    return _sample_findings(), t("sample_finding_hint")
