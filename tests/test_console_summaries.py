"""Pasted "Serving Benchmark Result" console blocks (vLLM, SGLang): every row form, cut blocks, real excerpts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli_tools import python_m_triage, run_triage
from triage.sources.files import load_benchmark

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "fixtures" / "real" / "console"


def load(text: str, name: str = "pasted.txt"):
    return load_benchmark(text.encode(), name)


def triage(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """The CLI in this process (tests/cli_tools.py); reading standard input launches the real `python -m triage`."""
    return run_triage(*args, stdin=stdin)


def test_rows_become_the_canonical_summary() -> None:
    (run,) = load((REAL / "vllm_bench_serve_rate_inf.txt").read_text()).runs
    s = run.summary
    assert s["completed"] == 1000 and s["duration_s"] == 30.85 and s["req_per_s"] == 32.42
    assert s["ttft_mean_s"] == pytest.approx(9.62613) and s["ttft_p50_s"] == pytest.approx(9.4597)
    assert s["tpot_p99_s"] == pytest.approx(0.21121) and s["itl_p99_s"] == pytest.approx(0.21435)
    assert s["prompt_tokens_mean"] == pytest.approx(229.711) and s["total_tok_per_s"] == 14029.44
    assert "offered_rate" not in s  # rate inf is not printed by newer vllm bench serve: not measurable


def test_sglang_block_reads_rate_concurrency_and_e2e_latency() -> None:
    (run,) = load((REAL / "sglang_bench_serving_rate_330.txt").read_text()).runs
    s = run.summary
    assert (s["offered_rate"], s["max_concurrency"], s["req_per_s"]) == (330.0, 330.0, 11.91)
    assert s["e2e_mean_s"] == pytest.approx(26.53012) and s["e2e_p50_s"] == pytest.approx(26.00141)
    assert "itl_p99_s" not in s and run.meta["tool"].startswith("SGLang")
    assert run.meta["mean concurrency"] == "315.98"


def test_context_lines_before_the_block_and_not_set_values() -> None:
    (run,) = load((REAL / "vllm_benchmark_serving_rate_15.txt").read_text()).runs
    assert (run.summary["offered_rate"], run.summary["max_concurrency"]) == (15.0, 100.0)
    assert "tpot_p90_s" not in run.summary and run.summary["tpot_p50_s"] == pytest.approx(0.01477)
    (vision,) = load((REAL / "sglang_bench_serving_vision_inf.txt").read_text()).runs
    assert "max_concurrency" not in vision.summary and "offered_rate" not in vision.summary  # inf, not set
    assert vision.label == "rate inf (all at once)"


def test_several_blocks_are_several_runs() -> None:
    block = (REAL / "vllm_bench_serve_rate_inf.txt").read_text()
    bench = load(block + "\nMaximum request concurrency: 8\n" + block.replace("32.42", "16.00"))
    assert [r.summary["req_per_s"] for r in bench.runs] == [32.42, 16.0]
    assert bench.runs[1].summary["max_concurrency"] == 8 and bench.runs[1].label.startswith("run 2")


def test_a_block_cut_before_its_counts_keeps_what_it_has_and_says_so() -> None:
    bench = load("============ Serving Benchmark Result ============\nBenchmark duration (s):   10.00\n"
                 "Mean TTFT (ms):  120.0\nP99 TTFT (ms):  900.0\n")
    (run,) = bench.runs
    assert run.summary == {"duration_s": 10.0, "ttft_mean_s": 0.12, "ttft_p99_s": 0.9}
    assert any("cut before 'Successful requests'" in note for note in bench.notes)


REAL_CASES = {
    "vllm_bench_serve_rate_inf.txt": ("ttft.queueing", {"awaiting_first_token_mean": 32.42 * 9.62613}),
    "sglang_bench_serving_rate_330.txt": ("ttft.queueing", {"achieved_over_offered": 11.91 / 330}),
    "sglang_bench_serving_vision_inf.txt": ("ttft.queueing", {"awaiting_first_token_mean": 17.53 * 25.74735}),
}


@pytest.mark.parametrize("name", sorted(REAL_CASES))
def test_diagnose_names_the_recorded_cause(name: str) -> None:
    cause, numbers = REAL_CASES[name]
    out = triage("diagnose", str(REAL / name), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["format"] == "serving_console" and data["findings"][0]["cause"] == cause
    evidence = {e["signal"]: e["value"] for e in data["findings"][0]["evidence"]}
    for signal, value in numbers.items():
        assert evidence[signal] == pytest.approx(value, rel=1e-3)


def test_offered_against_achieved_is_the_overload_evidence() -> None:
    out = triage("diagnose", str(REAL / "sglang_bench_serving_rate_330.txt"))
    assert "achieved_over_offered = 0.0361×" in out.stdout and "Throughput will not go up" in out.stdout


def test_every_console_sample_has_provenance() -> None:
    provenance = (REAL / "PROVENANCE.md").read_text()
    for path in REAL.glob("*.txt"):
        assert f"`{path.name}`" in provenance


def test_a_pasted_console_summary_on_standard_input() -> None:
    out = python_m_triage("diagnose", "-", stdin=(REAL / "sglang_bench_serving_rate_330.txt").read_text())
    assert out.returncode == 0 and "ttft.queueing" in out.stdout


def test_a_block_after_megabytes_of_progress_output_is_found() -> None:
    """A terminal log is searched whole: the block may follow pages of progress bars."""
    progress = "".join(f"  {i}%|####      | {i}/1000 [00:01<00:09, 98.0it/s]\n" for i in range(40_000))
    assert len(progress) > 2 * 1024 * 1024
    bench = load(progress + (REAL / "vllm_bench_serve_rate_inf.txt").read_text())
    assert bench.format == "serving_console" and bench.runs[0].summary["req_per_s"] == 32.42


def test_a_per_request_table_is_probed_for_a_block_only_near_its_head() -> None:
    """A file that starts with a table's column names is a table: a million rows are not scanned for a console
    block (that scan cost more than reading them); past the probed head, block lines are just malformed rows."""
    from triage.sources.files import detect

    rows = "ttft_s,e2e_s,output_tokens\n" + "0.1,1,10\n" * (detect.TABLE_PROBE_BYTES // 9 + 10)
    block = (REAL / "vllm_bench_serve_rate_inf.txt").read_text()
    assert detect.sniff(rows.encode(), "t.csv").fmt == "generic_csv"
    assert detect.sniff((rows + block).encode(), "t.csv").fmt == "generic_csv"
    assert detect.sniff((rows[:2000] + block).encode(), "t.csv").fmt == "serving_console"  # in the head: found
