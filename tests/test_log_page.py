"""AppTest of the Log page a page at a time: newest first, the pager's count, ?page=, and a page switch kept."""

from __future__ import annotations

import pytest
import streamlit as st

from tests.apptest_tools import open_page, static_tables, texts
from tests.test_experiment_log import entry
from triage.verify.experiment_log import ExperimentLog

ROWS = 120  # pages of 50: 50, 50 and 20


@pytest.fixture(autouse=True)
def _log(monkeypatch, tmp_path):
    st.cache_data.clear()
    path = tmp_path / "log.sqlite3"
    monkeypatch.setenv("TRIAGE_LOG_DB", str(path))
    log = ExperimentLog(path)
    for i in range(ROWS):  # every fourth a regression
        log.save(entry(overall="regression" if i % 4 == 0 else "gain confirmed", note=f"n{i}"))
    yield


def shown_ids(at) -> list[int]:
    return [int(i) for i in static_tables(at)[0].index]


def test_the_first_page_is_the_newest_fifty_and_page_two_the_next():
    at = open_page("pages/log.py")
    assert shown_ids(at) == list(range(ROWS, ROWS - 50, -1))
    assert "Page 1 of 3 · experiments 1–50 of 120, newest first" in texts(at)
    at.number_input(key="log_page").set_value(2).run()
    assert not at.exception, at.exception
    assert shown_ids(at) == list(range(70, 20, -1))
    assert "Page 2 of 3 · experiments 51–100 of 120, newest first" in texts(at)
    assert at.query_params["page"] == "2"
    assert at.selectbox(key="log_open").options == [str(i) for i in range(70, 20, -1)]


def test_a_link_opens_its_page_and_one_past_the_end_opens_the_last():
    at = open_page("pages/log.py", page="3")
    assert shown_ids(at) == list(range(20, 0, -1))
    assert "Page 3 of 3 · experiments 101–120 of 120" in texts(at)
    at = open_page("pages/log.py", page="9")
    assert shown_ids(at) == list(range(20, 0, -1)) and at.query_params["page"] == "3"


def test_a_filter_is_counted_by_the_database_and_starts_at_its_first_page():
    at = open_page("pages/log.py")
    at.number_input(key="log_page").set_value(2).run()
    at.selectbox(key="log_verdict").set_value("regression").run()
    assert not at.exception, at.exception
    assert shown_ids(at) == list(range(117, 0, -4))  # ids 1, 5, …, 117: 30 regressions, one page
    assert "Page 1 of 1 · experiments 1–30 of 30" in texts(at)


def test_the_filter_and_page_survive_a_page_switch():
    at = open_page("pages/log.py")
    at.selectbox(key="log_verdict").set_value("gain confirmed").run()
    at.number_input(key="log_page").set_value(2).run()
    page_two = shown_ids(at)
    at.switch_page("pages/technique.py")
    at.query_params.clear()  # the navigation link carries no ?page=
    at.run()
    at.switch_page("pages/log.py")
    at.query_params.clear()
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="log_verdict").value == "gain confirmed"
    assert at.number_input(key="log_page").value == 2 and shown_ids(at) == page_two
    assert "Page 2 of 2 · experiments 51–90 of 90" in texts(at)
