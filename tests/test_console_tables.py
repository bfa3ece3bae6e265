"""Console tables of genai-perf, AIPerf and GuideLLM (real samples from each tool's docs/tests and threads): read
as summary runs, a table cut short keeps what it has, and they diagnose / verify like any console summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_tools import run_triage
from triage.service.uploads import open_benchmark

ROOT = Path(__file__).resolve().parent.parent
CONSOLE = ROOT / "tests" / "fixtures" / "real" / "console"


def runs(name: str, text: str | None = None):
    data = text.encode() if text is not None else (CONSOLE / name).read_bytes()
    bench = open_benchmark(data, name)
    assert bench.format == "serving_console"
    return bench


def test_genai_perf_readme_table() -> None:
    (run,) = runs("genai_perf_readme_llm.txt").runs
    s = run.summary
    assert run.meta["tool"] == "genai-perf console"
    assert s["ttft_mean_s"] == pytest.approx(0.01626) and s["ttft_p99_s"] == pytest.approx(0.01709)
    assert s["tpot_p90_s"] == pytest.approx(0.00197)  # genai-perf's inter_token_latency is vLLM's TPOT
    assert s["e2e_p99_s"] == pytest.approx(0.54869)
    assert s["req_per_s"] == pytest.approx(1.99) and s["out_tok_per_s"] == pytest.approx(520.87)
    assert s["prompt_tokens_mean"] == pytest.approx(550.06)


def test_a_wrapped_label_joins_the_row_above_and_is_not_a_metric() -> None:
    (run,) = runs("genai_perf_tests_wrapped.txt").runs
    assert run.summary["completed"] == 3 and run.summary["req_per_s"] == 123
    (aiperf,) = runs("aiperf_readme_llm.txt").runs
    s = aiperf.summary
    assert aiperf.meta["tool"] == "AIPerf console"
    assert s["out_tok_per_s"] == pytest.approx(10944.03)  # "10,944.03"
    assert s["completed"] == 711 and s["ttft_p99_s"] == pytest.approx(0.06882)


def test_a_cut_aiperf_table_keeps_the_rows_and_cells_it_has() -> None:
    text = (CONSOLE / "aiperf_readme_llm.txt").read_text()
    cut = text[:text.index("487.30 │ 267.07") + len("487.30 │ 26")]  # inside the Request Latency row
    bench = runs("cut.txt", cut)
    s = bench.runs[0].summary
    assert s["ttft_mean_s"] == pytest.approx(0.01826) and s["e2e_mean_s"] == pytest.approx(0.4873)
    assert "e2e_p99_s" not in s and "req_per_s" not in s  # cut before them: not measurable
    assert any("request throughput" in n for n in bench.notes)


def test_guidellm_tables_merge_by_benchmark_row() -> None:
    bench = runs("guidellm_llmd_precise_prefix.txt")
    assert [r.label for r in bench.runs] == ["1. constant", "2. constant", "3. constant"]
    third = bench.runs[2].summary
    assert third["ttft_p50_s"] == pytest.approx(0.0255) and third["ttft_p95_s"] == pytest.approx(0.0611)
    assert third["tpot_p95_s"] == pytest.approx(0.0065)  # from ITL (each request's mean gap), not GuideLLM's TPOT
    assert third["e2e_p50_s"] == pytest.approx(0.3) and third["req_per_s"] == pytest.approx(9.9)
    assert third["duration_s"] == 30 and third["prompt_tokens_mean"] == 50
    assert bench.runs[2].meta["mean concurrency"] == "2.5"


def test_guidellm_throughput_only_table_and_a_cut_latency_table() -> None:
    (run,) = runs("guidellm_pr617_throughput.txt").runs
    assert run.summary == {"req_per_s": 2.3, "out_tok_per_s": 2319.4, "total_tok_per_s": 4775.9}
    assert run.meta["mean concurrency"] == "25.0"
    text = (CONSOLE / "guidellm_llmd_precise_prefix.txt").read_text()
    cut = text[:text.index("| constant  | 0.3     | 0.3    | 25.5") + 30]
    bench = runs("cut.txt", cut)
    assert len(bench.runs) == 3
    last = bench.runs[2].summary
    assert last["e2e_p50_s"] == pytest.approx(0.3) and "ttft_p95_s" not in last and "req_per_s" not in last


def test_diagnose_names_what_the_table_gives_and_what_it_cannot() -> None:
    out = run_triage("diagnose", str(CONSOLE / "aiperf_readme_llm.txt"))
    assert out.returncode == 0, out.stderr
    assert "AIPerf console summary" in out.stdout and "ttft_p99_s = 68.8 ms" in out.stdout
    sweep = str(CONSOLE / "guidellm_llmd_precise_prefix.txt")
    out = run_triage("diagnose", sweep)
    assert "No symptom is measurable from this source: this is not a sign of health." in out.stdout  # p95 only


def test_every_console_sample_has_a_provenance_entry() -> None:
    listed = (CONSOLE / "PROVENANCE.md").read_text()
    for path in CONSOLE.glob("*.txt"):
        assert f"`{path.name}`" in listed, path.name
