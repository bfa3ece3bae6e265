"""One Live refresh: a window pair → signals → diagnosis → deltas against the baseline, plus the panels' series."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from triage.diagnosis.compare import SignalDelta, signal_deltas
from triage.diagnosis.roofline import Hardware
from triage.diagnosis.rules import Diagnosis, Slo
from triage.diagnosis.window import LiveDiagnosis, diagnose_window, window_signals
from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.needs import Need, SeriesPoint
from triage.knowledge.panels import load_panels
from triage.knowledge.recipes import recipe_needs
from triage.service.windows import Clock, WindowPair

SERIES_POINTS = 60
CACHE_CONFIG = Need("info", "cache_config")


@dataclass
class LiveResult:
    """What one refresh found: the diagnosis, every signal against the baseline, the panels' series."""

    live: LiveDiagnosis
    deltas: list[SignalDelta]       # empty without a baseline
    series: dict[Need, list[SeriesPoint]]
    missing: dict[Need, str]        # need → why the window cannot answer it
    label: str
    at: float                       # unix seconds of the refresh

    @property
    def cache_config(self) -> dict[str, str]:
        """The engine's cache_config_info labels (vLLM), empty when the window has none."""
        labels = self.live.readings.values.get(CACHE_CONFIG)
        return dict(labels) if isinstance(labels, dict) else {}


def panel_needs() -> list[Need]:
    """Every need the Live panels draw, once each."""
    return list(dict.fromkeys(n for p in load_panels() for n in p.needs()))


def signal_keys(kb: KnowledgeBase, name: str) -> set[str]:
    """The metric keys a server signal's recipe reads, through the other signals it is computed from."""
    return {n.key for n in recipe_needs(kb, name)}


def evidence_group(kb: KnowledgeBase, diagnosis: Diagnosis) -> str:
    """The panel group (Live tab) to open: the one whose panels draw most of the top finding's evidence that
    holds (a note's when nothing is felt); a tie or evidence no panel draws goes to the group listing the
    finding's symptom; no finding, the first group."""
    groups = kb.panel_groups
    lit = diagnosis.findings or diagnosis.notes
    if not lit:
        return groups[0].id
    top = lit[0]
    keys: set[str] = set()
    for e in top.evidence:
        if e.holds and not e.context:
            keys |= signal_keys(kb, e.signal)
    drawn = {g.id: sum(1 for p in kb.panels if p.group == g.id and {n.key for n in p.needs()} & keys)
             for g in groups}
    best = max(drawn.values())
    tied = [g for g in groups if drawn[g.id] == best] if best else list(groups)
    return next((g.id for g in tied if top.symptom in g.symptoms), tied[0].id)


def refresh(kb: KnowledgeBase, pair: WindowPair, slo: Slo, series_points: int = SERIES_POINTS,
            clock: Clock = time.time, hardware: Hardware | None = None) -> LiveResult:
    """One refresh; the window's diagnosis, the panels' series and the baseline's signals are read concurrently.

    ``series_points=0`` skips the panels (the CLI has none); ``hardware`` adds the roofline comparisons.
    Raises TriageError when a source fails.
    """
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="refresh") as pool:  # the three reads overlap
        live_f = pool.submit(diagnose_window, kb, pair.current, slo, hardware)
        series_f = pool.submit(pair.current.series, panel_needs(), series_points) if series_points else None
        base_f = pool.submit(window_signals, kb, pair.baseline, hardware) if pair.baseline is not None else None
        live = live_f.result()
        series = series_f.result() if series_f else {}
        baseline = base_f.result()[0] if base_f else None
    deltas = signal_deltas(live.diagnosis.signals, baseline) if baseline is not None else []
    return LiveResult(live, deltas, series, dict(live.readings.missing), pair.label, clock())
