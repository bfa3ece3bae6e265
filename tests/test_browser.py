"""Real browser: Debian Chromium driven by Playwright against a freshly started `streamlit run app.py`."""

from __future__ import annotations

import os

import pytest

from tests.browser_tools import ARTIFACTS, CHROMIUM, chromium_page, click_tree_node, streamlit_server

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
        expect(page.get_by_role("heading", name="Chunked prefill").first).to_be_visible(timeout=30000)
        expect(page.get_by_text("Minimal-change-first checklist")).to_be_visible()
        assert page.get_by_text("Page not found").count() == 0


def test_first_request_deep_link_to_node():
    expect = _expect()
    with streamlit_server() as url, chromium_page() as page:
        page.goto(f"{url}/?node=ttft.queueing")
        expect(page.get_by_text("Requests queue too long").first).to_be_visible(timeout=30000)
        expect(page.get_by_text("vllm:request_queue_time_seconds").first).to_be_visible()
        assert page.get_by_text("Page not found").count() == 0


def test_click_technique_node_then_open_its_page():
    expect = _expect()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with streamlit_server() as url, chromium_page() as page:
        page.goto(f"{url}/")
        click_tree_node(page, "prefix_caching")
        expect(page).to_have_url(f"{url}/?node=prefix_caching", timeout=15000)
        link = page.get_by_role("link", name="Open the Prefix caching page")
        expect(link).to_be_visible(timeout=15000)
        page.screenshot(path=str(ARTIFACTS / "tree-selected.png"), full_page=True)
        link.click()
        expect(page).to_have_url(f"{url}/technique?id=prefix_caching&lang=en", timeout=15000)
        expect(page.get_by_role("heading", name="Prefix caching").first).to_be_visible(timeout=15000)
        page.screenshot(path=str(ARTIFACTS / "technique-page.png"), full_page=True)
