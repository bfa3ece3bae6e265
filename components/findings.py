"""Which nodes to light on the tree: the loaded source's findings, else the bundled sample."""

from __future__ import annotations

from pathlib import Path

import streamlit as st
import yaml

from components.shell import t
from triage.knowledge import DEFAULT_TREE_DIR

FINDINGS_KEY = "findings"
SAMPLE = DEFAULT_TREE_DIR / "sample" / "finding.yaml"


@st.cache_data(show_spinner=False)
def _sample_causes(path: Path = SAMPLE) -> list[str]:
    return list(yaml.safe_load(path.read_text(encoding="utf-8"))["causes"])


def current_highlight() -> tuple[list[str], str]:
    """Cause ids to light and a caption saying where they come from."""
    loaded = st.session_state.get(FINDINGS_KEY)
    if loaded:
        return list(loaded), ""
    return _sample_causes(), t("sample_finding_hint")
