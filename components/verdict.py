"""The verdict block at the top of Live, Benchmark and Diagnose: the answer first, the evidence below it."""

from __future__ import annotations

import streamlit as st

from components import session
from components.shell import knowledge, lang, t
from triage.service.evidence_text import fmt_threshold, fmt_value
from triage.service.knowledge import tool_label
from triage.service.model import Diagnosis, Evidence
from triage.service.verdict import Action, RankedTechnique, Verdict, action_sentence, ranked_techniques, verdict_of

BADGE = {"high": ":red-badge[{}]", "medium": ":orange-badge[{}]", "low": ":gray-badge[{}]"}
NOT_OP = {">": "≤", ">=": "<", "<": "≥", "<=": ">", "==": "≠"}  # a healthy number: the trigger that did not hold
SHOWN_OP = {">=": "≥", "<=": "≤"}


def _label(signal: str) -> str:
    spec = knowledge().signals.get(signal)
    return spec.label.get(lang()) if spec else signal


def number_line(e: Evidence) -> str:
    """``**KV usage (max)** 99.1 % ≥ 90 %``: the value against its threshold (the failed side for a healthy one)."""
    op = SHOWN_OP.get(e.op, e.op) if e.holds else NOT_OP.get(e.op, e.op)
    return f"**{_label(e.signal)}** {fmt_value(e.value, e.unit)} {op} {fmt_threshold(e)}"


def _symptom(sid: str | None) -> str:
    return knowledge().symptom(sid).title.get(lang()) if sid else ""


def _sentence(v: Verdict) -> str:
    kb = knowledge()
    if v.state in ("finding", "note") and v.cause and v.confidence:
        # a note is no alarm: nothing crosses the SLO, so its confidence is not drawn in red
        badge = (BADGE[v.confidence] if v.state == "finding" else ":blue-badge[{}]").format(
            t("confidence_" + v.confidence))
        key = "verdict_finding" if v.state == "finding" else \
            "verdict_note_unmeasured" if v.symptom in v.symptoms else "verdict_note"
        return t(key, cause=kb.causes[v.cause].title.get(lang()), symptom=_symptom(v.symptom)) + f" {badge}"
    if v.state == "symptom_only":
        return t("verdict_symptom_only", symptom=_symptom(v.symptom))
    names = ", ".join(_symptom(s) for s in v.symptoms)
    if v.state == "healthy":
        return t("verdict_healthy")
    if v.state == "partly_measured":
        return t("verdict_partly", names=names)
    if v.state == "not_measurable":
        return t("verdict_not_measurable", names=names)
    return t("nothing_to_judge", reason=v.reason)


def _engine(engine: str) -> str:
    """The engine's title from tree/engines/<id>.yaml (a tool without a map, by its label)."""
    spec = knowledge().engines.get(engine)
    return spec.title if spec is not None else tool_label(engine)


def action_lines(actions: list[Action], engine: str | None) -> list[str]:
    """``**First action** (vLLM): `--max-num-seqs 512` — what it does``; each engine's command when the engine
    is not known (one sentence after them)."""
    if not actions:
        return []
    first = actions[0]
    if engine or first.client or first.cluster:
        where = t("verdict_client") if first.client else t("verdict_cluster") if first.cluster \
            else _engine(first.engine)
        return [t("verdict_action", where=where) + f" `{first.command}` — {action_sentence(first, lang())}"]
    commands = " · ".join(f"{_engine(a.engine)} `{a.command}`" for a in actions)
    return [t("verdict_action_any") + f" {commands}", action_sentence(first, lang())]


def already_on_note(r: RankedTechnique, engine: str | None) -> str:
    """"Already on by default in vLLM — check it is not disabled (`--disable-prefix-caching`)"."""
    where = _engine(engine) if engine else t("verdict_every_engine")
    switch = f" (`{r.off_switch}`)" if r.off_switch else ""
    return t("technique_already_on", engine=where) + switch


def _already_on(v: Verdict) -> str:
    if not v.already_on:
        return ""
    kb = knowledge()

    def one(r: RankedTechnique) -> str:
        tech = kb.techniques[r.id]
        title = tech.title.zh.split("（")[0] if lang() == "zh" else tech.short
        return f"{title} (`{r.off_switch}`)" if r.off_switch else title

    where = _engine(v.engine) if v.engine else t("verdict_every_engine")
    return t("verdict_already_on", engine=where) + " " + "; ".join(one(r) for r in v.already_on)


def ranked_links(tids: list[str], engine: str | None) -> None:
    """A cause's techniques for the engine: the ones that change something first, each already-on one after
    them with the switch that would have turned it off."""
    from components.node_panel import technique_link  # the node panel draws this list too

    for r in ranked_techniques(knowledge(), tids, engine):
        technique_link(r.id)
        if r.default_on:
            st.caption(already_on_note(r, engine))


def verdict_block(diag: Diagnosis, engine: str | None, source: str = "", sample: bool = False) -> Verdict:
    """The block: the sentence with its confidence, the one or two deciding numbers, the first action for the
    engine (each engine's when it is not known), what is already on; ``source`` says whose data it is."""
    v = verdict_of(knowledge(), diag, engine)
    # a flag is copied whole: it never breaks at its own hyphens ("--" / "max-running-requests"); an inline block
    # as wide as its text, it moves to the next line whole. Only a command longer than the box's width (a JSON
    # --kv-transfer-config) wraps inside its block; held on one line, it ran past the box and off a 1024 px page.
    st.html(f"<style>.st-key-{session.VERDICT.name} code {{ display: inline-block; max-width: 100%; "
            "white-space: normal; overflow-wrap: anywhere; }</style>")
    with st.container(border=True, key=session.VERDICT.name):
        lines = [f"**{t('verdict_heading')}** · {_sentence(v)}"]
        if v.deciding:
            lines.append(" · ".join(number_line(e) for e in v.deciding))
        lines += action_lines(v.actions, v.engine)
        st.markdown("  \n".join(lines))
        notes = [_already_on(v)]
        if sample:
            notes.append(t("verdict_sample", label=source))
        elif source:
            notes.append(t("verdict_source", label=source))
        if any(notes):
            st.caption("  \n".join(n for n in notes if n))
    return v
