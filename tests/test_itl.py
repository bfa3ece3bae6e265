"""ITL on the Benchmark summary is the pooled inter-token latency (every gap of every successful request in one
pool) the tools themselves print, checked on every real fixture against the tool's own summary fields; files
without per-token times say ITL is not measurable instead of showing TPOT under ITL's name."""

from __future__ import annotations

import csv
import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from triage.report.run_summary import LatencyRow, run_summary
from triage.run import Benchmark
from triage.sources.files import load_benchmark
from triage.sources.files.common import ragged_gaps

REAL = Path(__file__).resolve().parent / "fixtures" / "real"
SCENARIOS = sorted(p.name for p in (REAL / "vllm").iterdir() if p.is_dir())
# Each tool pools with np.percentile's default linear method over float64 (vLLM benchmarks/serve.py
# calculate_metrics; AIPerf MetricArray.to_result; inference-perf reportgen summarize), as our pool does: the
# only differences are the units the files round-trip through (AIPerf's per-record ms vs its ns statistics).
REL = 1e-9


@cache
def parsed(path: Path) -> Benchmark:
    return load_benchmark(path.read_bytes(), path.name)


def itl_row(path: Path) -> LatencyRow:
    return next(r for r in run_summary(parsed(path).runs[0]).latencies if r.metric == "itl")


def row_ms(row: LatencyRow) -> dict[str, float | None]:
    return {"mean": row.mean_ms, "p50": row.median_ms, "p90": row.p90_ms, "p99": row.p99_ms}


def vllm_own(folder: Path) -> dict[str, float]:
    doc = json.loads((folder / "vllm_bench.json").read_text())
    return {"mean": doc["mean_itl_ms"], "p50": doc["median_itl_ms"], "p99": doc["p99_itl_ms"]}


def aiperf_own(folder: Path) -> dict[str, float]:
    icl = json.loads((folder / "profile_export_aiperf.json").read_text())["inter_chunk_latency"]
    assert icl["unit"] == "ms"
    return {"mean": icl["avg"], "p50": icl["p50"], "p90": icl["p90"], "p99": icl["p99"]}


def aiperf_csv_own(folder: Path) -> dict[str, float]:
    """The CSV prints two decimals (f"{v:,.2f}")."""
    rows = list(csv.reader((folder / "profile_export_aiperf.csv").read_text().splitlines()))
    header = rows[0]
    row = next(r for r in rows if r and r[0] == "Inter Chunk Latency (ms)")
    columns = (("mean", "avg"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99"))
    return {k: float(row[header.index(c)]) for k, c in columns}


def inference_perf_own(folder: Path, name: str = "summary_lifecycle_metrics.json") -> dict[str, float]:
    itl = json.loads((folder / name).read_text())["successes"]["latency"]["inter_token_latency"]
    return {"mean": itl["mean"] * 1e3, "p50": itl["median"] * 1e3, "p90": itl["p90"] * 1e3, "p99": itl["p99"] * 1e3}


# (tool folder, file the Benchmark page reads, the tool's own pooled ITL statistics in ms, relative tolerance)
CASES = [
    ("vllm", "vllm_bench.json", vllm_own, REL),
    ("aiperf", "profile_export.jsonl", aiperf_own, 1e-6),
    ("aiperf", "profile_export_aiperf.json", aiperf_own, REL),
    ("aiperf", "profile_export_aiperf.csv", aiperf_csv_own, REL),
    ("inference-perf", "per_request_lifecycle_metrics.json", inference_perf_own, REL),
    ("inference-perf", "summary_lifecycle_metrics.json", inference_perf_own, REL),
    ("inference-perf", "stage_0_lifecycle_metrics.json",
     lambda f: inference_perf_own(f, "stage_0_lifecycle_metrics.json"), REL),
]


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize(("tool", "name", "own", "rel"), CASES, ids=[f"{c[0]}/{c[1]}" for c in CASES])
def test_itl_row_is_the_tools_own_pooled_itl(tool, name, own, rel, scenario):
    folder = REAL / tool / scenario
    row = itl_row(folder / name)
    assert row.measurable
    ours, theirs = row_ms(row), own(folder)
    for stat, value in theirs.items():
        assert ours[stat] == pytest.approx(value, rel=rel), f"{stat}: ours {ours[stat]}, the tool's {value}"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_vllm_itl_is_every_gap_pooled_not_tpot(scenario):
    """The p90 vLLM did not print (default --metric-percentiles 99) is the pool's too; the row is not TPOT's."""
    folder = REAL / "vllm" / scenario
    doc = json.loads((folder / "vllm_bench.json").read_text())
    ok = [e == "" for e in doc["errors"]]
    gaps = np.array([g for good, itls in zip(ok, doc["itls"], strict=True) if good for g in itls]) * 1e3
    row = itl_row(folder / "vllm_bench.json")
    assert row.p90_ms == pytest.approx(float(np.percentile(gaps, 90)), rel=REL)
    tpot = next(r for r in run_summary(parsed(folder / "vllm_bench.json").runs[0]).latencies if r.metric == "tpot")
    assert (row.median_ms, row.p90_ms, row.p99_ms) != pytest.approx((tpot.median_ms, tpot.p90_ms, tpot.p99_ms))


def test_the_issue_numbers_for_the_queueing_file():
    row = itl_row(REAL / "vllm" / "queueing" / "vllm_bench.json")
    assert [round(v, 1) for v in (row.median_ms, row.p90_ms, row.p99_ms)] == [20.1, 48.0, 101.2]


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("name", ["benchmarks.json", "benchmarks.csv"])
def test_guidellm_itl_is_not_measurable(name, scenario):
    """GuideLLM keeps first and last token times only; its inter_token_latency_ms is TPOT, shown as TPOT."""
    path = REAL / "guidellm" / scenario / name
    row = itl_row(path)
    assert not row.measurable and row_ms(row) == {"mean": None, "p50": None, "p90": None, "p99": None}
    assert "not measurable" in parsed(path).runs[0].definitions["itl"]


def test_ragged_gaps_stay_inside_each_request():
    times = np.array([0.0, 1.0, 3.0, 10.0, 20.0, 5.0, 7.0, 8.0, 9.0])
    gaps, per_request = ragged_gaps(times, np.array([3, 0, 2, 1, 3]))
    assert gaps.tolist() == [1.0, 2.0, 10.0, 1.0, 1.0] and per_request.tolist() == [2, 0, 1, 0, 2]
