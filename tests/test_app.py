"""AppTest: every page renders, deep links select, a tree click selects, the language switch works."""

from __future__ import annotations

import pytest
import streamlit as st

from tests.apptest_tools import click_plotly, new_app, open_page, texts
from triage.knowledge.loader import load_knowledge

TECHNIQUES = sorted(load_knowledge().techniques)


@pytest.fixture(autouse=True)
def _fresh_cache():
    st.cache_data.clear()
    yield


def test_home_renders_tree_and_root_panel():
    at = new_app().run()
    assert not at.exception
    assert any(c.key == "tree" for c in at.get("plotly_chart"))
    assert "Inference Triage" in texts(at)


def test_deep_link_selects_cause():
    at = new_app(node="ttft.queueing").run()
    assert not at.exception
    body = texts(at)
    assert "Requests queue too long" in body
    assert "vllm:request_queue_time_seconds" in body


def test_unknown_deep_link_warns_and_keeps_tree():
    at = new_app(node="nope.nothing").run()
    assert not at.exception
    assert any("nope.nothing" in w.value for w in at.warning)
    assert any(c.key == "tree" for c in at.get("plotly_chart"))


def test_tree_click_selects_node_and_sets_url():
    at = new_app().run()
    at = click_plotly(at, "tree", "memory.kv_cache")
    assert not at.exception
    assert at.query_params["node"] == ["memory.kv_cache"] or at.query_params["node"] == "memory.kv_cache"
    assert "The KV cache is too small" in texts(at)


def test_technique_panel_links_to_its_page():
    at = new_app(node="speculative_decoding").run()
    links = [(link.proto.page, link.proto.query_string) for link in at.get("page_link")]
    assert any(page == "technique" and "id=speculative_decoding" in qs for page, qs in links)


def test_language_switch_changes_text():
    at = new_app(node="ttft.queueing").run()
    next(b for b in at.get("button_group") if b.key == "lang").set_value("zh").run()
    assert not at.exception
    body = texts(at)
    assert "推理诊断台" in body and "排队太久" in body
    assert "Requests queue too long" not in body


def test_language_from_url():
    at = new_app(lang="zh", node="memory").run()
    assert "显存不够" in texts(at)


def test_jump_box_selects_node():
    at = new_app().run()
    at.selectbox(key="jump").set_value("tail_latency.preemption_storm").run()
    assert "Preemption storm" in texts(at)


@pytest.mark.parametrize("tid", TECHNIQUES)
def test_technique_page_renders(tid):
    kb = load_knowledge()
    at = open_page("pages/technique.py", id=tid)
    body = texts(at)
    assert kb.techniques[tid].title.en in body
    assert len(at.checkbox) == len(kb.techniques[tid].checklist)
    assert len(at.get("tab")) == 3
    assert "Flags as of vLLM 0.33.0, SGLang 0.5.23" in body


def test_technique_page_says_tgi_is_in_maintenance():
    for lang, words in (("en", "Upstream TGI is in maintenance mode"),
                        ("zh", "上游 TGI 自 2025 年 12 月起进入维护模式")):
        at = open_page("pages/technique.py", id="chunked_prefill", lang=lang)
        assert any(words in box.value for box in at.info)


def test_technique_page_names_engine_versions_and_papers_in_chinese():
    at = open_page("pages/technique.py", id="chunked_prefill", lang="zh")
    body = texts(at)
    assert "参数以 vLLM 0.33.0、SGLang 0.5.23、TGI 3.3.7 为准" in body
    assert "[arXiv:2403.02310](https://arxiv.org/abs/2403.02310)" in body


def _knob_cells(at) -> list[str]:
    """The flag and default cells of a technique page's knob tables (every engine's tab is drawn)."""
    return [str(cell) for table in at.table for row in table.value.reset_index().itertuples(index=False)
            for cell in row[:2]]


ENGLISH_KNOB_WORDS = ("unset", "(off)", "environment variable", "(inside ", "no cap")


@pytest.mark.parametrize("tid", TECHNIQUES)
def test_a_technique_pages_knob_table_speaks_the_readers_language(tid):
    """Unset defaults, environment variables and the words about a default are data rendered in each language:
    the 中文 page showed "unset (off)" and "VLLM_CACHE_ROOT (environment variable)"."""
    tech = load_knowledge().techniques[tid]
    flags = [f for knobs in tech.knobs.values() for f in knobs.flags]
    zh = " | ".join(_knob_cells(open_page("pages/technique.py", id=tid, lang="zh")))
    assert not [w for w in ENGLISH_KNOB_WORDS if w in zh], zh
    words = [t for f in flags for t in (f.default_note, f.default_rule) if t is not None and t.en != t.zh]
    assert not [t.en for t in words if t.en in zh]
    en = " | ".join(_knob_cells(open_page("pages/technique.py", id=tid, lang="en")))
    assert all(t.en in en and t.zh in zh for t in words)
    for f in flags:
        if f.env:
            assert f"{f.flag} (environment variable)" in en and f"{f.flag}（环境变量）" in zh
        if f.default is None:
            assert "unset" in en and "未设置" in zh


def test_the_knob_words_of_the_two_pages_that_showed_them():
    en = _knob_cells(open_page("pages/technique.py", id="speculative_decoding", lang="en"))
    zh = _knob_cells(open_page("pages/technique.py", id="speculative_decoding", lang="zh"))
    assert "unset (off)" in en and "未设置（关闭）" in zh
    en = _knob_cells(open_page("pages/technique.py", id="gemm_kernels", lang="en"))
    zh = _knob_cells(open_page("pages/technique.py", id="gemm_kernels", lang="zh"))
    assert "VLLM_CACHE_ROOT (environment variable)" in en and "VLLM_CACHE_ROOT（环境变量）" in zh
    assert "~/.cache/vllm ($XDG_CACHE_HOME/vllm when XDG_CACHE_HOME is set)" in en
    assert "~/.cache/vllm（设置了 XDG_CACHE_HOME 时为 $XDG_CACHE_HOME/vllm）" in zh


def test_technique_index_without_id():
    at = new_app().run()
    at.switch_page("pages/technique.py").run()
    assert not at.exception
    assert len(at.get("page_link")) >= len(TECHNIQUES)


def test_checklist_progress_counts_ticks():
    at = open_page("pages/technique.py", id="prefix_caching")
    at.checkbox[0].check().run()
    assert not at.exception
    assert any("1 of" in str(p.proto.text) for p in at.get("progress"))


def test_checklist_ticks_survive_a_page_switch():
    at = open_page("pages/technique.py", id="prefix_caching")
    at.checkbox[1].check().run()
    at.switch_page("pages/diagnose.py").run()
    at.switch_page("pages/technique.py")
    at.query_params["id"] = "prefix_caching"
    at.run()
    assert [c.value for c in at.checkbox][:2] == [False, True]


@pytest.mark.parametrize("path,title", [
    ("pages/diagnose.py", "推理诊断台"), ("pages/live.py", "实时诊断"), ("pages/benchmark.py", "压测结果诊断"),
    ("pages/verify.py", "对比基线验证改动"), ("pages/retro.py", "复盘走查"), ("pages/log.py", "实验日志"),
    ("pages/memory.py", "显存计算器"), ("pages/technique.py", "全部技术"),
])
def test_every_page_opens_in_chinese(path, title, monkeypatch, tmp_path):
    monkeypatch.setenv("TRIAGE_LOG_DB", str(tmp_path / "log.sqlite3"))
    at = open_page(path, lang="zh")
    assert at.title[0].value == title


def test_sidebar_guide_is_drawn_only_once_opened():
    """The closed guide sends nothing (every page's first paint is lighter); opened, it shows every step."""
    kb = load_knowledge()
    steps = [s.title.en for s in kb.guidance.usage_flow]
    closed = new_app().run()
    assert not any(step in texts(closed) for step in steps)
    opened = new_app()
    opened.session_state["usage_flow"] = True  # the user has opened the guide
    opened.run()
    assert not opened.exception
    assert all(step in texts(opened) for step in steps)


def test_the_hidden_chart_is_the_first_thing_the_app_sends():
    """The chart code starts loading before the page computes: the sidebar's first element is the hidden chart
    (tests/test_browser.py checks that a real browser then fetches the chart code on a page without a chart)."""
    at = new_app().run()
    first = at.sidebar.children[0]
    assert first.type == "plotly_chart" and first.key == "chart_warmup"
    assert any(".st-key-chart_warmup { display: none; }" in str(h.proto.body) for h in at.get("html"))
