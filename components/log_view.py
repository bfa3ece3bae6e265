"""The Log page: recorded verifications, filterable, exportable as formula-safe CSV."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from components import session
from components.shell import knowledge, labels_now, lang, t
from components.static_table import static_table
from components.verify_view import comparison_table, log, stored_deltas, verdict_text, when_text
from triage.service.display import md_escape
from triage.service.model import TriageError

VERDICTS = ("gain confirmed", "no effect", "regression", "unsound")


def log_page() -> None:
    st.title(t("log_title"))
    kb = knowledge()
    try:
        store = log()
    except TriageError as exc:
        st.error(md_escape(exc.line()))
        return
    c1, c2 = st.columns(2)
    techs, verdicts = [None, *kb.techniques], [None, *VERDICTS]
    technique = c1.selectbox(t("verify_technique"), techs, key=session.LOG_TECHNIQUE.name, format_func=labels_now(
        techs, lambda x: t("log_all") if x is None else kb.techniques[x].title.get(lang())))
    verdict = c2.selectbox(t("verify_verdict"), verdicts, key=session.LOG_VERDICT.name,
                           format_func=labels_now(verdicts, lambda v: t("log_all") if v is None else verdict_text(v)))
    entries = store.list(technique=technique, verdict=verdict)
    if not entries:
        st.info(t("log_empty"))
        return
    def title(tid: str | None) -> str:
        return kb.techniques[tid].title.get(lang()) if tid in kb.techniques else tid or "—"

    rows = [{"#": e.id, t("log_when"): when_text(e.created_at), t("verify_who"): e.who or "",
             t("verify_technique"): title(e.technique), t("verify_verdict"): verdict_text(e.overall),
             t("verify_baseline"): e.baseline_name, t("verify_candidate"): e.candidate_name,
             t("verify_note"): e.note} for e in entries]
    static_table(pd.DataFrame(rows).set_index("#"))  # every entry shown, in the reader's words and dates
    chosen = st.selectbox(t("log_open"), [e.id for e in entries if e.id is not None], key=session.LOG_OPEN.name)
    if chosen is None:  # stored entries all have an id; nothing to open otherwise
        return
    entry = store.get(chosen)
    with st.container(border=True):
        st.markdown(f"**#{entry.id} · {md_escape(verdict_text(entry.overall))}** · "
                    f"{md_escape(title(entry.technique))} · {md_escape(when_text(entry.created_at))}")
        st.caption(f"{md_escape(entry.baseline_name)} ({md_escape(entry.baseline_sha256[:12])}) → "
                   f"{md_escape(entry.candidate_name)} ({md_escape(entry.candidate_sha256[:12])})")
        static_table(comparison_table(stored_deltas(entry.metrics)))
        st.page_link("pages/verify.py", label=t("log_verify_again", id=entry.id), icon=":material/compare_arrows:",
                     query_params={"experiment": str(entry.id)})
    st.download_button(t("log_export"), store.export_csv(), file_name="experiments.csv", mime="text/csv",
                       icon=":material/download:", key=session.LOG_EXPORT.name)
