"""Real browser: Debian Chromium driven by Playwright against `streamlit run app.py` (the shared server, or a fresh
one where a test needs a first request or settings of its own)."""

from __future__ import annotations

import os
import re

import pytest

from tests.browser_tools import (
    ARTIFACTS,
    CHROMIUM,
    after_rerun,
    chromium_page,
    click_tree_node,
    script_finished,
    streamlit_server,
)

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")]


def _expect():
    from playwright.sync_api import expect

    return expect


def test_first_request_deep_link_to_technique_page():
    """The very first request of a fresh server opens a technique page: right content, no 'Page not found'."""
    expect = _expect()
    with streamlit_server() as url, chromium_page() as page:
        page.goto(f"{url}/technique?id=chunked_prefill")
        expect(page.get_by_role("heading", name="Chunked prefill").first).to_be_visible(timeout=60000)
        script_finished(page)  # the whole page is drawn: what follows reads it, and its absences are final
        expect(page.get_by_text("Minimal-change-first checklist")).to_be_visible()
        # app.py framed the page: its navigation titles, not the legacy file list, are in the sidebar
        expect(page.get_by_role("link", name="Diagnose")).to_be_visible()
        expect(page.get_by_role("link", name="technique", exact=True)).to_have_count(0)
        assert page.get_by_text("Page not found").count() == 0


def test_first_request_deep_link_to_node():
    expect = _expect()
    with streamlit_server() as url, chromium_page() as page:
        page.goto(f"{url}/?node=ttft.queueing")
        expect(page.get_by_text("Requests queue too long").first).to_be_visible(timeout=60000)
        script_finished(page)
        expect(page.get_by_text("vllm:request_queue_time_seconds").first).to_be_visible()
        expect(page.get_by_role("link", name="Benchmark")).to_be_visible()
        assert page.get_by_text("Page not found").count() == 0


def test_click_technique_node_then_open_its_page(app_url):
    expect = _expect()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with chromium_page() as page:
        page.goto(f"{app_url}/")
        click_tree_node(page, "prefix_caching")
        expect(page).to_have_url(f"{app_url}/?node=prefix_caching", timeout=60000)
        link = page.get_by_role("link", name="Open the Prefix caching page")
        expect(link).to_be_visible(timeout=60000)
        page.screenshot(path=str(ARTIFACTS / "tree-selected.png"), full_page=True)
        link.click()
        expect(page).to_have_url(f"{app_url}/technique?id=prefix_caching&lang=en", timeout=60000)
        expect(page.get_by_role("heading", name="Prefix caching").first).to_be_visible(timeout=60000)
        page.screenshot(path=str(ARTIFACTS / "technique-page.png"), full_page=True)


def test_verify_page_upload_two_files_and_see_the_verdict(tmp_path):
    from tests.synthetic import requests

    expect = _expect()
    cols = ["start_s", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s", "ok"]
    base, cand = tmp_path / "baseline.csv", tmp_path / "candidate.csv"
    requests(n=1500, ttft_base=0.4, seed=1)[cols].to_csv(base, index=False)
    requests(n=1500, ttft_base=0.2, seed=2)[cols].to_csv(cand, index=False)
    with streamlit_server({"TRIAGE_LOG_DB": str(tmp_path / "log.sqlite3")}) as url, chromium_page() as page:
        page.goto(f"{url}/verify")
        expect(page.locator(".st-key-verify_base input[type=file]")).to_be_attached(timeout=60000)
        # the second file waits for the first one's rerun, which redraws both uploaders
        after_rerun(page, lambda: page.locator(".st-key-verify_base input[type=file]").set_input_files(str(base)))
        page.locator(".st-key-verify_cand input[type=file]").set_input_files(str(cand))
        expect(page.get_by_text("Overall: gain confirmed")).to_be_visible(timeout=30000)
        page.screenshot(path=str(ARTIFACTS / "verify.png"), full_page=True)
        # both uploads' bytes were released after the parse: a later run compares from the server's cache
        page.locator(".st-key-verify_who input").fill("oncall")
        after_rerun(page, lambda: page.locator(".st-key-verify_who input").press("Enter"))
        page.locator(".st-key-verify_save button").click()
        expect(page.get_by_text("Saved as experiment #1")).to_be_visible(timeout=30000)
        expect(page.get_by_text("Overall: gain confirmed")).to_be_visible()


def test_benchmark_page_upload_shows_findings(app_url, tmp_path):
    expect = _expect()
    sample = tmp_path / "mine.csv"
    sample.write_bytes((ARTIFACTS.parent.parent / "tree" / "sample" / "benchmark.csv").read_bytes())
    with chromium_page() as page:
        page.goto(f"{app_url}/benchmark")
        expect(page.get_by_text("Showing the bundled sample")).to_be_visible(timeout=30000)
        expect(page.get_by_role("link", name="Diagnose")).to_be_visible()
        assert page.get_by_text("Page not found").count() == 0
        page.locator(".st-key-bench_upload input[type=file]").set_input_files(str(sample))
        expect(page.get_by_text("Detected format: per-request CSV").first).to_be_visible(timeout=30000)
        expect(page.get_by_text("Showing the bundled sample")).to_have_count(0)
        expect(page.get_by_text("Requests queue too long").first).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "benchmark.png"), full_page=True)


def test_file_over_the_upload_limit_is_refused_and_the_page_keeps_its_data():
    expect = _expect()
    big = b"ttft_s,e2e_s,output_tokens\n" + b"0.1,1.0,100\n" * 200_000  # ~2.4 MB
    with streamlit_server({"STREAMLIT_SERVER_MAX_UPLOAD_SIZE": "1"}) as url, chromium_page() as page:
        page.goto(f"{url}/benchmark")
        expect(page.get_by_text("Showing the bundled sample")).to_be_visible(timeout=30000)
        page.locator(".st-key-bench_upload input[type=file]").set_input_files(
            files=[{"name": "huge.csv", "mimeType": "text/csv", "buffer": big}])
        expect(page.get_by_text("File must be 1.0MB or smaller")).to_be_visible(timeout=60000)
        expect(page.get_by_text("Showing the bundled sample")).to_be_visible()
        expect(page.get_by_text("Requests queue too long").first).to_be_visible()


def test_live_demo_refreshes_by_itself_keeps_the_open_tab_and_stays_usable(app_url):
    """The fragment re-runs on its timer: the 'refreshed' time moves on while the page stays usable. The evidence's
    tab opens first; another tab draws its own panels, and stays open across the timed refresh."""
    import re

    expect = _expect()
    with chromium_page() as page:
        page.goto(f"{app_url}/live")
        expect(page.locator(".st-key-panel-ttft .js-plotly-plot")).to_be_visible(timeout=60000)
        assert page.locator(".st-key-panel-kv").count() == 0  # a closed tab draws nothing
        page.get_by_role("tab", name=re.compile("Load and KV cache")).click()
        expect(page.locator(".st-key-panel-kv .js-plotly-plot")).to_be_visible(timeout=30000)
        expect(page.locator(".st-key-panel-ttft")).to_have_count(0)
        stamp = page.get_by_text(re.compile(r"refreshed \d\d:\d\d:\d\d"))
        expect(stamp).to_be_visible(timeout=60000)
        script_finished(page)  # the tab's rerun also draws a new time: read it once that run is over
        first = stamp.inner_text()
        expect(stamp).not_to_have_text(first, timeout=40000)  # the timed refresh (default interval 15 s) ran
        script_finished(page)  # the refresh's run is over: what stands now is what it drew
        expect(page.locator(".st-key-panel-kv .js-plotly-plot")).to_have_count(1)
        expect(page.locator(".st-key-panel-kv .js-plotly-plot")).to_be_visible()
        expect(page.get_by_role("tab", name=re.compile("Load and KV cache"))).to_have_attribute("aria-selected", "true")
        expect(page.get_by_text("Requests queue too long").first).to_be_visible()
        page.get_by_role("link", name="Diagnose").click()  # the page still answers a click during refreshes
        expect(page.get_by_text("Decision tree")).to_be_visible(timeout=60000)


def test_memory_page_70b_fp8_on_4_h100_names_no_shortage_branch(app_url):
    expect = _expect()
    with chromium_page() as page:
        page.goto(f"{app_url}/memory?model=llama-3.1-70b&gpu=h100&weights=fp8&tp=4")
        expect(page.get_by_text("It fits").first).to_be_visible(timeout=60000)
        script_finished(page)
        expect(page.get_by_text("headroom").first).to_be_visible()
        body = page.inner_text("body")
        assert "Branch" not in body and "memory.weights" not in body and "memory.kv_cache" not in body
        assert "Steps stacked in order" not in body  # no ladder of fixes for what already fits
        assert "What each cheaper step frees" not in body and "Nothing to change, it fits" in body
        page.screenshot(path=str(ARTIFACTS / "memory-70b-fp8-tp4.png"), full_page=True)


ZH_PAGES = {"/": "h1", "/benchmark": "h1", "/live": ".st-key-tree .js-plotly-plot", "/verify": "h1", "/retro": "h1",
            "/log": "h1", "/memory": ".st-key-mem_chart .js-plotly-plot", "/technique?id=chunked_prefill": "h1"}


@pytest.mark.timeout(1200)  # eight pages, each drawn in full, on a shared 2-core machine
def test_every_page_in_chinese_shows_no_english_ui_sentence(app_url):
    from tests.browser_tools import english_ui_sentences

    sentences = english_ui_sentences()
    assert len(sentences) > 50
    found = {}
    with chromium_page() as page:
        for path, ready in ZH_PAGES.items():
            sep = "&" if "?" in path else "?"
            page.goto(f"{app_url}{path}{sep}lang=zh")
            page.wait_for_selector(ready, state="visible", timeout=180000)
            script_finished(page)  # the page drawn in full, no element of an earlier run left
            page.wait_for_function("() => document.querySelectorAll('[data-stale=\"true\"]').length === 0",
                                   timeout=60000)
            body = page.inner_text("body")
            hits = sorted(s for s in sentences if s in body)
            if hits:
                found[path] = hits
    assert not found, found


def test_refused_upload_shows_no_sample_findings(app_url):
    expect = _expect()
    with chromium_page() as page:
        page.goto(f"{app_url}/benchmark")
        expect(page.get_by_text("Showing the bundled sample")).to_be_visible(timeout=60000)
        page.locator(".st-key-bench_upload input[type=file]").set_input_files(
            files=[{"name": "broken.json", "mimeType": "application/json", "buffer": b'{"date": "2025", "model_id": '}],
            timeout=120000)  # the uploader's code loads lazily; slow on a busy machine
        expect(page.get_by_text("Could not read broken.json").first).to_be_visible(timeout=30000)
        script_finished(page)  # the sample's findings of the run before the upload are gone only once it ends
        expect(page.get_by_text("bundled sample is hidden")).to_be_visible()
        body = page.inner_text("body")
        assert "Requests queue too long" not in body and "Parsed" not in body
        assert "Showing the bundled sample" not in body
        page.screenshot(path=str(ARTIFACTS / "benchmark-refused.png"), full_page=True)


def test_upload_survives_a_round_trip_through_diagnose(app_url, tmp_path):
    expect = _expect()
    good = ARTIFACTS.parent / "fixtures" / "bench" / "vllm_detailed.json"
    with chromium_page() as page:
        page.goto(f"{app_url}/benchmark")
        expect(page.get_by_text("Showing the bundled sample")).to_be_visible(timeout=60000)
        page.locator(".st-key-bench_upload input[type=file]").set_input_files(str(good), timeout=120000)
        expect(page.get_by_text("Detected format: vLLM").first).to_be_visible(timeout=30000)
        page.get_by_role("link", name="Diagnose").click()
        expect(page.get_by_text("Decision tree")).to_be_visible(timeout=30000)
        page.get_by_role("link", name="Benchmark").click()
        expect(page.get_by_text("Detected format: vLLM").first).to_be_visible(timeout=30000)
        script_finished(page)
        expect(page.locator(".st-key-bench_choice").get_by_role("combobox")).to_have_value("vllm_detailed.json")
        assert page.get_by_text("Showing the bundled sample").count() == 0


@pytest.mark.timeout(900)
def test_live_link_reopens_the_same_view_in_a_new_context(app_url):
    expect = _expect()
    with chromium_page() as first, chromium_page() as other:  # two contexts: two sessions sharing nothing
        first.goto(f"{app_url}/live?source=demo&scenario=healthy&window=1h&node=ttft.queueing")
        first.wait_for_selector(".st-key-tree .js-plotly-plot", state="visible", timeout=180000)
        expect(first).to_have_url(re.compile(r"window=1h"), timeout=30000)
        link = first.url
        assert "scenario=healthy" in link and "node=ttft.queueing" in link and "source=demo" in link
        other.goto(link)
        other.wait_for_selector(".st-key-tree .js-plotly-plot", state="visible", timeout=180000)
        expect(other.locator(".st-key-live_scenario").get_by_role("combobox")).to_have_value(
            re.compile("healthy", re.IGNORECASE), timeout=30000)
        expect(other.locator(".st-key-live_range [aria-checked=true], .st-key-live_range [aria-pressed=true]"
                             ).first).to_contain_text("1 h")
        assert "node=ttft.queueing" in other.url and "window=1h" in other.url


def test_evidence_tables_fit_their_half_width_column_at_1024_px(app_url):
    """At a 1024 px window the Live page's evidence tables sit in half the page: every column shows without
    sideways scrolling, and no signal name is cut inside a word (it may break only after an underscore)."""
    expect = _expect()
    with chromium_page() as page:
        page.set_viewport_size({"width": 1024, "height": 900})
        page.goto(f"{app_url}/live")
        tables = page.locator(".triage-table-wrap")
        expect(tables.first).to_be_visible(timeout=60000)
        script_finished(page)  # every table drawn before they are measured
        widths = tables.evaluate_all("ws => ws.map(w => [w.scrollWidth, w.clientWidth])")
        assert widths and all(scroll <= client + 1 for scroll, client in widths), widths
        heads = page.locator(".triage-table th[scope=row]").evaluate_all(
            "hs => hs.map(h => { const r = document.createRange(); r.setStartBefore(h.firstChild);"
            " r.setEndBefore(h.querySelector('br') || h.lastChild);"
            " const tops = new Set([...r.getClientRects()].map(x => Math.round(x.top)));"
            " return [r.toString(), tops.size]; })")
        assert heads
        for name, lines in heads:  # a signal name's lines each end at an underscore (or the name's end)
            assert "_" in name and lines <= name.count("_") + 1, (name, lines)


def _elements_in_arrival_order(url: str) -> list[str]:
    """The element types of a fresh page load's first run that draws the page (its title), in the order the
    server's websocket delivered them; a run that only hands over to app.py, or a later rerun, is cut off."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    runs: list[list[str]] = [[]]

    def on_frame(payload: str | bytes) -> None:
        msg = ForwardMsg()
        if not isinstance(payload, bytes):
            return
        msg.ParseFromString(payload)
        if msg.WhichOneof("type") == "script_finished":
            runs.append([])
        elif msg.WhichOneof("type") == "delta" and msg.delta.WhichOneof("type") == "new_element":
            runs[-1].append(msg.delta.new_element.WhichOneof("type"))

    expect = _expect()
    with chromium_page() as page:
        page.on("websocket", lambda ws: ws.on("framereceived", on_frame))
        page.goto(url)
        expect(page.locator("h1")).to_be_visible(timeout=60000)
        expect(page.locator(".st-key-chart_warmup")).to_be_attached(timeout=60000)
    return next(run for run in runs if "heading" in run)


def test_the_chart_code_is_fetched_before_a_chart_page_computes_and_after_a_text_page_is_sent(app_url):
    """Live's first paint is a chart: the hidden chart reaches the browser before the page's title, so the
    chart code loads while Live computes. The technique page shows text first: all of its elements arrive
    before the hidden chart, so the browser draws them before the second it spends on the chart code."""
    live = _elements_in_arrival_order(f"{app_url}/live")
    text = _elements_in_arrival_order(f"{app_url}/technique?id=chunked_prefill")
    assert live.index("plotly_chart") < live.index("heading"), live
    assert text.index("heading") < text.index("plotly_chart"), text
    assert text[-1] == "plotly_chart" and text.count("plotly_chart") == 1, text  # after all of the page


def test_the_chart_code_loads_on_a_page_without_a_chart_and_its_warmup_stays_hidden(app_url):
    """The hidden sidebar chart makes the browser fetch the chart code before any page needs it; it is never
    seen and takes no space."""
    expect = _expect()
    with chromium_page() as page:
        with page.expect_request(re.compile(r"/static/js/PlotlyChart\.[^/]+\.js$"), timeout=60000):
            page.goto(f"{app_url}/fleet")
        expect(page.locator("h1")).to_be_visible(timeout=60000)
        assert page.locator("[data-testid=stMain] .js-plotly-plot").count() == 0  # Fleet draws no chart at first
        warmup = page.locator(".st-key-chart_warmup")
        expect(warmup).to_be_attached()
        expect(warmup).to_be_hidden()
        assert warmup.bounding_box() is None


_TREE_SETTLED_JS = """() => {
  const gd = document.querySelector('.st-key-tree .js-plotly-plot');
  return !!gd && !!gd._fullLayout && gd.querySelectorAll('.textpoint text').length === gd.data[2].x.length
    && Math.abs(gd._fullLayout.width - gd.getBoundingClientRect().width) < 2; }"""
_TREE_LABELS_JS = """() => {
  const gd = document.querySelector('.st-key-tree .js-plotly-plot');
  const edge = gd.querySelector('.main-svg').getBoundingClientRect().right;
  return {edge, labels: [...gd.querySelectorAll('.textpoint text')].map(t => {
    const r = t.getBoundingClientRect(); return [t.textContent, r.left, r.right, r.top, r.bottom]; })}; }"""


def _label_problems(page) -> list[str]:
    """Tree labels past the chart's right edge, cut with '…', or overlapping another label (by over 1 px)."""
    page.wait_for_function(_TREE_SETTLED_JS, timeout=60000)
    found = page.evaluate(_TREE_LABELS_JS)
    labels = found["labels"]
    problems = [f"past the edge: {s}" for s, _, r, _, _ in labels if r > found["edge"] + 0.5]
    problems += [f"cut: {s}" for s, *_ in labels if "…" in s]
    for i, (a, al, ar, at, ab) in enumerate(labels):
        problems += [f"overlap: {a} / {b}" for b, bl, br, bt, bb in labels[i + 1:]
                     if al < br - 1 and bl < ar - 1 and at < bb - 1 and bt < ab - 1]
    return problems


def test_tree_labels_are_whole_and_apart_at_1024_and_1440_px(app_url):
    """The full tree (Diagnose) and the half-width one (Live) in both languages: at a 1024 px window with the
    sidebar open the half tree is ~270 px wide; no label may run past it, be cut short, or touch another."""
    with chromium_page() as page:
        seen = {}
        for width in (1024, 1440):
            page.set_viewport_size({"width": width, "height": 900})
            for path in ("", "?lang=zh", "live", "live?lang=zh"):
                page.goto(f"{app_url}/{path}")
                seen[(width, path)] = _label_problems(page)
        assert all(not problems for problems in seen.values()), {k: v for k, v in seen.items() if v}


def test_live_panels_keep_a_readable_width_beside_the_sidebar_at_1024_px(app_url):
    """Three panels in a row left each plot ~70 px wide beside the sidebar at 1024 px; they now wrap to keep
    at least 260 px each, and stay three in a row where there is room (1440 px)."""
    widths = {}
    with chromium_page() as page:
        for viewport in (1024, 1440):
            page.set_viewport_size({"width": viewport, "height": 900})
            page.goto(f"{app_url}/live")
            page.wait_for_function("() => [...document.querySelectorAll('.st-key-live_panels .js-plotly-plot')]"
                                   ".filter(g => g._fullLayout).length >= 3", timeout=60000)  # three drawn
            widths[viewport] = page.locator(".st-key-live_panels > div").evaluate_all(
                "ps => ps.map(p => { const r = p.getBoundingClientRect();"
                " return [Math.round(r.width), Math.round(r.top)]; })")
    assert len(widths[1024]) == 3 and all(w >= 260 for w, _ in widths[1024]), widths
    assert len({top for _, top in widths[1440]}) == 1, widths  # one row where three fit
