"""AppTest of Verify and the Experiment log as a reader sees them: few requests are compared with their wide
intervals (not refused), reopened experiments read like live ones, and 中文 says every verdict, warning and
date in Chinese."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import streamlit as st

from tests.apptest_tools import new_app, open_page, static_tables, texts
from tests.synthetic import requests

REAL = Path(__file__).resolve().parent / "fixtures" / "real"
COLUMNS = ["start_s", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s", "ok"]
# the core's English words and sentences a Chinese reader must not meet
ENGLISH = ("gain confirmed", "no effect", "regression", "unsound", "not comparable", "measured (", "Overall",
           "Per-request bootstrap", "Few requests", "too few", "intervals", "held fixed", "baseline", "candidate",
           "Dec ", "Jan ", "UTC ·")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    st.cache_data.clear()
    monkeypatch.setenv("TRIAGE_LOG_DB", str(tmp_path / "log.sqlite3"))
    yield


def csv(**kw) -> bytes:
    return requests(n=1500, **kw)[COLUMNS].to_csv(index=False).encode()


def upload_pair(at, base: tuple[str, bytes], cand: tuple[str, bytes]):
    at.file_uploader(key="verify_base").upload(base[0], base[1], "application/octet-stream")
    at.file_uploader(key="verify_cand").upload(cand[0], cand[1], "application/octet-stream").run()
    assert not at.exception, at.exception
    return at


def english_left(body: str) -> list[str]:
    return [w for w in ENGLISH if w in body]


def test_a_real_pair_with_few_requests_is_compared_with_wide_intervals():
    """Two real runs of 96 requests each (vLLM's queueing run twice): intervals shown, not refused, and a line
    saying that about 288 more requests per side (384 each) would halve them."""
    data = (REAL / "vllm" / "queueing" / "vllm_bench.json").read_bytes()
    at = upload_pair(open_page("pages/verify.py"), ("base.json", data), ("cand.json", data))
    assert at.session_state["verify_result"] != "unsound"
    assert not at.error
    said = " ".join(w.value for w in at.warning).replace("\\", "")  # shown Markdown-escaped
    assert "Few requests (baseline 96, candidate 96)" in said and "288 more per side (384 each)" in said
    table = static_tables(at)[0]
    # every metric with per-request values has its interval; pooled ITL (every gap of every request) has no
    # per-request sample to resample, so it is compared without one and says so
    intervals = table["95% interval"].drop("ITL p50")
    assert all(v.startswith("[") for v in intervals), intervals.tolist()
    assert table.loc["ITL p50", "95% interval"].startswith("no interval")


def test_the_gate_still_refuses_few_requests(kb):
    from triage.diagnosis.rules import resolve_slo
    from triage.sources.files import load_benchmark
    from triage.verify.comparison import compare

    run = load_benchmark((REAL / "vllm" / "queueing" / "vllm_bench.json").read_bytes(), "q.json").runs[0]
    c = compare(run, run, resolve_slo(kb, "chat"), kb=kb)
    assert c.overall == "unsound" and any("the baseline has 96 (need at least 100" in r for r in c.refused)


def test_verify_in_chinese_has_no_english_verdict():
    at = open_page("pages/verify.py", lang="zh")
    upload_pair(at, ("base.csv", csv(ttft_base=0.4, seed=1)), ("cand.csv", csv(ttft_base=0.2, seed=2)))
    assert at.session_state["verify_result"] == "gain confirmed"  # the core's word, kept for the log
    body = texts(at)
    assert "收益已确认" in body and "实测" in body and english_left(body) == []
    few = open_page("pages/verify.py", lang="zh")
    data = (REAL / "vllm" / "queueing" / "vllm_bench.json").read_bytes()
    upload_pair(few, ("a.json", data), ("b.json", data))
    body = texts(few).replace("\\", "")
    assert "请求较少（基线 96，候选 96）" in body and english_left(body) == [], english_left(body)


def _saved_experiment() -> None:
    at = upload_pair(open_page("pages/verify.py"), ("base.csv", csv(ttft_base=0.4, seed=1)),
                     ("cand.csv", csv(ttft_base=0.2, seed=2)))
    at.button(key="verify_save").click().run()
    assert "Saved as experiment #1" in " ".join(s.value for s in at.success)


def test_experiment_log_in_chinese_has_no_english_verdict_and_a_chinese_date():
    _saved_experiment()
    log = open_page("pages/log.py", lang="zh")
    assert not log.exception, log.exception
    body = texts(log).replace("\\", "")  # Markdown-escaped
    assert "收益已确认" in body and english_left(body) == [], english_left(body)
    assert re.search(r"\d{4}年\d{1,2}月\d{1,2}日 \d\d:\d\d UTC", body)
    assert not log.dataframe  # static tables: no inner scroll


def test_a_reopened_experiment_reads_like_a_live_comparison():
    """/verify?experiment=1: values in their units, one-decimal intervals, metric names from the tree, the
    workload as a table (no raw JSON), and in 中文 no English verdict or date."""
    _saved_experiment()
    for language in ("en", "zh"):
        opened = new_app(lang=language).run()
        opened.switch_page("pages/verify.py")
        opened.query_params["experiment"] = "1"
        opened.run()
        assert not opened.exception, opened.exception
        assert not opened.json and not opened.dataframe
        metrics, work = static_tables(opened)[:2]
        cells = metrics.to_csv()
        assert "ttft_p50" not in cells and not re.search(r"\d\.\d{4,}", cells), cells
        assert any(v.endswith(" ms") for v in metrics.iloc[:, 0]), metrics
        assert re.search(r"\[[+-]\d+(\.\d)? %, [+-]\d+(\.\d)? %\]", cells) and "−" not in cells, cells
        assert len(work.index) == 6
        if language == "zh":
            body = texts(opened)
            assert "收益已确认" in body and english_left(body) == [], english_left(body)
        else:
            assert "TTFT" in cells and "#1 · Overall: gain confirmed" in texts(opened)
