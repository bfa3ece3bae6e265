"""Two scrape texts, a minute apart, as a window, its diagnosis under the chat SLO and one cause's finding
(engine-metric tests)."""

from __future__ import annotations

from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.window import diagnose_window
from triage.sources.metrics.exposition import parse_metrics_text
from triage.sources.metrics.snapshot_window import SnapshotWindow


def window(kb, before: str, after: str) -> SnapshotWindow:
    snaps = [parse_metrics_text(body, at, f"scrape@{at}") for body, at in ((before, 0.0), (after, 60.0))]
    return SnapshotWindow(snaps, engines=kb.engines)


def diagnosis(kb, win: SnapshotWindow):
    return diagnose_window(kb, win, resolve_slo(kb, "chat")).diagnosis


def finding(kb, win: SnapshotWindow, cause: str):
    """The finding of ``cause`` in the window's chat-SLO diagnosis, or None."""
    return next((f for f in diagnosis(kb, win).findings if f.cause == cause), None)


def held(found) -> dict[str, float]:
    """The values of a finding's evidence that holds, but its context rows."""
    return {e.signal: e.value for e in found.evidence if e.holds and not e.context}
