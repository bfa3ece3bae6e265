"""Plotly panels for a benchmark run: distributions, TTFT vs prompt length, latency over time, sweep."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from components.chart_style import LEGEND_ABOVE, show
from components.shell import t
from triage.service.benchmark import knee_index
from triage.service.display import ms
from triage.service.model import Run, SweepPoint

MAX_POINTS = 5000  # scatter plots draw a fixed-seed sample; histograms use every request
HEIGHT = 300
BINS = 60
METRIC_COLORS = {"ttft_s": "#1565C0", "tpot_s": "#EF6C00"}  # TTFT blue, TPOT orange on every chart


def _sampled(df: pd.DataFrame) -> pd.DataFrame:
    return df.sample(MAX_POINTS, random_state=0) if len(df) > MAX_POINTS else df


def _layout(fig: go.Figure, x: str, y: str) -> go.Figure:
    fig.update_layout(height=HEIGHT, margin=dict(l=10, r=10, t=30, b=10), xaxis_title=x, yaxis_title=y,
                      legend=LEGEND_ABOVE, yaxis_rangemode="tozero")  # counts, latencies
    return fig


def _binned(values_ms: pd.Series, name: str, bins: int = BINS) -> go.Bar:
    """A histogram binned here: 60 bars reach the browser, not one value per request (a million-row upload
    would otherwise send every value and let the browser bin them)."""
    finite = values_ms[np.isfinite(values_ms)].to_numpy(dtype=float)
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if hi - lo < 1e-6 * max(1.0, abs(hi)):  # one value (or float noise): one bar around it, not 60 empty ones
        lo, hi, bins = lo - 0.5, hi + 0.5, 1
    counts, edges = np.histogram(finite, bins=bins, range=(lo, hi))
    return go.Bar(x=(edges[:-1] + edges[1:]) / 2, y=counts, width=np.diff(edges), name=name,
                  customdata=np.column_stack([edges[:-1], edges[1:]]),
                  hovertemplate="%{customdata[0]:.4~g}–%{customdata[1]:.4~g} ms: %{y}<extra></extra>")


def _no_requests() -> None:
    st.info(t("panel_missing", what="per-request data"))


def distributions(run: Run, slo: dict) -> None:
    df = run.requests
    if df is None:
        _no_requests()
        return
    cols = st.columns(2)
    for col, metric, key in ((cols[0], "ttft_s", "ttft_p99_s"), (cols[1], "tpot_s", "tpot_p99_s")):
        with col:
            if metric not in df.columns or df[metric].notna().sum() == 0:
                st.info(t("panel_missing", what=metric))
                continue
            fig = go.Figure(_binned(df[metric] * 1000, metric).update(marker_color=METRIC_COLORS[metric]))
            fig.add_vline(x=slo[key] * 1000, line_dash="dash", line_color="#D32F2F",
                          annotation_text=f"SLO p99 {ms(slo[key] * 1000)}")
            show(_layout(fig, f"{metric[:-2].upper()} (ms)", t("requests")), width="stretch")


def ttft_vs_prompt(run: Run) -> None:
    df = run.requests
    if df is None:
        _no_requests()
        return
    if not {"prompt_tokens", "ttft_s"} <= set(df.columns):
        st.info(t("panel_missing", what="prompt_tokens, ttft_s"))
        return
    s = _sampled(df)
    fig = go.Figure(go.Scattergl(x=s["prompt_tokens"], y=s["ttft_s"] * 1000, mode="markers",
                                 marker=dict(size=4, opacity=0.5)))
    show(_layout(fig, t("prompt_tokens"), "TTFT (ms)"), width="stretch")


def latency_over_time(run: Run) -> None:
    df = run.requests
    if df is None:
        _no_requests()
        return
    if "start_s" not in df.columns:
        st.info(t("panel_missing", what="start_s"))
        return
    s = _sampled(df).sort_values("start_s")
    fig = go.Figure()
    # TPOT gets its own axis on the right: tens of ms under a TTFT of seconds would be a flat line at zero
    for metric, axis in (("ttft_s", "y"), ("tpot_s", "y2")):
        if metric in s.columns:
            fig.add_trace(go.Scattergl(x=s["start_s"], y=s[metric] * 1000, mode="markers", name=metric[:-2].upper(),
                                       marker=dict(size=4, opacity=0.5, color=METRIC_COLORS[metric]), yaxis=axis))
    _layout(fig, t("run_time_s"), "TTFT (ms)")
    if "tpot_s" in s.columns:
        fig.update_layout(yaxis2=dict(title="TPOT (ms)", overlaying="y", side="right", rangemode="tozero",
                                      showgrid=False))
    show(fig, width="stretch")


def sweep_curve(points: list[SweepPoint], slo: dict) -> None:
    points = sorted(points, key=lambda p: (p.req_per_s is None, p.req_per_s or 0.0))  # a curve, left to right
    x = [p.req_per_s for p in points]
    y = [p.ttft_p99_s for p in points]
    fig = go.Figure(go.Scatter(x=x, y=[v * 1000 if v is not None else None for v in y], mode="lines+markers",
                               text=[p.label for p in points], name="TTFT p99"))
    knee = knee_index(x, y)
    knee_y = y[knee] if knee is not None else None
    if knee is not None and knee_y is not None:
        fig.add_trace(go.Scatter(x=[x[knee]], y=[knee_y * 1000], mode="markers+text", text=[t("knee")],
                                 textposition="top left", marker=dict(size=14, color="#D32F2F", symbol="x"),
                                 name=t("knee")))
    fig.add_hline(y=slo["ttft_p99_s"] * 1000, line_dash="dash", line_color="#9E9E9E",
                  annotation_text=f"SLO p99 {ms(slo['ttft_p99_s'] * 1000)}")
    show(_layout(fig, t("throughput_req_s"), "TTFT p99 (ms)"), width="stretch")
