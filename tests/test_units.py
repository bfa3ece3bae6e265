"""The one formatter: no scientific notation, sub-second times in ms, fractions in %, ratios as ×, deltas in the
unit of their value, zero as 0 — checked on every KPI and delta of a Live demo scenario and of benchmark files,
through the core and through the rendered pages."""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path

import pytest
import streamlit as st

from tests.apptest_tools import open_page
from triage.diagnosis.benchmark import diagnose_run, pick_run
from triage.diagnosis.compare import signal_deltas
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.window import window_signals
from triage.knowledge.units import fmt_against, fmt_delta, fmt_threshold, fmt_value
from triage.sources.files import load_benchmark
from triage.sources.metrics.exposition import parse_metrics_text
from triage.sources.metrics.simulator import SCENARIOS, Simulator
from triage.sources.metrics.snapshot_window import SnapshotWindow

ROOT = Path(__file__).resolve().parent.parent
SCI = re.compile(r"\d\.?\d*[eE][+-]?\d")
NUM = r"-?\d{1,3}(,\d{3})*(\.\d+)?"
# one text shape per unit (value; delta)
VALUE = {"s": rf"^{NUM} (ms|s)$", "fraction": rf"^{NUM} %$", "ratio": rf"^{NUM}×$", "r": rf"^{NUM}$",
         "bool": r"^(yes|no)$", "1/s": rf"^{NUM}/s$"}
DELTA = {"s": rf"^[+-]{NUM} (ms|s)$", "fraction": rf"^[+-]{NUM} pp$", "ratio": rf"^[+-]{NUM}×$",
         "r": rf"^[+-]{NUM}$", "1/s": rf"^[+-]{NUM}/s$"}


def value_ok(text: str, unit: str) -> bool:
    return re.match(VALUE.get(unit, rf"^{NUM} {re.escape(unit)}$"), text) is not None


def delta_ok(text: str, unit: str) -> bool:
    return text == "0" or re.match(DELTA.get(unit, rf"^[+-]{NUM} {re.escape(unit)}$"), text) is not None


# ---------------------------------------------------------------- the formatter


@pytest.mark.parametrize("value,unit,text", [
    (0.0248, "s", "24.8 ms"), (2.3, "s", "2.3 s"), (22.3, "s", "22.3 s"), (0.0, "s", "0 ms"),
    (0.000012, "s", "0.012 ms"), (0.934, "fraction", "93.4 %"), (0.0, "fraction", "0 %"), (2.1667, "ratio", "2.17×"),
    (1520.4, "tok/s", "1,520 tok/s"),
    (123456.7, "req/s", "123,457 req/s"), (0.87, "r", "0.87"), (True, "bool", "yes"), (None, "s", "—"),
    (math.nan, "s", "—"), (-0.0, "req", "0 req"), (0.0, "1/s", "0/s"), (0.8, "1/s", "0.8/s"),
])
def test_values(value, unit, text):
    assert fmt_value(value, unit) == text


def test_the_texts_users_saw_are_gone():
    assert fmt_delta(-4.86e-08, "s", like=0.0248) == "0"  # was "-4.86e-08 s vs baseline"
    assert fmt_against(22.3, 2.0, "s", "vs SLO") == "+20.3 s vs SLO 2 s"  # was "+2.03e+04 ms vs SLO 2000"
    assert fmt_against(0.8, 2.0, "s", "vs SLO") == "-1,200 ms vs SLO 2,000 ms"
    assert fmt_value(2.167, "ratio") == "2.17×"  # a tail ratio: was "216.7 %" in one table and "2.16" in another
    assert fmt_delta(0.0021, "s", like=0.0248) == "+2.1 ms"
    assert fmt_delta(0.012, "fraction", like=0.93) == "+1.2 pp"
    assert fmt_delta(-120, "tok/s", like=1520) == "-120 tok/s"
    assert fmt_threshold(2.0, "s", like=0.5) == "2,000 ms"


# ---------------------------------------------------------------- core: every signal and delta


@functools.cache  # a seeded run is the same every call and a window only reads it: one healthy baseline for all
def _window(scenario: str, seed: int, minutes: int = 5, step: float = 15.0) -> SnapshotWindow:
    sim = Simulator(scenario, seed=seed)
    snaps = []
    for _ in range(int(minutes * 60 / step) + 1):
        snaps.append(parse_metrics_text(sim.render(), sim.now, scenario))
        sim.advance(step)
    return SnapshotWindow(snaps)


def _check_set(kb, signals, deltas=()) -> int:
    checked = 0
    for name, sig in signals.values.items():
        unit = kb.signals[name].unit
        text = fmt_value(sig.value, unit)
        assert not SCI.search(text) and value_ok(text, unit), f"{name} ({unit}): {text!r}"
        checked += 1
    for d in deltas:
        if d.delta is None or isinstance(d.current, bool) or d.current is None:
            continue
        text = fmt_delta(d.delta, d.unit, like=float(d.current))
        assert not SCI.search(text) and delta_ok(text, d.unit), f"{d.name} ({d.unit}): {text!r}"
        checked += 1
    return checked


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_live_signal_and_delta_of_a_demo_scenario(kb, scenario):
    current, _ = window_signals(kb, _window(scenario, seed=3))
    baseline, _ = window_signals(kb, _window("healthy", seed=4))
    deltas = signal_deltas(current, baseline)
    assert _check_set(kb, current, deltas) > 20


@pytest.mark.parametrize("name", ["vllm_detailed.json", "guidellm_v05.json", "generic_requests.csv",
                                  "aiperf-concurrency16_profile_export_aiperf.csv", "llmperf_summary.json"])
def test_every_signal_of_a_benchmark_file(kb, name):
    path = ROOT / "tests" / "fixtures" / "bench" / name
    run = pick_run(load_benchmark(path.read_bytes(), name), None)
    diag = diagnose_run(kb, run, resolve_slo(kb, "chat"))
    assert _check_set(kb, diag.signals) > 3
    for sig_name in kb.kpis.benchmark:  # the KPI row's distance to the SLO
        spec, sig = kb.signals[sig_name], diag.signals.get(sig_name)
        if sig is not None and spec.slo:
            text = fmt_against(float(sig.value), float(resolve_slo(kb, "chat").values[spec.slo]), spec.unit, "vs SLO")
            assert not SCI.search(text), text


# ---------------------------------------------------------------- the rendered pages


@pytest.fixture
def _fresh_cache():
    st.cache_data.clear()
    yield


def _metric_texts(at, kb, row: list[str], lang: str = "en") -> list[str]:
    by_label = {kb.signals[n].label.get(lang): kb.signals[n].unit for n in row}
    seen = []
    for m in at.metric:
        if m.label not in by_label or m.value == "—":
            continue
        unit = by_label[m.label]
        assert value_ok(m.value, unit), f"{m.label}: {m.value!r}"
        delta = str(m.proto.delta or "")
        if delta:
            change = delta.split(" vs ")[0].split(" 对比")[0]
            assert delta_ok(change, unit), f"{m.label}: delta {delta!r}"
        seen += [m.value, delta]
    return seen


def test_live_demo_page_kpis_deltas_and_table(kb, _fresh_cache):
    at = open_page("pages/live.py")
    seen = _metric_texts(at, kb, kb.kpis.live)
    assert len(seen) >= 8 and any(seen[1::2])  # values, and at least one delta against the baseline
    at.session_state["live_all_deltas"] = True  # the table is drawn once its expander is opened
    at.run()
    table = at.dataframe[0].value
    cells = [str(c) for col in table.columns for c in table[col]]
    assert cells and not any(SCI.search(c) for c in cells), [c for c in cells if SCI.search(c)]
    for _, row in table.iterrows():
        unit = kb.signals[row["Signal"]].unit
        for col in ("This window", "Baseline"):
            if col in row and row[col] != "—":
                assert value_ok(row[col], unit), (row["Signal"], col, row[col])
    assert not any(SCI.search(s) for s in seen)


def test_benchmark_page_kpis(kb, _fresh_cache):
    at = open_page("pages/benchmark.py")
    seen = _metric_texts(at, kb, kb.kpis.benchmark)
    assert len(seen) >= 10 and not any(SCI.search(s) for s in seen)
    assert any("vs SLO" in s for s in seen)


def test_a_time_axis_is_in_ms_under_a_second_and_in_s_above():
    from triage.knowledge.units import time_axis

    assert time_axis(19_300, "ms") == (0.001, "s") and time_axis(850, "ms") == (1.0, "ms")
    assert time_axis(2.5, "s") == (1.0, "s") and time_axis(0.2, "s") == (1000.0, "ms")
    assert time_axis(0, "ms") == (1.0, "ms") and time_axis(5, "%") == (1.0, "%")
