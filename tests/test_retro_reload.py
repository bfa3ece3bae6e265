"""A reload of Retro (a new session on the same URL) keeps the walk's data and notes; the sample is never shown
without saying so at the top."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st

from tests.apptest_tools import new_app, open_page, texts
from triage.safe_text import md_escape

FIXTURE = Path(__file__).parent / "fixtures" / "real" / "vllm" / "queueing" / "vllm_bench.json"


@pytest.fixture(autouse=True)
def _fresh_cache():
    st.cache_data.clear()
    yield


def _param(value) -> str:
    return value[0] if isinstance(value, list) else value


def _retro_in_new_session(**query: str):
    """What F5 does: a new session opens the same URL."""
    at = new_app(**query).run()
    at.switch_page("pages/retro.py")
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def test_reload_of_retro_keeps_the_data_and_the_notes():
    at = open_page("pages/benchmark.py")
    at.file_uploader(key="bench_upload").upload(FIXTURE.name, FIXTURE.read_bytes(), "application/json").run()
    assert not at.exception, at.exception
    at.switch_page("pages/retro.py")
    at.run()
    at.text_area(key="retro_note:baseline").input("p99 doubled at 14:02 after the deploy").run()
    assert md_escape(FIXTURE.name) in texts(at)
    walk = _param(at.query_params["walk"])
    assert walk and len(walk) >= 16

    reloaded = _retro_in_new_session(walk=walk)
    assert reloaded.text_area(key="retro_note:baseline").value == "p99 doubled at 14:02 after the deploy"
    body = texts(reloaded)
    assert md_escape(FIXTURE.name) in body and "Bundled sample" not in body
    assert reloaded.session_state["diagnosis"][0].startswith(FIXTURE.name)


def test_retro_without_a_walk_says_it_shows_the_sample_and_an_unknown_walk_says_so():
    fresh = _retro_in_new_session()
    assert "Data: Bundled sample. Nothing of yours is loaded" in texts(fresh)
    gone = _retro_in_new_session(walk="no-such-walk-kept-here")
    assert "no longer kept on the server" in " ".join(w.value for w in gone.warning)
    assert _param(gone.query_params["walk"]) != "no-such-walk-kept-here"  # a new walk, under a new id


def _bench_in_new_session(**query: str):
    at = new_app(**query).run()
    at.switch_page("pages/benchmark.py")
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def test_reload_of_benchmark_reopens_the_uploaded_file_by_its_digest():
    at = open_page("pages/benchmark.py")
    at.file_uploader(key="bench_upload").upload(FIXTURE.name, FIXTURE.read_bytes(), "application/json").run()
    digest = _param(at.query_params["file"])
    assert digest and digest != "sample"
    reloaded = _bench_in_new_session(file=digest)
    body = texts(reloaded)
    assert f"Data: {md_escape(FIXTURE.name)}" in body and "Showing the bundled sample" not in body
    gone = _bench_in_new_session(file="0" * 24)
    assert "no longer held by the server" in " ".join(w.value for w in gone.warning)
    assert "Data: Bundled sample" in texts(gone)  # and the sample it falls back to says so at the top
    assert "file" not in gone.query_params
