"""The Retro page's flow: the walk's steps, what the diagnosis suggests at each, the wrong usages it warns about,
and the Markdown incident report that exports the walk and restores it."""

from __future__ import annotations

from triage.diagnosis.rules import Diagnosis
from triage.knowledge.loader import KnowledgeBase
from triage.report.markdown import WRONG_TEXT, report_markdown, restore_walk
from triage.report.retro import RetroState, RetroStep, load_steps, suggested, wrong_usages

__all__ = ["WRONG_TEXT", "RetroState", "RetroStep", "incident_report", "load_steps", "restore_report", "suggested",
           "wrong_usages"]


def incident_report(kb: KnowledgeBase, diag: Diagnosis | None, state: RetroState, lang: str) -> str:
    """The incident report in ``lang``, the walk embedded so that an import restores it."""
    return report_markdown(kb, diag, state, lang=lang)


def restore_report(markdown: str, kb: KnowledgeBase) -> RetroState:
    """The walk embedded in an exported report; TriageError when the text holds none or it is not valid."""
    return restore_walk(markdown, kb)
