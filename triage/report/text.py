"""Plain-text rendering of a Diagnosis for the terminal."""

from __future__ import annotations

from triage.diagnosis.rules import Diagnosis, Evidence
from triage.diagnosis.verdict import first_actions, ranked_techniques
from triage.knowledge import units
from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.messages import Msg, message_text
from triage.report.first_action import action_sentence

MARK = {True: "✗", False: "✓", None: "?"}


def fmt_value(value: float | bool | None, unit: str = "") -> str:
    """A value in its unit (the one formatter, triage/knowledge/units.py); ``n/a`` when absent."""
    return units.fmt_value(value, unit, missing="n/a")


def fmt_threshold(e: Evidence) -> str:
    """A rule's threshold in the display unit of the value it was held against."""
    if isinstance(e.threshold, bool) or e.threshold is None:
        return fmt_value(e.threshold, e.unit)
    like = e.value if isinstance(e.value, (int, float)) and not isinstance(e.value, bool) else None
    return units.fmt_threshold(float(e.threshold), e.unit, like=like, missing="n/a")


def breakdown(e: Evidence, lang: str) -> str:
    """`` (by reason: a 0.2/s, b 0.1/s)`` when the value was measured per label value too (a recipe's ``by``)."""
    src = e.source
    if not isinstance(src, Msg) or src.id != "server.by_label":
        return ""
    return f" ({message_text(Msg('server.by_label_short', label=src.param('label'), parts=src.param('parts')), lang)})"


def evidence_line(e: Evidence, lang: str, blind: str = "this source") -> str:
    if e.holds is None:
        return f"{e.signal}: not measurable from {blind} — {e.meaning.get(lang)}"
    if e.context:
        return f"{e.signal} = {fmt_value(e.value, e.unit)}{breakdown(e, lang)} — {e.meaning.get(lang)}"
    verdict = "met" if e.holds else "not met"
    return (f"{e.signal} = {fmt_value(e.value, e.unit)}{breakdown(e, lang)} [rule {e.op} {fmt_threshold(e)}: "
            f"{verdict}] — {e.meaning.get(lang)}")


def _symptoms(kb: KnowledgeBase, diag: Diagnosis, lang: str, blind: str) -> list[str]:
    lines = ["Symptoms:"]
    for check in diag.symptoms:
        title = kb.symptom(check.symptom).title.get(lang)
        state = {True: "present", False: "absent", None: f"not measurable from {blind}"}[check.present]
        lines.append(f"  {MARK[check.present]} {title} [{check.symptom}]: {state}")
        lines += [f"      {evidence_line(e, lang)}" for e in check.evidence if e.holds is not None]
    return lines


def _findings(kb: KnowledgeBase, diag: Diagnosis, lang: str, blind: str, engine: str | None = None) -> list[str]:
    if not diag.findings:
        if any(c.present for c in diag.symptoms):
            return ["A symptom is present, but no cause could be pinned down from this source: the evidence its "
                    "causes need is not measurable here (see the Symptoms above; try the live metrics)."]
        if all(c.present is None for c in diag.symptoms):
            return [f"No symptom is measurable from {blind}: this is not a sign of health."]
        blind_to = [c.symptom for c in diag.symptoms if c.present is None]
        if blind_to:
            return [f"No symptom among those measurable here (numbers above); not measurable from {blind}: "
                    f"{', '.join(blind_to)}."]
        return ["No symptom: every measurable symptom is within the SLO (numbers above)."]
    lines = ["Findings, most important first:"]
    for i, f in enumerate(diag.findings, start=1):
        lines.append(f" {i}. {kb.causes[f.cause].title.get(lang)} [{f.cause}] — confidence {f.confidence}")
        if f.explains:
            lines.append(f"    explains: {', '.join(f.explains)}")
        lines += [f"    {'·' if e.context else '●' if e.holds else '○'} {evidence_line(e, lang, blind)}"
                  for e in f.evidence if e.holds is not None]
        if f.not_measurable:
            lines.append(f"    not measurable from {blind}: {', '.join(f.not_measurable)}")
        actions = first_actions(kb, f.cause, engine, diag.signals)
        if actions:
            lines.append("    first action: " + " · ".join(f"{a.engine} {a.command}" for a in actions)
                         + (" (client side)" if actions[0].client else " (cluster side)" if actions[0].cluster else ""))
            if actions[0].cap is not None:  # the command is relative to the cap the data shows: say how
                lines.append(f"      {action_sentence(actions[0], lang)}")
        steps = [f"{kb.techniques[r.id].title.get(lang)} ({kb.techniques[r.id].level}"
                 + (", already on by default)" if r.default_on else ")")
                 for r in ranked_techniques(kb, f.techniques, None)]
        lines.append(f"    try, minimal change first: {' → '.join(steps)}")
    return lines


def diagnosis_text(kb: KnowledgeBase, diag: Diagnosis, header: list[str], lang: str = "en",
                   blind: str = "this source", engine: str | None = None) -> str:
    """The diagnosis for a terminal; ``blind`` names the source in "not measurable from …" ("a log"); ``engine``:
    the serving engine the data names (its first action only), None for every engine's."""
    slo = diag.slo.values
    lines = [*header, f"SLO: {diag.slo.name} — TTFT p99 ≤ {slo['ttft_p99_s']} s, TPOT p99 ≤ {slo['tpot_p99_s']} s", ""]
    lines += _symptoms(kb, diag, lang, blind) + [""] + _findings(kb, diag, lang, blind, engine)
    if diag.notes:
        lines += ["", "Notes (evidence without a symptom, not findings): "
                  + ", ".join(f.cause for f in diag.notes)]
    return "\n".join(lines)
