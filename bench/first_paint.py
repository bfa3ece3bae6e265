"""First paint per page against a one-chart Streamlit app, both measured in one run with Playwright + Chromium.

Usage: .venv/bin/python -m bench.first_paint [--repeat 5] [--pages /live,/benchmark]

Each measurement opens a fresh browser context (a new session, no cache) and times from navigation to
the first chart drawn and visible (a plotly SVG; the app's hidden chart that starts loading the chart code
does not count). A page without a chart on first load counts its title instead. Both servers are started
fresh and warmed once per page (the first request of a process pays the imports); then baseline and page
loads are interleaved so machine load hits both alike.
Prints one line per page: median ms, the baseline's median, and the ratio (target ≤ 1.5×). Five loads of each
by default: the same code measured from two servers differs by up to 0.13× at ten loads, and a median of three
moves with one slow load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.browser_tools import ARGS, CHROMIUM, streamlit_server

ROOT = Path(__file__).resolve().parent.parent

TARGET = 1.5
CHART = ".js-plotly-plot .main-svg >> visible=true"  # the first one the user can see
TITLE = "h1"
# page path → what its first paint is: "chart" or "title" (pages with no chart until the user acts)
PAGES: dict[str, str] = {
    "/": "chart", "/live": "chart", "/benchmark": "chart", "/memory": "chart", "/memory?lang=zh": "chart",
    "/fleet": "title", "/verify": "title", "/retro": "title", "/log": "title", "/technique?id=chunked_prefill": "title",
}
BASELINE_APP = '''
import plotly.graph_objects as go
import streamlit as st

st.title("One chart")
st.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 3, 2])))
'''


def _first_paint_ms(browser, url: str, what: str, timeout_ms: int = 60000) -> float:
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    try:
        t0 = time.perf_counter()
        page.goto(url, wait_until="commit")
        try:
            page.wait_for_selector(CHART if what == "chart" else TITLE, state="visible", timeout=timeout_ms)
        except Exception:
            shot = Path(tempfile.gettempdir()) / "first_paint_timeout.png"
            page.screenshot(path=str(shot), full_page=True)
            raise RuntimeError(f"{url}: no {what} within {timeout_ms} ms (screenshot {shot})") from None
        return (time.perf_counter() - t0) * 1000
    finally:
        context.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pages", default="", help="comma-separated subset of: " + ", ".join(PAGES))
    args = ap.parse_args(argv)
    pages = {p: PAGES[p] for p in args.pages.split(",") if p} if args.pages else PAGES

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        base_dir = Path(tmp)
        (base_dir / "app.py").write_text(BASELINE_APP)
        with streamlit_server() as app_url, streamlit_server(cwd=base_dir) as base_url, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            try:
                _first_paint_ms(browser, base_url + "/", "chart")  # warm both processes
                for path, what in pages.items():
                    _first_paint_ms(browser, app_url + path, what)
                worst = 0.0
                print(f"{'page':34s} {'first paint':>12s} {'one-chart app':>14s} {'ratio':>7s}")
                for path, what in pages.items():
                    base, ours = [], []
                    for _ in range(args.repeat):
                        base.append(_first_paint_ms(browser, base_url + "/", "chart"))
                        ours.append(_first_paint_ms(browser, app_url + path, what))
                    b, o = statistics.median(base), statistics.median(ours)
                    ratio = o / b
                    worst = max(worst, ratio)
                    flag = "ok" if ratio <= TARGET else "OVER"
                    print(f"{path + ' (' + what + ')':34s} {o:9.0f} ms {b:11.0f} ms {ratio:6.2f}×  {flag}")
                print(f"worst ratio {worst:.2f}× (target ≤ {TARGET}×)")
            finally:
                browser.close()
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
