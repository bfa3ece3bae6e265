"""How each signal was measured reads in Chinese too: every sentence the bundled sources produce has a phrase."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_live_scenarios import snapshots
from triage.diagnosis.benchmark import diagnose_run
from triage.diagnosis.roofline import Hardware
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.window import diagnose_window
from triage.errors import TriageError
from triage.knowledge.loader import load_knowledge
from triage.knowledge.provenance import known_provenance, translate_provenance
from triage.sources.files import load_benchmark
from triage.sources.metrics.snapshot_window import SnapshotWindow

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(p for d in ("tests/fixtures/bench", "tests/fixtures/real", "tree/sample")
               for p in (ROOT / d).rglob("*") if p.is_file())


def _sources(kb) -> dict[str, str]:
    """Every provenance sentence of the demo scenarios and the bundled files, with one signal that had it."""
    found: dict[str, str] = {}
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
            if sig.source:
                found.setdefault(sig.source, sig.name)
    return found


def test_every_sentence_the_bundled_sources_produce_reads_in_chinese(kb):
    found = _sources(kb)
    assert len(found) > 40, "the demo and fixtures should exercise most of the sentences"
    untranslated = {text: name for text, name in found.items() if not known_provenance(text)}
    assert untranslated == {}, "add a phrase to tree/provenance.yaml for each"
    assert any("TPOT p50 ÷" in text and "floor" in text for text in found), "the roofline sentence was exercised"


@pytest.mark.parametrize("text, zh", [
    ("p99 of 1,987 successful requests", "1,987 个成功请求的 p99"),
    ("Spearman r, in-flight requests vs TTFT (5,000-request sample)",
     "Spearman 相关系数 r：在途请求数与 TTFT（抽样 5,000 个请求）"),
    ("mean prompt tokens (tool summary) ÷ TTFT p5", "prompt token 数的均值（工具汇总） ÷ TTFT p5"),
    ("something no phrase knows", "something no phrase knows"),
])
def test_placeholders_are_kept_and_nested_phrases_translated(text, zh):
    assert translate_provenance(text, "zh") == zh
    assert translate_provenance(text, "en") == text


def test_a_phrase_whose_languages_disagree_on_placeholders_is_refused(tmp_path):
    import shutil

    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "tree", tree)
    path = tree / "provenance.yaml"
    path.write_text('phrases:\n  - {en: "{p} of the E2E histogram", zh: "E2E 直方图的 {q}"}\n', encoding="utf-8")
    with pytest.raises(TriageError, match=r"phrases\[0\]: placeholders differ"):
        load_knowledge(tree)


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
