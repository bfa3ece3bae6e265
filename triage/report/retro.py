"""The retro walk as data: steps from tree/retro.yaml, the walk's state, and the seed's wrong-usage checks."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path

from triage.diagnosis.rules import Diagnosis
from triage.errors import TriageError
from triage.knowledge.loader import KnowledgeBase, load_knowledge
from triage.knowledge.model import RetroStep
from triage.knowledge.units import count


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
    def from_dict(cls, data: object, kb: KnowledgeBase | None = None) -> RetroState:
        """A walk from untrusted data (an imported report): every field typed and bounded, ids checked against
        the tree when ``kb`` is given; anything else is a TriageError naming the field."""
        return _walk_from(data, kb)


WALK_KEY = "triage-retro"
MAX_TEXT = {"title": 200, "source": 500, "change": 2_000, "verification": 100}
MAX_NOTE = 10_000
MAX_TECHNIQUES = 20
MAX_CHECKS = 100
MAX_EVENTS = 1_000
EVENT_TEXT = {"at": 40, "step": 80, "text": 500}


def _bad(field: str, why: str) -> TriageError:
    return TriageError(f"the saved walk is not valid: {field} {why}", key=WALK_KEY)


def _text(value: object, field: str, limit: int, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _bad(field, "must be text")
    if len(value) > limit:
        raise _bad(field, f"is longer than {count(limit)} characters")
    return value


def _known_id(value: object, field: str, known: set[str] | None) -> str | None:
    text = _text(value, field, 100, optional=True)
    if text is not None and known is not None and text not in known:
        raise _bad(field, "is not in this decision tree")
    return text


def _walk_from(data: object, kb: KnowledgeBase | None) -> RetroState:
    if not isinstance(data, dict):
        raise _bad("the walk", "must be an object")
    unknown = sorted(str(k)[:40] for k in data if k not in {f.name for f in fields(RetroState)})
    if unknown:
        raise _bad("field", f"{', '.join(unknown[:5])} is unknown")
    steps = load_steps()
    step_ids = {s.id for s in steps}
    step = data.get("step", 0)
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < len(steps):
        raise _bad("step", f"must be a whole number from 0 to {len(steps) - 1}")
    techniques = data.get("techniques", [])
    if not isinstance(techniques, list) or len(techniques) > MAX_TECHNIQUES:
        raise _bad("techniques", f"must be a list of at most {MAX_TECHNIQUES} technique ids")
    known_tech = set(kb.techniques) if kb else None
    notes = data.get("notes", {})
    if not isinstance(notes, dict) or any(k not in step_ids for k in notes):
        raise _bad("notes", "must map step ids of the walk to text")
    checklist = data.get("checklist", {})
    if not isinstance(checklist, dict) or any(k not in step_ids for k in checklist):
        raise _bad("checklist", "must map step ids of the walk to lists of true/false")
    for key, ticks in checklist.items():
        if not isinstance(ticks, list) or len(ticks) > MAX_CHECKS or not all(isinstance(x, bool) for x in ticks):
            raise _bad(f"checklist.{key}", "must be a list of true/false")
    timeline = data.get("timeline", [])
    if not isinstance(timeline, list) or len(timeline) > MAX_EVENTS:
        raise _bad("timeline", f"must be a list of at most {count(MAX_EVENTS)} events")
    events = []
    for i, event in enumerate(timeline):
        if not isinstance(event, dict) or set(event) != set(EVENT_TEXT):
            raise _bad(f"timeline[{i}]", "must have exactly at, step and text")
        events.append(Event(**{k: str(_text(event[k], f"timeline[{i}].{k}", n)) for k, n in EVENT_TEXT.items()}))
    return RetroState(
        title=str(_text(data.get("title", "Incident retro"), "title", MAX_TEXT["title"])),
        source=str(_text(data.get("source", ""), "source", MAX_TEXT["source"])),
        step=step,
        symptom=_known_id(data.get("symptom"), "symptom", {s.id for s in kb.symptoms} if kb else None),
        cause=_known_id(data.get("cause"), "cause", set(kb.causes) if kb else None),
        techniques=[str(_known_id(x, f"techniques[{i}]", known_tech)) for i, x in enumerate(techniques)],
        change=str(_text(data.get("change", ""), "change", MAX_TEXT["change"])),
        verification=_text(data.get("verification"), "verification", MAX_TEXT["verification"], optional=True),
        notes={k: str(_text(v, f"notes.{k}", MAX_NOTE)) for k, v in notes.items()},
        checklist={k: list(v) for k, v in checklist.items()},
        timeline=events,
    )


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
