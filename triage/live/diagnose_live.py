"""Diagnose a metric window: read every need at once, compute server signals, run the rules."""

from __future__ import annotations

from dataclasses import dataclass

from triage.knowledge import KnowledgeBase
from triage.live.readings import MetricWindow, Readings
from triage.live.server_signals import NEEDS, server_signals
from triage.rules import Diagnosis, Slo, diagnose


@dataclass
class LiveDiagnosis:
    diagnosis: Diagnosis
    readings: Readings
    engine: str


def diagnose_window(kb: KnowledgeBase, window: MetricWindow, slo: Slo) -> LiveDiagnosis:
    readings = window.read(NEEDS)
    return LiveDiagnosis(diagnose(kb, server_signals(kb, readings), slo), readings, window.engine.id)
