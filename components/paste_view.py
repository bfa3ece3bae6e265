"""Paste instead of upload: a text area on the Benchmark page and the Live page's snapshot source, detected like
a file, diagnosed in place."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from components import findings, session
from components.chart_style import LEGEND_ABOVE
from components.evidence import diagnosis_panel
from components.shell import knowledge, t
from components.static_table import static_table
from components.verdict import verdict_block
from triage.service.display import count, fmt_value, plain
from triage.service.model import Hardware, Slo, TriageError
from triage.service.pasted import Pasted, read_pasted

CHART_HEIGHT = 260
TOP_MARGIN = 80  # the title's line, then the legend's


def _figure(frame: pd.DataFrame, columns: list[tuple[str, str]], title: str, percent: bool = False) -> go.Figure:
    fig = go.Figure()
    for column, name in columns:
        if column in frame:
            values = frame[column] * (100 if percent else 1)
            fig.add_trace(go.Scatter(x=frame.index, y=values, mode="lines", name=name))
    # the title at the top of the figure, the legend on its own line below it, just above the plot (with both
    # at the plot's top the legend ran over the title's tail at any width)
    fig.update_layout(title=dict(text=title, y=1, yref="container", yanchor="top", pad=dict(t=8)),
                      height=CHART_HEIGHT, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10), legend=LEGEND_ABOVE,
                      yaxis=dict(ticksuffix=" %" if percent else "", rangemode="tozero"),
                      # vLLM's stamps carry no year (a placeholder one is used): the axis shows day and time only
                      xaxis=dict(tickformat="%H:%M:%S<br>%b %d", hoverformat="%b %d %H:%M:%S"))
    return fig


def series_panels(frame: pd.DataFrame) -> None:
    """Running and waiting requests, KV usage, prompt and generation tokens/s over the log's time."""
    st.markdown(f"### {t('paste_series_heading')}")
    charts = [
        _figure(frame, [("running", t("paste_series_running")), ("waiting", t("paste_series_waiting"))],
                t("paste_series_requests")),
        _figure(frame, [("kv", t("paste_series_kv"))], t("paste_series_kv"), percent=True),
        _figure(frame, [("prompt_tps", t("paste_series_prompt")), ("gen_tps", t("paste_series_gen"))],
                t("paste_series_tokens")),
    ]
    # three columns at any width left each chart ~220 px beside the sidebar at 1024 px, and its legend, wrapped to
    # two lines, rose over its title; a chart now keeps 260 px and the row wraps, as the Live panels do
    st.html(f"<style>.st-key-{session.PASTE_SERIES.name} > div {{ min-width: 260px; }}</style>")
    row = st.container(horizontal=True, key=session.PASTE_SERIES.name)
    for fig in charts:
        with row, st.container():
            st.plotly_chart(fig, width="stretch", config={"displayModeBar": False})


def _recognised(found: Pasted) -> str:
    f = found.facts
    if found.kind == "log":
        return t("paste_log_recognised", title=found.title, stats=count(float(f["stats"])),
                 minutes=plain(float(f["minutes"])), skipped=count(float(f["skipped"])))
    if found.kind == "scrape":
        return t("paste_scrape_recognised", engine=str(f["engine"]))
    return t("paste_bench_recognised", title=found.title, runs=f["runs"], run=str(f["run"]))


def show(found: Pasted) -> None:
    verdict_block(found.diagnosis, found.engine, found.label)  # first, as for a file: the answer, then the detail
    st.success(_recognised(found), icon=":material/check_circle:")
    if found.kind == "scrape" and found.facts.get("implausible"):
        st.warning(t("paste_scrape_implausible", n=found.facts["implausible"]))
    if found.series is not None and not found.series.empty:
        series_panels(found.series)
    if found.readings:
        st.markdown(f"#### {t('paste_readings')}")
        # each reading by its name in the reader's language (tree/ui.yaml log_reading_*), not its id
        static_table(pd.DataFrame({"": [t(f"log_reading_{r.name}") for r in found.readings],
                                   t("sum_value"): [fmt_value(r.value, r.unit) for r in found.readings]}
                                  ).set_index(""))
    diagnosis_panel(found.diagnosis, found.label, found.engine)


def _kept(widget: session.Widget[str]) -> None:
    """Give the text area back the text this session pasted into it: Streamlit drops a widget's state when a
    page without it runs (a page switch), the session's copy stays. A browser reload starts a new session and
    starts empty: the text is never kept where another session could be shown it."""
    texts = session.PASTED_TEXTS.setdefault(dict)
    if not widget.present() and texts.get(widget.name):
        widget.seed(texts[widget.name])


def _keep(widget: session.Widget[str], text: str | None) -> None:
    texts = session.PASTED_TEXTS.setdefault(dict)
    if text:
        texts[widget.name] = text
    else:
        texts.pop(widget.name, None)  # cleared by the user: nothing comes back


SHOWN, REFUSED, EMPTY = "shown", "refused", "empty"  # what paste_area did with the text area's text


def paste_area(slo: Slo, hardware: Hardware | None = None, widget: session.Widget[str] = session.BENCH_PASTE) -> str:
    """The text area. SHOWN: its text was diagnosed and fills the page; REFUSED: why it could not be read is said,
    and the page goes on with its other sources (the files the user loaded stay on screen); EMPTY: no text."""
    _kept(widget)
    with st.expander(t("paste_heading"), expanded=bool(widget.value())):
        text = st.text_area(t("paste_label"), key=widget.name, height=160)
    _keep(widget, text)
    if not text or not text.strip():
        return EMPTY
    try:
        found = read_pasted(knowledge(), text, slo, hardware)
    except TriageError as exc:
        findings.forget()
        st.error(t("paste_refused", reason=exc.reason))
        return REFUSED
    findings.remember(found.label, found.diagnosis, found.engine)  # before anything is drawn: a page switch keeps it
    show(found)
    return SHOWN
