"""Verify with two server logs or two console summaries: `gate` on real samples, what a log cannot conclude,
and the refusal of a log set against a benchmark file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli_tools import run_triage
from triage.service.verify_sides import compare_log_sides, open_side
from triage.verify.logs import LOG_SPECS, compare_logs

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "fixtures" / "real" / "logs"
CONSOLE = ROOT / "tests" / "fixtures" / "real" / "console"
V1 = ("INFO 09-07 06:{m:02d}:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: {p} tokens/s, Avg generation "
      "throughput: {g} tokens/s, Running: {r} reqs, Waiting: {w} reqs, GPU KV cache usage: {kv}%, Prefix cache hit "
      "rate: 0.0%")


def constructed_log(lines: int, running: int, waiting: int, gen: float, kv: float, prompt: float = 2000.0) -> str:
    """A vLLM V1 log of ``lines`` stats lines ten seconds apart (constructed: no real excerpt is this long)."""
    return "\n".join(V1.format(m=i * 10 // 60, s=i * 10 % 60, p=prompt, g=gen, r=running, w=waiting, kv=kv)
                     for i in range(lines)) + "\n"


def gate(*args: str | Path) -> subprocess.CompletedProcess:
    return run_triage("gate", *map(str, args))  # in this process (tests/cli_tools.py)


def test_two_real_logs_are_compared_and_refused_as_too_short_with_what_a_log_cannot_say() -> None:
    out = gate(LOGS / "vllm_v1_apiserver_kv_full.txt", LOGS / "vllm_v1_k8s_wrapped_kv_full.txt", "--json")
    assert out.returncode == 2, out.stderr
    report = json.loads(out.stdout)
    assert report["kind"] == "server logs" and report["overall"] == "unsound"
    assert report["baseline"]["read_as"].startswith("vLLM V1 server log, 5 stats lines")
    rows = {m["metric"]: m for m in report["metrics"]}
    # the log's own numbers: Waiting 43, 42, … (median 33) against 18 → 40 → 47 (median 40)
    assert rows["log_waiting"]["baseline"] == 33 and rows["log_waiting"]["candidate"] == 40
    assert rows["log_kv"]["baseline"] == pytest.approx(0.959) and rows["log_kv"]["interval"] is None
    assert any("baseline log has 5 stats times" in r for r in report["refused"])
    assert any("candidate log has 3 stats times" in r for r in report["refused"])
    assert any("no TTFT, TPOT or E2E percentile" in w and "no bootstrap interval" in w for w in report["warnings"])
    assert not any(m["metric"].startswith(("ttft", "tpot", "e2e")) for m in report["metrics"])


def test_two_real_vllm_v0_logs_text_names_the_preemptions() -> None:
    out = gate(LOGS / "vllm_v0_swap_preemption.txt", LOGS / "vllm_v0_pending_swap_preemption.txt")
    assert out.returncode == 2, out.stderr
    assert "Preemptions per second" in out.stdout and "gate: UNSOUND" in out.stdout
    assert "prompt throughput differs: median 2,706 vs 0 tok/s" in out.stdout


def test_two_constructed_logs_of_sound_length_gain_and_regress(tmp_path: Path) -> None:
    before = tmp_path / "before.log"
    after = tmp_path / "after.log"
    worse = tmp_path / "worse.log"
    before.write_text(constructed_log(12, 32, 20, 1600.0, 97.0))
    after.write_text(constructed_log(12, 48, 2, 3000.0, 80.0))
    worse.write_text(constructed_log(12, 32, 40, 1200.0, 99.0))
    good = gate(before, after, "--json")
    assert good.returncode == 0, good.stdout + good.stderr
    report = json.loads(good.stdout)
    assert report["overall"] == "gain confirmed" and not report["refused"]
    rows = {m["metric"]: m for m in report["metrics"]}
    assert rows["log_gen_tps"]["delta"] == pytest.approx(87.5) and rows["log_gen_tps"]["verdict"] == "gain"
    assert rows["log_waiting"]["verdict"] == "gain"
    assert rows["log_decode_speed"]["baseline"] == pytest.approx(50.0)
    bad = gate(before, worse)
    assert bad.returncode == 1 and "FAIL: a counted median regressed" in bad.stdout
    assert "Waiting requests (median)" in bad.stdout


def test_a_log_against_a_benchmark_file_is_refused_with_one_line() -> None:
    for pair in ((LOGS / "vllm_v1_apiserver_kv_full.txt", CONSOLE / "vllm_bench_serve_rate_inf.txt"),
                 (CONSOLE / "vllm_bench_serve_rate_inf.txt", LOGS / "sglang_decode_kv_full.txt")):
        out = gate(*pair)
        assert out.returncode == 2 and out.stdout == ""
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "cannot compare a" in lines[0]
        assert "give two server logs or two benchmark" in lines[0]
        assert "Traceback" not in out.stderr


def test_metric_tolerances_are_refused_for_logs(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text(constructed_log(8, 10, 0, 500.0, 50.0))
    out = gate(log, log, "--metric", "ttft_p99", "--max-regression", "5%")
    assert out.returncode == 2 and "server log holds none of them" in out.stderr


def test_two_real_vllm_console_summaries_go_through_the_soundness_checks() -> None:
    out = gate(CONSOLE / "vllm_bench_serve_rate_inf.txt", CONSOLE / "vllm_benchmark_serving_rate_15.txt", "--json")
    assert out.returncode == 2
    report = json.loads(out.stdout)
    assert report["overall"] == "unsound" and report["baseline"]["format"] == "serving_console"
    assert any("prompt lengths differ" in r for r in report["refused"])
    assert report["basis"].startswith("summary statistics only")
    assert all(m["interval"] is None for m in report["metrics"])


def test_two_real_sglang_console_summaries_refuse_the_different_workload() -> None:
    out = gate(CONSOLE / "sglang_bench_serving_rate_330.txt", CONSOLE / "sglang_bench_serving_vision_inf.txt")
    assert out.returncode == 2
    assert "refused: output lengths differ: median 1,024 vs 1 tokens" in out.stdout


def test_the_same_console_summary_twice_is_no_effect_without_an_interval() -> None:
    same = CONSOLE / "sglang_bench_serving_rate_330.txt"
    out = gate(same, same, "--json")
    report = json.loads(out.stdout)
    assert out.returncode == 0 and report["overall"] == "no effect"
    assert {m["verdict"] for m in report["metrics"]} == {"no effect"}


def test_service_side_reads_a_log_and_a_console_summary() -> None:
    log = open_side((LOGS / "sglang_prefill_burst.txt").read_bytes(), "b.txt")
    bench = open_side((CONSOLE / "vllm_bench_serve_rate_inf.txt").read_bytes(), "c.txt")
    assert compare_log_sides(bench, bench) is None
    with pytest.raises(Exception, match="cannot compare a benchmark file"):
        compare_log_sides(bench, log)
    c = compare_logs(log, log)  # type: ignore[arg-type]
    assert {m.metric for m in c.metrics} <= set(LOG_SPECS)


# ---------------------------------------------------------------- the Verify page (AppTest)


def verify_page(base: tuple[str, bytes], cand: tuple[str, bytes], lang: str | None = None):
    from tests.apptest_tools import open_page

    at = open_page("pages/verify.py", **({"lang": lang} if lang else {}))
    at.file_uploader(key="verify_base").upload(base[0], base[1], "text/plain")
    at.file_uploader(key="verify_cand").upload(cand[0], cand[1], "text/plain").run()
    assert not at.exception, at.exception
    return at


@pytest.fixture
def _log_db(monkeypatch, tmp_path):
    import streamlit as st

    st.cache_data.clear()
    monkeypatch.setenv("TRIAGE_LOG_DB", str(tmp_path / "log.sqlite3"))


@pytest.mark.usefixtures("_log_db")
def test_verify_page_compares_two_logs_and_says_what_a_log_cannot_conclude() -> None:
    from tests.apptest_tools import static_tables, texts

    before = constructed_log(12, 32, 20, 1600.0, 97.0).encode()
    after = constructed_log(12, 48, 2, 3000.0, 80.0).encode()
    at = verify_page(("before.log", before), ("after.log", after))
    assert at.session_state["verify_result"] == "gain confirmed"
    shown = texts(at)
    assert "Read as vLLM V1 server log, 12 stats lines over 110 s" in shown
    assert "no latency percentile (TTFT, TPOT, E2E)" in shown
    assert any("no TTFT, TPOT or E2E percentile" in w.value for w in at.warning)
    table = static_tables(at)[0].to_csv()
    assert "Generation tokens/s (median)" in table and "Waiting requests (median)" in table
    assert "TTFT" not in table


@pytest.mark.usefixtures("_log_db")
def test_verify_page_refuses_two_short_real_logs_in_chinese() -> None:
    at = verify_page(("a.txt", (LOGS / "vllm_v1_apiserver_kv_full.txt").read_bytes()),
                     ("b.txt", (LOGS / "vllm_v1_k8s_wrapped_kv_full.txt").read_bytes()), lang="zh")
    assert at.session_state["verify_result"] == "unsound"
    errors = " ".join(e.value for e in at.error)
    assert "统计行太少：基线日志只有 5 个统计时刻" in errors and "候选日志只有 3 个" in errors


@pytest.mark.usefixtures("_log_db")
def test_verify_page_refuses_a_log_against_a_console_summary() -> None:
    at = verify_page(("bench.txt", (CONSOLE / "vllm_bench_serve_rate_inf.txt").read_bytes()),
                     ("server.log", (LOGS / "sglang_decode_kv_full.txt").read_bytes()))
    errors = " ".join(e.value for e in at.error)
    assert "Cannot compare a server log with a benchmark file (the candidate is the log)" in errors
    assert "verify_result" not in at.session_state or at.session_state["verify_result"] != "gain confirmed"
    assert not at.dataframe and not at.get("plotly_chart")


@pytest.mark.usefixtures("_log_db")
def test_verify_page_compares_two_console_summaries() -> None:
    same = (CONSOLE / "sglang_bench_serving_rate_330.txt").read_bytes()
    at = verify_page(("a.txt", same), ("b.txt", same))
    assert at.session_state["verify_result"] == "no effect"
    assert "Summary statistics only" in " ".join(c.value for c in at.caption)
