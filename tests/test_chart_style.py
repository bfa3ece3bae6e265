"""Every chart is drawn in the app's own template (theme=None), readable in light and dark."""

from __future__ import annotations

import json

import pytest

from components.chart_style import template
from components.tree_chart import PAGE_BACKGROUND
from tests.apptest_tools import open_page
from tests.test_tree_layout import _luminance


def _contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("dark", [False, True])
def test_template_text_is_readable_on_the_page(dark):
    """Body text and tick labels reach WCAG AA (4.5:1) on the page behind the transparent chart."""
    layout = template(dark).layout
    bg = PAGE_BACKGROUND[dark]
    assert layout.paper_bgcolor == layout.plot_bgcolor == "rgba(0,0,0,0)"
    assert _contrast(layout.font.color, bg) >= 4.5
    assert _contrast(layout.yaxis.tickfont.color, bg) >= 4.5
    assert layout.xaxis.showgrid is False and layout.yaxis.showgrid is True


def test_themes_differ():
    assert template(True).layout.font.color != template(False).layout.font.color


@pytest.mark.parametrize("page", ["pages/live.py", "pages/benchmark.py", "pages/memory.py", "pages/diagnose.py"])
def test_every_chart_skips_streamlits_browser_theme(page):
    """theme=None on every chart (Streamlit's theme restyles each figure in the browser before it draws) and
    the template in the figure instead, so the look does not fall back to plotly's white default."""
    at = open_page(page)
    charts = [c for c in at.get("plotly_chart") if c.key != "chart_warmup"]
    assert charts, page
    for chart in charts:
        assert chart.proto.theme == "", (page, chart.key)
        layout = json.loads(chart.proto.spec)["layout"]
        assert layout["template"]["layout"]["paper_bgcolor"] == "rgba(0,0,0,0)", (page, chart.key)
