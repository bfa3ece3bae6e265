"""Files the real load-test tools wrote against the OpenAI simulator (tests/fixtures/real, captured by
bench/capture_real.py, never re-run here): every one is detected, parsed and diagnosed; our per-request
statistics agree with the tool's own summary; no share or fraction leaves [0, 1]. That each is diagnosed to
its scenario's cause is tests/test_real_diagnosis.py."""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from triage.cli import main
from triage.run import Benchmark
from triage.sources.files import load_benchmark

REAL = Path(__file__).resolve().parent / "fixtures" / "real"
FILES = sorted(p for p in REAL.glob("*/*/*") if p.is_file() and p.name != "PROVENANCE.md")
FOLDERS = sorted(p for p in REAL.glob("*/*") if p.is_dir())
IDS = [str(p.relative_to(REAL)) for p in FILES]

# file name → the format it must be detected as
FORMATS = {
    "benchmarks.json": "guidellm_json", "benchmarks.csv": "guidellm_csv",
    "profile_export_aiperf.csv": "aiperf_csv", "profile_export_aiperf.json": "aiperf_json",
    "profile_export.jsonl": "aiperf_jsonl",
    "vllm_bench.json": "vllm_bench",
    "profile_export.json": "genai_perf_raw", "profile_export_genai_perf.json": "genai_perf_json",
    "profile_export_genai_perf.csv": "genai_perf_csv",
}
# Signals that are a share or a fraction of a whole (tree/signals.yaml): never outside [0, 1].
FRACTIONS = {"queue_share_of_ttft", "prefill_share_of_ttft", "error_rate", "slo_attainment", "weights_share",
             "kv_usage_max", "kv_usage_mean", "batch_fill", "prefix_hit_rate", "spec_acceptance", "dram_active"}


def expected_format(path: Path) -> str | None:
    if path.name in FORMATS:
        return FORMATS[path.name]
    if path.parent.parent.name == "inference-perf":
        return "inference_perf_requests" if "per_request" in path.name else "inference_perf_summary"
    return None


@cache
def parsed(path: Path) -> Benchmark:
    return load_benchmark(path.read_bytes(), path.name)


def diagnose_json(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    capsys.readouterr()
    code = main(["diagnose", str(path), "--json", *extra])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_fixtures_cover_four_tools_in_three_scenarios_with_provenance():
    tools: dict[str, set[str]] = {}
    for folder in FOLDERS:
        tools.setdefault(folder.parent.name, set()).add(folder.name)
        prov = (folder / "PROVENANCE.md").read_text(encoding="utf-8")
        for words in ("Exact command", "Date (UTC)", "Scenario:", "unmodified"):
            assert words in prov, f"{folder}: PROVENANCE.md lacks {words!r}"
    assert len([t for t, scen in tools.items() if len(scen) >= 3]) >= 4, tools


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_real_file_detected_parsed_and_diagnosed(path: Path, capsys: pytest.CaptureFixture[str]):
    bench = parsed(path)
    want = expected_format(path)
    if want is not None:
        assert bench.format == want
    assert bench.runs and all(run.has_requests or run.summary for run in bench.runs)
    out = diagnose_json(path, capsys)
    assert out["format"] == bench.format
    for name, sig in out["signals"].items():
        value = sig.get("value") if isinstance(sig, dict) else sig
        if name in FRACTIONS and isinstance(value, (int, float)) and math.isfinite(value):
            assert 0.0 <= value <= 1.0, f"{name} = {value} leaves [0, 1]"


def _mean(run, col: str) -> float:
    df = run.requests
    x = df[col].to_numpy(dtype=float)
    ok = df["ok"].to_numpy(dtype=bool) if "ok" in df else np.ones(len(x), dtype=bool)
    x = x[ok & np.isfinite(x)]
    return float(x.mean())


def _tool_means(folder: Path) -> dict[str, float]:
    """The tool's own means (seconds) for TTFT, E2E and its TPOT-equivalent, from its summary file."""
    tool = folder.parent.name
    if tool == "guidellm":
        doc = json.loads((folder / "benchmarks.json").read_text())
        m = doc["benchmarks"][0]["metrics"]
        return {"ttft_s": m["time_to_first_token_ms"]["successful"]["mean"] / 1e3,
                "e2e_s": m["request_latency"]["successful"]["mean"],
                "tpot_s": m["inter_token_latency_ms"]["successful"]["mean"] / 1e3}
    if tool == "aiperf":
        doc = json.loads((folder / "profile_export_aiperf.json").read_text())
        return {"ttft_s": doc["time_to_first_token"]["avg"] / 1e3, "e2e_s": doc["request_latency"]["avg"] / 1e3,
                "tpot_s": doc["inter_token_latency"]["avg"] / 1e3}
    if tool == "vllm":
        doc = json.loads((folder / "vllm_bench.json").read_text())
        return {"ttft_s": doc["mean_ttft_ms"] / 1e3, "e2e_s": doc["mean_e2el_ms"] / 1e3,
                "tpot_s": doc["mean_tpot_ms"] / 1e3}
    if tool == "inference-perf":  # seconds already
        lat = json.loads((folder / "summary_lifecycle_metrics.json").read_text())["successes"]["latency"]
        return {"ttft_s": lat["time_to_first_token"]["mean"], "e2e_s": lat["request_latency"]["mean"],
                "tpot_s": lat["time_per_output_token"]["mean"]}
    if tool == "genai-perf":
        doc = json.loads(next(folder.glob("*genai_perf.json")).read_text())
        return {"ttft_s": doc["time_to_first_token"]["avg"] / 1e3, "e2e_s": doc["request_latency"]["avg"] / 1e3,
                "tpot_s": doc["inter_token_latency"]["avg"] / 1e3}
    return {}


PER_REQUEST = {"guidellm": "benchmarks.json", "aiperf": "profile_export.jsonl", "vllm": "vllm_bench.json",
               "inference-perf": "per_request_lifecycle_metrics.json", "genai-perf": "profile_export.json"}


@pytest.mark.parametrize("folder", [f for f in FOLDERS if f.parent.name in PER_REQUEST],
                         ids=lambda f: f"{f.parent.name}/{f.name}")
def test_per_request_means_match_the_tools_summary(folder: Path):
    """TTFT, E2E and TPOT means from the per-request rows within 1 % of what the tool itself reports."""
    run = parsed(folder / PER_REQUEST[folder.parent.name]).runs[0]
    assert run.has_requests
    for col, theirs in _tool_means(folder).items():
        ours = _mean(run, col)
        assert ours == pytest.approx(theirs, rel=0.01), f"{col}: ours {ours:.6g}, tool's {theirs:.6g}"

