"""AppTest of the Benchmark page's text area: a pasted log, console summary or scrape is named and diagnosed."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st

from tests.apptest_tools import open_page, static_tables, texts

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "fixtures" / "real" / "logs"
CONSOLE = ROOT / "tests" / "fixtures" / "real" / "console"
METRICS = ROOT / "tests" / "fixtures" / "metrics" / "vllm.txt"


@pytest.fixture(autouse=True)
def _fresh_cache():
    st.cache_data.clear()
    yield


def paste(text: str, **query: str):
    at = open_page("pages/benchmark.py", **query)
    at.text_area(key="bench_paste").input(text).run()
    assert not at.exception, at.exception
    return at


def test_a_pasted_vllm_log_is_named_diagnosed_and_drawn_over_time():
    at = paste((LOGS / "vllm_v1_apiserver_kv_full.txt").read_text())
    body = texts(at)
    assert "Recognised: vLLM V1 server log, 5 stats lines over 0.667 min, 1 lines skipped" in body
    assert at.session_state["findings"][0] == "memory.kv_cache"  # the tree lights the log's branch
    assert "The KV cache is too small" in body
    charts = [c for c in at.get("plotly_chart")]
    assert len(charts) >= 3  # running/waiting, KV usage, tokens/s (and the lit tree)
    assert "bundled sample" not in body  # the paste replaces the sample, never shown under its name


def test_a_pasted_console_summary_and_a_scrape():
    at = paste((CONSOLE / "sglang_bench_serving_rate_330.txt").read_text())
    assert "'Serving Benchmark Result', genai-perf, AIPerf, GuideLLM\\), 1 run(s)" in texts(at)
    assert at.session_state["findings"][0] == "ttft.queueing"
    at = paste(METRICS.read_text())
    assert "one /metrics scrape of vLLM, diagnosed since the server started" in texts(at)


def test_unrecognised_text_is_a_clear_error_in_both_languages():
    at = paste("hello, world\nthis is not a log\n")
    (error,) = [e.value.replace("\\", "") for e in at.error]  # the message is Markdown-escaped
    assert error.startswith("Could not read the pasted text: not a load-test result")
    assert "also tried server logs (vLLM server log, SGLang server log) and a /metrics scrape" in error
    assert "findings" not in at.session_state or not at.session_state["findings"]
    zh = paste("hello, world\n", lang="zh")
    assert [e.value for e in zh.error][0].startswith("无法读取粘贴的文本")


def test_chinese_labels_for_a_log():
    at = paste((LOGS / "vllm_v0_swap_preemption.txt").read_text(), lang="zh")
    assert "已识别：vLLM V0 server log" in texts(at)


def test_a_pasted_log_opens_with_the_verdict_for_the_engine_that_wrote_it():
    """A pasted log names its engine: the page opens with the verdict, as for a file, and its first action is that
    engine's flag alone, not every engine's under "engine not detected"; Diagnose carries the engine on."""
    at = paste((LOGS / "vllm_v1_apiserver_kv_full.txt").read_text())
    verdict = "\n".join(m.value for m in at.markdown if m.value.startswith("**Verdict**"))
    assert "The KV cache is too small" in verdict
    assert "**First action** (vLLM)" in verdict and "--gpu-memory-utilization" in verdict
    assert "engine not detected" not in verdict and "--mem-fraction-static" not in verdict
    assert at.session_state["diagnosis_engine"] == "vllm"
    at = paste((LOGS / "sglang_decode_kv_full.txt").read_text())
    verdict = "\n".join(m.value for m in at.markdown if m.value.startswith("**Verdict**"))
    assert "**First action** (SGLang)" in verdict and "--gpu-memory-utilization" not in verdict


BENCH = ROOT / "tests" / "fixtures" / "bench" / "vllm_detailed.json"


def test_text_that_cannot_be_read_keeps_the_users_file_on_screen():
    """A wrong paste says why, and the file the user had loaded stays shown and diagnosed below, with the
    uploader: the page is not emptied down to the error until the text area is cleared."""
    at = open_page("pages/benchmark.py")
    at.file_uploader(key="bench_upload").upload(BENCH.name, BENCH.read_bytes(), "application/octet-stream").run()
    at.text_area(key="bench_paste").input("hello, world\nthis is not a log\n").run()
    assert not at.exception, at.exception
    assert [e.value for e in at.error][0].startswith("Could not read the pasted text")
    body = texts(at)
    assert "Detected format: **vLLM" in body and "bundled sample" not in body
    assert at.get("file_uploader")  # another file can still be dropped
    assert at.session_state["diagnosis"][0].startswith("vllm_detailed.json")  # what is on screen is what is kept


def test_text_that_cannot_be_read_with_no_file_shows_the_uploader_but_not_the_sample():
    at = paste("hello, world\n")
    assert at.get("file_uploader")
    assert "bundled sample" not in texts(at) and not at.metric  # never the sample's numbers as if the user's
    assert "findings" not in at.session_state or not at.session_state["findings"]


def test_the_logs_own_readings_are_named_in_the_readers_language():
    """'From the log's own numbers' listed ids (kv_full_share, decode_tok_per_s_per_request) on the English and
    the 中文 page alike; each reading the log parsers make now has a name in both languages."""
    import re

    from triage.knowledge.i18n import load_strings

    made = set()
    for path in (ROOT / "triage" / "sources" / "logs").glob("*.py"):
        made |= set(re.findall(r'LogReading\(\s*"([a-z_]+)"', path.read_text(encoding="utf-8")))
    assert len(made) >= 8 and not {f"log_reading_{n}" for n in made} - set(load_strings())
    for lang, label in (("en", "Share of stats lines with the KV cache ≥ 95 %"), ("zh", "KV Cache ≥ 95% 的统计行占比")):
        at = paste((LOGS / "vllm_v1_k8s_wrapped_kv_full.txt").read_text(), lang=lang)
        table = static_tables(at)[0]  # the readings, above the findings
        rows = list(table.index)
        assert label in rows and not [r for r in rows if re.fullmatch(r"[a-z_]+", r)], rows


def test_the_logs_own_readings_have_no_english_unit():
    """A reading's unit is printed as it is on the 中文 page too: only symbols and the formatter's units (the
    out-of-memory count read "3 lines")."""
    import re

    units = set()
    for path in (ROOT / "triage" / "sources" / "logs").glob("*.py"):
        units |= set(re.findall(r'LogReading\(\s*"[a-z_]+",\s*[^"\n]+?,\s*"([^"]*)"', path.read_text(encoding="utf-8")))
    assert units and units <= {"", "req", "tok/s", "s", "fraction", "ratio"}, units
