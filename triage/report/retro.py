"""The retro walk as data: steps from tree/retro.yaml, the walk's state, and the seed's wrong-usage checks."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from triage.diagnosis.rules import Diagnosis
from triage.errors import TriageError
from triage.knowledge.loader import KnowledgeBase, load_knowledge
from triage.knowledge.model import RetroStep


def load_steps(tree_dir: Path | None = None) -> tuple[RetroStep, ...]:
    """The retro steps of tree/retro.yaml (validated with the rest of the tree)."""
    return load_knowledge(tree_dir).retro


@dataclass
class Event:
    at: str
    step: str
    text: str


@dataclass
class RetroState:
    """Everything a team decided while walking the tree; serializable, so a report can restore it."""

    title: str = "Incident retro"
    source: str = ""
    step: int = 0
    symptom: str | None = None
    cause: str | None = None
    techniques: list[str] = field(default_factory=list)
    change: str = ""
    verification: str | None = None  # the Verify page's overall verdict, when one exists
    notes: dict[str, str] = field(default_factory=dict)
    checklist: dict[str, list[bool]] = field(default_factory=dict)
    timeline: list[Event] = field(default_factory=list)

    def log(self, step: str, text: str) -> None:
        self.timeline.append(Event(datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%SZ"), step, text))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> RetroState:
        try:
            events = [Event(**e) for e in data.get("timeline", [])]
            return cls(**{**data, "timeline": events})
        except TypeError as exc:
            raise TriageError(f"the saved walk does not match this version: {exc}", key="triage-retro") from exc


@dataclass(frozen=True)
class WrongUsage:
    """A wrong usage the seed names, found in the walk."""

    code: str
    technique: str | None = None


HEAVY_LEVEL = "architecture"


def wrong_usages(kb: KnowledgeBase, state: RetroState, diag: Diagnosis | None) -> list[WrongUsage]:
    """The seed's ✗ lines checked against the walk: heavy tools without evidence, stacking, unverified claims."""
    found: list[WrongUsage] = []
    evidenced = set(diag.matched_ids) if diag else set()
    for tid in state.techniques:
        tech = kb.techniques.get(tid)
        if tech is None or tech.level != HEAVY_LEVEL:
            continue
        if not any(c.id in evidenced for c in kb.causes_reaching(tid)):
            found.append(WrongUsage("heavy_without_evidence", tid))
    if len(state.techniques) > 1:
        found.append(WrongUsage("several_at_once"))
    at_end = state.step >= len(load_steps()) - 1
    if at_end and state.techniques and state.verification not in ("gain confirmed",):
        found.append(WrongUsage("claim_without_verification"))
    return found


def suggested(kb: KnowledgeBase, diag: Diagnosis | None) -> tuple[str | None, str | None, list[str]]:
    """What the data answers for symptom, cause and techniques (the top finding), if anything."""
    if not diag or not diag.findings:
        return None, None, []
    top = diag.findings[0]
    return top.symptom, top.cause, list(top.techniques)
