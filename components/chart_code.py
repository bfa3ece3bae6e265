"""Start the browser loading the chart library: before a chart page computes, after a text page is drawn."""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from components import session

# The smallest figure plotly accepts, drawn as cheaply as it can be (no axes, no toolbar, no hover layer):
# it is never shown, but the browser still draws it.
_EMPTY_FIGURE = {"data": [{"type": "scatter", "x": [], "y": []}],
                 "layout": {"width": 10, "height": 10, "margin": {"l": 0, "r": 0, "t": 0, "b": 0},
                            "xaxis": {"visible": False}, "yaxis": {"visible": False}}}
_STATIC = {"staticPlot": True, "displayModeBar": False}


class ChartCodeWarmup:
    """An empty, hidden chart at the top of the sidebar, drawn once on every run of every page.

    Streamlit fetches its 4.7 MB plotly bundle only when the first chart element is rendered, and evaluating
    it holds the browser's main thread for about a second. A page whose first paint is a chart calls
    :meth:`draw` before it computes, so the fetch starts at once and its own charts find the code loaded. A
    page that shows text first calls it after its content: its text is drawn before that second of evaluation
    (measured on the technique page: title 2.5 s → 1.8 s), and the code is still loaded before the user acts.
    The slot is reserved first so the sidebar's elements keep their positions; the chart is hidden
    (``display: none``: no space, not read by screen readers).
    """

    def __init__(self) -> None:
        self._slot: DeltaGenerator = st.sidebar.empty()
        self._drawn = False

    def draw(self) -> None:
        """Draw the hidden chart (once per run; later calls do nothing)."""
        if self._drawn:
            return
        self._drawn = True
        st.html(f"<style>.st-key-{session.CHART_WARMUP.name} {{ display: none; }}</style>")
        self._slot.plotly_chart(_EMPTY_FIGURE, key=session.CHART_WARMUP.name, width="content", config=_STATIC,
                                theme=None)
