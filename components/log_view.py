"""The Log page: recorded verifications, filterable, a page at a time (newest first), exportable as formula-safe
CSV."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from components import session
from components.shell import knowledge, lang, t, translated_choice
from components.static_table import static_table
from components.verify_view import comparison_table, stored_deltas, verdict_text, when_text
from triage.service.display import count, md_escape
from triage.service.experiments import experiment_log
from triage.service.model import TriageError

VERDICTS = ("gain confirmed", "no effect", "regression", "unsound")
PAGE_SIZE = 50  # rows per page: the database returns only these, so a log of 100,000 draws as fast as one of 50


def _restore(techs: list[str | None], verdicts: list[str | None]) -> dict[str, object]:
    """Seed the filters and the page from what this session chose (a page switch drops widget state); the page
    from ``?page=`` first, once, so a shared link opens the same page."""
    kept = session.LOG_KEPT.setdefault(dict)
    # None ("all") is the default, drawn as such: seeded, the select box would show its placeholder instead
    if not session.LOG_TECHNIQUE.present() and kept.get("technique") is not None and kept["technique"] in techs:
        session.LOG_TECHNIQUE.seed(kept["technique"])
    if not session.LOG_VERDICT.present() and kept.get("verdict") is not None and kept["verdict"] in verdicts:
        session.LOG_VERDICT.seed(kept["verdict"])
    if not session.LOG_PAGE.present():
        try:
            session.LOG_PAGE.seed(max(1, int(st.query_params.get("page") or kept.get("page") or 1)))
        except ValueError:  # ?page=abc: the first page
            session.LOG_PAGE.seed(1)
    return kept


def _pager(total: int, pages: int) -> None:
    """The page number (below the table) and which rows the page shows."""
    number = session.LOG_PAGE.value() or 1
    c1, c2 = st.columns([1, 4], vertical_alignment="bottom")
    c1.number_input(t("log_page"), min_value=1, max_value=pages, step=1, key=session.LOG_PAGE.name)
    first = (number - 1) * PAGE_SIZE + 1
    c2.caption(t("log_pager", page=count(number), pages=count(pages), first=count(first),
                 last=count(min(total, number * PAGE_SIZE)), total=count(total)))


def log_page() -> None:
    st.title(t("log_title"))
    kb = knowledge()
    try:
        store = experiment_log()
    except TriageError as exc:
        st.error(md_escape(exc.line()))
        return
    c1, c2 = st.columns(2)
    techs, verdicts = [None, *kb.techniques], [None, *VERDICTS]
    kept = _restore(techs, verdicts)
    technique = translated_choice(c1.selectbox, t("verify_technique"), techs, session.LOG_TECHNIQUE,
                                  lambda x: t("log_all") if x is None else kb.techniques[x].title.get(lang()))
    verdict = translated_choice(c2.selectbox, t("verify_verdict"), verdicts, session.LOG_VERDICT,
                                lambda v: t("log_all") if v is None else verdict_text(v))
    if (technique, verdict) != (kept.get("technique"), kept.get("verdict")) and "page" in kept:
        session.LOG_PAGE.seed(1)  # other filters: their first page (the pager is drawn below, after the query)
    number = session.LOG_PAGE.value() or 1
    entries, total = store.page(PAGE_SIZE, (number - 1) * PAGE_SIZE, technique=technique, verdict=verdict)
    pages = max(1, -(-total // PAGE_SIZE))
    if number > pages:  # past the end (the log shrank, or ?page= was too large): its last page
        number = pages
        session.LOG_PAGE.seed(number)
        entries, total = store.page(PAGE_SIZE, (number - 1) * PAGE_SIZE, technique=technique, verdict=verdict)
    session.LOG_KEPT.set({"technique": technique, "verdict": verdict, "page": number})
    if number > 1 or "page" in st.query_params:
        st.query_params["page"] = str(number)
    if not entries:
        st.info(t("log_empty"))
        return
    def title(tid: str | None) -> str:
        return kb.techniques[tid].title.get(lang()) if tid in kb.techniques else tid or "—"

    rows = [{"#": e.id, t("log_when"): when_text(e.created_at), t("verify_who"): e.who or "",
             t("verify_technique"): title(e.technique), t("verify_verdict"): verdict_text(e.overall),
             t("verify_baseline"): e.baseline_name, t("verify_candidate"): e.candidate_name,
             t("verify_note"): e.note} for e in entries]
    static_table(pd.DataFrame(rows).set_index("#"))  # the page's entries, in the reader's words and dates
    _pager(total, pages)
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
    # the whole log is read only when the button is pressed (a callable), never on each run
    st.download_button(t("log_export"), store.export_csv, file_name="experiments.csv", mime="text/csv",
                       icon=":material/download:", key=session.LOG_EXPORT.name)
