"""Start the browser loading the chart library while the server still computes the page."""

from __future__ import annotations

import streamlit as st

from components import session

# The smallest figure plotly accepts, drawn as cheaply as it can be (no axes, no toolbar, no hover layer):
# it is never shown, but the browser still draws it.
_EMPTY_FIGURE = {"data": [{"type": "scatter", "x": [], "y": []}],
                 "layout": {"width": 10, "height": 10, "margin": {"l": 0, "r": 0, "t": 0, "b": 0},
                            "xaxis": {"visible": False}, "yaxis": {"visible": False}}}
_STATIC = {"staticPlot": True, "displayModeBar": False}


def warm_chart_code() -> None:
    """An empty, hidden chart at the top of the sidebar, drawn on every run of every page.

    Streamlit fetches its 4.7 MB plotly bundle only when the first chart element is rendered, and evaluating
    it takes the browser's main thread for about a second. A page that computes before its first chart would
    otherwise start that fetch only once the chart arrives; this element, sent before the page runs, starts
    it at once (the page's own charts then find the code loaded). It is drawn on every run so the sidebar's
    elements keep their positions, and it is hidden (``display: none``: no space, not read by screen readers).
    """
    st.html(f"<style>.st-key-{session.CHART_WARMUP.name} {{ display: none; }}</style>")
    st.sidebar.plotly_chart(_EMPTY_FIGURE, key=session.CHART_WARMUP.name, width="content", config=_STATIC)
