"""`gate` and `log` on the command line: exit codes, overrides, the JSON contract, saving to the log."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_tools import run_triage
from tests.synthetic import requests
from triage.cli import main

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = ["start_s", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s", "ok"]


def write_csv(path: Path, seed: int, ttft_factor: float = 1.0, n: int = 2000) -> Path:
    df = requests(n, seed)
    df["e2e_s"] = df["e2e_s"] + df["ttft_s"] * (ttft_factor - 1)
    df["ttft_s"] = df["ttft_s"] * ttft_factor
    df[COLUMNS].to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("gate")
    garbage = d / "garbage.json"
    garbage.write_bytes(b"\x00\x01 not a benchmark")
    return {"base": write_csv(d / "base.csv", 1), "good": write_csv(d / "good.csv", 2, 0.7),
            "same": write_csv(d / "same.csv", 2), "bad": write_csv(d / "bad.csv", 3, 1.2),
            "tiny": write_csv(d / "tiny.csv", 4, n=50), "garbage": garbage, "missing": d / "missing.csv"}


def gate(files, a: str, b: str, *extra: str) -> int:
    return main(["gate", str(files[a]), str(files[b]), *extra])


def gate_json(files, capsys, a: str, b: str, *extra: str) -> tuple[int, dict]:
    code = gate(files, a, b, "--json", *extra)
    return code, json.loads(capsys.readouterr().out)


def test_pass_exits_0_with_a_readable_table(files, capsys):
    assert gate(files, "base", "good", "--technique", "chunked_prefill") == 0
    out = capsys.readouterr().out
    assert "metric" in out and "95% interval" in out and "tolerance" in out
    assert "overall: gain confirmed" in out and "gate: PASS" in out and "expected: " in out


def test_no_change_passes(files):
    assert gate(files, "base", "same") == 0


def test_regression_exits_1(files, capsys):
    assert gate(files, "base", "bad") == 1
    assert "gate: FAIL: ttft_p99 +" in capsys.readouterr().out


@pytest.mark.parametrize("which", ["missing", "garbage"])
def test_unreadable_file_exits_2_with_one_line(files, capsys, which):
    assert gate(files, "base", which) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and str(files[which].name) in err and "\n" not in err


@pytest.mark.parametrize("extra", [
    ["--metric", "ttft_p99", "--max-regression", "five"],
    ["--metric", "ttft_p99", "--max-regression=-5%"],
    ["--max-regression", "5%"],
    ["--metric", "ttft_p99"],
    ["--metric", "ttft_p42", "--max-regression", "5%"],
    ["--metric", "ttft_p99", "--max-regression", "5pp"],
    ["--no-defaults"],
    ["--slo", "nope"],
    ["--technique", "no_such_technique"],
    ["--run-baseline", "3"],
])
def test_bad_arguments_exit_2(files, capsys, extra):
    assert gate(files, "base", "good", *extra) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_overrides_replace_a_default_tolerance(files):
    assert gate(files, "base", "bad", "--metric", "ttft_p99", "--max-regression", "50%") == 0
    assert gate(files, "base", "same", "--metric", "ttft_p50", "--max-regression", "0%") == 0  # within noise
    assert gate(files, "base", "bad", "--no-defaults", "--metric", "tpot_p99", "--max-regression", "5%") == 0
    assert gate(files, "base", "bad", "--no-defaults", "--metric", "ttft_p50", "--max-regression", "25%",
                "--metric", "ttft_p90", "--max-regression", "10%") == 1


def test_json_contract(files, capsys):
    code, out = gate_json(files, capsys, "base", "bad")
    assert code == 1 and out["gate"] == {"passed": False, "failed": ["ttft_p99"], "exit_code": 1}
    assert out["overall"] == "regression" and isinstance(out["warnings"], list) and out["refused"] == []
    for m in out["metrics"]:
        assert set(m) >= {"metric", "direction", "baseline", "candidate", "change_pct", "delta", "scale",
                          "interval", "tolerance", "verdict", "gate"}
    by_id = {m["metric"]: m for m in out["metrics"]}
    assert by_id["ttft_p99"]["tolerance"] == 5.0 and by_id["ttft_p99"]["gate"] == "fail"
    assert by_id["ttft_p50"]["gate"] == "not gated" and by_id["ttft_p50"]["tolerance"] is None
    assert by_id["error_rate"]["scale"] == "pp" and by_id["error_rate"]["tolerance"] == 0.5
    assert len(by_id["ttft_p99"]["interval"]) == 2
    assert out["baseline"]["requests"] == 2000 and len(out["baseline"]["sha256"]) == 64
    assert out["slo"]["name"] == "chat"


def test_unsound_comparison_exits_2_but_reports(files, capsys):
    code, out = gate_json(files, capsys, "base", "tiny")
    assert code == 2 and out["overall"] == "unsound" and out["gate"]["exit_code"] == 2
    assert any("too few requests" in r and "50" in r for r in out["refused"])
    code, out = gate_json(files, capsys, "base", "good", "--technique", "chunked_prefill",
                          "--technique", "prefix_caching")
    assert code == 2 and any("one change at a time" in r for r in out["refused"])


def test_save_and_log_commands(files, capsys, tmp_path):
    db = str(tmp_path / "log.sqlite3")
    assert gate(files, "base", "good", "--technique", "chunked_prefill", "--save", "--db", db,
                "--who", "ana", "--note", "=chunk 2048") == 0
    assert "saved as experiment 1" in capsys.readouterr().out
    code, out = gate_json(files, capsys, "base", "bad", "--save", "--db", f"sqlite:///{db}")
    assert code == 1 and out["saved_id"] == 2
    assert main(["log", "--db", db, "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 2 and "chunked_prefill" in listed[0] and "regression" in listed[1]
    assert main(["log", "list", "--db", db, "--verdict", "regression", "--json"]) == 0
    assert [e["id"] for e in json.loads(capsys.readouterr().out)] == [2]
    assert main(["log", "show", "1", "--db", db]) == 0
    assert "ttft_p50" in capsys.readouterr().out
    assert main(["log", "show", "9", "--db", db]) == 2
    out_file = tmp_path / "log.csv"
    assert main(["log", "export", "--db", db, "--out", str(out_file)]) == 0
    rows = list(csv.DictReader(io.StringIO(out_file.read_text(encoding="utf-8"), newline="")))
    assert rows[0]["note"] == "'=chunk 2048" and rows[0]["who"] == "ana" and rows[1]["overall"] == "regression"


# ---------------------------------------------------------------- the command line as CI runs it: argv in, exit code
# and one-line stderr out (in this process, tests/cli_tools.py); the JSON-and-log test launches the real
# `python -m triage`, so the interpreter's exit code is checked too


@pytest.mark.parametrize("a,b,extra,code", [
    ("base", "good", [], 0),
    ("base", "bad", [], 1),
    ("base", "missing", [], 2),
    ("base", "garbage", [], 2),
    ("base", "good", ["--metric", "ttft_p99", "--max-regression", "lots"], 2),
    ("base", "good", ["--max-regression", "5%"], 2),
])
def test_python_m_triage_gate_exit_codes(files, a, b, extra, code):
    done = run_triage("gate", str(files[a]), str(files[b]), *extra)
    assert done.returncode == code, done.stderr
    if code == 2:
        assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1


def test_python_m_triage_gate_json_and_log(files, tmp_path):
    db = str(tmp_path / "log.sqlite3")
    done = subprocess.run([sys.executable, "-m", "triage", "gate", str(files["base"]), str(files["bad"]), "--json",
                           "--save", "--db", db], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and json.loads(done.stdout)["gate"]["failed"] == ["ttft_p99"]
    listed = run_triage("log", "--db", db, "list")
    assert listed.returncode == 0 and "regression" in listed.stdout
