"""Which nodes to light on the tree: the loaded source's findings, else the bundled sample's."""

from __future__ import annotations

import streamlit as st

from components import session
from components.bench_source import sample
from components.shell import knowledge, t
from triage.service.benchmark import diagnose_benchmark
from triage.service.knowledge import resolve_slo
from triage.service.model import Diagnosis


def remember(label: str, diag: Diagnosis, engine: str | None = None) -> None:
    """Pages that diagnose a source share it: the tree lights it, the retro walks it, Diagnose's verdict names
    the engine's first action."""
    session.FINDINGS.set(diag.matched_ids)
    session.DIAGNOSIS.set((label, diag))
    if engine:
        session.DIAGNOSIS_ENGINE.set(engine)
    else:
        session.DIAGNOSIS_ENGINE.clear()


def forget() -> None:
    """Nothing of the user's loaded: the tree and the retro go back to the labelled sample."""
    session.FINDINGS.clear()
    session.DIAGNOSIS.clear()
    session.DIAGNOSIS_ENGINE.clear()


@st.cache_resource(show_spinner=False)
def _sample_diagnosis() -> Diagnosis:
    kb = knowledge()
    return diagnose_benchmark(kb, sample().bench.runs[0], resolve_slo(kb))


def current_diagnosis() -> tuple[str, Diagnosis]:
    """The diagnosis of the source opened last, else the bundled sample's."""
    opened = session.DIAGNOSIS.get()
    if opened is not None:
        return opened
    return t("sample_label"), _sample_diagnosis()


def showing_sample() -> bool:
    """True when nothing of the user's is loaded and the pages fall back to the bundled sample."""
    return session.DIAGNOSIS.get() is None


def current_engine() -> str | None:
    """The engine of the source opened last, when it is known."""
    return session.DIAGNOSIS_ENGINE.get() if session.DIAGNOSIS.get() is not None else None


def current_highlight() -> tuple[list[str], str]:
    """Cause ids to light and a caption saying where they come from."""
    loaded = session.FINDINGS.get()
    if loaded is not None:
        return list(loaded), t("highlight_from_source")
    return _sample_diagnosis().matched_ids, t("sample_finding_hint")
