"""Screenshots of every page in the light and the dark theme (docs/<page>-light.png, docs/<page>-dark.png).

Debian Chromium against a fresh local server; the theme follows the browser's color scheme (the app sets
no base theme). Usage: .venv/bin/python scripts/screenshots.py [--pages diagnose,memory] [--schemes dark]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser_tools import ARGS, CHROMIUM, streamlit_server  # noqa: E402

DOCS = ROOT / "docs"
PLOT = ".js-plotly-plot .main-svg"
# name → (path, selector that says the page is drawn)
PAGES: dict[str, tuple[str, str]] = {
    "diagnose": ("/?node=ttft.queueing", f".st-key-tree {PLOT}"),
    "live": ("/live", f".st-key-tree {PLOT}"),
    "benchmark": ("/benchmark", f".st-key-tree {PLOT}"),
    "verify": ("/verify", "h1"),
    "retro": ("/retro", "h1"),
    "log": ("/log", "h1"),
    "memory": ("/memory?model=llama-3.1-70b&gpu=h100&weights=fp8&tp=4", f".st-key-mem_chart {PLOT}"),
    "technique": ("/technique?id=chunked_prefill", "h1"),
    "technique-zh": ("/technique?id=chunked_prefill&lang=zh", "h1"),
}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", default="", help="comma-separated subset of: " + ", ".join(PAGES))
    ap.add_argument("--schemes", default="light,dark")
    args = ap.parse_args(argv)
    pages = [p for p in args.pages.split(",") if p] or list(PAGES)

    from playwright.sync_api import sync_playwright

    with streamlit_server() as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            for scheme in args.schemes.split(","):
                context = browser.new_context(viewport={"width": 1440, "height": 1100}, color_scheme=scheme)
                page = context.new_page()
                for name in pages:
                    path, ready = PAGES[name]
                    page.goto(url + path)
                    page.wait_for_selector(ready, state="visible", timeout=180000)
                    page.wait_for_function(
                        "() => document.querySelectorAll('[data-stale=\"true\"]').length === 0", timeout=60000)
                    out = DOCS / f"{name}-{scheme}.png"
                    page.screenshot(path=str(out), full_page=name not in ("live", "benchmark"))
                    print(out.relative_to(ROOT))
                context.close()
        finally:
            browser.close()


if __name__ == "__main__":
    main()
