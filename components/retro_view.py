"""The retro page: walk the tree step by step with the loaded data's answers, then export the report."""

from __future__ import annotations

import secrets
from collections import OrderedDict
from dataclasses import dataclass
from threading import Lock

import streamlit as st

from components import session
from components.evidence import findings_block, symptom_summary
from components.findings import current_diagnosis, current_engine, remember, showing_sample, unfinished_text
from components.node_panel import technique_link
from components.shell import knowledge, lang, t, translated_choice
from triage.service.model import Diagnosis, TriageError
from triage.service.params import int_param
from triage.service.retro import (
    WRONG_TEXT,
    RetroState,
    RetroStep,
    incident_report,
    load_steps,
    restore_report,
    suggested,
    wrong_usages,
)

STEP_PARAM = "step"
WALK_PARAM = "walk"  # an opaque id of this walk in the server's store: a reload (F5) or the same link reopens it
MAX_WALKS = 256  # walks kept per server process; the oldest is dropped first


@dataclass
class SavedWalk:
    """A walk and the data it walks (None: the bundled sample), as the server keeps it between reloads."""

    walk: RetroState
    source: tuple[str, Diagnosis, str | None] | None


@st.cache_resource(show_spinner=False)
def _walks() -> tuple[OrderedDict[str, SavedWalk], Lock]:
    """Walks by id for this server process, shared by every session (a reload opens a new session)."""
    return OrderedDict(), Lock()


def _restore(walk_id: str | None) -> None:
    """A new session opened on ``?walk=``: take the walk and its data back, unless this session has its own."""
    if not walk_id or session.RETRO.present():
        return
    walks, lock = _walks()
    with lock:
        saved = walks.get(walk_id)
    if saved is None:
        st.warning(t("retro_walk_gone"))
        st.query_params.pop(WALK_PARAM, None)
        return
    session.RETRO.set(saved.walk)
    if saved.source is not None and showing_sample():
        remember(*saved.source)


def _save() -> None:
    """Keep this session's walk (and the data it walks) under the id in the URL, creating one the first time."""
    walk_id = st.query_params.get(WALK_PARAM) or secrets.token_urlsafe(12)
    opened = None if showing_sample() else current_diagnosis()  # never a diagnosis that did not finish
    source = None if opened is None else (*opened, current_engine())
    walks, lock = _walks()
    with lock:
        walks[walk_id] = SavedWalk(state(), source)
        walks.move_to_end(walk_id)
        while len(walks) > MAX_WALKS:
            walks.popitem(last=False)
    if st.query_params.get(WALK_PARAM) != walk_id:
        st.query_params[WALK_PARAM] = walk_id


def state() -> RetroState:
    return session.RETRO.setdefault(RetroState)


def current_step(s: RetroState) -> int:
    """The step in the URL wins (a shared link opens the same step), clamped to the walk.

    The URL counts from 1, as the text does (``?step=3`` is "3. …"); the state counts from 0."""
    raw, last = st.query_params.get(STEP_PARAM), len(load_steps())
    wanted = int_param(raw, 1, last)
    if wanted is not None:
        s.step = wanted - 1
    elif raw is not None:  # said, not silently replaced by the step in progress
        shown = raw if len(raw) <= 20 else f"{raw[:20]}…"
        s.step = max(0, min(int(s.step), last - 1))
        st.warning(t("retro_step_refused", value=shown, last=last, step=s.step + 1),
                   icon=":material/link_off:")
        st.query_params[STEP_PARAM] = str(s.step + 1)  # the link now names the step shown
    s.step = max(0, min(int(s.step), len(load_steps()) - 1))
    return s.step


def _go(delta: int) -> None:
    s = state()
    s.step = max(0, min(s.step + delta, len(load_steps()) - 1))
    st.query_params[STEP_PARAM] = str(s.step + 1)
    s.log(load_steps()[s.step].id, f"moved to step {s.step + 1}")


def _answer(step: RetroStep, diag: Diagnosis | None, s: RetroState) -> None:
    """What the loaded data says at this step."""
    kb = knowledge()
    if diag is None:
        st.info(t("retro_no_data"))
        return
    if step.id in ("baseline", "symptom"):
        symptom_summary(diag)
    elif step.id == "cause":
        findings_block(diag, select=False, engine=current_engine())
    elif step.id in ("technique", "minimal_change"):
        _, cause, techs = suggested(kb, diag)
        for tid in (s.techniques or techs):
            technique_link(tid)
        if step.id == "minimal_change" and s.techniques:
            tech = kb.techniques[s.techniques[0]]
            st.markdown("\n".join(f"- [{c.level}] {c.change.get(lang())}" for c in tech.checklist))
    elif step.id == "verify":
        verdict = session.VERIFY_VERDICT.get()
        st.markdown(t("retro_verify_result", verdict=verdict) if verdict else t("retro_verify_missing"))


def _decide(step: RetroStep, diag: Diagnosis | None, s: RetroState) -> None:
    kb = knowledge()
    sym, cause, techs = suggested(kb, diag)
    if step.id == "symptom":
        ids = [x.id for x in kb.symptoms]
        s.symptom = translated_choice(st.selectbox, t("retro_symptom"), ids, session.RETRO_SYMPTOM,
                                      lambda i: kb.symptom(i).title.get(lang()),
                                      index=ids.index(s.symptom or sym or ids[0]))
    elif step.id == "cause":
        ids = [c.id for c in kb.symptom(s.symptom or sym or "ttft").causes]
        pick = s.cause if s.cause in ids else (cause if cause in ids else ids[0])
        s.cause = translated_choice(st.selectbox, t("retro_cause"), ids, session.RETRO_CAUSE,
                                    lambda i: kb.causes[i].title.get(lang()), index=ids.index(pick))
    elif step.id == "technique":
        options = [x.id for x in kb.causes[s.cause].techniques] if s.cause else list(kb.techniques)
        default = [x for x in s.techniques if x in options] or options[:1]
        s.techniques = translated_choice(st.multiselect, t("retro_techniques"), options, session.RETRO_TECHNIQUES,
                                         lambda i: kb.techniques[i].title.get(lang()), default=default)
    elif step.id == "minimal_change":
        s.change = st.text_input(t("retro_change"), value=s.change, key=session.RETRO_CHANGE.name)
    elif step.id == "verify":
        s.verification = session.VERIFY_VERDICT.get() or s.verification


def _checklist(step: RetroStep, s: RetroState) -> None:
    ticks = s.checklist.setdefault(step.id, [False] * len(step.checklist))
    for i, item in enumerate(step.checklist):
        ticks[i] = st.checkbox(item.get(lang()), value=ticks[i], key=session.RETRO_CHECK.key(step.id, i))


def _warnings(s: RetroState, diag: Diagnosis | None) -> None:
    for w in wrong_usages(knowledge(), s, diag):
        st.warning(WRONG_TEXT[w.code].format(t=w.technique), icon=":material/warning:")


def _export(s: RetroState, diag: Diagnosis | None) -> None:
    from components import auth

    md = incident_report(knowledge(), diag, s, lang())
    if not auth.can_edit():
        st.caption(t("auth_viewer_cannot_export"))
    else:
        st.download_button(t("retro_export"), md, file_name="incident-report.md", mime="text/markdown",
                           icon=":material/download:", key=session.RETRO_EXPORT.name)
    upload = st.file_uploader(t("retro_import"), type=["md", "markdown", "txt"], key=session.RETRO_IMPORT.name)
    if upload is not None and session.RETRO_IMPORTED.get() != upload.file_id:
        try:
            session.RETRO.set(restore_report(upload.getvalue().decode("utf-8", errors="replace"), knowledge()))
        except TriageError as exc:
            st.error(t("retro_import_failed", name=upload.name, reason=exc.line()))
            return
        # widgets would otherwise show the walk that was replaced
        session.forget(session.RETRO_TITLE, session.RETRO_NOTE, session.RETRO_CHECK, session.RETRO_CHANGE,
                       session.RETRO_SYMPTOM, session.RETRO_CAUSE, session.RETRO_TECHNIQUES)
        session.RETRO_IMPORTED.set(upload.file_id)
        st.query_params[STEP_PARAM] = str(state().step + 1)
        st.rerun()


def _incidents() -> None:
    """What on-call saw: the Alertmanager receiver's incidents (alert, labels, time, cause, link), newest first."""
    from triage.service.incidents import recent_incidents

    try:
        rows = recent_incidents()
    except TriageError as exc:
        st.warning(t("retro_incidents_failed", reason=exc.line()))
        return
    if not rows:
        return
    with st.expander(t("retro_incidents", n=len(rows))):
        st.dataframe([{"alert": r.alertname, "labels": ", ".join(f"{k}={v}" for k, v in r.replica.items()),
                       "time": r.starts_at[:19].replace("T", " "), "status": r.status,
                       "diagnosis": r.cause or (r.error or "—"), "link": r.link} for r in rows],
                     column_config={"link": st.column_config.LinkColumn("link", display_text="Live")},
                     hide_index=True)


def _walked(s: RetroState) -> Diagnosis | None:
    """The data this walk shows (the walk's source follows it), or none while a page's diagnosis of new data has
    not finished: never the previous data's under the new data's name, nor the other way round."""
    opened = current_diagnosis()
    if opened is None:
        st.warning(unfinished_text(), icon=":material/hourglass_empty:")
        s.source = ""
        return None
    label, diag = opened
    if showing_sample():  # never the sample's data without saying so at the top
        st.info(t("verdict_sample", label=label), icon=":material/science:")
    s.source = label
    return diag


def retro_page() -> None:
    st.title(t("retro_title"))
    _restore(st.query_params.get(WALK_PARAM))
    _incidents()
    s = state()
    diag = _walked(s)
    steps = load_steps()
    i = current_step(s)
    step = steps[i]
    st.progress((i + 1) / len(steps), text=" → ".join(
        f"**{x.title.get(lang())}**" if j == i else x.title.get(lang()) for j, x in enumerate(steps)))
    untitled = s.title == RetroState.title  # the core's English default: offered in the reader's language
    s.title = st.text_input(t("retro_name"), value=t("retro_default_name") if untitled else s.title,
                            key=session.RETRO_TITLE.name)
    if diag is not None:
        st.caption(t("retro_source", source=s.source))
    st.subheader(f"{i + 1}. {step.title.get(lang())}")
    st.markdown(f"**{t('question')}** — {step.question.get(lang())}")
    with st.container(border=True):
        _answer(step, diag, s)
    _decide(step, diag, s)
    _checklist(step, s)
    s.notes[step.id] = st.text_area(t("retro_note"), value=s.notes.get(step.id, ""),
                                    key=session.RETRO_NOTE.key(step.id))
    _warnings(s, diag)
    back, fwd = st.columns(2)
    back.button(t("retro_back"), on_click=_go, args=(-1,), disabled=i == 0, key=session.RETRO_BACK.name,
                width="stretch")
    fwd.button(t("retro_next"), on_click=_go, args=(1,), disabled=i == len(steps) - 1, key=session.RETRO_NEXT.name,
               width="stretch", type="primary")
    st.divider()
    _export(s, diag)
    _save()
