"""Benchmark-file input layer: detection, runs, labels and canonical values per format, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from triage.errors import TriageError
from triage.run import REQUEST_COLUMNS, SUMMARY_KEYS, Benchmark
from triage.sources.files import detect_format, formats, load_benchmark

FIXTURES = Path(__file__).parent / "fixtures" / "bench"
SAMPLE = Path(__file__).parent.parent / "tree" / "sample" / "benchmark.csv"

# fixture file → (format id, run labels)
EXPECTED: dict[str, tuple[str, list[str]]] = {
    "vllm_detailed.json": ("vllm_bench", ["rate 8 req/s"]),
    "vllm_append.json": ("vllm_bench", ["concurrency 1", "concurrency 16", "concurrency 64"]),
    "sglang_bench.jsonl": ("sglang_bench", ["concurrency 8", "rate 4 req/s"]),
    "guidellm_v03.json": ("guidellm_json", ["synchronous (concurrency 1)", "rate 2 req/s (constant)"]),
    "guidellm_v05.json": ("guidellm_json", ["concurrency 4", "concurrency 16"]),
    "guidellm_v05.yaml": ("guidellm_yaml", ["concurrency 4", "concurrency 16"]),
    "guidellm_v03.csv": ("guidellm_csv", ["synchronous (concurrency 1)", "rate 2 req/s (constant)"]),
    "guidellm_v05.csv": ("guidellm_csv", ["concurrency 4", "concurrency 16"]),
    "genai_perf-concurrency32_genai_perf.csv": ("genai_perf_csv", ["concurrency 32"]),
    "genai_perf_genai_perf.json": ("genai_perf_json", ["concurrency 32"]),
    "profile_export.json": ("genai_perf_raw", ["concurrency 2"]),
    "aiperf-concurrency16_profile_export_aiperf.csv": ("aiperf_csv", ["concurrency 16"]),
    "profile_export_aiperf.json": ("aiperf_json", ["concurrency 16"]),
    "profile_export.jsonl": ("aiperf_jsonl", ["profile_export (3 requests)"]),
    "llmperf_summary.json": ("llmperf_summary", ["concurrency 8"]),
    "llmperf_individual_responses.json": ("llmperf_requests", ["individual responses (4)"]),
    "aiperf013-concurrency8_profile_export_aiperf.csv": ("aiperf_csv", ["concurrency 8"]),
    "aiperf013-empty_profile_export_aiperf.csv": ("aiperf_csv", ["aiperf013-empty_profile_export_aiperf (summary)"]),
    "stage_0_lifecycle_metrics.json": ("inference_perf_summary", ["stage 0: rate 2 req/s"]),
    "per_request_lifecycle_metrics.json": ("inference_perf_requests", ["per-request lifecycle (6 requests)"]),
    "generic_requests.csv": ("generic_csv", ["generic_requests (5 requests)"]),
    "generic_requests.parquet": ("generic_parquet", ["generic_requests (4 requests)"]),
    "vllm_console.txt": ("serving_console", ["rate 15 req/s, concurrency 100"]),
}


def load(name: str) -> Benchmark:
    return load_benchmark((FIXTURES / name).read_bytes(), name)


def reject(data: bytes, name: str = "bad.csv") -> str:
    with pytest.raises(TriageError) as info:
        load_benchmark(data, name)
    msg = str(info.value)
    assert info.value.where == name and msg.startswith(name)
    return msg


# ---------------------------------------------------------------- every format


def test_every_format_has_a_fixture_and_a_parser():
    assert {fmt for fmt, _ in EXPECTED.values()} == {f.id for f in formats()}
    assert sorted(p.name for p in FIXTURES.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_detect_runs_labels(name):
    fmt, labels = EXPECTED[name]
    data = (FIXTURES / name).read_bytes()
    assert detect_format(data, name) == fmt
    bench = load_benchmark(data, name)
    assert bench.format == fmt and bench.source == name
    assert [r.label for r in bench.runs] == labels
    for run in bench.runs:
        assert set(run.summary) <= set(SUMMARY_KEYS), set(run.summary) - set(SUMMARY_KEYS)
        assert all(isinstance(v, float) and np.isfinite(v) for v in run.summary.values())
        assert all(isinstance(v, str) and len(v) <= 80 for v in run.meta.values())
        if run.requests is not None:
            assert list(run.requests.columns) == [c for c in REQUEST_COLUMNS if c in run.requests.columns]
            assert {"ttft_s", "e2e_s"} <= set(run.requests.columns) or "e2e_s" in run.requests.columns
            assert run.summary["completed"] == run.requests["ok"].sum() if "ok" in run.requests else True


# ---------------------------------------------------------------- vLLM


def test_vllm_detailed_per_request_canonical():
    run = load("vllm_detailed.json").runs[0]
    df = run.requests
    assert list(df["ok"]) == [True, False, True, True]
    assert df["start_s"].tolist() == pytest.approx([0.0, 0.1, 0.3, 0.5])  # perf_counter → relative
    # queue_times is the client's wait for a concurrency slot (vllm/benchmarks/serve.py), not engine queue time
    assert df["client_wait_s"].tolist() == pytest.approx([0.0, 0.0, 0.01, 0.02]) and "queue_s" not in df
    assert np.isnan(df["ttft_s"][1]) and np.isnan(df["output_tokens"][1])  # failed: 0.0 placeholders dropped
    assert df["tpot_s"][0] == pytest.approx((1.1 - 0.1) / 99)
    assert df["itl_s"][0] == pytest.approx(1 / 3)
    assert run.definitions["tpot"].startswith("recomputed per request")
    assert run.summary["ttft_p50_s"] == pytest.approx(0.15)
    assert run.summary["req_per_s"] == 1.2  # the tool's throughput wins
    assert run.summary["offered_rate"] == 8.0
    assert run.summary["itl_mean_s"] == pytest.approx(np.mean([0.3, 0.3, 0.4, 0.5, 0.5, 0.5, 0.2, 0.29]))  # pooled
    assert run.summary["completed"] == 3 and run.summary["failed"] == 1
    assert run.meta == {"model": "meta-llama/Llama-3.1-8B-Instruct", "backend": "vllm", "tool": "vllm bench serve",
                        "date": "2025-01-02 10:00"}


def test_vllm_append_result_legacy_keys():
    bench = load("vllm_append.json")
    first, second, third = bench.runs
    assert first.requests is None and first.summary["ttft_p99_s"] == pytest.approx(0.040)  # ms → s
    assert first.summary["max_concurrency"] == 1 and "offered_rate" not in first.summary  # request_rate "inf"
    assert second.meta["goodput"] == "7.5 req/s"  # legacy "request_goodput:" key
    assert second.summary["failed"] == 2  # num_prompts − completed
    assert second.summary["e2e_p90_s"] == pytest.approx(1.9)
    assert third.summary["e2e_p50_s"] == pytest.approx(3.3)  # from the `latencies` array kept in summary files


def test_vllm_duplicate_rates_get_dates():
    doc = json.loads((FIXTURES / "vllm_detailed.json").read_text())
    other = dict(doc, date="20250103-111500")
    data = (json.dumps(doc) + "\n" + json.dumps(other)).encode()
    labels = [r.label for r in load_benchmark(data, "two.json").runs]
    assert labels == ["run 1 (2025-01-02 10:00): rate 8 req/s", "run 2 (2025-01-03 11:15): rate 8 req/s"]


# ---------------------------------------------------------------- SGLang


def test_sglang_infinity_and_details():
    first, second = load("sglang_bench.jsonl").runs
    assert "offered_rate" not in first.summary and first.summary["max_concurrency"] == 8  # bare Infinity literal
    df = first.requests
    assert df["e2e_s"][0] == pytest.approx(0.15 + 1.2)  # ttft + Σ itls
    assert df["tpot_s"][0] == pytest.approx(1.2 / 127)
    assert first.summary["failed"] == 1
    assert second.requests is None and second.summary["offered_rate"] == 4.0
    assert second.summary["total_tok_per_s"] == pytest.approx(4096 + 512)
    assert second.summary["e2e_p99_s"] == pytest.approx(3.5)
    assert first.meta["model"] == "meta-llama/Llama-3.1-8B-Instruct"


# ---------------------------------------------------------------- GuideLLM


@pytest.mark.parametrize("name", ["guidellm_v05.json", "guidellm_v05.yaml"])
def test_guidellm_v05_tpot_recomputed_not_ttft_including(name):
    run = load(name).runs[0]
    df = run.requests
    assert df["tpot_s"][0] == pytest.approx((2.0 - 0.3) / 199)
    assert df["tpot_s"][0] != pytest.approx(2.0 / 200)  # time_per_output_token_ms (includes TTFT) is not used
    # request_start − targeted_start: the client's dispatch delay, outside TTFT; not engine queue time
    assert df["client_wait_s"].tolist() == pytest.approx([0.05, 0.05, 0.10, 0.10]) and "queue_s" not in df
    assert df["ok"].tolist() == [True, True, True, False]
    assert run.meta["tool"] == "guidellm 0.5.4" and run.meta["model"] == "Qwen/Qwen3-8B"
    assert run.summary["max_concurrency"] == 4


def test_guidellm_v03_json_requests():
    sync, const = load("guidellm_v03.json").runs
    assert sync.requests["ttft_s"].tolist()[:2] == pytest.approx([0.1, 0.12])
    assert sync.requests["tpot_s"][0] == pytest.approx(0.9 / 100)
    assert const.summary["offered_rate"] == 2.0 and sync.summary["max_concurrency"] == 1


def test_guidellm_v05_csv_three_header_rows():
    bench = load("guidellm_v05.csv")
    run = bench.runs[0]
    assert run.requests is None
    assert run.summary["tpot_p50_s"] == pytest.approx(0.009045, rel=1e-3)  # Inter Token Latency median
    assert run.summary["tpot_p50_s"] != pytest.approx(0.011, rel=1e-3)  # not Time per Output Token (incl. TTFT)
    assert "INCLUDES TTFT" in run.definitions["tpot"]
    assert run.summary["ttft_p90_s"] == pytest.approx(0.5) and run.summary["e2e_mean_s"] == pytest.approx(2.2333, 1e-3)
    assert run.summary["completed"] == 3 and run.summary["failed"] == 1 and run.summary["duration_s"] == 3.0
    assert any("row 3 has 85 cells" in n for n in bench.notes)  # the shifted v0.4–0.6 row is skipped, with a note


def test_guidellm_v03_csv():
    sync, const = load("guidellm_v03.csv").runs
    assert sync.summary["ttft_mean_s"] == pytest.approx(0.11)
    assert sync.summary["tpot_p50_s"] == pytest.approx(0.0095, rel=1e-3)
    assert const.summary["offered_rate"] == 2.0
    assert sync.meta["model"] == "meta-llama/Llama-3.1-8B-Instruct"


# ---------------------------------------------------------------- genai-perf / AIPerf


def test_genai_perf_csv_thousands_crlf_na():
    data = (FIXTURES / "genai_perf-concurrency32_genai_perf.csv").read_bytes()
    assert b"\r\n" in data and b'"4,613.39"' in data and b"N/A" in data
    run = load("genai_perf-concurrency32_genai_perf.csv").runs[0]
    assert run.summary["e2e_mean_s"] == pytest.approx(4.61339)
    assert run.summary["ttft_p99_s"] == pytest.approx(2.05)
    assert run.summary["tpot_p50_s"] == pytest.approx(0.0132)  # genai-perf ITL = vLLM TPOT
    assert run.summary["out_tok_per_s"] == pytest.approx(1740.12) and run.summary["completed"] == 416
    assert run.summary["prompt_tokens_mean"] == 1024 and run.summary["max_concurrency"] == 32


def test_genai_perf_json_and_raw():
    run = load("genai_perf_genai_perf.json").runs[0]
    assert run.summary["ttft_mean_s"] == pytest.approx(1.2345) and run.meta["model"].startswith("meta-llama")
    raw = load("profile_export.json").runs[0]
    df = raw.requests
    assert df["ttft_s"].tolist()[:2] == pytest.approx([0.2, 0.3])
    # as genai-perf does, the usage/[DONE] responses (no generated text) are not counted as tokens or as the end
    assert df["e2e_s"].tolist()[:2] == pytest.approx([0.5, 0.7])
    assert df["output_tokens"].tolist()[:2] == [5, 4]  # from the usage block of the last chunk
    assert df["tpot_s"][1] == pytest.approx(0.4 / 3)
    assert df["ok"].tolist() == [True, True, False]


def test_genai_perf_raw_without_usage_has_tpot_from_chunk_timestamps():
    """genai-perf's raw export timestamps every streamed chunk: with no usage block, TPOT comes from them."""
    doc = json.loads((FIXTURES / "profile_export.json").read_text())
    for req in doc["experiments"][0]["requests"]:
        req["response_outputs"] = [o for o in req["response_outputs"] if '"usage"' not in o["response"]]
        req["response_timestamps"] = req["response_timestamps"][:len(req["response_outputs"])]
    run = load_benchmark(json.dumps(doc).encode(), "profile_export.json").runs[0]
    df = run.requests
    assert "output_tokens" not in df and df["tpot_s"].tolist()[:2] == pytest.approx([0.1, 0.2])
    assert run.summary["tpot_p50_s"] == pytest.approx(0.15) and "chunk" in run.definitions["tpot"]


def test_aiperf_csv_json_jsonl():
    csv_run = load("aiperf-concurrency16_profile_export_aiperf.csv").runs[0]
    assert csv_run.summary["ttft_p50_s"] == pytest.approx(0.42) and csv_run.summary["duration_s"] == 60.12
    assert csv_run.summary["failed"] == 3 and csv_run.summary["itl_p99_s"] == pytest.approx(0.035)
    json_run = load("profile_export_aiperf.json").runs[0]
    assert json_run.summary == pytest.approx(csv_run.summary)
    assert json_run.meta["model"] == "Qwen/Qwen3-0.6B"
    bench = load("profile_export.jsonl")
    df = bench.runs[0].requests
    assert len(df) == 3 and any("warmup" in n for n in bench.notes)
    assert df["ttft_s"][0] == pytest.approx(0.25) and df["itl_s"][0] == pytest.approx(0.010)
    assert df["tpot_s"][0] == pytest.approx(1.75 / 175)
    assert df["ok"].tolist() == [True, True, False] and df["prompt_tokens"][2] == 580


# ---------------------------------------------------------------- LLMPerf


def test_llmperf_summary_does_not_use_its_itl_as_tpot():
    run = load("llmperf_summary.json").runs[0]
    assert not any(k.startswith("tpot") or k.startswith("itl") for k in run.summary)
    assert "INCLUDES TTFT" in run.definitions["tpot"]
    assert run.summary["ttft_p90_s"] == 0.55 and run.summary["req_per_s"] == pytest.approx(2.25)
    assert run.summary["completed"] == 98 and run.summary["failed"] == 2


def test_llmperf_individual_responses():
    bench = load("llmperf_individual_responses.json")
    df = bench.runs[0].requests
    assert df["tpot_s"][0] == pytest.approx((3.5 - 0.3) / 149)
    assert df["ok"].tolist() == [True, True, False, True] and np.isnan(df["ttft_s"][2])
    assert "start_s" not in df


# ---------------------------------------------------------------- generic CSV / Parquet


def test_generic_csv_aliases_units_iso_crlf():
    bench = load("generic_requests.csv")
    df = bench.runs[0].requests
    assert df["start_s"].tolist() == pytest.approx([0.0, 0.5, 1.25, 2.0, 2.5])  # ISO → relative seconds
    assert df["ttft_s"].tolist()[:3] == pytest.approx([1.25, 0.3005, 0.45])  # "1,250.0" ms → 1.25 s
    assert df["e2e_s"][0] == pytest.approx(3.25) and df["itl_s"][0] == pytest.approx(0.010)
    assert df["queue_s"][0] == pytest.approx(0.9)
    assert df["tpot_s"][0] == pytest.approx(2.0 / 200) and np.isnan(df["tpot_s"][2])  # out = 1 → NaN
    assert df["ok"].tolist() == [True, True, True, False, True]
    assert bench.runs[0].definitions["tpot"] == "recomputed per request: (e2e − ttft)/(out − 1)"


def test_generic_parquet():
    df = load("generic_requests.parquet").runs[0].requests
    assert df["output_tokens"].tolist() == [200, 300, 150, 2]  # completion_tokens alias
    assert df["e2e_s"][0] == pytest.approx(6.17) and df["start_s"][1] == pytest.approx(0.25)
    assert df["ok"].all()  # empty error strings mean success


def test_generic_minimal_and_tab_separated():
    data = b"ttft\te2e_latency_ms\toutput_len\n0.5\t2500\t101\n"
    df = load_benchmark(data, "x.tsv").runs[0].requests
    assert list(df.columns) == ["output_tokens", "ttft_s", "e2e_s", "tpot_s"]
    assert df["tpot_s"][0] == pytest.approx(0.02)


def test_generic_integer_epoch_nanoseconds_and_ms_start():
    """Integer epoch nanoseconds lie beyond 2**53 (an Arrow safe cast to float64 refused them): read, with a note;
    a unit suffix scales integers and floats alike."""
    ns = 1_735_812_000_123_456_789
    data = (f"start,ttft_ms,e2e_ms,output_tokens\n{ns},100,1100,11\n{ns + 1_500_000_000},200,,5\n"
            f"{ns + 3_000_000_000},300,2300,21\n").encode()
    bench = load_benchmark(data, "ns.csv")
    df = bench.runs[0].requests
    assert df["start_s"].tolist() == pytest.approx([0.0, 1.5, 3.0], abs=1e-6)
    assert df["ttft_s"].tolist() == pytest.approx([0.1, 0.2, 0.3]) and np.isnan(df["e2e_s"][1])
    assert df["ok"].tolist() == [True, False, True] and df["tpot_s"][0] == pytest.approx(0.1)
    assert any("epoch nanoseconds" in note for note in bench.notes)
    ms = load_benchmark(b"start_ms,ttft_s,e2e_s,output_tokens\n1000,0.1,1,3\n3500,0.1,1,3\n", "ms.csv")
    assert ms.runs[0].requests["start_s"].tolist() == [0.0, 2.5]


def test_bundled_sample_is_queueing_bound():
    run = load_benchmark(SAMPLE.read_bytes(), "benchmark.csv").runs[0]
    df = run.requests
    assert 1900 <= len(df) <= 2100 and list(df.columns)[:6] == ["start_s", "prompt_tokens", "output_tokens",
                                                                 "ttft_s", "e2e_s", "tpot_s"]
    first, last = df.iloc[: len(df) // 4], df.iloc[-len(df) // 4:]
    assert last["ttft_s"].median() > 10 * first["ttft_s"].median()  # TTFT climbs with the queue
    assert 0.030 <= first["tpot_s"].median() <= 0.040 and 0.030 <= last["tpot_s"].median() <= 0.040  # TPOT flat
    assert 0.002 <= 1 - df["ok"].mean() <= 0.01
    assert 600 <= df["prompt_tokens"].median() <= 1000


# ---------------------------------------------------------------- bad input


def test_empty_file():
    assert "empty file" in reject(b"", "a.json")
    assert "empty file" in reject(b" \r\n\n", "b.csv")


def test_unknown_format():
    said = reject(b"hello world\n", "notes.txt")  # each text format tried is named, not only the categories
    assert "not a load-test result we read" in said
    assert "holds no console summary (vLLM / SGLang 'Serving Benchmark Result', genai-perf, AIPerf, GuideLLM)" in said
    assert "unknown format" in reject(b'{"foo": 1, "bar": [1, 2]}', "x.json")
    said = reject(b"a,b,c\n1,2,3\n", "x.csv")  # in the user's terms: no parser word, no repository path
    assert "not a load-test result we read" in said and "'a,b,c'" in said
    assert "CSV header" not in said and "docs/" not in said
    with pytest.raises(TriageError, match="unknown format"):
        detect_format(b"[1, 2, 3]", "list.json")


def test_known_but_unsupported_formats_say_so():
    prom = b'{"benchmark_time_seconds": 0, "load_summary": {}, "failures": {}, "successes": {"queue_len": {}}}'
    assert "inference-perf Prometheus metrics report" in reject(prom, "summary_prometheus_metrics.json")
    assert "Locust" in reject(b"Type,Name,Request Count,Failure Count,Median Response Time\n", "locust_stats.csv")


def test_truncated_json():
    data = (FIXTURES / "vllm_detailed.json").read_bytes()[:200]
    msg = reject(data, "vllm.json")
    assert "truncated JSON at line 1 col" in msg
    jsonl = (FIXTURES / "sglang_bench.jsonl").read_bytes()
    lines = jsonl.split(b"\n")
    msg = reject(lines[0] + b"\n" + lines[1][:50], "sglang.jsonl")
    assert "truncated JSON at line 2" in msg
    assert "invalid JSON at line 1 col" in reject(b'{"a": 1,, }', "x.json")


def test_not_utf8():
    assert "not UTF-8" in reject(b'{"model_id": "\xff\xfe"}', "x.json")
    head = b"ttft_s,e2e_s,output_tokens,model\n" + b"0.1,1.0,10,llama\n" * 5000
    msg = reject(head + b"0.1,1.0,10,ll\xe9ma\n", "latin1.csv")  # past the sniffed head, inside a cell
    assert "not UTF-8" in msg and "line 5002" in msg
    assert "UTF-16" in reject("ttft_s,e2e_s\n".encode("utf-16"), "u16.csv")


def test_negative_latencies_refused():
    data = b"ttft_ms,e2e_ms,output_tokens\n100,900,10\n-5,900,10\n-7,800,10\n-1,500,10\n"
    msg = reject(data, "neg.csv")
    assert "negative ttft_ms in 3 rows" in msg and "row 3" in msg
    doc = json.loads((FIXTURES / "vllm_detailed.json").read_text())
    doc["ttfts"][0] = -0.5
    assert "negative ttfts in 1 row" in reject(json.dumps(doc).encode(), "vllm.json")


def test_mixed_units_refused():
    msg = reject(b"ttft_ms,e2e_s,output_tokens\n100,0.05,10\n", "mixed.csv")
    assert "e2e_s shorter than ttft_ms in 1 row" in msg


def test_nan_latencies_all_refused_some_counted_failed():
    assert "ttft_s is empty or NaN in all 2 rows" in reject(b"ttft_s,e2e_s,output_tokens\nNaN,1,10\n,2,10\n")
    bench = load_benchmark(b"ttft_s,e2e_s,output_tokens\n0.1,1,10\nNaN,2,10\n0.2,,10\n", "some.csv")
    df = bench.runs[0].requests
    assert df["ok"].tolist() == [True, False, False]
    assert bench.runs[0].summary["failed"] == 2
    assert any("2 requests with an empty or NaN latency counted as failed" in n for n in bench.notes)


def test_missing_columns_named():
    msg = reject(b"prompt_tokens,output_tokens\n10,20\n", "cols.csv")
    assert "missing columns: ttft" in msg and "e2e latency" in msg and "output tokens" not in msg


def test_spreadsheet_formula_refused():
    data = (b"ttft_s,e2e_s,output_tokens,model\n0.1,1,10,llama\n0.1,1,10,llama\n"
            b'0.1,1,10,"=HYPERLINK(""http://x"",""y"")"\n')
    msg = reject(data, "formula.csv")
    assert "cell looks like a spreadsheet formula: '=HYPERLINK(" in msg and "in column model (row 4)" in msg
    assert "spreadsheet formula" in reject(b"ttft_s,e2e_s,output_tokens\n0.1,@SUM(A1),10\n", "f2.csv")
    genai = (FIXTURES / "genai_perf-concurrency32_genai_perf.csv").read_bytes().replace(b"6.93", b"=1+2")
    assert "spreadsheet formula: '=1+2'" in reject(genai, "genai.csv")


def test_negative_numbers_are_not_formulas():
    msg = reject(b'ttft_s,e2e_s,output_tokens,note\n0.1,1,10,"-1,234.5"\n0.1,1,10,-3\n0.1,1,-4,x\n', "n.csv")
    assert "negative output_tokens in 1 row" in msg


def test_non_numeric_cell_named():
    msg = reject(b"ttft_s,e2e_s,output_tokens\n0.1,1,10\n0.1,fast,10\n", "nn.csv")
    assert "non-numeric value 'fast' in column e2e_s (row 3)" in msg


def test_no_data_rows():
    assert "no data rows" in reject(b"ttft_s,e2e_s,output_tokens\n", "hdr.csv")


def test_bad_parquet():
    buf = pa.BufferOutputStream()
    pq.write_table(pa.table({"ttft_s": [0.1], "e2e_s": [-1.0], "output_tokens": [5]}), buf)
    assert "negative e2e_s in 1 row" in reject(buf.getvalue().to_pybytes(), "neg.parquet")
    assert "Parquet" in reject(b"PAR1" + b"\x00" * 40, "broken.parquet")


def test_wrong_types_inside_known_format_become_triage_errors():
    doc = json.loads((FIXTURES / "vllm_detailed.json").read_text())
    doc["ttfts"] = "fast"
    assert "ttfts should be a list of per-request values, found a string" in reject(json.dumps(doc).encode(), "v.json")
    doc["ttfts"] = [0.1, "x", 0.2, 0.3]
    assert "non-numeric value 'x' in ttfts (index 1)" in reject(json.dumps(doc).encode(), "v.json")
    doc["ttfts"] = [0.1, 0.2]
    assert "different lengths" in reject(json.dumps(doc).encode(), "v.json")


def test_yaml_aliases_refused():
    data = b"benchmarks:\n- &a {type_: generative_benchmark}\n- *a\n"
    assert "aliases" in reject(data, "bomb.yaml")


# ---------------------------------------------------------------- AIPerf ≥ 0.2 and inference-perf


def test_aiperf_csv_with_sum_column():
    run = load("aiperf013-concurrency8_profile_export_aiperf.csv").runs[0]
    s = run.summary
    assert s["ttft_p5_s"] == pytest.approx(0.783) and s["ttft_p99_s"] == pytest.approx(0.829)
    assert s["tpot_p50_s"] == pytest.approx(0.0204) and s["e2e_p99_s"] == pytest.approx(2.165)
    assert s["completed"] == 100 and s["req_per_s"] == pytest.approx(3.8) and s["max_concurrency"] == 8


def test_aiperf_csv_without_request_metrics_is_read_and_empty():
    run = load("aiperf013-empty_profile_export_aiperf.csv").runs[0]
    assert run.summary == {"duration_s": pytest.approx(5.02), "failed": 12}
    assert "no completed request" in run.empty_reason() and "12 failed" in run.empty_reason()


def test_inference_perf_summary_in_seconds_with_stage_load():
    run = load("stage_0_lifecycle_metrics.json").runs[0]
    s = run.summary
    assert s["ttft_p50_s"] == pytest.approx(0.82) and s["ttft_p5_s"] == pytest.approx(0.802)
    assert s["tpot_p99_s"] == pytest.approx(0.02) and s["completed"] == 5 and s["failed"] == 1
    assert s["offered_rate"] == 2.0 and s["prompt_tokens_mean"] == 128 and s["output_tokens_mean"] == 8
    assert "last − first token" in run.definitions["tpot"]


def test_inference_perf_per_request_from_token_times():
    run = load("per_request_lifecycle_metrics.json").runs[0]
    df = run.requests
    assert int((~df["ok"]).sum()) == 1 and len(df) == 6
    ok = df[df["ok"]]
    assert ok["ttft_s"].tolist() == pytest.approx([0.8, 0.81, 0.82, 0.83, 0.84])
    assert ok["output_tokens"].tolist() == [8] * 5 and ok["prompt_tokens"].tolist() == [128] * 5
    assert ok["itl_s"].tolist() == pytest.approx([0.02] * 5)
    assert run.summary["ttft_p50_s"] == pytest.approx(0.82)
    assert run.summary["tpot_p50_s"] == pytest.approx(0.14 / 7)  # to the last token, as the tool measures it


def test_inference_perf_unstreamed_requests_keep_e2e_only():
    recs = json.loads((FIXTURES / "per_request_lifecycle_metrics.json").read_text())
    for r in recs:
        if r["info"].get("response_metrics"):
            r["info"]["response_metrics"].pop("output_token_times")
    bench = load_benchmark(json.dumps(recs).encode(), "per_request_lifecycle_metrics.json")
    assert "ttft_s" not in bench.runs[0].requests and "not streamed" in " ".join(bench.notes)


def test_guidellm_benchmark_without_requests_is_empty():
    doc = json.loads((FIXTURES / "guidellm_v05.json").read_text())
    bench = doc["benchmarks"][0]
    bench["requests"] = {k: [] for k in bench["requests"]}
    bench["metrics"]["request_totals"] = {"successful": 0, "errored": 0, "incomplete": 0, "total": 0}
    run = load_benchmark(json.dumps(doc).encode(), "guidellm.json").runs[0]
    assert not run.has_requests and "no completed request" in run.empty_reason()


# ---------------------------------------------------------------- the same parsers on real tool outputs

REAL = Path(__file__).parent / "fixtures" / "real"
needs_real = pytest.mark.skipif(not (REAL / "aiperf").is_dir() or not (REAL / "inference-perf").is_dir(),
                                reason="real tool outputs not captured yet")


def load_real(rel: str) -> Benchmark:
    return load_benchmark((REAL / rel).read_bytes(), Path(rel).name)


@needs_real
@pytest.mark.parametrize("scenario", ["healthy", "queueing", "prefill_bound", "decode_bound"])
def test_real_aiperf_csv_with_sum_column_agrees_with_its_json(scenario):
    csv = load_real(f"aiperf/{scenario}/profile_export_aiperf.csv")
    js = load_real(f"aiperf/{scenario}/profile_export_aiperf.json")
    assert csv.format == "aiperf_csv" and js.format == "aiperf_json"
    a, b = csv.runs[0].summary, js.runs[0].summary
    for key in ("ttft_p5_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "e2e_p50_s", "e2e_p99_s",
                "completed", "req_per_s"):
        assert a[key] == pytest.approx(b[key], rel=0.01), key  # the CSV rounds to 2 decimals


@needs_real
@pytest.mark.parametrize("scenario", ["healthy", "queueing", "prefill_bound", "decode_bound"])
def test_real_inference_perf_per_request_agrees_with_its_summary(scenario):
    summary = load_real(f"inference-perf/{scenario}/summary_lifecycle_metrics.json")
    stage = load_real(f"inference-perf/{scenario}/stage_0_lifecycle_metrics.json")
    per_request = load_real(f"inference-perf/{scenario}/per_request_lifecycle_metrics.json")
    assert (summary.format, stage.format, per_request.format) == (
        "inference_perf_summary", "inference_perf_summary", "inference_perf_requests")
    assert stage.runs[0].label.startswith("stage 0: concurrency")
    s, r = summary.runs[0].summary, per_request.runs[0].summary
    assert len(per_request.runs[0].requests) == s["completed"] + s["failed"]
    for key in ("ttft_p50_s", "ttft_p99_s", "e2e_p50_s", "e2e_p99_s"):
        assert r[key] == pytest.approx(s[key], rel=0.01), key
    assert r["tpot_p50_s"] == pytest.approx(s["tpot_p50_s"], rel=0.01)  # both to the last token
