"""Real browser: a technique page's knob tables fit the page at 1024 px, in English and 中文."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser_tools import CHROMIUM, chromium_page, script_finished

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")]

TECHNIQUES = sorted(p.stem for p in (Path(__file__).resolve().parent.parent / "tree" / "techniques").glob("*.yaml"))

# Each drawn knob table: how much wider it is than the box that holds it, and any cell whose text runs past it.
KNOB_TABLES_JS = """() => Array.from(document.querySelectorAll('[data-testid=stMain] [data-testid=stTable] table'))
  .filter(t => t.getBoundingClientRect().width > 0).map(t => ({
    over: Math.round(t.getBoundingClientRect().width - t.parentElement.getBoundingClientRect().width),
    spill: Array.from(t.querySelectorAll('th, td')).filter(c => c.scrollWidth > c.clientWidth + 1)
      .map(c => c.innerText.slice(0, 40)) }))"""


TABLES_DRAWN_JS = """(n) => document.querySelectorAll('[data-testid=stMain] [data-testid=stTable] table').length === n
  && document.querySelectorAll('[data-testid=stMain] [role=tablist]').length > 0"""


def flag_tables(tid: str) -> int:
    """How many knob tables the technique's page draws: one per engine tab that lists flags."""
    from triage.knowledge.loader import load_knowledge

    kb = load_knowledge()
    knobs = kb.techniques[tid].knobs
    return sum(1 for e in kb.serving if e in knobs and knobs[e].flags)


def test_knob_tables_fit_the_page_at_1024_px(app_url):
    """At 1024 px a flag ('cudagraph_mode=FULL_DECODE_ONLY') or a JSON example never broke: the PD page's table was
    ~750 px wide in ~560, its meanings out of sight behind a sideways scroll. Every technique's first engine tab,
    in both languages, now fits with no cell's text running past its cell."""
    seen = {}
    with chromium_page() as page:
        page.set_viewport_size({"width": 1024, "height": 900})
        for lang in ("en", "zh"):
            for tid in TECHNIQUES:
                page.goto(f"{app_url}/technique?id={tid}&lang={lang}")
                # every engine tab's table drawn (a table's code loads after the page's run ends)
                page.wait_for_function(TABLES_DRAWN_JS, arg=flag_tables(tid), timeout=60000)
                script_finished(page)
                tables = page.evaluate(KNOB_TABLES_JS)
                bad = [t for t in tables if t["over"] > 1 or t["spill"]]
                if bad:
                    seen[(lang, tid)] = bad
    assert not seen, seen
