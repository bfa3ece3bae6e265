"""Leaving a page before its run ends: Retro (and Diagnose) never show the diagnosis of data the user replaced.

A page switch interrupts the running script at its next Streamlit call (``leave_after`` requests that stop right
after a chosen element is sent, as a click on another page at that moment does)."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1.local_script_runner import LocalScriptRunner

from tests.apptest_tools import open_page, texts
from triage.safe_text import md_escape

BENCH = Path(__file__).parent / "fixtures" / "bench"
FIRST, SECOND = BENCH / "generic_requests.csv", BENCH / "vllm_detailed.json"


@pytest.fixture(autouse=True)
def _fresh_cache():
    st.cache_data.clear()
    yield


def leave_after(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """The next runs stop at the first Streamlit call after an element whose message holds ``text`` is sent."""
    send = LocalScriptRunner._enqueue_forward_msg

    def send_then_leave(runner: LocalScriptRunner, msg) -> None:
        send(runner, msg)
        if text in str(msg):
            runner.request_stop()

    monkeypatch.setattr(LocalScriptRunner, "_enqueue_forward_msg", send_then_leave)


def _upload(at, path: Path):
    at.file_uploader(key="bench_upload").upload(path.name, path.read_bytes(), "application/octet-stream").run()
    return at


def _first_diagnosed():
    at = _upload(open_page("pages/benchmark.py"), FIRST)
    assert not at.exception, at.exception
    assert at.session_state["diagnosis"][0].startswith(FIRST.name)
    return at


@pytest.mark.parametrize("left_at", ["parsed in", "Detected format"], ids=["parsed", "verdict-drawn"])
def test_retro_never_shows_the_replaced_diagnosis(monkeypatch, left_at):
    at = _first_diagnosed()
    with monkeypatch.context() as patch:
        leave_after(patch, left_at)
        _upload(at, SECOND)
    uploads = at.session_state["bench_uploads"]
    assert len(uploads.digests) == 2 and uploads.viewed == uploads.digests[-1]  # Benchmark now shows the second
    at.switch_page("pages/retro.py").run()
    assert not at.exception, at.exception
    body = texts(at)
    assert md_escape(FIRST.name) not in body, body
    assert md_escape(SECOND.name) in body or "did not finish" in body, body
    at.switch_page("pages/diagnose.py").run()  # Diagnose's verdict either
    assert not at.exception, at.exception
    body = texts(at)
    assert md_escape(FIRST.name) not in body and (md_escape(SECOND.name) in body or "did not finish" in body)
    at.switch_page("pages/benchmark.py").run()  # back on Benchmark the run completes
    at.switch_page("pages/retro.py").run()
    body = texts(at)
    assert md_escape(SECOND.name) in body and md_escape(FIRST.name) not in body and "did not finish" not in body


def test_a_stop_after_the_parse_is_said_on_retro_in_both_languages(monkeypatch):
    at = _first_diagnosed()
    with monkeypatch.context() as patch:
        leave_after(patch, "parsed in")
        _upload(at, SECOND)
    at.switch_page("pages/retro.py").run()
    warning = " ".join(w.value for w in at.warning)
    assert "The Benchmark page was left before its run ended" in warning
    assert "Data for this walk" not in texts(at)  # no source named for data that is not shown
    at.session_state["lang"] = "zh"  # the sidebar's language switch
    at.run()
    assert "在压测结果页面运行结束前就离开了" in " ".join(w.value for w in at.warning)


def test_the_walk_names_the_data_it_shows_not_the_first_one_it_walked():
    at = _first_diagnosed()
    at.switch_page("pages/retro.py").run()
    assert md_escape(FIRST.name) in texts(at)
    at.switch_page("pages/benchmark.py").run()
    _upload(at, SECOND)
    at.switch_page("pages/retro.py").run()
    source = [c.value for c in at.caption if c.value.startswith("Data for this walk")]
    assert len(source) == 1 and md_escape(SECOND.name) in source[0], source


def test_live_left_after_another_scenario_was_picked_does_not_carry_the_first_one(monkeypatch):
    at = open_page("pages/live.py", source="demo", scenario="queueing")
    first = at.session_state["diagnosis"][0]
    assert "queueing" in first and at.session_state["findings"][0] == "ttft.queueing"
    with monkeypatch.context() as patch:
        leave_after(patch, "Live diagnosis")  # the page's title: the new scenario is picked, not diagnosed yet
        at.selectbox(key="live_scenario").set_value("kv_pressure").run()
    at.switch_page("pages/retro.py").run()
    body = texts(at)
    assert md_escape(first) not in body and "The Live page was left before its run ended" in body, body
    at.switch_page("pages/live.py").run()  # back on Live: the scenario it now shows is diagnosed
    shown = at.selectbox(key="live_scenario").value
    assert shown in at.session_state["diagnosis"][0]
    at.switch_page("pages/retro.py").run()
    assert md_escape(shown) in texts(at) and "did not finish" not in texts(at)
