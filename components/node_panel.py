"""The details panel beside the tree: what a selected node asks, measures and recommends."""

from __future__ import annotations

import streamlit as st

from components import session
from components.shell import knowledge, labels_now, lang, t
from components.tree_chart import request_scroll
from components.verdict import action_lines, already_on_note
from triage.service.knowledge import ROOT_ID, KnowledgeBase
from triage.service.verdict import first_actions, ranked_techniques

TECHNIQUE_PAGE = "pages/technique.py"
JUMP_KEY = session.JUMP.name


def _select(node_id: str) -> None:
    request_scroll(node_id)


def _node_button(node_id: str, label: str) -> None:
    st.button(label, key=session.GOTO.key(node_id), on_click=_select, args=(node_id,), type="tertiary")


def short_title(tid: str) -> str:
    tech = knowledge().techniques[tid]
    return tech.title.zh.split("（")[0] if lang() == "zh" else tech.short


def technique_link(tid: str) -> None:
    title = short_title(tid)
    st.page_link(TECHNIQUE_PAGE, label=t("open_page", title=title), icon=":material/menu_book:",
                 query_params={"id": tid, "lang": lang()})


def _root(kb: KnowledgeBase) -> None:
    st.subheader(kb.guidance.root.get(lang()))
    st.write(kb.guidance.principle.get(lang()))
    for sym in kb.symptoms:
        _node_button(sym.id, sym.title.get(lang()))


def _symptom(kb: KnowledgeBase, node_id: str) -> None:
    sym = kb.symptom(node_id)
    st.subheader(sym.title.get(lang()))
    st.write(sym.summary.get(lang()))
    st.markdown(f"**{t('look_first')}**")
    st.markdown("\n".join(f"- {line.get(lang())}" for line in sym.look_first))
    st.info(f"**{t('free_first')}** — {sym.free_first.get(lang())}")
    st.markdown(f"**{t('causes')}**")
    for cause in sym.causes:
        _node_button(cause.id, cause.title.get(lang()))
    st.caption(f"{t('key_point')}: {sym.key_point.get(lang())}")


def _cause(kb: KnowledgeBase, node_id: str) -> None:
    cause = kb.causes[node_id]
    st.caption(kb.symptom_of(node_id).title.get(lang()))
    st.subheader(cause.title.get(lang()))
    st.write(cause.detail.get(lang()))
    st.markdown(f"**{t('question')}** — {cause.question.get(lang())}")
    st.markdown(f"**{t('metric')}** — `{cause.metric.get(lang())}`")
    from components.findings import current_diagnosis, current_engine  # the source diagnosed last, if any

    engine = current_engine()
    opened = current_diagnosis()
    signals = opened[1].signals if opened else None  # a batch cap relative to what that source shows
    if lines := action_lines(first_actions(kb, node_id, engine, signals), engine):
        st.markdown("  \n".join(lines))
    st.markdown(f"**{t('techniques')}**")
    gains = {ct.id: ct.gain for ct in cause.techniques}
    for r in ranked_techniques(kb, [ct.id for ct in cause.techniques], engine):
        tech = kb.techniques[r.id]
        with st.container(border=True):
            st.markdown(f"**{tech.title.get(lang())}** · {t('level_' + tech.level)}")
            st.caption(f"{t('seed_gain')}: {gains[r.id].get(lang())}")
            if r.default_on:
                st.caption(already_on_note(r, engine))
            technique_link(r.id)


def _technique(kb: KnowledgeBase, node_id: str) -> None:
    tech = kb.techniques[node_id]
    st.subheader(tech.title.get(lang()))
    st.markdown(f"**{t('level')}:** {t('level_' + tech.level)} · **{t('bottleneck')}:** {tech.bottleneck.get(lang())}")
    st.write(tech.principle.get(lang()))
    st.markdown(f"**{t('expected_gain')}** — {tech.expected_gain.seed.get(lang())}")
    technique_link(node_id)
    st.markdown(f"**{t('reached_from')}**")
    for cause in kb.causes_reaching(node_id):
        _node_button(cause.id, cause.title.get(lang()))


def node_panel(node_id: str | None) -> None:
    """Render the panel for ``node_id`` (the root when None)."""
    kb = knowledge()
    node_id = node_id or ROOT_ID
    kind = kb.kind(node_id)
    st.caption(f"{t('kind_' + kind)} · `{node_id}`")
    {"root": lambda: _root(kb), "symptom": lambda: _symptom(kb, node_id),
     "cause": lambda: _cause(kb, node_id), "technique": lambda: _technique(kb, node_id)}[kind]()


def _on_jump() -> None:
    _select(session.JUMP.get() or ROOT_ID)


def jump_box(selected: str | None) -> None:
    """A keyboard-friendly way to select any node, kept in step with the URL."""
    kb = knowledge()
    ids = [ROOT_ID] + [i for s in kb.symptoms for i in (s.id, *(c.id for c in s.causes))] + list(kb.techniques)
    session.JUMP.set(selected or ROOT_ID)
    st.selectbox(t("pick_node"), ids, key=JUMP_KEY, on_change=_on_jump,
                 format_func=labels_now(ids, lambda i: _label(kb, i)))


def _label(kb: KnowledgeBase, node_id: str) -> str:
    kind = kb.kind(node_id)
    if kind == "root":
        return kb.guidance.root.get(lang())
    if kind == "symptom":
        return kb.symptom(node_id).title.get(lang())
    if kind == "cause":
        return f"  {kb.causes[node_id].title.get(lang())}"
    return f"◆ {kb.techniques[node_id].title.get(lang())}"
