"""The benchmark page's body: upload, pick, KPIs, panels, findings and the lit tree."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st

from components import bench_charts, bench_source, findings, session
from components.evidence import diagnosis_panel
from components.kpi import kpi_row
from components.paste_view import EMPTY, REFUSED, SHOWN
from components.shell import knowledge, t
from components.static_table import static_table
from components.verdict import verdict_block
from triage.service.benchmark import diagnose_benchmark, summary, sweep
from triage.service.display import count, fmt_value, md_escape, ms, percent, plain
from triage.service.model import Hardware, Run, Slo
from triage.service.uploads import format_list, format_title
from triage.service.verdict import run_engine

PasteArea = Callable[[Slo, Hardware | None], str]  # paste_view.paste_area: SHOWN, REFUSED or EMPTY


def upload_area() -> list[tuple[str, str]]:
    """The uploader; returns (name, message) of each file in it that could not be read."""
    files = st.file_uploader(t("upload"), accept_multiple_files=True, key=session.BENCH_UPLOAD.name,
                             type=["json", "jsonl", "yaml", "yml", "csv", "parquet", "txt"])
    fresh = bench_source.fresh(files or [])
    if fresh:
        with st.status(t("parsing"), expanded=False) as status:
            good, bad = bench_source.ingest(fresh, status, session.BENCH_UPLOAD)
            if bad:  # the status says what happened, never "parsed" for a file that was refused
                status.update(label=t("upload_refused", names=", ".join(bad)), state="error", expanded=False)
            else:
                status.update(label=t("parsed_files", names=", ".join(good)), state="complete")
    if bench_source.dropped():
        st.caption(t("bench_dropped", n=bench_source.dropped()))
    return bench_source.refused(session.BENCH_UPLOAD)


FILE_PARAM = "file"  # the digest of the file viewed: a reload (F5) reopens it while the server still holds it


def reopen_from_url() -> None:
    """A new session opened on ``?file=<digest>``: view that file again, or say it is gone (never silently show
    the sample instead)."""
    wanted = st.query_params.get(FILE_PARAM)
    if not wanted or wanted == bench_source.viewed() or wanted in bench_source.loaded():
        return
    if not bench_source.adopt(wanted):
        st.warning(t("bench_file_gone"), icon=":material/warning:")
        st.query_params.pop(FILE_PARAM, None)


def file_in_url(loaded: bench_source.Loaded) -> None:
    if loaded.is_sample:
        st.query_params.pop(FILE_PARAM, None)
    elif st.query_params.get(FILE_PARAM) != loaded.digest:
        st.query_params[FILE_PARAM] = loaded.digest


def file_picker(failed: list[tuple[str, str]], sample: bool = True) -> bench_source.Loaded | None:
    """The file viewed (kept across pages); None when the user's upload (or, ``sample`` False, their pasted text)
    was refused and nothing of theirs loaded: then the page shows the error alone, not the sample's findings as if
    they were the user's."""
    store = bench_source.loaded()
    if store:
        options = [bench_source.SAMPLE_ID, *store]
        label = {bench_source.SAMPLE_ID: t("sample_label"), **{d: b.source for d, b in store.items()}}
        bench_source.sync_picker(options)
        st.selectbox(t("file_picker"), options, key=session.BENCH_CHOICE.name, format_func=label.__getitem__,
                     on_change=bench_source.picked)
    for name, reason in failed:
        st.error(t("upload_failed", name=name, reason=reason) + " "
                 + (t("kept_previous") if store else t("nothing_shown")))
    if (failed or not sample) and not store:
        return None
    loaded = bench_source.current()
    if loaded.is_sample:
        st.info(t("showing_sample"), icon=":material/science:")
    return loaded


def run_picker(loaded: bench_source.Loaded) -> Run:
    bench = loaded.bench
    st.markdown(t("detected", fmt=format_title(bench.format), runs=len(bench.runs),
                  secs=bench.parse_seconds))
    for note in bench.notes:  # notes quote column names and values of the file
        st.caption(md_escape(note))
    if len(bench.runs) == 1:
        return bench.runs[0]
    labels = [f"{i}. {r.label}" for i, r in enumerate(bench.runs, start=1)]
    chosen = st.selectbox(t("run_picker"), range(len(labels)), index=len(labels) - 1,
                          format_func=labels.__getitem__, key=session.BENCH_RUN.key(loaded.digest))
    return bench.runs[chosen]


def _ms(value: float | None) -> str:
    """Milliseconds in every cell, as the load tools print this table (digits: the one formatter's)."""
    return ms(value)


def summary_table(run: Run) -> None:
    """The run as the load tools print it: mean, median, p90, p99 per latency, then counts, load and errors."""
    s = summary(run)
    st.markdown(f"#### {t('bench_summary')}")
    if s.latencies:
        static_table(pd.DataFrame(
            [{t("sum_metric"): row.metric.upper(),
              t("sum_mean"): _ms(row.mean_ms) if row.measurable else t("sum_not_measurable"),
              t("sum_median"): _ms(row.median_ms), "P90": _ms(row.p90_ms), "P99": _ms(row.p99_ms)}
             for row in s.latencies]).set_index(t("sum_metric")))
    load = t("sum_load_unknown")
    if s.concurrency is not None:
        load = t("sum_concurrency_value", n=count(s.concurrency))
    elif s.rate is not None:
        load = t("sum_rate_value", rate=plain(s.rate))
    total = (s.requests or 0) + (s.failed or 0)
    errors = "—" if s.failed is None else (
        f"{count(s.failed)} ({percent(s.failed / total)})" if total else count(s.failed))
    facts = {
        t("sum_requests"): count(s.requests),
        t("sum_duration"): fmt_value(s.duration_s, "s"),
        t("sum_load"): load,
        t("sum_throughput"): fmt_value(s.req_per_s, "req/s"),
        t("sum_errors"): errors,
    }
    static_table(pd.DataFrame({t("sum_value"): list(facts.values())}, index=list(facts)))


def panels(loaded: bench_source.Loaded, run: Run, slo: Slo) -> None:
    multi = len(loaded.bench.runs) > 1
    names = [t("tab_distributions"), t("tab_prompt"), t("tab_time")] + ([t("tab_sweep")] if multi else [])
    tabs = st.tabs(names, key=session.BENCH_TAB.name, on_change="rerun")  # lazy: only the open tab's charts are drawn
    if run.has_requests:
        if tabs[0].open:
            with tabs[0]:
                bench_charts.distributions(run, slo.values)
        if tabs[1].open:
            with tabs[1]:
                bench_charts.ttft_vs_prompt(run)
        if tabs[2].open:
            with tabs[2]:
                bench_charts.latency_over_time(run)
    else:
        for tab in tabs[:3]:
            tab.info(t("summary_only"))
    if multi and tabs[3].open:
        with tabs[3]:
            bench_charts.sweep_curve(sweep(knowledge(), loaded.bench, slo.values), slo.values)
    if run.definitions:
        with st.expander(t("definitions")):
            st.markdown("\n".join(f"- **{md_escape(k)}**: {md_escape(v)}" for k, v in run.definitions.items()))


def benchmark_page(slo: Slo, hardware: Hardware | None = None, paste: PasteArea | None = None) -> None:
    with findings.diagnosing("nav_benchmark"):  # left half-way, the previous diagnosis is not carried on
        _benchmark_body(slo, hardware, paste)


def _benchmark_body(slo: Slo, hardware: Hardware | None, paste: PasteArea | None) -> None:
    st.title(t("bench_title"))
    st.caption(t("bench_hint"))
    answer = st.container()  # the verdict goes first, above the uploader, once the file viewed is diagnosed
    reopen_from_url()
    pasted = paste(slo, hardware) if paste is not None else EMPTY
    if pasted == SHOWN:  # pasted text replaces the files below while it is there
        return
    refused = upload_area()  # text refused: its error above, the user's files still here
    st.caption(t("bench_formats", formats=format_list()))  # below the uploader: the verdict stays above the fold
    loaded = file_picker(refused, sample=pasted != REFUSED)
    if loaded is None:
        findings.forget()
        return
    file_in_url(loaded)
    run = run_picker(loaded)
    diag = diagnose_benchmark(knowledge(), run, slo, hardware)
    engine = run_engine(run)
    label = f"{loaded.bench.source} · {run.label}"
    if loaded.is_sample:  # nothing of the user's: Diagnose and Retro show the sample as the sample, said so
        findings.forget()
    else:
        findings.remember(label, diag, engine)  # before anything is drawn: a switch away from here keeps it
    with answer:
        verdict_block(diag, engine, t("sample_label") if loaded.is_sample else label, sample=loaded.is_sample)
    kpi_row(diag.signals, slo.values)
    summary_table(run)
    panels(loaded, run, slo)
    diagnosis_panel(diag, label, engine)
