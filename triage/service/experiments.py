"""The Verify and Log pages' flow: compare a baseline run with a candidate, and keep or read the comparison in
the experiment log (TRIAGE_LOG_DB: a path, sqlite:/// or postgresql:// URL, else the user data directory)."""

from __future__ import annotations

import os

from triage.diagnosis.rules import Slo
from triage.knowledge.loader import KnowledgeBase
from triage.run import Run
from triage.verify.comparison import (
    GAIN,
    NOISE_FLOOR_PCT,
    REGRESSION,
    SUMMARY_TOLERANCE_PCT,
    Comparison,
    MetricDelta,
    Note,
    compare,
    comparison_json,
    metric_specs,
)
from triage.verify.experiment_log import ExperimentLog, entry_from, sha256

__all__ = ["GAIN", "NOISE_FLOOR_PCT", "REGRESSION", "SUMMARY_TOLERANCE_PCT", "Comparison", "ExperimentLog",
           "MetricDelta", "Note", "compare_runs", "experiment_log", "label_digest", "metric_specs", "save_experiment"]


def compare_runs(base: Run, cand: Run, slo: Slo, technique: str | None, kb: KnowledgeBase) -> Comparison:
    """Baseline → candidate as a page compares them: few requests are compared with their wide intervals, never
    refused for that alone (the CI gate refuses)."""
    return compare(base, cand, slo, technique=technique, kb=kb, refuse_few=False)


def experiment_log() -> ExperimentLog:
    """The experiment log: TRIAGE_LOG_DB (a path, sqlite:/// or postgresql:// URL), else the user data directory."""
    return ExperimentLog(os.environ.get("TRIAGE_LOG_DB") or None)


def label_digest(label: str) -> str:
    """The SHA-256 a window's label stands in for a file's (a Prometheus window has no file bytes)."""
    return sha256(label.encode())


def save_experiment(c: Comparison, base: tuple[str, str], cand: tuple[str, str], who: str | None, note: str,
                    created_by: str | None) -> int:
    """Record the comparison of ``base`` and ``cand`` (name, SHA-256) in the experiment log; its new id."""
    return experiment_log().save(entry_from(comparison_json(c), base, cand, who, note, created_by=created_by))
