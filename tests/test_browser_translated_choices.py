"""Real browser: a select box with translated options shows its chosen option in the language switched to, on two
pages of one session (Log's filters into 中文, Verify's technique back into English), and keeps the choice."""

from __future__ import annotations

import os

import pytest

from tests.browser_tools import CHROMIUM, after_rerun, chromium_page, script_finished
from triage.knowledge.i18n import tr
from triage.knowledge.loader import load_knowledge

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")]


def _pick(page, key: str, option: str) -> None:
    script_finished(page)
    page.locator(f".st-key-{key} input").click()  # opens the list; no run
    after_rerun(page, lambda: page.get_by_role("option", name=option, exact=True).click())


def _language(page, name: str) -> None:
    after_rerun(page, lambda: page.locator("[data-testid=stSidebar]").get_by_text(name, exact=True).click())


def test_chosen_options_follow_the_language_on_two_pages(app_url) -> None:
    from playwright.sync_api import expect

    technique = load_knowledge().techniques["prefix_caching"].title
    with chromium_page() as page:
        page.goto(f"{app_url}/log")
        box = page.locator(".st-key-log_verdict input")
        expect(box).to_be_visible(timeout=60000)
        script_finished(page)
        _pick(page, "log_verdict", tr("verdict_regression", "en"))
        _language(page, "中文")
        # they read "regression" and "all" until a reload; a click elsewhere then emptied the "all" box
        expect(box).to_have_value(tr("verdict_regression", "zh"))
        expect(page.locator(".st-key-log_technique input")).to_have_value(tr("log_all", "zh"))
        _pick(page, "log_technique", technique.zh)
        expect(box).to_have_value(tr("verdict_regression", "zh"))  # the other filter kept its choice and label

        after_rerun(page, lambda: page.get_by_role("link", name=tr("nav_verify", "zh")).click())
        box = page.locator(".st-key-verify_technique input")
        expect(box).to_be_visible(timeout=60000)
        _pick(page, "verify_technique", technique.zh)
        _language(page, "English")
        expect(box).to_have_value(technique.en)
