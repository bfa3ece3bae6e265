"""Which nodes to light on the tree: the loaded source's findings, else the bundled sample's; none (said so) while
a page's diagnosis of new data has not finished."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from components import session
from components.bench_source import sample
from components.shell import knowledge, t
from triage.service.benchmark import diagnose_benchmark
from triage.service.knowledge import resolve_slo
from triage.service.model import Diagnosis


@contextmanager
def diagnosing(page: str) -> Iterator[None]:
    """Around the body of a page that diagnoses what it shows (``page``: its ui key, e.g. ``nav_benchmark``).

    A page switch stops a run at its next Streamlit call (a session-state access too), which may come after the
    page took new data (an upload parsed, another file or run picked) and before ``remember``: the session's
    diagnosis is then the replaced data's. From the body's start until ``remember`` or ``forget`` it is marked
    unfinished and no page shows it; a body that ends without diagnosing anything keeps the previous one. A run
    stopped or failed half-way stays marked (``unfinished``) until the page runs again."""
    session.DIAGNOSIS_UNFINISHED.set(page)
    yield
    session.DIAGNOSIS_UNFINISHED.clear()  # reached only when the body ended normally


def remember(label: str, diag: Diagnosis, engine: str | None = None) -> None:
    """Pages that diagnose a source share it: the tree lights it, the retro walks it, Diagnose's verdict names
    the engine's first action. Called as soon as the diagnosis exists, before anything is drawn from it."""
    session.FINDINGS.set(diag.matched_ids)
    session.DIAGNOSIS.set((label, diag))
    if engine:
        session.DIAGNOSIS_ENGINE.set(engine)
    else:
        session.DIAGNOSIS_ENGINE.clear()
    session.DIAGNOSIS_UNFINISHED.clear()  # last: a run stopped between these writes stays unfinished


def forget() -> None:
    """Nothing of the user's loaded: the tree and the retro go back to the labelled sample."""
    session.FINDINGS.clear()
    session.DIAGNOSIS.clear()
    session.DIAGNOSIS_ENGINE.clear()
    session.DIAGNOSIS_UNFINISHED.clear()


def unfinished() -> str | None:
    """The ui key of the page whose diagnosis of new data has not finished (left before its run ended), if any."""
    return session.DIAGNOSIS_UNFINISHED.get()


def unfinished_text() -> str:
    """Why no diagnosis is shown while ``unfinished``: which page, and how to finish it."""
    page = unfinished() or "nav_benchmark"
    return t("diagnosis_unfinished", page=t(page))


@st.cache_resource(show_spinner=False)
def _sample_diagnosis() -> Diagnosis:
    kb = knowledge()
    return diagnose_benchmark(kb, sample().bench.runs[0], resolve_slo(kb))


def current_diagnosis() -> tuple[str, Diagnosis] | None:
    """The diagnosis of the source opened last, else the bundled sample's; None while ``unfinished``."""
    if unfinished():
        return None
    opened = session.DIAGNOSIS.get()
    if opened is not None:
        return opened
    return t("sample_label"), _sample_diagnosis()


def showing_sample() -> bool:
    """True when nothing of the user's is loaded and the pages fall back to the bundled sample."""
    return session.DIAGNOSIS.get() is None and not unfinished()


def current_engine() -> str | None:
    """The engine of the source opened last, when it is known."""
    return session.DIAGNOSIS_ENGINE.get() if session.DIAGNOSIS.get() is not None and not unfinished() else None


def current_highlight() -> tuple[list[str], str]:
    """Cause ids to light and a caption saying where they come from (none while ``unfinished``)."""
    if unfinished():
        return [], unfinished_text()
    loaded = session.FINDINGS.get()
    if loaded is not None:
        return list(loaded), t("highlight_from_source")
    return _sample_diagnosis().matched_ids, t("sample_finding_hint")
