"""The look every chart shares: legend placement and a small light or dark template, drawn with theme=None."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import plotly.graph_objects as go
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

# Anchored by its bottom just above the plot area: when the legend wraps (several lines in a narrow column),
# plotly grows the top margin for it instead of drawing it over the start of the data.
LEGEND_ABOVE = dict(orientation="h", yanchor="bottom", y=1.02, x=0)

# Streamlit's categorical palette, so series keep the colours its own theme would give them.
_COLORWAY = {False: ["#0068C9", "#83C9FF", "#FF2B2B", "#FFABAB", "#29B09D", "#7DEFA1", "#FF8700", "#FFD16A",
                     "#6D3FC0", "#D5DAE5"],
             True: ["#83C9FF", "#0068C9", "#FFABAB", "#FF2B2B", "#7DEFA1", "#29B09D", "#FFD16A", "#FF8700",
                    "#6D3FC0", "#D5DAE5"]}
# (text, tick text, grid and axis lines, hover box) per theme; tick text is darker than Streamlit's #808495
# (3.7:1 on white) so axis numbers reach WCAG AA
_INK = {False: ("#31333F", "#5E6270", "#E6EAF1", "#FFFFFF"), True: ("#FAFAFA", "#C7CAD1", "#31333F", "#262730")}


@lru_cache(maxsize=2)
def template(dark: bool) -> go.layout.Template:
    """A few layout defaults in the app's font and the page's colours.

    Streamlit's own chart theme (``theme="streamlit"``) restyles every figure in the browser before it draws:
    on the Live page that cost about 150 ms of the main thread for four charts, measured in Chromium here.
    This template carries the same look in the figure itself, and explicit layout settings still win over it.
    """
    ink, muted, grid, hover = _INK[dark]
    axis = dict(gridcolor=grid, linecolor=grid, zerolinecolor=grid, tickcolor=grid, automargin=True,
                tickfont=dict(color=muted), title=dict(font=dict(color=ink)))
    return go.layout.Template(layout=dict(
        font=dict(family='"Source Sans", "Source Sans Pro", sans-serif', size=12, color=ink),
        colorway=_COLORWAY[dark], paper_bgcolor="rgba(0,0,0,0)", plot_bgcolor="rgba(0,0,0,0)",
        xaxis=dict(axis, showgrid=False), yaxis=dict(axis, showgrid=True),
        hoverlabel=dict(bgcolor=hover, font=dict(color=ink)), legend=dict(font=dict(color=ink))))


def dark() -> bool:
    """Whether the browser shows the dark theme (it follows the user's OS unless they picked one)."""
    return st.context.theme.type == "dark"


def show(fig: go.Figure, where: DeltaGenerator | None = None, **kwargs: Any) -> None:
    """Draw ``fig`` in the app's look, in ``where`` (the current container by default)."""
    fig.update_layout(template=template(dark()))
    (where or st).plotly_chart(fig, theme=None, **kwargs)
