"""The UI's view of the model: the domain types pages and components render, hold or catch, re-exported here.

Pages and components import these from this module, never from the layer that defines them (tests/test_layers.py
and the import-linter contract in pyproject.toml check it), so the core can move a type without touching the UI.
"""

from __future__ import annotations

from triage.diagnosis.compare import SignalDelta
from triage.diagnosis.roofline import Hardware
from triage.diagnosis.rules import Diagnosis, Evidence, Finding, Slo
from triage.diagnosis.signals import SignalSet
from triage.diagnosis.sweep import SweepPoint
from triage.errors import TriageError
from triage.run import Benchmark, Run

__all__ = ["Benchmark", "Diagnosis", "Evidence", "Finding", "Hardware", "Run", "SignalDelta", "SignalSet", "Slo",
           "SweepPoint", "TriageError"]
