"""Markdown incident report: findings with evidence, techniques as task lists, the retro walk; re-importable."""

from __future__ import annotations

import base64
import json
import re

from triage import safe_load
from triage.diagnosis.rules import Diagnosis, Evidence, Finding
from triage.diagnosis.signals import SignalSet
from triage.diagnosis.verdict import first_actions, ranked_techniques
from triage.errors import TriageError
from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.messages import message_text
from triage.report.first_action import action_sentence
from triage.report.retro import RetroState, load_steps, wrong_usages
from triage.report.text import fmt_threshold, fmt_value
from triage.safe_text import md_escape

STATE_MARK = "triage-retro"
MAX_REPORT_CHARS = 2_000_000
ID_RE = re.compile(r"[A-Za-z0-9_.\-]{1,100}")
STATE_RE = re.compile(r"<!--\s*" + STATE_MARK + r":([A-Za-z0-9+/=\s]+?)\s*-->")
WRONG_TEXT = {
    "heavy_without_evidence": "A heavy, architecture-level technique ({t}) was chosen without evidence for its cause.",
    "several_at_once": "Several techniques were chosen at once: the gain cannot be attributed, a regression cannot "
                       "be located.",
    "claim_without_verification": "The walk ends without a verified gain: re-run the load test against the "
                                  "baseline before claiming it.",
}


def _cell(text: object) -> str:
    """A Markdown table cell of the tree's own text: pipes escaped, newlines folded."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _user(text: object) -> str:
    """Text from a file, a server or an imported walk (a run label, a title, notes, a provenance sentence quoting a
    label): made literal as the pages do it (``md_escape``: no image, link, HTML, heading or autolink; pipes and
    newlines table-safe), so ``![l](http://host/pixel)`` in a benchmark label cannot load a pixel in a viewer."""
    return md_escape(text)


def _code(ident: object) -> str:
    """An id in backticks when it is one (letters, digits, ``_.-``), else the text made literal."""
    return f"`{ident}`" if isinstance(ident, str) and ID_RE.fullmatch(ident) else _user(ident)


def _evidence_table(evidence: list[Evidence], lang: str) -> list[str]:
    rows = ["| signal | value | rule | met | meaning | measured as |", "| --- | --- | --- | --- | --- | --- |"]
    for e in evidence:
        if e.holds is None:
            continue
        rule, met = ("—", "context") if e.context else (f"{e.op} {fmt_threshold(e)}", "yes" if e.holds else "no")
        rows.append(f"| `{e.signal}` | {fmt_value(e.value, e.unit)} | {rule} | {met} | {_cell(e.meaning.get(lang))} | "
                    f"{_user(message_text(e.source, lang))} |")
    return rows


def _finding(kb: KnowledgeBase, f: Finding, i: int, lang: str, signals: SignalSet | None = None) -> list[str]:
    cause = kb.causes[f.cause]
    out = [f"### {i}. {cause.title.get(lang)} (`{f.cause}`), confidence {f.confidence}", ""]
    if f.explains:
        out += [f"Root cause: also explains {', '.join(f'`{c}`' for c in f.explains)}.", ""]
    out += _evidence_table(f.evidence, lang) + [""]
    if f.not_measurable:
        out += [f"Not measurable from this source: {', '.join(f'`{s}`' for s in f.not_measurable)}.", ""]
    actions = first_actions(kb, f.cause, None, signals)
    if actions:
        where = " (on the client)" if actions[0].client else " (on the cluster)" if actions[0].cluster else ""
        out += [f"First action{where}: " + " · ".join(f"{a.engine} `{a.command}`" for a in actions)
                + f" — {_cell(action_sentence(actions[0], lang))}", ""]
    out.append("Techniques, minimal change first (already on by default last):")
    for r in ranked_techniques(kb, f.techniques, None):
        tech = kb.techniques[r.id]
        on = ", already on by default: check it is not disabled" if r.default_on else ""
        out.append(f"- **{tech.title.get(lang)}** ({tech.level}{on})")
        out += [f"  - [ ] [{s.level}] {_cell(s.change.get(lang))} — measure: {_cell(s.measure.get(lang))}"
                for s in tech.checklist]
    return out + [""]


def findings_markdown(kb: KnowledgeBase, diag: Diagnosis, lang: str = "en") -> list[str]:
    out = ["## Symptoms", ""]
    for check in diag.symptoms:
        state = {True: "present", False: "no symptom", None: "not measurable from this source"}[check.present]
        nums = "; ".join(f"`{e.signal}` {fmt_value(e.value, e.unit)}" for e in check.evidence if e.holds is not None)
        out.append(f"- **{kb.symptom(check.symptom).title.get(lang)}**: {state}" + (f" ({nums})" if nums else ""))
    out += ["", "## Findings", ""]
    if not diag.findings:
        out += ["No finding: no symptom is present, or none of its causes is measurable here.", ""]
    for i, f in enumerate(diag.findings, start=1):
        out += _finding(kb, f, i, lang, diag.signals)
    return out


def _walk(kb: KnowledgeBase, state: RetroState, diag: Diagnosis | None, lang: str) -> list[str]:
    steps = load_steps()
    out = ["## Decision", ""]
    out.append(f"- Symptom: {_code(state.symptom or '—')}; cause: {_code(state.cause or '—')}")
    names = ", ".join(kb.techniques[t].title.get(lang) for t in state.techniques if t in kb.techniques) or "—"
    out += [f"- Technique: {names}", f"- Minimal change: {_user(state.change) or '—'}",
            f"- Verification: {_user(state.verification or 'not verified yet')}", ""]
    warnings = wrong_usages(kb, state, diag)
    if warnings:
        out += ["## Warnings", ""] + [f"- ⚠ {WRONG_TEXT[w.code].format(t=w.technique)}" for w in warnings] + [""]
    out += ["## Checklist", ""]
    for step in steps:
        ticks = state.checklist.get(step.id, [])
        for j, item in enumerate(step.checklist):
            out.append(f"- [{'x' if j < len(ticks) and ticks[j] else ' '}] {step.title.get(lang)}: {item.get(lang)}")
    out += ["", "## Notes", ""]
    out += [f"- **{s.title.get(lang)}**: {_user(state.notes[s.id])}" for s in steps if state.notes.get(s.id)] or ["—"]
    out += ["", "## Timeline", "", "| time (UTC) | step | event |", "| --- | --- | --- |"]
    out += [f"| {_user(e.at)} | {_user(e.step)} | {_user(e.text)} |" for e in state.timeline]
    return out + [""]


def report_markdown(kb: KnowledgeBase, diag: Diagnosis | None, state: RetroState | None = None,
                    source: str = "", lang: str = "en") -> str:
    """The incident report. With a walk, its state is embedded (an HTML comment GitHub does not show)."""
    title = state.title if state else "Inference Triage report"
    out = [f"# {_user(title)}", "", f"Source: {_user(state.source if state else source) or '—'}", ""]
    if state is not None:
        out += _walk(kb, state, diag, lang)
    if diag is not None:
        out += findings_markdown(kb, diag, lang)
    if state is not None:
        payload = base64.b64encode(json.dumps(state.to_dict(), ensure_ascii=False).encode()).decode()
        out += [f"<!-- {STATE_MARK}:{payload} -->", ""]
    return "\n".join(out)


def restore_walk(markdown: str, kb: KnowledgeBase | None = None) -> RetroState:
    """The walk embedded in an exported report; a clear error when the text holds none or it is not valid
    (typed and bounded fields, ids from the tree when ``kb`` is given, no deep nesting)."""
    if len(markdown) > MAX_REPORT_CHARS:
        raise TriageError(f"larger than {MAX_REPORT_CHARS // 1_000_000} MB; an exported report is far smaller",
                          key=STATE_MARK)
    m = STATE_RE.search(markdown)
    if not m:
        raise TriageError("this Markdown holds no saved walk (was it exported by the Retro page?)",
                          key=STATE_MARK)
    try:
        raw = base64.b64decode(re.sub(r"\s", "", m.group(1)), validate=True)
    except ValueError as exc:
        raise TriageError("the saved walk is damaged and cannot be read", key=STATE_MARK) from exc
    try:
        data = safe_load.load_json(raw, max_chars=MAX_REPORT_CHARS)
    except TriageError as exc:
        reason = ("the saved walk is nested too deeply to be a walk" if "nested too deeply" in exc.reason
                  else "the saved walk is damaged and cannot be read")
        raise TriageError(reason, key=STATE_MARK) from None
    if not isinstance(data, dict):
        raise TriageError("the saved walk is damaged and cannot be read", key=STATE_MARK)
    return RetroState.from_dict(data, kb)
