"""Diagnose a metric window: read every need at once, compute server signals, run the rules."""

from __future__ import annotations

from dataclasses import dataclass

from triage.diagnosis.readings import MetricWindow, Readings
from triage.diagnosis.rules import Diagnosis, Slo, diagnose
from triage.diagnosis.server_signals import NEEDS, server_signals
from triage.diagnosis.signals import SignalSet
from triage.knowledge.loader import KnowledgeBase


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
