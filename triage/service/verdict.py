"""The verdict a page shows first: the top cause, its deciding numbers and the first action for the engine."""

from __future__ import annotations

from triage.diagnosis.rules import Diagnosis
from triage.diagnosis.verdict import (
    Action,
    RankedTechnique,
    Verdict,
    engine_id,
    first_actions,
    ranked_techniques,
    verdict,
)
from triage.knowledge.loader import KnowledgeBase
from triage.report.first_action import action_sentence
from triage.run import Run

__all__ = ["Action", "RankedTechnique", "Verdict", "action_sentence", "engine_id", "first_actions", "ranked_techniques",
           "run_engine", "verdict_of"]


def run_engine(run: Run) -> str | None:
    """The engine a benchmark run was taken against, when its file names it (``backend: sglang``); else None."""
    return engine_id(run.meta.get("backend"))


def verdict_of(kb: KnowledgeBase, diag: Diagnosis, engine: str | None) -> Verdict:
    return verdict(kb, diag, engine)
