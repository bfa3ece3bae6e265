"""Real browser: in 中文 the file uploader's own text (which Streamlit does not translate, and no theme option or
uploader parameter sets) is swapped by components/shell.py's CSS, keyed on Streamlit's data-testids; this fails
when a Streamlit upgrade renames them."""

from __future__ import annotations

import os

import pytest

from tests.browser_tools import CHROMIUM, chromium_page, script_finished

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")]

AFTER = """zone => [...zone.querySelectorAll('*')]
  .map(el => getComputedStyle(el, '::after').content).filter(c => c && c !== 'none' && c !== 'normal')"""


def test_the_uploader_speaks_chinese(app_url):
    from playwright.sync_api import expect

    with chromium_page() as page:
        page.goto(f"{app_url}/benchmark?lang=zh")
        zone = page.locator(".st-key-bench_upload [data-testid=stFileUploaderDropzone]")
        expect(zone).to_be_visible(timeout=120000)
        script_finished(page)  # the shell's style, which swaps the text, is part of the same run
        shown = zone.inner_text()
        assert "Browse files" not in shown and "Drag and drop" not in shown and "per file" not in shown, shown
        assert sorted(zone.evaluate(AFTER)) == sorted(['"每个文件不超过 200 MB"', '"上传"'])
