"""Fleet diagnosis from the recording rules: when Prometheus holds `python -m triage rules`' series for the window
(here evaluated by `promtool tsdb create-blocks-from rules` over the simulated fleet), `diagnose --by` reads them
instead of the raw series, and every group still gets the causes, symptoms and signal values of the raw read and of
a single-engine diagnosis of that replica over the same window; anything else falls back to the raw read, saying
why."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml

from tests.cli_tools import run_triage
from tests.fleet_history import WINDOW_MIN, slo_of
from tests.prom_harness import backfill
from tests.rules_harness import merge_openmetrics, recording_passes, serve_with_recorded
from triage.diagnosis.fleet import base_signals, diagnose_fleet
from triage.diagnosis.rules import Diagnosis, resolve_slo
from triage.diagnosis.window import diagnose_window
from triage.knowledge.messages import message_text
from triage.knowledge.recipes import recipe_needs
from triage.sources.metrics.prometheus_fleet import FleetWindow
from triage.sources.metrics.prometheus_window import PrometheusWindow
from triage.sources.metrics.simulator import SCENARIOS

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(900)]  # the simulated fleet takes minutes to build


@pytest.fixture(scope="module")
def recorded(fleet_history, tmp_path_factory):
    """A Prometheus holding the fleet and the recording rules (15m) evaluated every minute of its last 2 minutes;
    and the rule file's recorded signal names."""
    folder = tmp_path_factory.mktemp("recorded")
    done = run_triage("rules")
    assert done.returncode == 0, done.stderr
    rules = folder / "rules.yml"
    rules.write_text(done.stdout)
    assert len(recording_passes(rules)) == 2  # raw-series rules, then the ratios of recorded ones
    data = backfill(merge_openmetrics(fleet_history.texts), folder)
    server = serve_with_recorded(folder, data, rules, fleet_history.end - 120, fleet_history.end)
    names = [r["record"].split(":")[1] for g in yaml.safe_load(done.stdout)["groups"] for r in g["rules"]
             if "record" in r]
    yield server, names
    server.stop()


def _window(url: str, end: datetime, **kw) -> FleetWindow:
    return FleetWindow(url, end - timedelta(minutes=WINDOW_MIN), end, timeout=10, **kw)


# read from vLLM >= 0.32 series the simulated engines do not export: their rules record no series, so the fleet
# read has none for them (not measurable, as on a raw read)
UNSIMULATED = frozenset({"admission_rejections_per_s", "prompt_cached_share",
                         # the simulated PD decode instance (pd_slow_transfer) has no expiry (counted on a prefill
                         # instance) and no SGLang bootstrap; the residency histograms need --kv-cache-metrics
                         "kv_transfer_expired_per_s", "kv_bootstrap_failures_per_s",
                         "kv_reuse_gap_over_idle", "kv_idle_before_evict_mean_s", "kv_block_lifetime_mean_s",
                         # SGLang's evictable prefix cache and its per-request transfer speed: the simulated
                         # engines are vLLM
                         "kv_evictable_share", "kv_transfer_speed_gib_s",
                         # a router's in-flight gauge per worker: the simulated fleet has no router in front
                         "inflight_mean"})


def _same(a: Diagnosis, b: Diagnosis, who: str) -> None:
    """Same symptoms, causes (findings and notes, in order) and signals (names, values to rounding; the running cap
    too, which both read from the replica's running/waiting series)."""
    assert [(c.symptom, c.present) for c in a.symptoms] == [(c.symptom, c.present) for c in b.symptoms], who
    assert a.matched_ids == b.matched_ids and [n.cause for n in a.notes] == [n.cause for n in b.notes], who
    assert set(a.signals.values) == set(b.signals.values), who
    for name, sig in a.signals.values.items():
        assert sig.value == pytest.approx(b.signals.values[name].value, rel=1e-9, abs=1e-12), (who, name)
    assert a.empty == b.empty, who


@pytest.mark.parametrize("slo", ["chat", "batch"])
def test_recorded_fleet_diagnoses_like_the_raw_read_and_each_single_engine(kb, fleet_history, recorded, slo):
    server, names = recorded
    preset = resolve_slo(kb, slo)
    fleet = diagnose_fleet(kb, _window(server.url, fleet_history.stop, by=["instance"]), preset)
    read = fleet.read
    assert read.path == "recorded", read.reason
    # every recorded signal computed from readings alone has a series at the evaluation read; the ratios of
    # recorded signals are divided client-side, as a raw read does
    assert sorted(read.signals) == sorted(n for n in names if n in base_signals(kb) and n not in UNSIMULATED)
    # but a router's per-worker in-flight gauge: no serving engine map answers it, so no replica rule records it
    # and a fleet read takes it raw (when a router is scraped)
    assert set(base_signals(kb)) - set(names) == {"inflight_mean"}
    assert fleet_history.stop - timedelta(minutes=1) < read.end <= fleet_history.stop
    # read raw: DCGM's (no rule) and the needs of the signals whose recorded series are missing (UNSIMULATED)
    unrecorded = {f"{n.kind}:{n.key}" for s in UNSIMULATED for n in recipe_needs(kb, s)}
    assert sorted(n for n in read.raw_needs if not n.startswith("info:")) == sorted(
        {"gauge_mean:dram_active", "gauge_mean:tensor_active"} | unrecorded)
    raw = diagnose_fleet(kb, _window(server.url, read.end, by=["instance"]), preset, recorded=False)
    assert raw.read.path == "raw"
    assert [r.labels for r in fleet.rows] == [r.labels for r in raw.rows] == [{"instance": s} for s in
                                                                              sorted(SCENARIOS)]
    for row, raw_row in zip(fleet.rows, raw.rows):
        scenario = row.labels["instance"]
        single = diagnose_window(kb, PrometheusWindow(server.url, read.end - timedelta(minutes=WINDOW_MIN),
                                                      read.end, match={"instance": scenario}, timeout=10), preset)
        _same(row.diagnosis, raw_row.diagnosis, scenario)
        _same(row.diagnosis, single.diagnosis, scenario)
        how = message_text(row.diagnosis.signals.values["ttft_p99_s"].source, "en")
        assert how.startswith("recorded triage:ttft_p99_s:15m"), how
        if slo_of(scenario) == slo:  # the fleet finds what the rules and the Python diagnosis found at the end
            assert sorted(row.diagnosis.matched_ids) == fleet_history.causes[scenario], scenario


def test_cli_says_which_read_it_used(fleet_history, recorded):
    server, _ = recorded
    args = ["diagnose", "--prometheus", server.url, "--end",
            fleet_history.stop.isoformat(), "--by", "instance"]
    done = run_triage(*args, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["read"]["path"] == "recorded" and data["read"]["rules"] == "triage:*:15m"
    assert len(data["groups"]) == len(SCENARIOS)
    text = run_triage(*args)
    assert "read: read from the recording rules triage:*:15m" in text.stdout
    assert "instance=queueing: symptoms ttft; causes ttft.queueing" in text.stdout
    raw = run_triage(*args, "--raw")
    assert "read: read raw, every need grouped server-side (recorded signals not asked for (--raw))" in raw.stdout


def test_falls_back_to_the_raw_read_and_says_why(kb, fleet_history, recorded):
    """Groups that are not one replica of the rules, a label the rules do not group by, a window with no rules:
    the raw read, with the reason; a match narrowing a coarse grouping to one replica reads the rules again."""
    server, _ = recorded
    stop, preset = fleet_history.stop, resolve_slo(kb)
    coarse = diagnose_fleet(kb, _window(server.url, stop, by=["engine"]), preset)  # every replica has engine="0"
    assert coarse.read.path == "raw" and "holds several recorded replicas" in coarse.read.reason
    other = diagnose_fleet(kb, _window(server.url, stop, by=["gpu"]), preset)
    assert other.read.path == "raw" and "'gpu' is not one of those labels" in other.read.reason
    longer = FleetWindow(server.url, stop - timedelta(minutes=30), stop, by=["instance"], timeout=10)
    missing = diagnose_fleet(kb, longer, preset)
    assert missing.read.path == "raw" and "no recorded triage:running_mean:30m series" in missing.read.reason
    one = diagnose_fleet(kb, _window(server.url, stop, by=["engine"], match={"instance": "queueing"}), preset)
    assert one.read.path == "recorded" and len(one.rows) == 1
    match = {**one.rows[0].labels, "instance": "queueing"}  # the group's labels and the fleet's match
    single = diagnose_window(kb, PrometheusWindow(server.url, one.read.end - timedelta(minutes=WINDOW_MIN),
                                                  one.read.end, match=match, timeout=10), preset)
    _same(one.rows[0].diagnosis, single.diagnosis, "queueing")
