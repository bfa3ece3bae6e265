"""Real browser: Verify's table shows every row at 1024×768 (no inner scroll), and in 中文 its verdict too."""

from __future__ import annotations

import os

import pytest

from tests.browser_tools import CHROMIUM, after_rerun, chromium_page

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")]


def test_verify_table_shows_every_row_without_an_inner_scroll(app_url, tmp_path):
    from playwright.sync_api import expect

    from tests.synthetic import requests

    cols = ["start_s", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s", "ok"]
    base, cand = tmp_path / "baseline.csv", tmp_path / "candidate.csv"
    requests(n=1500, ttft_base=0.4, seed=1)[cols].to_csv(base, index=False)
    requests(n=1500, ttft_base=0.2, seed=2)[cols].to_csv(cand, index=False)
    with chromium_page() as page:
        page.set_viewport_size({"width": 1024, "height": 768})
        page.goto(f"{app_url}/verify?lang=zh")
        expect(page.locator(".st-key-verify_base input[type=file]")).to_be_attached(timeout=60000)
        after_rerun(page, lambda: page.locator(".st-key-verify_base input[type=file]").set_input_files(str(base)))
        page.locator(".st-key-verify_cand input[type=file]").set_input_files(str(cand))
        expect(page.get_by_text("总体结论: 收益已确认")).to_be_visible(timeout=30000)
        table = page.locator(".triage-table").first
        rows = table.locator("tr")
        # the verdict is drawn before the table: wait for the rows rather than count what is there yet
        expect(rows.nth(11)).to_be_attached(timeout=30000)  # the header and every compared metric, the last included
        rows.last.scroll_into_view_if_needed()
        expect(rows.last).to_be_visible()
        boxes = page.locator(".triage-table-wrap").evaluate_all(
            "ws => ws.map(w => [w.scrollWidth - w.clientWidth, w.scrollHeight - w.clientHeight])")
        assert all(dx <= 1 and dy <= 1 for dx, dy in boxes), boxes
        assert "gain confirmed" not in page.locator("[data-testid=stMain]").inner_text()
