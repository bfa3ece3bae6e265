"""Screenshots of every page in the light and the dark theme (docs/<page>-light.png, docs/<page>-dark.png).

Debian Chromium against a fresh local server; the theme follows the browser's color scheme (the app sets
no base theme). Usage: .venv/bin/python -m scripts.screenshots [--pages diagnose,memory] [--schemes dark]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tests.browser_tools import ARGS, CHROMIUM, streamlit_server

ROOT = Path(__file__).resolve().parent.parent

DOCS = ROOT / "docs"
PLOT = ".js-plotly-plot .main-svg"
# name → (path, selector that says the page is drawn)
PAGES: dict[str, tuple[str, str]] = {
    "diagnose": ("/?node=ttft.queueing", f".st-key-tree {PLOT}"),
    "live": ("/live", f".st-key-tree {PLOT}"),
    "fleet": ("/fleet", "h1"),
    "benchmark": ("/benchmark", f".st-key-tree {PLOT}"),
    "verify": ("/verify", "h1"),
    "retro": ("/retro", "h1"),
    "log": ("/log", "h1"),
    "memory": ("/memory?model=llama-3.1-70b&gpu=h100&weights=fp8&tp=4", f".st-key-mem_chart {PLOT}"),
    "technique": ("/technique?id=chunked_prefill", "h1"),
    "technique-zh": ("/technique?id=chunked_prefill&lang=zh", "h1"),
}
VIEWPORT = {"width": 1280, "height": 900}
MAX_HEIGHT = 1800  # a long page is cut here: the top of each page, at a size a README can carry
# everything drawn: no stale element, no placeholder, every chart with its SVG
SETTLED = """() => document.querySelectorAll('[data-stale="true"], [data-testid="stSkeleton"]').length === 0
  && [...document.querySelectorAll('.stPlotlyChart')].every(c => c.querySelector('.main-svg'))"""


def shrink(path: Path) -> None:
    """Rewrite a screenshot as a 256-colour palette PNG (a UI has few colours; about a third of the bytes)."""
    from PIL import Image

    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(path, optimize=True)


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
                for name in pages:  # a fresh context per page: a new session, as a visitor opening the link
                    context = browser.new_context(viewport=VIEWPORT, color_scheme=scheme)
                    page = context.new_page()
                    path, ready = PAGES[name]
                    page.goto(url + path)
                    page.wait_for_selector(ready, state="visible", timeout=180000)
                    page.wait_for_function(SETTLED, timeout=120000)
                    height = page.evaluate(
                        "() => (document.querySelector('[data-testid=\"stMain\"]') || document.body).scrollHeight")
                    page.set_viewport_size({"width": VIEWPORT["width"], "height": min(max(height, 900), MAX_HEIGHT)})
                    page.wait_for_function(SETTLED, timeout=120000)  # charts re-laid out for the new height
                    out = DOCS / f"{name}-{scheme}.png"
                    page.screenshot(path=str(out))
                    shrink(out)
                    print(out.relative_to(ROOT), flush=True)
                    context.close()
        finally:
            browser.close()


if __name__ == "__main__":
    main()
