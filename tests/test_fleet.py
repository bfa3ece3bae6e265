"""Fleet diagnosis: `diagnose --prometheus URL --by LABEL` diagnoses every replica in one pass, one grouped query
per need, and each group exactly as a single-window diagnosis matching it would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fleet_history import slo_of
from tests.prom_harness import closed_port_url
from triage.cli import main
from triage.sources.metrics.simulator import SCENARIOS

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(900)]  # the simulated fleet takes minutes to build


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "triage", "diagnose", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def fleet_json(fleet_history):
    out = {}
    for slo in ("chat", "batch"):
        done = cli("--prometheus", fleet_history.server.url, "--end", fleet_history.stop.isoformat(), "--by",
                   "instance", "--slo", slo, "--json")
        assert done.returncode == 0, done.stderr
        out[slo] = json.loads(done.stdout)
    return out


def test_one_group_per_replica(fleet_json):
    data = fleet_json["chat"]
    assert data["by"] == ["instance"] and data["engine"] == "vllm"
    assert [g["labels"] for g in data["groups"]] == [{"instance": s} for s in sorted(SCENARIOS)]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_each_group_is_its_single_engine_diagnosis(fleet_history, fleet_json, scenario):
    """The whole diagnose --json object of a group equals the single-window one matching it (signals, symptoms,
    findings, notes, missing, source)."""
    slo = slo_of(scenario)
    group = next(g for g in fleet_json[slo]["groups"] if g["labels"] == {"instance": scenario})
    single = cli("--prometheus", fleet_history.server.url, "--end", fleet_history.stop.isoformat(), "--match",
                 f'instance="{scenario}"', "--slo", slo, "--json")
    assert single.returncode == 0, single.stderr
    assert group["diagnosis"] == json.loads(single.stdout)
    assert sorted(f["cause"] for f in group["diagnosis"]["findings"]) == fleet_history.causes[scenario]


def test_a_replica_pinned_at_its_cap_gets_the_cap_and_the_action_live_gives(kb, fleet_history):
    """The queueing replica runs 16 requests while its queue grows: the fleet reads that plateau from the replica's
    running/waiting series, as its Live view does, so the verdict doubles it instead of naming a starting point."""
    from datetime import timedelta

    from triage.diagnosis.fleet import diagnose_fleet
    from triage.diagnosis.rules import resolve_slo
    from triage.diagnosis.verdict import verdict
    from triage.diagnosis.window import diagnose_window
    from triage.sources.metrics.prometheus_fleet import FleetWindow
    from triage.sources.metrics.prometheus_window import PrometheusWindow

    stop, start = fleet_history.stop, fleet_history.stop - timedelta(minutes=15)
    slo = resolve_slo(kb, "chat")
    rows = diagnose_fleet(kb, FleetWindow(fleet_history.server.url, start, stop, by=["instance"]), slo,
                          recorded=False).rows
    fleet = next(r for r in rows if r.labels == {"instance": "queueing"}).diagnosis
    live = diagnose_window(kb, PrometheusWindow(fleet_history.server.url, start, stop,
                                                match={"instance": "queueing"}), slo).diagnosis
    cap = fleet.signals.get("running_cap")
    assert cap is not None and cap.value == 16 and cap.source == live.signals.values["running_cap"].source
    assert verdict(kb, fleet, "vllm").actions[0].command == verdict(kb, live, "vllm").actions[0].command \
        == "--max-num-seqs 32"
    healthy = next(r for r in rows if r.labels == {"instance": "healthy"}).diagnosis
    assert healthy.signals.get("running_cap") is None  # no queue: no cap read, as on Live


def test_running_while_waiting_is_one_narrowed_query_with_the_live_points(fleet_history):
    """both_above_zero: one range query narrowed to the groups asked (others get nothing), and each group's points
    are the running points of its single window's series at the times both it and the waiting one were above 0."""
    from datetime import timedelta

    from triage.diagnosis.batch_cap import RUNNING, SERIES_POINTS, WAITING, series_samples
    from triage.sources.metrics.prometheus_fleet import FleetWindow
    from triage.sources.metrics.prometheus_window import PrometheusWindow

    stop, start = fleet_history.stop, fleet_history.stop - timedelta(minutes=15)
    fleet = FleetWindow(fleet_history.server.url, start, stop, by=["instance"])
    sent: list[str] = []
    original = fleet._range
    fleet._range = lambda q, *span: (sent.append(q), original(q, *span))[1]  # type: ignore[method-assign]
    asked = [(("instance", "queueing"),), (("instance", "healthy"),), (("instance", "kv_pressure"),)]
    got = fleet.both_above_zero(RUNNING, WAITING, SERIES_POINTS, asked)
    assert len(sent) == 1 and 'instance=~"healthy|kv_pressure|queueing"' in sent[0] and list(got) == asked
    for key in asked:
        live = PrometheusWindow(fleet_history.server.url, start, stop, match=dict(key))
        samples = series_samples(live.series([RUNNING, WAITING], SERIES_POINTS))
        assert got[key] == [r for r, w in samples if r > 0 and w > 0]
    assert len(got[(("instance", "queueing"),)]) >= 3  # the queueing replica waited: there is something to compare


def test_a_selector_narrowed_to_label_values_escapes_them():
    from triage.sources.metrics.snapshot_window import selector

    assert selector("m", {"job": "a"}, {"pod": ["x.1", 'q"r', "x.1"]}) == 'm{job="a",pod=~"q\\"r|x\\\\.1"}'
    assert selector("m", {}) == "m" and selector("m", {}, {"pod": ["p"]}) == 'm{pod=~"p"}'


def test_two_labels_and_a_match(fleet_history):
    done = cli("--prometheus", fleet_history.server.url, "--end", fleet_history.stop.isoformat(), "--by", "instance",
               "--by", "engine", "--match", 'model_name="meta-llama/Llama-3.1-8B-Instruct"', "--json")
    assert done.returncode == 0, done.stderr
    labels = [g["labels"] for g in json.loads(done.stdout)["groups"]]
    assert labels == [{"engine": "0", "instance": s} for s in sorted(SCENARIOS)]


def test_one_request_per_need_for_the_whole_fleet(fleet_history):
    """The fleet read sends as many queries as one engine's read, however many replicas there are."""
    from datetime import timedelta

    from triage.diagnosis.server_signals import window_needs
    from triage.knowledge.loader import load_knowledge
    from triage.sources.metrics.prometheus_fleet import FleetWindow
    from triage.sources.metrics.prometheus_window import PrometheusWindow

    stop = fleet_history.stop
    counts = {}
    for name, window in (("fleet", FleetWindow(fleet_history.server.url, stop - timedelta(minutes=15), stop,
                                               by=["instance"])),
                         ("one", PrometheusWindow(fleet_history.server.url, stop - timedelta(minutes=15), stop,
                                                  match={"instance": "queueing"}))):
        sent: list[str] = []
        original = window._instant
        window._instant = lambda q, at, original=original, sent=sent: (sent.append(q), original(q, at))[1]
        needs = window_needs(load_knowledge())
        groups = window.read_groups(needs) if name == "fleet" else {(): window.read(needs)}
        counts[name] = (len(sent), len(groups))
    assert counts["fleet"][0] == counts["one"][0] and counts["fleet"][1] == len(SCENARIOS)


def test_text_output_lists_every_group(fleet_history):
    done = cli("--prometheus", fleet_history.server.url, "--end", fleet_history.stop.isoformat(), "--by", "instance")
    assert done.returncode == 0, done.stderr
    assert "instance=queueing: symptoms ttft; causes ttft.queueing" in done.stdout  # (then any other cause)
    assert "instance=healthy: symptoms none; causes no finding" in done.stdout


def test_bad_fleet_arguments_exit_2(capsys, tmp_path):
    assert main(["diagnose", "--endpoint", "http://127.0.0.1:9/metrics", "--by", "pod"]) == 2
    assert "--prometheus" in capsys.readouterr().err
    assert main(["diagnose", "--prometheus", closed_port_url(), "--by", "pod"]) == 2
    assert "unreachable" in capsys.readouterr().err
    assert main(["diagnose", "--prometheus", closed_port_url(), "--by", "not a label"]) == 2
    assert "not a label name" in capsys.readouterr().err


def test_itl_is_read_only_for_replicas_without_per_request_tpot(fleet_history, tmp_path):
    """A fleet mixing a current vLLM (per-request TPOT histogram) and an older one (ITL only): the ITL quantiles are
    asked in a second round for the older replica alone, which gets its TPOT from them, and each group still equals
    its single-engine diagnosis."""
    from tests.prom_harness import start_prometheus
    from tests.rules_harness import merge_openmetrics

    per_request = "vllm:request_time_per_output_token_seconds"
    old = "\n".join(line for line in fleet_history.texts["queueing"].splitlines() if per_request not in line) + "\n"
    texts = {"current": fleet_history.texts["queueing"], "older": old}
    server = start_prometheus(tmp_path, merge_openmetrics(texts), fleet_history.end)
    try:
        args = ["--prometheus", server.url, "--end", fleet_history.stop.isoformat(), "--json"]
        fleet = json.loads(cli(*args, "--by", "instance").stdout)
        for group in fleet["groups"]:
            single = cli(*args, "--match", f'instance="{group["labels"]["instance"]}"')
            assert single.returncode == 0, single.stderr
            assert group["diagnosis"] == json.loads(single.stdout)
        by = {g["labels"]["instance"]: g["diagnosis"] for g in fleet["groups"]}
        assert set(by) == {"current", "older"}
        assert "ITL histogram" in by["older"]["signals"]["tpot_p99_s"]["source"]
        assert "per-request TPOT" in by["current"]["signals"]["tpot_p99_s"]["source"]
        assert not any(k.startswith("quantile:itl") for k in by["current"]["missing"])
    finally:
        server.stop()


def test_a_label_the_info_metric_lacks_still_selects_its_series(kb, fleet_history):
    """vllm:cache_config_info carries `engine` but no `model_name`: matching or grouping by model_name must still
    find whether prefix caching is on and the KV cache's size, as matching the replica by its instance does."""
    from datetime import timedelta

    from triage.diagnosis.fleet import diagnose_fleet
    from triage.diagnosis.rules import resolve_slo
    from triage.diagnosis.window import diagnose_window
    from triage.sources.metrics.prometheus_fleet import FleetWindow
    from triage.sources.metrics.prometheus_window import PrometheusWindow
    from triage.sources.metrics.simulator import MODEL_NAME

    stop, url, preset = fleet_history.stop, fleet_history.server.url, resolve_slo(kb)
    start = stop - timedelta(minutes=15)

    def single(match: dict[str, str]) -> dict[str, float | None]:
        found = diagnose_window(kb, PrometheusWindow(url, start, stop, match=match, timeout=10), preset)
        return {k: s.value for k, s in found.diagnosis.signals.values.items()}

    plain = single({"instance": "kv_pressure"})
    assert plain["prefix_caching_enabled"] is not None and "decode_gb_per_step" in plain
    assert single({"instance": "kv_pressure", "model_name": MODEL_NAME}) == plain
    fleet = diagnose_fleet(kb, FleetWindow(url, start, stop, by=["model_name"], match={"instance": "kv_pressure"},
                                           timeout=10), preset, recorded=False)
    assert [r.labels for r in fleet.rows] == [{"model_name": MODEL_NAME}]
    assert {k: s.value for k, s in fleet.rows[0].diagnosis.signals.values.items()} == plain
