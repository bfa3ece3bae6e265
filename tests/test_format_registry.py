"""Formats as data: a benchmark format is one registered object, which detection, loading, messages and listings
all read; a new one is added from its own module without touching any other."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap

import pytest

from triage.cli import main
from triage.errors import TriageError
from triage.service.uploads import format_list, format_title, open_text_benchmark, uploadable_formats
from triage.sources import logs
from triage.sources.files import detect_format, formats, load_benchmark
from triage.sources.files.registry import BENCHMARK_FORMATS, BenchmarkFormat
from triage.sources.logs.registry import LOG_FORMATS

TOY_MODULE = '''
"""ToyBench: a made-up load-test tool writing one JSON object per request."""

import numpy as np

from triage.sources.files.common import build_run, frame
from triage.sources.files.registry import BenchmarkFormat, register


def is_toy(doc):
    return isinstance(doc, dict) and doc.get("tool") == "toybench"


def parse(values, ctx):
    cols = {"ttft_s": np.array([v["ttft_ms"] / 1e3 for v in values]),
            "e2e_s": np.array([v["e2e_ms"] / 1e3 for v in values]),
            "output_tokens": np.array([float(v["tokens"]) for v in values]),
            "ok": np.ones(len(values), dtype=bool)}
    return [build_run(f"toybench ({len(values)} requests)", ctx, requests=frame(cols), meta={"tool": "toybench"})]


register(BenchmarkFormat("toybench_jsonl", "ToyBench per-request JSONL", "json", is_toy, parse, multi_value=True))
'''
TOY_LINES = "".join(json.dumps({"tool": "toybench", "ttft_ms": 40 + i, "e2e_ms": 900 + 10 * i, "tokens": 128}) + "\n"
                    for i in range(20)).encode()


@pytest.fixture
def toy_format(tmp_path, monkeypatch):
    """The toy module written to tmp_path and imported; the registry and sys.modules are restored afterwards."""
    (tmp_path / "toybench_format.py").write_text(textwrap.dedent(TOY_MODULE), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with BENCHMARK_FORMATS.restored():
        importlib.import_module("toybench_format")
        yield tmp_path
    sys.modules.pop("toybench_format", None)


def test_a_new_format_is_one_registered_object_from_its_own_module(toy_format, capsys):
    data_file = toy_format / "run.jsonl"
    data_file.write_bytes(TOY_LINES)
    assert detect_format(TOY_LINES, "run.jsonl") == "toybench_jsonl"
    bench = load_benchmark(TOY_LINES, "run.jsonl")
    assert bench.format == "toybench_jsonl" and [r.label for r in bench.runs] == ["toybench (20 requests)"]
    assert bench.runs[0].summary["ttft_p50_s"] == pytest.approx(0.0495)
    assert format_title("toybench_jsonl") == "ToyBench per-request JSONL"
    assert "ToyBench per-request JSONL" in format_list()

    assert main(["formats"]) == 0
    assert "toybench_jsonl  " in capsys.readouterr().out
    assert main(["diagnose", str(data_file), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["format"] == "toybench_jsonl" and out["runs"][0]["label"] == "toybench (20 requests)"


def test_the_registry_is_restored_after_a_test_adds_a_format():
    assert "toybench_jsonl" not in BENCHMARK_FORMATS
    with pytest.raises(TriageError, match="unknown format: 20 JSON values"):
        load_benchmark(TOY_LINES, "run.jsonl")


def test_unknown_text_lists_the_registered_formats(toy_format):
    with pytest.raises(TriageError) as info:
        load_benchmark(b'{"what": 1}', "x.json")
    assert "expected one of" in str(info.value) and "ToyBench per-request JSONL" in str(info.value)
    with pytest.raises(TriageError) as info:
        open_text_benchmark(b"hello there\n", "pasted")
    assert f"also tried server logs ({logs.tried()})" in str(info.value)


def test_a_taken_id_is_refused():
    with pytest.raises(ValueError, match="registered already"):
        BENCHMARK_FORMATS.register(BenchmarkFormat("vllm_bench", "again", "json", lambda d: False,
                                                   lambda v, c: []))


def test_log_formats_are_registered_too_and_listed_with_the_benchmark_ones(capsys):
    assert [f.id for f in logs.formats()] == ["vllm_log", "sglang_log"]
    assert logs.tried() == "vLLM server log, SGLang server log"
    kinds = {(e.kind, e.id) for e in uploadable_formats()}
    assert ("log", "sglang_log") in kinds and ("benchmark", "serving_console") in kinds
    assert {f.id for f in formats()} == {i for k, i in kinds if k == "benchmark"}
    assert LOG_FORMATS.title("vllm_log") == "vLLM server log"
    assert main(["formats", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {"kind": "log", "id": "vllm_log", "title": "vLLM server log"} in listed


def test_a_json_or_yaml_format_gets_the_parsed_document():
    with pytest.raises(ValueError, match="parsed document"):
        BenchmarkFormat("x", "X", "json", lambda d: True, lambda v, c: [], payload="bytes")
    with pytest.raises(ValueError, match="only a JSON format"):
        BenchmarkFormat("x", "X", "header", lambda d: True, lambda v, c: [], multi_value=True)


def test_a_new_server_log_format_is_detected_listed_and_named(capsys):
    from triage.sources.logs import vllm
    from triage.sources.logs.registry import LogFormat, register

    text = b"TOYLOG started\nTOYLOG serving\n"
    with LOG_FORMATS.restored():
        register(LogFormat("toy_log", "Toy server log", lambda head: head.startswith(b"TOYLOG"), vllm.parse))
        fmt = logs.detect_log(text)
        assert fmt is not None and fmt.id == "toy_log" and "Toy server log" in logs.tried()
        with pytest.raises(TriageError, match="recognised as a Toy server log, but it holds no periodic stats"):
            logs.read_log([text], fmt, "toy.log")
        assert main(["formats"]) == 0 and "toy_log" in capsys.readouterr().out
    assert logs.detect_log(text) is None and "Toy" not in logs.tried()
