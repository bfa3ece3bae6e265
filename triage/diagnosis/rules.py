"""The rule evaluator: symptom triggers and cause evidence over signals, ordered root cause first."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

from triage.diagnosis.signals import SignalSet
from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.messages import Msg
from triage.knowledge.model import LEVEL_ORDER, Condition, Text

OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq}
CONFIDENCE_RANK = {"high": 0, "medium": 1, "low": 2}


@dataclass(frozen=True)
class Slo:
    """The SLO in force: a preset name and its values (possibly overridden)."""

    name: str
    values: dict[str, float | bool]


@dataclass(slots=True)
class Evidence:
    """One condition checked against the data: ``holds`` is None when the signal is not measurable. Read-only by
    convention (slots, not frozen: a fleet builds ~70 per replica, and a frozen dataclass costs 4x to build)."""

    signal: str
    op: str
    threshold: float | bool
    value: float | bool | None
    unit: str
    holds: bool | None
    meaning: Text
    source: Msg | None = None  # how the signal was measured; None when it was not
    context: bool = False  # shown for its value only; it neither matches nor contradicts the cause
    # the requirements that failed while the condition's own comparison held: why a "5.04× >= 5×" is ✘
    unmet: list[Evidence] = field(default_factory=list)


@dataclass
class Finding:
    cause: str
    symptom: str
    confidence: str
    evidence: list[Evidence]
    not_measurable: list[str]
    techniques: list[str]
    explains: list[str] = field(default_factory=list)


@dataclass
class SymptomCheck:
    """Whether a symptom is present; ``present`` is None when none of its triggers is measurable."""

    symptom: str
    present: bool | None
    evidence: list[Evidence]


@dataclass
class Diagnosis:
    signals: SignalSet
    slo: Slo
    symptoms: list[SymptomCheck]
    findings: list[Finding]
    notes: list[Finding] = field(default_factory=list)
    empty: str = ""  # why the source had nothing to judge; then "no finding" does not mean healthy

    @property
    def matched_ids(self) -> list[str]:
        return [f.cause for f in self.findings]


def resolve_slo(kb: KnowledgeBase, preset: str | None = None, **overrides: float | None) -> Slo:
    """A preset's values with any given override (e.g. ``ttft_p99_s=1.0``) applied."""
    name = preset or kb.default_slo
    if name not in kb.slo_presets:
        raise KeyError(name)
    values = dict(kb.slo_presets[name].values)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Slo(name if not any(v is not None for v in overrides.values()) else f"{name} (custom)", values)


def check(cond: Condition, signals: SignalSet, slo: Slo) -> Evidence | None:
    """Evaluate one condition; None when an ``only_if`` SLO flag switches it off."""
    if cond.only_if is not None and not slo.values.get(cond.only_if):
        return None
    threshold = _threshold(cond, slo)
    sig = signals.get(cond.signal)
    if sig is None:
        return Evidence(cond.signal, cond.op, threshold, None, "", None, cond.meaning, context=cond.context)
    holds = _holds(cond, signals, slo)
    unmet = [] if holds or not OPS[cond.op](sig.value, threshold) else \
        [e for r in cond.requires if (e := check(r, signals, slo)) is not None and e.holds is False]
    return Evidence(cond.signal, cond.op, threshold, sig.value, sig.unit, holds, cond.meaning, sig.source,
                    cond.context, unmet)


def _threshold(cond: Condition, slo: Slo) -> float | bool:
    if cond.slo is not None:
        return float(slo.values[cond.slo]) * cond.factor
    assert cond.value is not None  # a condition has exactly one of value and slo (validated)
    return cond.value


def _holds(cond: Condition, signals: SignalSet, slo: Slo) -> bool | None:
    """Whether ``cond`` holds (its requirements too), without building Evidence: what ``check`` records as
    ``holds``; None when the signal is absent or an ``only_if`` switches the condition off."""
    if cond.only_if is not None and not slo.values.get(cond.only_if):
        return None
    sig = signals.get(cond.signal)
    if sig is None:
        return None
    return bool(OPS[cond.op](sig.value, _threshold(cond, slo))) and not _blocked(cond, signals, slo)


def _blocked(cond: Condition, signals: SignalSet, slo: Slo) -> bool:
    """True when a measurable requirement of ``cond`` fails (e.g. a tail ratio on tiny absolute latencies)."""
    return any(_holds(r, signals, slo) is False for r in cond.requires)


def _checks(conds: list[Condition], signals: SignalSet, slo: Slo) -> list[Evidence]:
    return [e for e in (check(c, signals, slo) for c in conds) if e is not None]


def _confidence(agree: int, contradict: int) -> str:
    if agree >= 3 or (agree == 2 and contradict == 0):
        return "high"
    if agree == 2 or contradict == 0:
        return "medium"
    return "low"


def _ordered_techniques(kb: KnowledgeBase, cause_id: str) -> list[str]:
    ids = [t.id for t in kb.causes[cause_id].techniques]
    return sorted(ids, key=lambda tid: LEVEL_ORDER[kb.techniques[tid].level])  # stable: seed order per level


def _evaluate_cause(kb: KnowledgeBase, cause_id: str, signals: SignalSet, slo: Slo) -> Finding | None:
    rule = kb.causes[cause_id].rule
    if rule is None:
        return None
    pairs = [(c, e) for c in rule.evidence if (e := check(c, signals, slo)) is not None]
    evidence = [e for _, e in pairs]
    counted = [e for c, e in pairs if not c.context]
    agree = sum(e.holds is True for e in counted)
    primary = any(e.holds for c, e in pairs if not c.supports_only and not c.context)
    if agree < rule.min_agree or not primary:
        return None
    contradict = sum(e.holds is False for c, e in pairs if not c.context and not c.one_way)
    return Finding(cause_id, kb.parent[cause_id], _confidence(agree, contradict), evidence,
                   [e.signal for e in evidence if e.holds is None], _ordered_techniques(kb, cause_id))


def _root_cause_first(kb: KnowledgeBase, findings: list[Finding]) -> list[Finding]:
    found = {f.cause for f in findings}
    for f in findings:
        rule = kb.causes[f.cause].rule
        f.explains = [c for c in (rule.explains if rule else []) if c in found]
    order = list(kb.causes)
    return sorted(findings, key=lambda f: (-len(f.explains), CONFIDENCE_RANK[f.confidence], order.index(f.cause)))


def diagnose(kb: KnowledgeBase, signals: SignalSet, slo: Slo) -> Diagnosis:
    """No symptom, no finding: causes are judged only under a symptom whose trigger holds. Fleet signals
    (kind ``fleet``) are judged under the fleet symptoms only, every other set under the replica ones."""
    checks: list[SymptomCheck] = []
    findings: list[Finding] = []
    notes: list[Finding] = []
    scope = "fleet" if signals.kind == "fleet" else "replica"
    for sym in kb.symptoms:
        if sym.scope != scope:
            continue
        evidence = _checks(sym.trigger, signals, slo)
        measured = [e for e in evidence if e.holds is not None]
        present = any(e.holds for e in measured) if measured else None
        checks.append(SymptomCheck(sym.id, present, evidence))
        for cause in sym.causes:
            finding = _evaluate_cause(kb, cause.id, signals, slo)
            if finding is not None:
                (findings if present else notes).append(finding)
    return Diagnosis(signals, slo, checks, _root_cause_first(kb, findings), notes)
