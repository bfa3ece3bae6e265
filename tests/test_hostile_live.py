"""The Live page against a hostile Prometheus or a typed URL (AppTest, fake servers on 127.0.0.1): one short line,
the page alive, bounded memory (issue 23, cases 2, 4 and 9).

TRIAGE_DEBUG is unset here so the page's error boundaries behave as they do for visitors."""

from __future__ import annotations

import resource

import pytest
import streamlit as st

from tests.apptest_tools import open_page
from tests.hostile_server import hostile_server


@pytest.fixture(autouse=True)
def visitor_mode(monkeypatch):
    monkeypatch.delenv("TRIAGE_DEBUG", raising=False)
    st.cache_data.clear()


def source(at):
    return next(b for b in at.get("button_group") if b.key == "live_kind")


def errors(at) -> list[str]:
    return [str(e.value).replace("\\", "") for e in at.error]  # as read: the page escapes Markdown


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.timeout(180)
@pytest.mark.parametrize("path,expected", [
    ("/redirect-bomb", "redirects are not followed"),     # a 302 whose own body inflates to 4.2 GB
    ("/elsewhere", "redirects are not followed"),         # a 302 to another origin's endless body
    ("/huge-error", "bad_data: parse error"),             # a 300 KB JSON error full of newlines
])
def test_a_hostile_prometheus_profile_gives_one_short_line(monkeypatch, path, expected):
    with hostile_server() as target, hostile_server(redirect_to=target.url + "/endless") as first:
        monkeypatch.setenv("TRIAGE_PROMETHEUS_HOSTILE_URL", first.url + path)
        monkeypatch.setenv("TRIAGE_PROMETHEUS_HOSTILE_TIMEOUT", "20")
        at = open_page("pages/live.py")
        before = _peak_mb()
        source(at).set_value("prometheus").run()
        assert not at.exception, at.exception
        shown = [e for e in errors(at) if expected in e]
        assert shown, errors(at)
        # before: the 300 KB body became a 300,239-character alert; a redirect took the page from 261 MB to 1.7 GB
        assert all(len(e) < 600 and "\n" not in e.strip() for e in errors(at)), [e[:300] for e in errors(at)]
        assert _peak_mb() - before < 300 and _peak_mb() < 600 + before, (before, _peak_mb())
        assert target.hits == []
        source(at).set_value("demo").run()  # the page keeps working
        assert not at.exception and at.session_state["findings"]
