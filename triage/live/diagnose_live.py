"""Diagnose a metric window: read every need at once, compute server signals, run the rules."""

from __future__ import annotations

from dataclasses import dataclass

from triage.knowledge import KnowledgeBase
from triage.live.readings import MetricWindow, Readings
from triage.live.server_signals import NEEDS, server_signals
from triage.rules import Diagnosis, Slo, diagnose
from triage.signals import SignalSet


@dataclass
class LiveDiagnosis:
    diagnosis: Diagnosis
    readings: Readings
    engine: str


def window_signals(kb: KnowledgeBase, window: MetricWindow) -> tuple[SignalSet, Readings]:
    """Every need read at once, then the server signals they give."""
    readings = window.read(NEEDS)
    return server_signals(kb, readings), readings


def diagnose_window(kb: KnowledgeBase, window: MetricWindow, slo: Slo) -> LiveDiagnosis:
    signals, readings = window_signals(kb, window)
    return LiveDiagnosis(diagnose(kb, signals, slo), readings, window.engine.id)
