"""No third-party request from any page (issue 23, case 9): a real Chromium (Playwright) records every request each
page makes, the page icon included, and every one goes to the app on 127.0.0.1."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import pytest

from tests.browser_tools import CHROMIUM, chromium_page, script_finished, streamlit_server

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")]

PAGES = ["/", "/live", "/fleet", "/benchmark", "/verify", "/retro", "/log", "/memory", "/technique?id=chunked_prefill",
         "/?lang=zh"]
# the favicon link Streamlit sets from page_icon once the page's config arrives (its default is ./favicon.png)
ICON_JS = """() => { const l = document.querySelector('link[rel="shortcut icon"], link[rel="icon"]');
  return l ? l.href : null; }"""


def _settled(page) -> None:
    """The script run finished (Streamlit's run state), the main block drawn, the page icon set."""
    page.wait_for_selector('[data-testid="stMain"]', timeout=60000)
    script_finished(page)  # the status widget shows only after a delay: its absence alone may come before the run
    page.wait_for_function(f"() => ({ICON_JS})() && !({ICON_JS})().endsWith('/favicon.png')", timeout=60000)
    page.wait_for_load_state("networkidle", timeout=60000)


@pytest.mark.timeout(600)
def test_every_page_requests_only_the_app_itself():
    requested: list[str] = []
    with streamlit_server(env={"TRIAGE_DEBUG": ""}) as url, chromium_page() as page:
        page.on("request", lambda r: requested.append(r.url))
        icons = {}
        for path in PAGES:
            page.goto(url + path)
            _settled(page)
            icons[path] = page.evaluate(ICON_JS)
    outside = sorted({u for u in requested if urlsplit(u).scheme not in ("data", "blob")
                      and urlsplit(u).hostname != "127.0.0.1"})
    assert not outside, outside  # e.g. fonts.gstatic.com/…/materialsymbolsrounded/troubleshoot/…/24px.svg
    assert all(urlsplit(icon).hostname == "127.0.0.1" for icon in icons.values()), icons
    fetched_icons = [u for u in requested if "/media/" in u and u.endswith(".png")]
    assert fetched_icons, "the page icon was not fetched from the app"
