"""Regenerate the README screenshots (docs/*.png) with Debian Chromium against a fresh local server."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import expect  # noqa: E402

from tests.browser_tools import chromium_page, streamlit_server  # noqa: E402

DOCS = ROOT / "docs"
PLOT = ".js-plotly-plot .scatterlayer path.point"


def main() -> None:
    with streamlit_server() as url, chromium_page() as page:
        page.set_viewport_size({"width": 1440, "height": 1200})
        page.goto(f"{url}/?node=ttft.queueing")
        expect(page.get_by_text("Requests queue too long").first).to_be_visible(timeout=30000)
        page.wait_for_selector(f".st-key-tree {PLOT}", timeout=30000)
        page.screenshot(path=str(DOCS / "screenshot.png"))
        page.goto(f"{url}/live")
        expect(page.get_by_text("Findings, most important first")).to_be_visible(timeout=60000)
        page.wait_for_selector(f".st-key-tree {PLOT}", timeout=30000)
        page.screenshot(path=str(DOCS / "live.png"), full_page=True)
        page.goto(f"{url}/technique?id=chunked_prefill&lang=zh")
        expect(page.get_by_text("最小改动优先清单")).to_be_visible(timeout=30000)
        expect(page.get_by_role("checkbox").first).to_be_visible(timeout=30000)
        page.screenshot(path=str(DOCS / "technique-zh.png"))


if __name__ == "__main__":
    main()
