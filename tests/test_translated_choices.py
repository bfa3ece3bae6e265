"""AppTest: after a switch to 中文, every keyed select box whose options are translated is told to show its chosen
option in 中文 and keeps the choice (components.shell.translated_choice); back in English, the same."""

from __future__ import annotations

from typing import Any

import pytest
import streamlit as st

from tests.apptest_tools import open_page
from tests.prom_harness import free_port

# page, its URL, the boxes set to a value other than their default first (an untouched default counts too)
CASES = [
    ("pages/log.py", {}, {"log_verdict": "regression", "log_technique": "chunked_prefill"}),
    ("pages/live.py", {}, {"live_scenario": "kv_pressure", "slo_preset": "interactive"}),
    ("pages/live.py", {"source": "prometheus"}, {"prom_baseline": 24.0}),
    ("pages/live.py", {"source": "prometheus"}, {}),  # the baseline left at its None option, "none"
    ("pages/verify.py", {}, {"verify_technique": "prefix_caching"}),
    ("pages/benchmark.py", {}, {"hw_model": "llama-3.1-8b", "hw_gpu": "h100"}),
    ("pages/retro.py", {"step": "2"}, {"retro_symptom": "tpot"}),
    ("pages/retro.py", {"step": "4"}, {"retro_techniques": ["continuous_batching", "parallelism"]}),
    ("pages/memory.py", {}, {"mem_model": "__custom__"}),
    ("pages/diagnose.py", {"node": "ttft.queueing"}, {}),  # the jump box, set from the URL each run
]


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    st.cache_data.clear()
    monkeypatch.setenv("TRIAGE_LOG_DB", str(tmp_path / "log.sqlite3"))
    monkeypatch.setenv("TRIAGE_PROMETHEUS_DOWN_URL", f"http://127.0.0.1:{free_port()}")


def _boxes(at) -> dict[str, Any]:
    return {str(w.key): w for w in [*at.selectbox, *at.multiselect] if w.key}


def _chosen(box) -> list[int]:
    """Positions of the box's chosen options."""
    return list(box.indices) if hasattr(box, "indices") else [box.index]


def _told_to_show(box) -> list[str] | None:
    """The labels the run tells the browser to show in the box; None when it leaves the box as it is."""
    if not box.proto.set_value:
        return None
    return list(box.proto.raw_values) if hasattr(box.proto, "raw_values") else [box.proto.raw_value]


def _switch(at, lang: str) -> None:
    """As the sidebar's language control does (AppTest's tree has lost the sidebar after a rerun: it is set by its
    key, which the control writes)."""
    at.session_state["lang"] = lang
    at.run()
    assert not at.exception, at.exception


@pytest.mark.parametrize("path,query,values", CASES, ids=[f"{c[0]}-{'-'.join(c[2]) or 'default'}" for c in CASES])
def test_a_language_switch_shows_each_chosen_option_in_the_new_language(path, query, values) -> None:
    at = open_page(path, lang="en", **query)
    for key, value in values.items():
        (at.multiselect if isinstance(value, list) else at.selectbox)(key=key).set_value(value).run()
        assert not at.exception, at.exception
    checked = set()
    for lang in ("zh", "en"):
        before = {key: (list(box.options), _chosen(box), box.value) for key, box in _boxes(at).items()}
        _switch(at, lang)
        for key, box in _boxes(at).items():
            if key not in before or list(box.options) == before[key][0]:
                continue  # new on this run, or its labels are the same in both languages (file names, numbers)
            _, positions, value = before[key]
            assert box.value == value, f"{key}: the choice changed with the language"
            assert _told_to_show(box) == [box.options[i] for i in positions], \
                f"{key}: the browser keeps showing {[before[key][0][i] for i in positions]}"
            checked.add(key)
    assert set(values) <= checked, f"boxes not seen with translated options: {set(values) - checked}"
    assert checked, "no box with translated options on this page"


# widgets given a format_func of their own, and why they need no translated_choice
OWN_LABELS = {
    ("components/node_panel.py", "JUMP_KEY"): "the tree's jump box: set from the URL before every draw",
    ("components/bench_view.py", "session.BENCH_CHOICE.name"): "Benchmark's file picker: set before every draw",
    ("components/bench_view.py", "session.BENCH_RUN.key(loaded.digest)"): "run labels read from the file",
    ("components/verify_view.py", "run_key"): "run labels read from the file",
    ("components/memory_view.py", "session.MEM_GPU.name"): "GPU names, the same in both languages",
}


def test_every_other_labelled_choice_is_drawn_by_translated_choice() -> None:
    """A widget with its own ``format_func`` is one of the few above; any other goes through translated_choice,
    or its labels would stay in the language they were first drawn in."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    seen = set()
    for path in [*root.glob("components/*.py"), *root.glob("pages/*.py")]:
        rel = str(path.relative_to(root))
        if rel == "components/shell.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and any(k.arg == "format_func" for k in node.keywords):
                key = next((ast.unparse(k.value) for k in node.keywords if k.arg == "key"), "")
                seen.add((rel, key))
    assert seen == set(OWN_LABELS), f"draw these with components.shell.translated_choice: {seen - set(OWN_LABELS)}"
