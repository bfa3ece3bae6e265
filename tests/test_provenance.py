"""How each signal was measured, as a message with an id: every message renders in English and Chinese with its
parameters filled; every id the core names has a template; the bundled sources and demo produce only such messages."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest

from tests.test_live_scenarios import snapshots
from triage.diagnosis.benchmark import diagnose_run
from triage.diagnosis.roofline import Hardware
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.window import diagnose_window
from triage.errors import TriageError
from triage.knowledge.loader import PLACEHOLDER, load_knowledge
from triage.knowledge.messages import Msg, message_text
from triage.knowledge.model import NeedKindName
from triage.sources.files import load_benchmark
from triage.sources.metrics.snapshot_window import SnapshotWindow

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(p for d in ("tests/fixtures/bench", "tests/fixtures/real", "tree/sample")
               for p in (ROOT / d).rglob("*") if p.is_file())
LANGS = ("en", "zh")


def _sources(kb) -> dict[Msg, str]:
    """Every provenance message of the demo scenarios and the bundled files, with one signal that had it."""
    found: dict[Msg, str] = {}
    slo = resolve_slo(kb)
    diagnoses = [diagnose_window(kb, SnapshotWindow(snapshots(s, 5)), slo).diagnosis for s in kb.scenarios]
    for path in FILES:
        try:
            runs = load_benchmark(path.read_bytes(), path.name).runs
        except TriageError:
            continue  # not a benchmark file (a scrape, a config)
        for run in runs:
            diagnoses.append(diagnose_run(kb, run, slo))
            diagnoses.append(diagnose_run(kb, run, slo, Hardware("llama-3.1-8b", "h100")))  # rooflines too
    for d in diagnoses:
        for sig in d.signals.values.values():
            found.setdefault(sig.source, sig.name)
    return found


def _ids(message: Msg) -> set[str]:
    return {message.id} | {i for _, v in message.params if isinstance(v, Msg) for i in _ids(v)}


def test_every_message_the_bundled_sources_produce_renders_in_both_languages(kb):
    found = _sources(kb)
    assert len(found) > 40, "the demo and fixtures should exercise most of the messages"
    assert all(isinstance(m, Msg) for m in found), "a signal's source is a message, never an English sentence"
    for message in found:
        en, zh = message_text(message, "en"), message_text(message, "zh")
        assert en and zh and (en != zh or message.id in SAME_IN_BOTH), message
        assert not PLACEHOLDER.search(en) and not PLACEHOLDER.search(zh), message  # every {name} filled
    used = {i for m in found for i in _ids(m)}
    assert {"roofline.decode_floor", "roofline.where", "bench.percentile", "bench.prefill_rate"} <= used


def _templates(kb) -> list[tuple[str, str]]:
    return [(key, lang) for key in kb.messages for lang in LANGS]


def _filled(template: str) -> dict[str, str]:
    return {name: f"<{name}>" for name in PLACEHOLDER.findall(template)}


@pytest.mark.parametrize("key", sorted(load_knowledge().messages))
def test_each_message_renders_in_both_languages_with_its_parameters_filled(kb, key):
    """Each template, in each language, takes the parameters its id names and shows every one of them."""
    names = sorted(set(PLACEHOLDER.findall(kb.messages[key].en)))
    message = Msg(key, **{n: f"<{n}>" for n in names})
    for lang in LANGS:
        text = message_text(message, lang)
        assert text.strip() and all(f"<{n}>" in text for n in names), (key, lang, text)
        assert "{" not in text and "}" not in text, (key, lang, text)
    if names:
        assert message_text(message, "en") != message_text(message, "zh") or key in SAME_IN_BOTH, key


# formulas that read the same in both languages (metric names and symbols only)
SAME_IN_BOTH = {"tail_ratio", "bench.ttft_over_p5", "bench.prefill_rate", "recipe.div"}


def _ids_in_code() -> set[tuple[str, str]]:
    """(file, id) of every Msg("literal id", …) in triage/ and components/ (a computed id is listed separately)."""
    out = set()
    for path in [*(ROOT / "triage").rglob("*.py"), *(ROOT / "components").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Msg" and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    out.add((str(path.relative_to(ROOT)), arg.value))
                elif isinstance(arg, ast.IfExp):
                    out |= {(str(path.relative_to(ROOT)), b.value) for b in (arg.body, arg.orelse)
                            if isinstance(b, ast.Constant)}
    return out


def _ids_in_recipes(kb) -> set[str]:
    """The message ids the server signals' recipes name (tree/signals.yaml ``how``)."""
    out, todo = set(), [s.recipe for s in kb.signals.values() if s.recipe is not None]
    while todo:
        part = todo.pop()
        todo += (part.div or []) + (part.first or [])
        if part.how is not None:
            out.add(part.how.id)
    return out


def test_every_id_the_core_names_has_a_template(kb):
    named = _ids_in_code() | {("tree/signals.yaml", i) for i in _ids_in_recipes(kb)}  # a recipe's `how` too
    assert len(named) > 50
    missing = sorted((f, i) for f, i in named if i not in kb.messages)
    assert missing == [], "add each to tree/provenance.yaml in en and zh"
    computed = {f"roofline.{b}" for b in ("memory", "compute")} | {f"recipe.{k}" for k in get_args(NeedKindName)}
    assert computed <= set(kb.messages)
    assert {"server.tpot_req_hist", "server.itl_hist", "tail_ratio"} <= {i for _, i in named}
    unused = set(kb.messages) - {i for _, i in named} - computed
    assert unused == set(), "a template no code names"


@pytest.mark.parametrize("message, en, zh", [
    (Msg("bench.percentile", p="p99", n=1987), "p99 of 1,987 successful requests", "1,987 个成功请求的 p99"),
    (Msg("bench.spearman_ttft", sample=Msg("bench.sample", n=5000)),
     "Spearman r, in-flight requests vs TTFT (5,000-request sample)",
     "Spearman 相关系数 r：在途请求数与 TTFT（抽样 5,000 个请求）"),
    (Msg("bench.spearman_ttft", sample=""), "Spearman r, in-flight requests vs TTFT",
     "Spearman 相关系数 r：在途请求数与 TTFT"),
    (Msg("bench.prefill_rate", prompt=Msg("bench.mean_prompt_summary")),
     "mean prompt tokens (tool summary) ÷ TTFT p5", "prompt token 数的均值（工具汇总） ÷ TTFT p5"),
    (Msg("roofline.decode_floor", ms="5.12", where=Msg("roofline.where", model="Llama 3.1 8B", tp=2, gpu="H100"),
         batch=16, context=1536, bound=Msg("roofline.memory")),
     "TPOT p50 ÷ 5.12 ms floor (Llama 3.1 8B on 2× H100, batch ≈ 16, context ≈ 1,536 tokens, memory-bound)",
     "TPOT p50 ÷ 5.12 ms 下限（2× H100 上的 Llama 3.1 8B，batch ≈ 16，上下文 ≈ 1,536 token，带宽受限）"),
    (Msg("fleet.largest", s="waiting_mean", who=Msg("fleet.whole_window"), n=3),
     "waiting_mean of the whole window, the largest of 3 replicas", "整个窗口 的 waiting_mean，3 个副本中最大"),
])
def test_parameters_are_filled_and_nested_messages_rendered_in_the_same_language(message, en, zh):
    assert message_text(message, "en") == en
    assert message_text(message, "zh") == zh


def test_a_plain_text_is_shown_as_is_and_none_as_nothing():
    assert message_text("test", "zh") == "test" and message_text(None, "zh") == ""


def test_a_message_is_a_value():
    """Hashable and equal by id and parameters (the views cache diagnoses; sets of sources dedupe)."""
    import pickle

    m = Msg("bench.percentile", p="p99", n=3)
    assert m == Msg("bench.percentile", p="p99", n=3) and m != Msg("bench.percentile", p="p50", n=3)
    assert len({m, Msg("bench.percentile", p="p99", n=3)}) == 1 and pickle.loads(pickle.dumps(m)) == m
    assert m.param("n") == 3


def test_a_message_whose_languages_disagree_on_placeholders_is_refused(tmp_path):
    import shutil

    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "tree", tree)
    path = tree / "provenance.yaml"
    path.write_text('messages:\n  server.e2e_hist: {en: "{p} of the E2E histogram", zh: "E2E 直方图的 {q}"}\n',
                    encoding="utf-8")
    with pytest.raises(TriageError, match=r"server.e2e_hist: placeholders differ"):
        load_knowledge(tree)


@pytest.mark.parametrize("text", ["phrases:\n  - {en: a, zh: b}\n", "messages:\n  x: {en: a}\n"])
def test_a_provenance_file_of_the_old_shape_or_missing_a_language_is_refused(tmp_path, text):
    import shutil

    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "tree", tree)
    (tree / "provenance.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(TriageError, match="provenance.yaml"):
        load_knowledge(tree)


def test_no_triage_module_translates_by_pattern():
    """The old way (an English sentence matched back to its Chinese by regex) is gone for good."""
    for path in (ROOT / "triage").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "translate_provenance" not in text and "known_provenance" not in text, path
    assert not (ROOT / "triage/knowledge/provenance.py").exists()


def test_the_benchmark_page_in_chinese_says_how_each_signal_was_measured_in_chinese():
    from tests.apptest_tools import open_page, static_tables

    at = open_page("pages/benchmark.py", lang="zh")
    assert not at.exception, at.exception
    cells = " ".join(tb.to_csv() for tb in static_tables(at))
    assert "测量方式: Spearman 相关系数 r：在途请求数与 TTFT" in cells and "逐请求 TTFT 之和 ÷ 运行时长" in cells
    assert "successful requests" not in cells and "run span" not in cells and "How it was measured" not in cells


def test_the_retro_title_is_offered_in_the_readers_language():
    from tests.apptest_tools import open_page

    assert open_page("pages/retro.py", lang="zh").text_input(key="retro_title").value == "事故复盘"
    assert open_page("pages/retro.py").text_input(key="retro_title").value == "Incident retro"


def _sample_diagnosis(kb):
    run = load_benchmark((ROOT / "tree/sample/benchmark.csv").read_bytes(), "benchmark.csv").runs[0]
    return diagnose_run(kb, run, resolve_slo(kb))


def test_the_json_contract_keeps_the_english_text_in_either_language(kb):
    """diagnose --json pins "source" as text: the English rendering, whatever language the meanings are in."""
    from triage.report.json_contract import diagnosis_json

    diag = _sample_diagnosis(kb)
    for lang in LANGS:
        out = diagnosis_json(diag, source="s", fmt="f", runs=[], lang=lang)
        sources = [s["source"] for s in out["signals"].values()]
        assert sources and all(isinstance(s, str) and s for s in sources)
        assert any(s.endswith("successful requests") for s in sources), sources
        shown = [e["source"] for f in out["findings"] for e in f["evidence"]]
        assert shown and all(isinstance(s, str) for s in shown) and not any("个" in s for s in shown)


def test_the_report_says_how_each_signal_was_measured_in_its_language(kb):
    from triage.report.markdown import report_markdown

    diag = _sample_diagnosis(kb)
    zh, en = report_markdown(kb, diag, lang="zh"), report_markdown(kb, diag, lang="en")
    assert "| Spearman 相关系数 r：在途请求数与 TTFT |" in zh and "in-flight requests vs" not in zh
    assert "| Spearman r, in-flight requests vs TTFT |" in en and "相关系数" not in en
    assert "逐请求 TTFT 之和 ÷ 运行时长" in zh and "run span" not in zh
