"""AppTest of the Benchmark page: sample by default, every fixture uploads, bad files keep what loaded."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import streamlit as st

from tests.apptest_tools import open_page, static_tables, texts
from tests.cli_tools import run_triage
from triage.knowledge.messages import message_text

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "tests" / "fixtures" / "bench").glob("*.*"))


@pytest.fixture(autouse=True)
def _fresh_cache():
    st.cache_data.clear()
    yield


def bench_page():
    return open_page("pages/benchmark.py")


SAMPLE = ROOT / "tree" / "sample" / "benchmark.csv"


def own_copy_of_the_sample():
    """The bundled sample uploaded as the user's own file: its diagnosis becomes the session's."""
    return upload(bench_page(), "mine.csv", SAMPLE.read_bytes())


def upload(at, name: str, data: bytes):
    at.file_uploader(key="bench_upload").upload(name, data, "application/octet-stream").run()
    assert not at.exception, at.exception
    return at


def test_sample_is_shown_and_labelled():
    at = bench_page()
    body = texts(at)
    assert "bundled sample" in body
    assert "inference-perf lifecycle metrics JSON" in body  # the uploader's hint lists the registered formats
    assert "Requests queue too long" in body
    labels = [m.label for m in at.metric]
    assert "TTFT p99" in labels and "Requests/s" in labels
    # nothing of the user's is loaded: the other pages show the sample as the sample, never under its file name
    assert "findings" not in at.session_state and "diagnosis" not in at.session_state
    for page in ("pages/diagnose.py", "pages/retro.py"):
        at.switch_page(page).run()
        assert not at.exception, at.exception
        assert "Data: Bundled sample" in texts(at) and "benchmark.csv" not in texts(at), page


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_every_fixture_uploads(path):
    at = upload(bench_page(), path.name, path.read_bytes())
    errors = [e.value for e in at.error]
    if "empty" in path.name:  # an empty run says so instead of "no symptom"
        assert errors and all(e.startswith("Nothing to diagnose: no completed request") for e in errors), errors
        assert not any("No symptom" in x for x in texts(at))
    else:
        assert not errors, errors
    assert "Detected format" in texts(at)
    assert "bundled sample" not in texts(at)


def test_bad_file_reports_and_keeps_what_loaded():
    good = ROOT / "tests" / "fixtures" / "bench" / "vllm_detailed.json"
    at = upload(bench_page(), good.name, good.read_bytes())
    at = upload(at, "broken.json", b'{"date": "2025", "model_id": ')
    errors = " ".join(e.value for e in at.error)
    assert "broken.json" in errors and "still shown" in errors
    assert "vllm_detailed.json" not in errors
    assert "Detected format: **vLLM" in texts(at)


def test_multi_run_file_offers_a_run_picker_and_sweep():
    path = ROOT / "tests" / "fixtures" / "bench" / "vllm_append.json"
    at = upload(bench_page(), path.name, path.read_bytes())
    picker = next(s for s in at.selectbox if s.label == "Run")
    assert len(picker.options) == 3
    assert any(tab.label == "Sweep" for tab in at.tabs)


def test_page_and_cli_agree_on_findings():
    sample = ROOT / "tree" / "sample" / "benchmark.csv"
    at = upload(bench_page(), "mine.csv", sample.read_bytes())
    out = run_triage("diagnose", str(sample), "--json")
    assert out.returncode == 0, out.stderr
    cli = [f["cause"] for f in json.loads(out.stdout)["findings"]]
    assert cli and at.session_state["findings"] == cli


def test_slo_preset_changes_findings():
    at = own_copy_of_the_sample()
    before = list(at.session_state["findings"])
    at.selectbox(key="slo_preset").set_value("batch").run()
    assert not at.exception
    assert at.session_state["findings"] != before


def test_naming_the_hardware_adds_the_roofline_signal():
    at = own_copy_of_the_sample()
    at.selectbox(key="hw_model").set_value("llama-3.1-8b")
    at.selectbox(key="hw_gpu").set_value("h100").run()
    assert not at.exception, at.exception
    label, diag = at.session_state["diagnosis"]
    sig = diag.signals.get("tpot_over_roofline")
    assert sig is not None and sig.value > 1 and "H100" in message_text(sig.source, "en")


def test_slo_picker_offers_the_interactive_preset():
    at = bench_page()
    box = at.selectbox(key="slo_preset")
    assert "Interactive chat (latency-critical)" in box.options
    box.set_value("interactive").run()
    assert not at.exception, at.exception
    assert any("GuideLLM" in c.value for c in at.sidebar.caption)


def test_summary_table_like_the_tools_print():
    at = bench_page()
    tables = static_tables(at)
    latency = next(tb for tb in tables if "Median" in tb.columns)
    assert {"TTFT", "TPOT", "E2E"} <= set(latency.index) and list(latency.columns) == ["Mean", "Median", "P90", "P99"]
    assert all(str(v).endswith(" ms") or v == "—" for v in latency.drop(index="ITL").to_numpy().ravel())
    # the sample has no per-token times: ITL says so rather than showing TPOT under its name
    assert "not measurable" in latency.loc["ITL", "Mean"] and set(latency.loc["ITL"].iloc[1:]) == {"—"}
    facts = next(tb for tb in tables if "Successful requests" in tb.index)
    assert {"Duration", "Load", "Errors"} <= set(facts.index)
    assert "e+" not in facts.to_csv() + latency.to_csv()
    errors = str(facts.loc["Errors"].iloc[0])
    assert re.fullmatch(r"[\d,]+ \([\d.]+ %\)", errors), errors  # the share in the one formatter's digits


def test_itl_row_is_the_files_pooled_itl_not_tpot():
    """vLLM's queueing run: ITL pools every gap (its own median_itl_ms 20.08, p99_itl_ms 101.23), TPOT does not."""
    path = ROOT / "tests" / "fixtures" / "real" / "vllm" / "queueing" / "vllm_bench.json"
    at = upload(bench_page(), path.name, path.read_bytes())
    latency = next(tb for tb in static_tables(at) if "Median" in tb.columns)
    assert list(latency.loc["ITL", ["Median", "P90", "P99"]]) == ["20.1 ms", "48 ms", "101 ms"]
    assert list(latency.loc["TPOT", ["Median", "P90", "P99"]]) == ["27.2 ms", "38.7 ms", "39.2 ms"]


def test_within_slo_but_is_a_warning_card_and_still_healthy():
    path = ROOT / "tests" / "fixtures" / "bench" / "guidellm_v05.json"
    at = upload(bench_page(), path.name, path.read_bytes())
    picker = next(s for s in at.selectbox if s.label == "Run")
    # run 1 is within the SLO, but only 75 % of its requests meet it (tail_latency.slo_sensitive as a note)
    picker.set_value(0).run()
    body = texts(at)
    assert "No symptom" in body and "Within the SLO, but" in body
    assert any("The tail matters for some requests" in w.value and "still within the SLO" in w.value
               for w in at.warning), [w.value for w in at.warning]


def test_refused_upload_shows_no_sample_findings():
    at = upload(bench_page(), "broken.json", b'{"date": "2025", "model_id": ')
    body = texts(at)
    errors = " ".join(e.value for e in at.error)
    assert "broken.json" in errors and "bundled sample is hidden" in errors and "still shown" not in errors
    assert "Requests queue too long" not in body and "bundled sample (a queueing" not in body
    assert not at.metric and "findings" not in at.session_state
    status = at.get("expandable")
    assert not any("Parsed" in str(getattr(s.proto, "label", "")) for s in status)


def test_upload_survives_a_round_trip_through_diagnose():
    good = ROOT / "tests" / "fixtures" / "bench" / "vllm_detailed.json"
    at = upload(bench_page(), good.name, good.read_bytes())
    at.switch_page("pages/diagnose.py").run()
    at.switch_page("pages/benchmark.py").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="bench_choice").value != "sample"
    assert "Detected format: **vLLM" in texts(at) and "bundled sample (a queueing" not in texts(at)


def test_distributions_send_binned_counts_not_every_request():
    """The histograms arrive as at most 60 bars whose counts add up to the run's requests with that latency."""
    from tests.synthetic import requests

    frame = requests(n=20_000, ttft_base=0.3, seed=3)
    at = upload(bench_page(), "big.csv", frame.to_csv(index=False).encode())
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    bars = [s["data"][0] for s in specs if s["data"] and s["data"][0].get("type") == "bar"]
    assert bars, "no distribution chart drawn"
    for bar in bars:
        counts = _plotly_array(bar["y"])
        assert len(counts) <= 60
        assert counts.sum() == frame[bar["name"]].notna().sum()


def _plotly_array(value):
    """A data array of a plotly spec: a list, or plotly 6's typed array ({"dtype", "bdata" in base64})."""
    import base64

    import numpy as np

    if isinstance(value, dict):
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
    return np.asarray(value)


def test_notes_beside_findings_do_not_deny_the_symptoms_and_say_what_is_unmeasured():
    """The sample has red findings and two notes: the notes' heading must not say 'no symptom crosses the SLO',
    a note under a symptom this file cannot measure must not call it 'within the SLO', and a ✘ beside a value
    past its threshold names the requirement that failed."""
    at = bench_page()
    captions = " ".join(c.value for c in at.caption)
    assert "Requests queue too long" in texts(at) and "No symptom crosses the SLO" not in captions
    assert "Deal with the findings above first" in captions
    warnings = {w.value.split("**")[1]: w.value for w in at.warning}
    assert "cannot be measured from this source" in warnings["A high share of long sequences"]
    assert "still within the SLO" in warnings["Decode is memory-bandwidth-bound"]
    cells = " ".join(static_tables(at)[i].to_csv() for i in range(len(static_tables(at))))
    assert "counts only if: Prompts are alike in length (prompt_tail_ratio < 2×)" in cells


def test_latency_over_the_run_draws_tpot_on_its_own_axis():
    """TPOT (tens of ms) beside a TTFT of seconds on one axis was a flat line at zero: it has the right axis."""
    at = bench_page()
    at.session_state["bench_tab"] = next(tab.label for tab in at.tabs if tab.label == "Latency over the run")
    at.run()
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    spec = next(s for s in specs if {d.get("name") for d in s["data"]} == {"TTFT", "TPOT"})
    axis = {d["name"]: d.get("yaxis", "y") for d in spec["data"]}
    assert axis == {"TTFT": "y", "TPOT": "y2"}
    assert spec["layout"]["yaxis2"]["overlaying"] == "y" and spec["layout"]["yaxis2"]["rangemode"] == "tozero"


def test_custom_slo_inputs_stop_at_a_day_as_the_cli():
    """The sidebar's own TTFT / TPOT targets took any number: 1e300 s was accepted and the KPI card read a
    300-digit 'vs SLO'. They stop at a day, the bound of the CLI's --ttft-slo / --tpot-slo."""
    at = bench_page()
    at.toggle(key="slo_custom").set_value(True).run()
    assert not at.exception, at.exception
    assert at.number_input(key="slo_ttft").max == at.number_input(key="slo_tpot").max == 86_400
    out = run_triage("diagnose", str(SAMPLE), "--ttft-slo", "86401")
    assert out.returncode == 2 and "out of range" in out.stderr
