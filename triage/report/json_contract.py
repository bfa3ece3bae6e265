"""The ``diagnose --json`` contract: one object every view can be checked against."""

from __future__ import annotations

from typing import Any

from triage.diagnosis.rules import Diagnosis, Evidence, Finding
from triage.knowledge.messages import message_text


def _evidence(e: Evidence, lang: str) -> dict[str, Any]:
    return {"signal": e.signal, "value": e.value, "op": e.op, "threshold": e.threshold, "unit": e.unit,
            # "source" in English whatever ``lang``: the contract's text for how a signal was measured
            "holds": e.holds, "meaning": e.meaning.get(lang), "source": message_text(e.source, "en"),
            "context": e.context,
            "unmet": [_evidence(r, lang) for r in e.unmet]}


def _finding(f: Finding, lang: str) -> dict[str, Any]:
    return {"cause": f.cause, "symptom": f.symptom, "confidence": f.confidence,
            "evidence": [_evidence(e, lang) for e in f.evidence if e.holds is not None],
            "not_measurable": f.not_measurable, "techniques": f.techniques, "explains": f.explains}


def diagnosis_json(diag: Diagnosis, *, source: str, fmt: str, runs: list[dict[str, Any]],
                   lang: str = "en") -> dict[str, Any]:
    return {
        "source": source,
        "format": fmt,
        "runs": runs,
        "slo": {"name": diag.slo.name, **diag.slo.values},
        "signals": {s.name: {"value": s.value, "unit": s.unit, "source": message_text(s.source, "en")}
                    for s in diag.signals.values.values()},
        "symptoms": [{"symptom": c.symptom, "present": c.present,
                      "evidence": [_evidence(e, lang) for e in c.evidence]} for c in diag.symptoms],
        "findings": [_finding(f, lang) for f in diag.findings],
        "notes": [_finding(f, lang) for f in diag.notes],
    }
