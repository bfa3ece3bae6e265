"""The verdict: a diagnosis in one block — the top cause, the numbers that decide it, the first action for the engine.

Also the techniques of a cause ranked for an engine: a technique the engine already runs by default goes after
the ones that change something, with the switch that would have turned it off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal

from triage.diagnosis.rules import Diagnosis, Evidence, Finding
from triage.diagnosis.signals import SignalSet
from triage.knowledge.loader import KnowledgeBase, load_knowledge
from triage.knowledge.messages import Msg
from triage.knowledge.model import RelativeCap, Text

State = Literal["finding", "note", "symptom_only", "healthy", "partly_measured", "not_measurable", "empty"]
MAX_DECIDING = 2  # the one or two numbers that decide the verdict


@dataclass(frozen=True)
class RankedTechnique:
    """A technique of a cause for one engine; ``default_on`` when the engine already runs it (then ranked last)."""

    id: str
    default_on: bool
    off_switch: str = ""  # how a deployment would have turned it off ("" when it cannot be)


CapState = Literal["raise", "kv_unknown", "kv_full", "unmeasured"]


@dataclass(frozen=True)
class CapAdvice:
    """A batch-cap action relative to the cap the data shows. ``raise``: the command holds ``target`` (factor ×
    the cap, bounded by the KV headroom); ``kv_unknown``: factor × the cap, KV not measurable; ``kv_full``: the
    command is the memory cause's, the cap is kept; ``unmeasured``: the command is a starting point. ``sentence``
    is the data's template; the numbers stay raw for the reader's formatter (triage/report/first_action.py)."""

    state: CapState
    sentence: Text
    factor: float
    ceiling: float
    cap: float | None = None
    target: int | None = None
    waiting: float | None = None
    kv: float | None = None
    how: Msg | None = None  # how the cap was read (the running_cap signal's source)


@dataclass(frozen=True)
class Action:
    """The first action for one engine: the exact flags (or NAME=VALUE) and the sentence saying what it does."""

    engine: str
    command: str
    do: Text
    client: bool = False  # the knob is the load's (the client's concurrency), not an engine flag
    cluster: bool = False  # the knob is the deployment's or the router's (a fleet cause), not an engine flag
    cap: CapAdvice | None = None  # set when the command is relative to the measured batch cap


@dataclass(frozen=True)
class Verdict:
    """What a page says first. ``engine`` is the detected engine id, or None (then ``actions`` holds all three)."""

    state: State
    engine: str | None
    cause: str | None = None
    symptom: str | None = None
    confidence: str | None = None
    deciding: list[Evidence] = field(default_factory=list)  # evidence that holds, or a healthy run's numbers
    actions: list[Action] = field(default_factory=list)  # the detected engine's first, else one per engine
    already_on: list[RankedTechnique] = field(default_factory=list)
    symptoms: list[str] = field(default_factory=list)  # present symptoms (symptom_only), else the unmeasured ones
    reason: str = ""  # why there is nothing to judge (state "empty"), as the core wrote it


def engine_id(name: str | None, kb: KnowledgeBase | None = None) -> str | None:
    """A serving engine's id (tree/engines/*.yaml) from what a source calls it (``vllm``, ``sglang-oai``, ``tgi``…);
    None when unknown."""
    low = (name or "").lower()
    serving = (kb or load_knowledge()).serving
    return next((e for e in serving if low == e or low.startswith(f"{e}-") or low.startswith(f"{e}_")), None)


def ranked_techniques(kb: KnowledgeBase, finding_techniques: list[str], engine: str | None) -> list[RankedTechnique]:
    """The finding's techniques in their order, those already on in ``engine`` moved after the rest (stable).
    Without a detected engine a technique counts as on only when every engine runs it by default."""
    ranked = []
    for tid in finding_techniques:
        knobs = kb.techniques[tid].knobs
        spec = next((k for e, k in knobs.items() if e == engine), None)
        if spec is not None:
            on, switch = spec.default_on, spec.off_switch
        else:
            on, switch = all(k.default_on for k in knobs.values()), ""
        ranked.append(RankedTechnique(tid, on, switch))
    return sorted(ranked, key=lambda r: r.default_on)


def first_actions(kb: KnowledgeBase, cause_id: str, engine: str | None,
                  signals: SignalSet | None = None) -> list[Action]:
    """The cause's first action for ``engine``; one per engine when it is not known (empty without data). A
    batch-cap action is set relative to the cap ``signals`` show (a starting point, said so, when none)."""
    first = kb.causes[cause_id].first_action
    if first is None:
        return []
    engines = [engine] if engine in first.engines else [e for e in kb.serving if e in first.engines]
    actions = [Action(e, first.command(e), first.sentence(e), first.client, first.cluster)
               for e in engines if e is not None]
    rel = first.relative
    if rel is None:
        return actions
    return [_relative(kb, rel, a, signals or SignalSet("server")) if a.engine in rel.flags else a for a in actions]


def _relative(kb: KnowledgeBase, rel: RelativeCap, action: Action, signals: SignalSet) -> Action:
    """Factor × the measured cap, bounded by what the KV headroom allows (KV use grows with the running count);
    the memory cause's action when the KV cache is already at the ceiling; the plain command, as a starting
    point, when no cap was measured."""
    cap, kv_peak, waiting = (_number(signals, n) for n in ("running_cap", "kv_usage_max", "waiting_mean"))
    source = signals.values["running_cap"].source if cap else None
    if not cap:
        return replace(action, cap=CapAdvice("unmeasured", rel.unmeasured[action.engine], rel.factor, rel.kv_ceiling))
    flag = rel.flags[action.engine]
    most = math.floor(cap * rel.factor)
    if kv_peak is None:
        return replace(action, command=flag.format(target=most), cap=CapAdvice(
            "kv_unknown", rel.kv_unknown, rel.factor, rel.kv_ceiling, cap, most, waiting, None, source))
    target = min(most, math.floor(cap * rel.kv_ceiling / kv_peak)) if kv_peak > 0 else most
    if target <= cap:
        memory = kb.causes[rel.memory_cause].first_action
        return replace(action, command=memory.command(action.engine) if memory is not None else action.command,
                       cap=CapAdvice("kv_full", rel.kv_full, rel.factor, rel.kv_ceiling, cap, None, waiting, kv_peak,
                                     source))
    return replace(action, command=flag.format(target=target), cap=CapAdvice(
        "raise", rel.measured, rel.factor, rel.kv_ceiling, cap, target, waiting, kv_peak, source))


def _number(signals: SignalSet, name: str) -> float | None:
    s = signals.get(name)
    return None if s is None or isinstance(s.value, bool) else float(s.value)


def _deciding(f: Finding) -> list[Evidence]:
    return [e for e in f.evidence if e.holds and not e.context][:MAX_DECIDING]


def _lit(kb: KnowledgeBase, f: Finding, state: State, engine: str | None, signals: SignalSet) -> Verdict:
    ranked = ranked_techniques(kb, f.techniques, engine)
    return Verdict(state, engine, f.cause, f.symptom, f.confidence, _deciding(f),
                   first_actions(kb, f.cause, engine, signals), [r for r in ranked if r.default_on])


def verdict(kb: KnowledgeBase, diag: Diagnosis, engine: str | None = None) -> Verdict:
    """The verdict of a diagnosis. No finding is "healthy" only when every symptom was measured and none is
    present; a symptom that could not be measured is named, never read as health."""
    engine = engine if engine in kb.serving else None
    if diag.empty:
        return Verdict("empty", engine, reason=diag.empty)
    if diag.findings:
        return _lit(kb, diag.findings[0], "finding", engine, diag.signals)
    present = [c.symptom for c in diag.symptoms if c.present]
    if present:
        check = next(c for c in diag.symptoms if c.present)
        numbers = [e for e in check.evidence if e.holds][:MAX_DECIDING]
        return Verdict("symptom_only", engine, symptom=check.symptom, deciding=numbers, symptoms=present)
    unmeasured = [c.symptom for c in diag.symptoms if c.present is None]
    if diag.notes:  # ``symptoms``: the unmeasured ones, so a note under one is not called "within the SLO"
        lit = _lit(kb, diag.notes[0], "note", engine, diag.signals)
        return Verdict(lit.state, engine, lit.cause, lit.symptom, lit.confidence, lit.deciding, lit.actions,
                       lit.already_on, unmeasured)
    measured = [e for c in diag.symptoms if c.present is False for e in c.evidence if e.holds is False]
    if not measured:
        return Verdict("not_measurable", engine, symptoms=unmeasured)
    state: State = "partly_measured" if unmeasured else "healthy"
    return Verdict(state, engine, deciding=measured[:MAX_DECIDING], symptoms=unmeasured)
