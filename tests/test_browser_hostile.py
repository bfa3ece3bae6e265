"""Crafted URLs and imports in a real browser (Debian Chromium via Playwright, one fresh Streamlit server):
no traceback, no exception box, no request to the attacker's host, no link or image of theirs on the page."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

from tests.browser_tools import CHROMIUM, chromium_page, script_finished, streamlit_server
from triage.verify.experiment_log import Entry, ExperimentLog

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")]

EVIL = "evil.invalid"
INJECT = f"![x](http://{EVIL}/x.png) [click](http://{EVIL}/) <img src=http://{EVIL}/i.png> www.{EVIL}"
URLS = [f"/verify?experiment={'9' * 23}", "/verify?experiment=-1", f"/verify?experiment={quote(INJECT)}",
        "/verify?experiment=1", f"/technique?id={quote(INJECT)}", f"/?node={quote(INJECT)}", "/retro?step=abc",
        "/retro?step=%C2%B2", f"/retro?step={'9' * 30}", "/log"]


def _report(text: str) -> str:
    return f"# report\n<!-- triage-retro:{base64.b64encode(text.encode()).decode()} -->\n"


# file → (report, the words of its one-line refusal; None: a valid walk that imports)
IMPORTS = {"step.md": (_report(json.dumps({"step": "abc"})), "step must be a whole number"),
           "deep.md": (_report("[" * 200_000 + "]" * 200_000), "nested too deeply"),
           "symptom.md": (_report(json.dumps({"symptom": "no-such"})), "symptom is not in this decision tree"),
           "inject.md": (_report(json.dumps({"title": INJECT, "source": INJECT, "notes": {"symptom": INJECT}})),
                         None)}


def _settled(page) -> None:
    """The script run finished (Streamlit's run state) and the main block is drawn."""
    page.wait_for_selector('[data-testid="stMain"]', timeout=60000)
    script_finished(page)  # the status widget shows only after a delay: its absence alone may come before the run


def _assert_clean(page, where: str) -> None:
    body = page.inner_text("body")
    assert "Traceback" not in body and 'File "/' not in body, where
    assert page.locator('[data-testid="stException"]').count() == 0, where
    found = page.locator(f'img[src*="{EVIL}"], a[href*="{EVIL}"]')
    assert found.count() == 0, (where, [e.evaluate("e => e.outerHTML.slice(0, 300)") for e in found.all()])


def test_crafted_urls_and_imports_show_no_traceback(tmp_path: Path):
    db = tmp_path / "log.db"
    ExperimentLog(db).save(Entry("chunked_prefill", {}, INJECT, "0" * 64, "b.csv", "1" * 64, [], "no effect",
                                 note=INJECT, who=INJECT))
    requested: list[str] = []
    env = {"TRIAGE_DEBUG": "", "TRIAGE_LOG_DB": str(db)}
    with streamlit_server(env=env) as url, chromium_page() as page:
        page.on("request", lambda r: requested.append(r.url))
        for path in URLS:
            page.goto(url + path)
            _settled(page)
            _assert_clean(page, path)
        page.goto(url + "/retro")
        _settled(page)
        for name, (text, refusal) in IMPORTS.items():
            file = tmp_path / name
            file.write_text(text, encoding="utf-8")
            page.locator(".st-key-retro_import input[type=file]").set_input_files(str(file))
            if refusal:
                page.get_by_text(refusal).first.wait_for(timeout=60000)
            else:  # a valid walk whose texts are hostile: it imports (the step goes into the URL) and nothing of it
                # becomes a link or an image (Retro names the data it walks now, not the report's source)
                page.wait_for_url(lambda u: "step=1" in u, timeout=60000)
            _settled(page)
            _assert_clean(page, name)
    assert not [r for r in requested if (urlsplit(r).hostname or "").endswith(EVIL)]  # nothing fetched from there
