"""The command line as a user runs it: exit codes, one-line errors, JSON shape, the Markdown report."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.cli_tools import python_m_triage, run_triage
from tests.conftest import edit_yaml

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tree" / "sample" / "benchmark.csv"


def triage(*args: str) -> subprocess.CompletedProcess:
    """The CLI in this process (tests/cli_tools.py); the JSON contract and the unreadable file launch the real
    `python -m triage`, for the interpreter's exit codes 0 and 2."""
    return run_triage(*args)


def test_tree_json_dumps_the_knowledge_base():
    out = triage("tree", "--json")
    assert out.returncode == 0
    data = json.loads(out.stdout)
    assert [s["id"] for s in data["symptoms"]][0] == "ttft" and "chunked_prefill" in data["techniques"]


def test_tree_text_in_chinese():
    out = triage("tree", "--lang", "zh")
    assert out.returncode == 0 and "TTFT 过高" in out.stdout


def test_broken_tree_fails_with_one_line(tiny_tree):
    edit_yaml(tiny_tree / "tree.yaml", lambda d: d["symptoms"][0]["causes"][0]["techniques"][0].update(id="nope"))
    out = triage("tree", "--tree-dir", str(tiny_tree))
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1
    assert "tree.yaml" in out.stderr and "unknown technique id 'nope'" in out.stderr


def test_diagnose_json_contract():
    out = python_m_triage("diagnose", str(SAMPLE), "--json")
    assert out.returncode == 0
    data = json.loads(out.stdout)
    assert {"source", "format", "runs", "signals", "findings"} <= set(data)
    assert data["signals"]["ttft_p99_s"]["unit"] == "s"
    first = data["findings"][0]
    assert first["cause"] == "ttft.queueing" and first["symptom"] == "ttft" and first["confidence"] == "high"
    assert {"signal", "value", "threshold", "meaning"} <= set(first["evidence"][0])
    assert first["techniques"][0] == "continuous_batching"


def test_diagnose_unreadable_file_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "empty.json"
    bad.write_bytes(b"")
    out = python_m_triage("diagnose", str(bad))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "empty.json" in out.stderr
    missing = triage("diagnose", str(tmp_path / "nope.csv"))
    assert missing.returncode == 2 and "nope.csv" in missing.stderr


def test_diagnose_custom_slo_and_bad_preset():
    relaxed = json.loads(triage("diagnose", str(SAMPLE), "--ttft-slo", "60", "--json").stdout)
    assert relaxed["slo"]["ttft_p99_s"] == 60 and "ttft.queueing" not in [f["cause"] for f in relaxed["findings"]]
    bad = triage("diagnose", str(SAMPLE), "--slo", "realtime")
    assert bad.returncode == 2 and "realtime" in bad.stderr


def test_report_on_a_benchmark_file_is_markdown_with_task_lists():
    out = triage("report", str(SAMPLE))
    assert out.returncode == 0
    assert out.stdout.startswith("# ") and "## Findings" in out.stdout
    assert "| `ttft_load_corr` |" in out.stdout and "  - [ ] [config]" in out.stdout


def test_memory_json_keys():
    out = triage("memory", "--model", "llama-3.1-8b", "--gpu", "h100", "--json")
    data = json.loads(out.stdout)
    assert {"weights_gib", "kv_cache_gib", "activation_gib", "overhead_gib", "kv_bytes_per_token",
            "kv_capacity_tokens", "max_concurrency", "fits", "branch", "techniques"} <= set(data)
    assert data["kv_bytes_per_token"] == 131072


def test_empty_run_is_not_healthy_exit_2(tmp_path):
    doc = json.loads((ROOT / "tests" / "fixtures" / "bench" / "guidellm_v05.json").read_text())
    for bench in doc["benchmarks"]:
        bench["requests"] = {k: [] for k in bench["requests"]}
        bench["metrics"]["request_totals"] = {"successful": 0, "errored": 0, "incomplete": 0, "total": 0}
    empty = tmp_path / "guidellm_empty.json"
    empty.write_text(json.dumps(doc))
    for args in ((str(empty),), (str(empty), "--json"), (str(empty), "--run", "1")):
        out = triage("diagnose", *args)
        assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1, args
        assert "nothing to diagnose: no completed request" in out.stderr and "guidellm_empty.json" in out.stderr
    report = triage("report", str(empty))
    assert report.returncode == 2 and "nothing to diagnose" in report.stderr
    aiperf = triage("diagnose", str(ROOT / "tests/fixtures/bench/aiperf013-empty_profile_export_aiperf.csv"))
    assert aiperf.returncode == 2 and "12 failed" in aiperf.stderr


def test_idle_snapshot_window_is_not_healthy_exit_2(tmp_path):
    text = (ROOT / "tests" / "fixtures" / "metrics" / "vllm.txt").read_text()
    idle = "\n".join(line.replace("} 12.0", "} 0.0").replace("} 9.0", "} 0.0").replace("} 3.0", "} 0.0")
                     if line.startswith(("vllm:num_requests_running", "vllm:num_requests_waiting")) else line
                     for line in text.splitlines()) + "\n"
    before, after = tmp_path / "a.txt", tmp_path / "b.txt"
    before.write_text(idle)
    after.write_text(idle)
    out = triage("diagnose", "--scrape", str(before), str(after), "--interval", "60")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "no request finished in the window and none was running or waiting" in out.stderr


def test_interactive_preset_is_stricter_than_chat(tmp_path):
    src = (ROOT / "tests/fixtures/bench/aiperf013-concurrency8_profile_export_aiperf.csv").read_text()
    rows = [r if not r.startswith("Inter Token Latency") else
            "Inter Token Latency (ms),80.00,75.00,90.00,8000.00,75.00,76.00,77.00,78.00,80.00,82.00,85.00,87.00,89.00,2"
            for r in src.splitlines()]
    slow = tmp_path / "aiperf-concurrency8_profile_export_aiperf.csv"
    slow.write_text("\n".join(rows) + "\n")

    def tpot_present(preset: str) -> bool:
        data = json.loads(triage("diagnose", str(slow), "--slo", preset, "--json").stdout)
        assert data["slo"]["name"] == preset
        return next(s["present"] for s in data["symptoms"] if s["symptom"] == "tpot")

    assert tpot_present("interactive") and not tpot_present("chat")
    assert "interactive" in triage("diagnose", "--help").stdout
