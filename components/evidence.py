"""Evidence cards: a finding with its numbers and thresholds, and the symptom check of a healthy run."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from components import session
from components.node_panel import node_panel
from components.shell import knowledge, lang, t
from components.static_table import static_table
from components.tree_chart import request_scroll, selected_node, tree_chart
from components.verdict import action_lines, ranked_links
from triage.service.evidence_text import fmt_threshold, fmt_value
from triage.service.knowledge import message_text, tr
from triage.service.model import Diagnosis, Evidence, Finding, SignalSet
from triage.service.verdict import first_actions

# Material icons ship with Streamlit's own font: no emoji font needed (🟢 / 🔴 / ❔ were empty boxes without one)
MARK = {"present": ":red[:material/error:]", "absent": ":green[:material/check_circle:]",
        "unknown": ":gray[:material/help:]"}
CONFIDENCE_BADGE = {"high": ":red-badge[{}]", "medium": ":orange-badge[{}]", "low": ":gray-badge[{}]"}


def _rows(evidence: list[Evidence]) -> pd.DataFrame:
    """Evidence as a two-column table that reads even in half of a 1024 px window: the signal with its value
    (✔ when its condition holds) and threshold beneath; what it means above how it was measured."""
    mark = {True: "✔", False: "✘", None: "—"}
    return pd.DataFrame([{
        t("ev_signal"): "\n".join([e.signal, _nowrap(f"{'ℹ' if e.context else mark[e.holds]} "
                                                     f"{fmt_value(e.value, e.unit)}"),
                                    *([] if e.context else [_nowrap(f"{e.op} {fmt_threshold(e)}")])]),
        t("ev_meaning"): "\n".join([e.meaning.get(lang()), *map(_unmet, e.unmet),
                                    f"{t('ev_source')}: {_how(e)}"]),
    } for e in evidence]).set_index(t("ev_signal"))


def _how(e: Evidence) -> str:
    return message_text(e.source, lang()) or t("not_measurable_short")


def _unmet(r: Evidence) -> str:
    """A failed requirement: why a value past its threshold is still ✘ (plain text: the table escapes HTML)."""
    return tr("ev_unmet", lang(), condition=f"{r.signal} {r.op} {fmt_threshold(r)}", value=fmt_value(r.value, r.unit),
             meaning=r.meaning.get(lang()))


def _nowrap(text: str) -> str:
    return text.replace(" ", "\u00a0")  # "✔ 99.1 %" and ">= 50 %" each stay on one line


def finding_card(f: Finding, rank: int, select: bool = True, engine: str | None = None,
                 signals: SignalSet | None = None) -> None:
    kb = knowledge()
    cause = kb.causes[f.cause]
    with st.container(border=True):
        badge = CONFIDENCE_BADGE[f.confidence].format(t("confidence_" + f.confidence))
        st.markdown(f"**{rank}. {cause.title.get(lang())}** {badge}  \n"
                    f"{kb.symptom_of(f.cause).title.get(lang())} · `{f.cause}`")
        if f.explains:
            names = ", ".join(kb.causes[c].title.get(lang()) for c in f.explains)
            st.caption(t("explains", names=names))
        measured = [e for e in f.evidence if e.holds is not None]
        if measured:
            static_table(_rows(measured))
        if f.not_measurable:
            st.caption(t("not_measurable", names=", ".join(f.not_measurable)))
        if lines := action_lines(first_actions(kb, f.cause, engine, signals), engine):
            st.markdown("  \n".join(lines))
        st.markdown(f"**{t('techniques')}**")
        ranked_links(f.techniques, engine)
        if select:  # only where the tree is on the page; elsewhere the cause's id names it
            st.button(t("show_in_tree", title=cause.short.get(lang())), key=session.SHOW_CAUSE.key(f.cause),
                      on_click=request_scroll, args=(f.cause,), icon=":material/account_tree:")


def symptom_summary(diag: Diagnosis) -> None:
    """Each symptom's verdict with the numbers behind it; a healthy run reads 'no symptom' here.

    One Markdown element, a paragraph per symptom: five elements cost the browser five Markdown renders."""
    kb = knowledge()
    lines = []
    for check in diag.symptoms:
        title = kb.symptom(check.symptom).title.get(lang())
        if check.present is None:
            lines.append(f"{MARK['unknown']} **{title}** — {t('symptom_unknown')}")
            continue
        icon = MARK["present" if check.present else "absent"]
        numbers = "; ".join(f"`{e.signal}` {fmt_value(e.value, e.unit)} {e.op} {fmt_threshold(e)}"
                            if e.holds else
                            f"`{e.signal}` {fmt_value(e.value, e.unit)}" for e in check.evidence if e.holds is not None)
        state = t("symptom_present") if check.present else t("symptom_absent")
        lines.append(f"{icon} **{title}** — {state}: {numbers}")
    st.markdown("\n\n".join(lines))


def findings_block(diag: Diagnosis, select: bool = True, engine: str | None = None) -> None:
    if diag.empty:
        st.error(t("nothing_to_judge", reason=diag.empty))
        return
    if not diag.findings and any(c.present for c in diag.symptoms):
        st.warning(t("symptom_no_cause"))
    elif not diag.findings:
        st.success(t("no_symptom"))
    for i, f in enumerate(diag.findings, start=1):
        finding_card(f, i, select, engine, diag.signals)
    within_slo_but(diag, select, engine)


def within_slo_but(diag: Diagnosis, select: bool = True, engine: str | None = None) -> None:
    """Evidence that matches a cause while no symptom is felt: a warning card each, numbers and techniques."""
    if not diag.notes:
        return
    st.markdown(f"#### {t('within_slo_but')}")
    # beside findings, "no symptom crosses the SLO" would deny the red symptoms listed on the same page
    st.caption(t("within_slo_but_hint_also" if any(c.present for c in diag.symptoms) else "within_slo_but_hint"))
    kb = knowledge()
    unmeasured = {c.symptom for c in diag.symptoms if c.present is None}
    for f in diag.notes:
        cause = kb.causes[f.cause]
        with st.container(border=True):
            # a symptom this source cannot measure is not "within the SLO": say which it is
            note = t("unmeasured_note" if f.symptom in unmeasured else "within_slo_note")
            st.warning(f"**{cause.title.get(lang())}** — {kb.symptom_of(f.cause).title.get(lang())} {note}",
                       icon=":material/warning:")
            measured = [e for e in f.evidence if e.holds is not None]
            if measured:
                static_table(_rows(measured))
            st.markdown(f"**{t('techniques')}**")
            ranked_links(f.techniques, engine)
            if select:
                st.button(t("show_in_tree", title=cause.short.get(lang())), key=session.SHOW_NOTE_CAUSE.key(f.cause),
                          on_click=request_scroll, args=(f.cause,), icon=":material/account_tree:")


def diagnosis_panel(diag: Diagnosis, label: str, engine: str | None = None) -> None:
    """Findings and symptoms on the left, the lit tree on the right (the caller has made the diagnosis the
    session's with ``findings.remember`` before drawing anything of it)."""
    left, right = st.columns(2, gap="medium")
    with left:
        st.markdown(f"### {t('findings')}")
        findings_block(diag, engine=engine)
        st.markdown(f"### {t('symptoms')}")
        symptom_summary(diag)
    with right:
        st.markdown(f"### {t('tree_heading')}")
        chosen = selected_node()
        if chosen:  # a clicked node or "Show … in the tree" opens its panel, as on Diagnose
            with st.container(border=True, key=session.NODE_DETAILS.name):
                node_panel(chosen)
        else:
            st.caption(t("tree_hint"))
        tree_chart(diag.matched_ids, compact=True, judged=True, panel=session.NODE_DETAILS.name)
