"""Real browser: the Memory page reads whole at 1024×768 beside the sidebar (no value cut, no word split)."""

from __future__ import annotations

import os

import pytest

from tests.browser_tools import CHROMIUM, chromium_page, script_finished

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")]

# leaf elements whose text is wider than their box and clipped (an ellipsis, or hidden overflow)
CUT_JS = """() => [...document.querySelectorAll('[data-testid=stMain] *')].filter(e =>
    e.children.length === 0 && (e.innerText || '').trim() && e.scrollWidth > e.clientWidth + 1
    && getComputedStyle(e).overflowX !== 'visible').map(e => e.innerText.slice(0, 40))"""
# pieces of table text (between spaces, hyphens and slashes) that the browser drew on two lines
SPLIT_JS = """() => { const out = [];
  for (const cell of document.querySelectorAll('.triage-table th, .triage-table td')) {
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      for (const m of n.data.matchAll(/[^\\s\\-\\/]+/g)) {
        const r = document.createRange(); r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
        if (new Set([...r.getClientRects()].map(x => Math.round(x.top))).size > 1) out.push(m[0]);
      }
    }
  }
  return out; }"""


def test_memory_page_is_whole_at_1024_px(app_url):
    """KPIs read '459,568' and '22.7 ms' (not '459,…', '22.7…'), the GPU's name is not cut, and the step tables'
    headers and cells never break inside a word ('Chang|e', 'GP|Us', 'n|o', '--quantizatio|n')."""
    with chromium_page() as page:
        page.set_viewport_size({"width": 1024, "height": 768})
        page.goto(f"{app_url}/memory?model=llama-3.1-8b&len=32768&conc=256&gpu=mi300x")
        page.wait_for_selector(".triage-table", timeout=60000)
        page.wait_for_function("() => document.querySelectorAll('.triage-table').length >= 2", timeout=60000)
        # the KPI cards may arrive after the tables (the page streams its elements): wait for them, then measure
        page.wait_for_function("() => document.querySelectorAll('[data-testid=stMetricValue]').length >= 4",
                               timeout=60000)
        script_finished(page)  # the page drawn in full before it is measured
        assert page.locator("[data-testid=stMetricValue]").count() == 4
        assert page.evaluate(CUT_JS) == []
        assert page.evaluate(SPLIT_JS) == []
