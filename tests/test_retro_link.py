"""AppTest: a Retro link naming a step the walk does not have says so, with the valid range."""

from __future__ import annotations

from tests.apptest_tools import open_page
from triage.report.retro import load_steps


def test_a_step_past_the_walk_is_refused_out_loud():
    last = len(load_steps())
    at = open_page("pages/retro.py", step="999")
    assert not at.exception, at.exception
    said = " ".join(w.value for w in at.warning)
    assert "step=999" in said and f"1 to {last}" in said and "showing step 1" in said
    assert at.query_params["step"] == "1"  # the link now names the step shown


def test_a_valid_step_is_taken_without_a_word():
    at = open_page("pages/retro.py", step="3")
    assert not at.exception, at.exception
    assert not any("step=" in w.value for w in at.warning) and at.query_params["step"] == "3"


def test_the_refusal_is_in_chinese_too():
    at = open_page("pages/retro.py", step="abc", lang="zh")
    assert any("step=abc" in w.value and "不是复盘中的步骤" in w.value for w in at.warning)
