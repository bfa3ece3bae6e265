"""F5 on Retro in real Chromium: the uploaded file's data and the notes typed into the walk are still there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser_tools import CHROMIUM, after_rerun, chromium_page, script_finished

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")]

FIXTURE = Path(__file__).parent / "fixtures" / "real" / "vllm" / "queueing" / "vllm_bench.json"
NOTE = "p99 doubled at 14:02 after the deploy"


def test_reload_of_retro_keeps_the_data_and_the_notes(app_url) -> None:
    """Before, a reload swapped the data for the bundled sample (High TTFT 22.3 s) and the notes were gone."""
    from playwright.sync_api import expect

    with chromium_page() as page:
        page.goto(f"{app_url}/benchmark")
        uploader = page.locator("[data-testid=stFileUploaderDropzoneInput]")
        uploader.wait_for(state="attached", timeout=60000)
        uploader.set_input_files(str(FIXTURE))
        expect(page.get_by_text("Data: vllm_bench.json").first).to_be_visible(timeout=60000)
        # the diagnosis is the session's before that line is drawn: leaving at once, before the run ends, takes
        # it to Retro (it once took the bundled sample, when the diagnosis was remembered at the end of the run)
        page.get_by_role("link", name="Retro").click()
        note = page.get_by_role("textbox", name="Note")
        expect(note).to_be_visible(timeout=30000)
        note.fill(NOTE)
        after_rerun(page, lambda: note.press("Tab"))  # a text area sends its value when it loses focus
        page.wait_for_function("location.search.includes('walk=')", timeout=30000)
        page.reload()
        expect(page.get_by_role("textbox", name="Note")).to_have_value(NOTE, timeout=60000)
        script_finished(page)
        expect(page.get_by_text("Data for this walk: vllm_bench.json").first).to_be_visible()
        assert page.get_by_text("Bundled sample").count() == 0
