"""Real browser: paste a vLLM server log into the Benchmark page and see the lit branch and the log over time."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser_tools import ARTIFACTS, CHROMIUM, after_rerun, chromium_page, script_finished

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")]

LOG = Path(__file__).resolve().parent / "fixtures" / "real" / "logs" / "vllm_v1_k8s_wrapped_kv_full.txt"

# Per drawn plotly chart: its title and, for the tree, each node's marker opacity (1 = on the lit branch).
CHARTS_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => ({
  title: ((gd.layout.title && gd.layout.title.text) || '').replace(/<[^>]+>/g, ''),
  points: (gd.calcdata || []).map(cd => cd.length),
  nodes: gd.data.length > 2 && gd.data[2].customdata ? Array.from(gd.data[2].customdata) : [],
  opacity: gd.data.length > 2 && gd.data[2].marker ? Array.from([].concat(gd.data[2].marker.opacity)) : [],
}))"""


def test_pasting_a_vllm_log_lights_its_branch_and_draws_its_time_series(app_url):
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with chromium_page() as page:
        page.goto(f"{app_url}/benchmark")
        expect(page.get_by_text("Showing the bundled sample")).to_be_visible(timeout=30000)
        page.get_by_text("Or paste text").click()
        area = page.locator(".st-key-bench_paste textarea")
        expect(area).to_be_visible(timeout=60000)
        area.fill(LOG.read_text())
        after_rerun(page, lambda: area.press("Control+Enter"))
        expect(page.get_by_text("Recognised: vLLM V1 server log, 3 stats lines").first).to_be_visible(timeout=30000)
        expect(page.get_by_text("The KV cache is too small").first).to_be_visible(timeout=30000)
        expect(page.get_by_text("Showing the bundled sample")).to_have_count(0)
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 4", timeout=30000)
        script_finished(page)
        charts = page.evaluate(CHARTS_JS)
        titles = [c["title"] for c in charts]
        assert {"Requests", "KV cache usage", "Tokens/s"} <= set(titles), titles
        requests = charts[titles.index("Requests")]
        assert requests["points"] == [3, 3]  # running and waiting at each of the three stats times
        tree = next(c for c in charts if "memory.kv_cache" in c["nodes"])
        lit = dict(zip(tree["nodes"], tree["opacity"], strict=True))
        assert lit["memory.kv_cache"] == 1.0 and lit["memory"] == 1.0
        assert lit["ttft.queueing"] < 1.0  # off the lit branch: faded
        page.screenshot(path=str(ARTIFACTS / "benchmark-paste-log.png"), full_page=True)


METRICS = Path(__file__).resolve().parent / "fixtures" / "metrics" / "vllm.txt"


def test_a_scrape_pasted_on_live_is_diagnosed_and_kept_with_its_source_across_a_page_switch(app_url):
    from playwright.sync_api import expect

    with chromium_page() as page:
        page.goto(f"{app_url}/live?source=snapshots")
        page.get_by_text("Or paste text").click()
        area = page.locator(".st-key-live_paste textarea")
        expect(area).to_be_visible(timeout=30000)
        text = METRICS.read_text()
        area.fill(text)
        after_rerun(page, lambda: area.press("Control+Enter"))
        recognised = "Recognised: one /metrics scrape of vLLM, diagnosed since the server started"
        expect(page.get_by_text(recognised).first).to_be_visible(timeout=30000)
        page.get_by_role("link", name="Verify").click()
        expect(page.get_by_role("heading", name="Verify").first).to_be_visible(timeout=30000)
        page.get_by_role("link", name="Live").click()
        # the navigation link carries no ?source=: the page reopens on the source chosen before (the session
        # keeps it, and writes it back to the URL), with the text pasted before the switch, diagnosed
        expect(page.get_by_text(recognised).first).to_be_visible(timeout=30000)
        script_finished(page)  # the run that wrote the source back to the URL is over
        expect(page.get_by_role("radio", name="Two snapshots", exact=True)).to_be_checked()
        assert "source=snapshots" in page.url
        assert page.locator(".st-key-live_paste textarea").input_value() == text


# Per chart of the pasted log: its width and whether its title and legend boxes overlap (by over 1 px).
SERIES_LAYOUT_JS = """() => Array.from(document.querySelectorAll('.st-key-paste_series .js-plotly-plot')).map(gd => {
  const t = gd.querySelector('.gtitle'), l = gd.querySelector('.legend');
  const a = t && t.getBoundingClientRect(), b = l && l.getBoundingClientRect();
  const overlap = !!(a && b) && a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1
    && b.top < a.bottom - 1;
  const box = r => r && [r.top, r.bottom, r.left, r.right];
  return {width: Math.round(gd.getBoundingClientRect().width), overlap, title: box(a), legend: box(b)}; })"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_pasted_logs_charts_keep_their_width_and_legend_clear_of_the_title_at_1024_px(app_url, lang):
    """Three columns at any width left each chart ~220 px beside the sidebar at 1024 px, and its legend, wrapped
    to two lines, rose over the chart's title ('Requests' under 'running / waiting'); each now keeps 260 px."""
    from playwright.sync_api import expect

    with chromium_page() as page:
        page.set_viewport_size({"width": 1024, "height": 900})
        page.goto(f"{app_url}/benchmark?lang={lang}")
        page.get_by_text({"en": "Or paste text", "zh": "或粘贴文本"}[lang]).click()
        area = page.locator(".st-key-bench_paste textarea")
        expect(area).to_be_visible(timeout=60000)
        area.fill(LOG.read_text())
        after_rerun(page, lambda: area.press("Control+Enter"))
        # drawn: three charts, two with a legend (KV usage has one line and none)
        page.wait_for_function("document.querySelectorAll('.st-key-paste_series .js-plotly-plot .legend').length"
                               " === 2", timeout=30000)
        script_finished(page)
        charts = page.evaluate(SERIES_LAYOUT_JS)
        assert len(charts) == 3 and all(c["width"] >= 255 and not c["overlap"] for c in charts), charts
