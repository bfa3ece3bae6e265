"""AppTest of the paste area on the Live page's snapshot source, and of pasted text kept across reruns and page
switches (Benchmark and Live)."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st

from tests.apptest_tools import new_app, open_page, texts

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "fixtures" / "real" / "logs"
METRICS = ROOT / "tests" / "fixtures" / "metrics" / "vllm.txt"


@pytest.fixture(autouse=True)
def _fresh_cache():
    st.cache_data.clear()
    yield


def live_paste(text: str):
    at = open_page("pages/live.py", source="snapshots")
    at.text_area(key="live_paste").input(text).run()
    assert not at.exception, at.exception
    return at


def test_one_scrape_pasted_on_live_is_diagnosed_since_the_server_started():
    at = live_paste(METRICS.read_text())
    body = texts(at)
    assert "Recognised: one /metrics scrape of vLLM, diagnosed since the server started" in body
    assert "Live" in at.title[0].value and not at.error


def test_a_vllm_log_pasted_on_live_is_named_and_drawn():
    at = live_paste((LOGS / "vllm_v1_apiserver_kv_full.txt").read_text())
    assert "Recognised: vLLM V1 server log, 5 stats lines" in texts(at)
    assert at.session_state["findings"][0] == "memory.kv_cache"
    assert len(at.get("plotly_chart")) >= 3


def test_unreadable_paste_on_live_is_a_clear_error_not_a_diagnosis():
    at = live_paste("hello, this is not a log")
    errors = " ".join(e.value.replace("\\", "") for e in at.error)
    assert "Could not read the pasted text" in errors and "also tried server logs" in errors
    assert "findings" not in at.session_state or not at.session_state["findings"]


@pytest.mark.parametrize(("page", "key", "query"), [("pages/benchmark.py", "bench_paste", {}),
                                                    ("pages/live.py", "live_paste", {"source": "snapshots"})])
def test_pasted_text_survives_a_rerun_and_a_page_switch(page: str, key: str, query: dict[str, str]):
    text = (LOGS / "vllm_v1_apiserver_kv_full.txt").read_text()
    at = open_page(page, **query)
    at.text_area(key=key).input(text).run()
    at.run()  # a rerun
    assert at.text_area(key=key).value == text
    at.switch_page("pages/verify.py")
    at.run()
    assert key not in at.session_state  # Streamlit dropped the widget's own state on the other page
    at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    assert at.text_area(key=key).value == text
    assert "Recognised: vLLM V1 server log" in texts(at)


def test_cleared_text_stays_cleared_and_a_new_session_starts_empty():
    text = METRICS.read_text()
    at = open_page("pages/benchmark.py")
    at.text_area(key="bench_paste").input(text).run()
    at.text_area(key="bench_paste").input("").run()
    at.switch_page("pages/verify.py")
    at.run()
    at.switch_page("pages/benchmark.py")
    at.run()
    assert not at.text_area(key="bench_paste").value
    other = new_app().run()  # another browser session of the same server never sees this session's paste
    other.switch_page("pages/benchmark.py")
    other.run()
    assert not other.text_area(key="bench_paste").value
