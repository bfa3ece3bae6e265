"""Fleet causes through a real Prometheus: three simulated fleets (one `job` each: a straggler, a skewed router,
every replica over capacity) backfilled by promtool; `diagnose --by instance` lights each fleet's node, and the
fleet alerts of `python -m triage rules` (dry run, recording rules inlined) fire where the fleet's own series
decide it: routing skew and out of capacity on their fleet only, and (under the SLO its symptom needs) the straggler
on its own: a replica's TTFT / TPOT p99 over its fleet's quantile(0.5, …), where the slowest replica has no more
traffic than its peers."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.cli_tools import run_triage
from tests.prom_harness import PROMETHEUS, PROMTOOL, start_prometheus
from tests.rules_harness import merge_openmetrics, with_label
from tests.test_fleet_causes import FLEETS, LIT
from triage.diagnosis.fleet import diagnose_fleet
from triage.diagnosis.rules import resolve_slo
from triage.sources.metrics.prometheus_fleet import FleetWindow
from triage.sources.metrics.simulator import write_openmetrics

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(900)]
MINUTES, WINDOW_MIN, STEP = 7, 5, 15


@pytest.fixture(scope="module")
def fleets_server(tmp_path_factory):
    if not (Path(PROMETHEUS).exists() and Path(PROMTOOL).exists()):
        pytest.fail("prometheus / promtool missing: scripts/test.sh installs the Debian package")
    folder = tmp_path_factory.mktemp("fleet-causes")
    end = int(time.time() // 60 * 60) - 120
    texts = {}
    for name, (_, members) in FLEETS.items():
        for i, (scenario, overrides) in enumerate(members):
            path = folder / f"{name}-{i}.om"
            write_openmetrics(path, scenario, minutes=MINUTES, step=STEP, end=end, seed=i, overrides=overrides)
            texts[f"{name}-{i}"] = "\n".join(with_label(path.read_text(), "job", name)) + "\n# EOF\n"
    server = start_prometheus(folder, merge_openmetrics(texts), end)
    try:
        yield server, datetime.fromtimestamp(end, UTC)
    finally:
        server.stop()


@pytest.mark.parametrize("name", list(FLEETS))
def test_diagnose_by_instance_lights_each_fleet_node(kb, fleets_server, name):
    server, stop = fleets_server
    slo = resolve_slo(kb, FLEETS[name][0])
    window = FleetWindow(server.url, stop - timedelta(minutes=WINDOW_MIN), stop, by=["instance"], match={"job": name},
                         timeout=10)
    result = diagnose_fleet(kb, window, slo)
    assert len(result.rows) == len(FLEETS[name][1]) and result.fleet is not None
    assert result.fleet.matched_ids == [LIT[name]], [(f.cause, [(e.signal, e.value, e.holds) for e in f.evidence])
                                                     for f in result.fleet.findings]


def test_cli_prints_the_fleet_diagnosis(fleets_server):
    server, stop = fleets_server
    args = ["diagnose", "--prometheus", server.url, "--end", stop.isoformat(),
            "--window", f"{WINDOW_MIN}m", "--by", "instance", "--match", 'job="skew"']
    done = run_triage(*args, "--json")
    assert done.returncode == 0, done.stderr
    fleet = json.loads(done.stdout)["fleet"]
    assert [f["cause"] for f in fleet["findings"]] == ["fleet.routing_skew"]
    assert 0 <= fleet["signals"]["saturated_share"]["value"] <= 1
    text = run_triage(*args)
    assert "fleet: symptoms fleet; causes fleet.routing_skew" in text.stdout
    assert "req_rate_max_over_median" in text.stdout and "instance=skew-0" in text.stdout


def test_fleet_alerts_fire_where_the_fleet_series_decide(fleets_server):
    server, stop = fleets_server
    done = run_triage("rules", "--evaluate", "--prometheus", server.url, "--end", stop.isoformat(), "--window",
                      f"{WINDOW_MIN}m", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    fleet = sorted((a["labels"].get("job"), a["cause"]) for a in data["alerts"] if a["symptom"] == "fleet")
    assert fleet == [("out_of_capacity", "fleet.out_of_capacity"), ("skew", "fleet.routing_skew")]
    assert all("instance" not in a["labels"] for a in data["alerts"] if a["symptom"] == "fleet")
    assert "fleet.straggler" not in {s["cause"] for s in data["skipped"]}  # it has a PromQL form now


def test_the_straggler_alert_fires_on_the_straggler_fleet_only(fleets_server):
    """Under the SLO the straggler fleet misses (interactive), the straggler alert fires on that fleet and on no other:
    the skewed fleet's hot replica is as slow, but it gets more traffic than its peers (routing, not its node)."""
    server, stop = fleets_server
    done = run_triage("rules", "--evaluate", "--prometheus", server.url, "--end", stop.isoformat(), "--window",
                      f"{WINDOW_MIN}m", "--slo", FLEETS["straggler"][0], "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    stragglers = [a for a in data["alerts"] if a["cause"] == "fleet.straggler"]
    assert [a["labels"].get("job") for a in stragglers] == ["straggler"], data["alerts"]
    assert "instance" not in stragglers[0]["labels"]


def test_fleet_page_shows_the_causes_across_replicas(kb, fleets_server, monkeypatch):
    """The Fleet page (AppTest) over the three fleets at once, grouped by instance: under the table, the fleet
    symptom with its numbers and the fleet causes with their evidence, in both languages."""
    from tests.apptest_tools import open_page, texts

    server, _ = fleets_server
    monkeypatch.setenv("TRIAGE_PROMETHEUS_FLEET_URL", server.url)
    titles = [kb.causes[c].title for c in LIT.values()]
    for lang in ("en", "zh"):
        at = open_page("pages/fleet.py", lang=lang)
        shown = texts(at)
        assert kb.symptom("fleet").title.get(lang) in shown, shown[-2000:]
        assert ("Across replicas" if lang == "en" else "副本之间") in shown
        assert any(t.get(lang) in shown for t in titles), shown[-2000:]


def test_one_replica_is_no_fleet(fleets_server):
    """Grouped down to one replica, the fleet causes are not measurable (said so), never 'no finding'."""
    server, stop = fleets_server
    args = ["diagnose", "--prometheus", server.url, "--end", stop.isoformat(),
            "--window", f"{WINDOW_MIN}m", "--by", "job", "--match", 'instance="skew-0"']
    text = run_triage(*args)
    assert text.returncode == 0, text.stderr
    assert "fleet: not measurable (1 replica(s) with traffic in the window" in text.stdout
    data = json.loads(run_triage(*args, "--json").stdout)
    assert data["fleet"]["empty"] and data["fleet"]["signals"] == {} and data["fleet"]["findings"] == []
    assert [s["present"] for s in data["fleet"]["symptoms"]] == [None]


PROMTOOL_FIRING = {  # SLO → (fleet job, cause) that Prometheus's rule engine must fire, and nothing else
    "chat": [("skew", "fleet.routing_skew"), ("out_of_capacity", "fleet.out_of_capacity")],
    "interactive": [("skew", "fleet.routing_skew"), ("out_of_capacity", "fleet.out_of_capacity"),
                    ("straggler", "fleet.straggler")],
}


@pytest.mark.parametrize("slo", list(PROMTOOL_FIRING))
def test_promtool_fires_the_fleet_alerts_through_the_recording_rules(tmp_path, slo):
    """`promtool test rules` over the three fleets' samples and the rule file's recording rules and fleet alerts
    (the replica alerts left out): Prometheus's own rule engine, records → fleet records → alerts with `for`, fires
    exactly routing skew on the skewed fleet and out of capacity on the saturated one, and under the SLO the
    straggler fleet misses, the straggler on its fleet."""
    import yaml

    from tests.rules_harness import promtool_test_file, run_promtool_test
    from triage.alerting.export import alert_name
    from triage.sources.metrics.simulator import MODEL_NAME

    done = run_triage("rules", "--window", f"{WINDOW_MIN}m", "--for", "1m", "--slo", slo)
    assert done.returncode == 0, done.stderr
    doc = yaml.safe_load(done.stdout)
    group = doc["groups"][0]
    group["rules"] = [r for r in group["rules"] if "record" in r or r["labels"]["symptom"] == "fleet"]
    names = [r["alert"] for r in group["rules"] if "alert" in r]
    assert sorted(names) == ["TriageFleetOutOfCapacity", "TriageFleetRoutingSkew", "TriageFleetStraggler"]
    rules = tmp_path / "fleet-rules.yml"
    rules.write_text(yaml.safe_dump(doc, sort_keys=False, width=10**6))
    end = int(time.time() // 60 * 60)
    texts = {}
    for name, (_, members) in FLEETS.items():
        for i, (scenario, overrides) in enumerate(members):
            path = tmp_path / f"{name}-{i}.om"
            write_openmetrics(path, scenario, minutes=MINUTES, step=STEP, end=end, seed=i, overrides=overrides)
            texts[f"{name}-{i}"] = "\n".join(with_label(path.read_text(), "job", name)) + "\n# EOF\n"
    firing = [{"alertname": alert_name(cause), "alertstate": "firing", "cause": cause, "symptom": "fleet",
               "severity": "warning", "job": job, "model_name": MODEL_NAME}
              for job, cause in PROMTOOL_FIRING[slo]]
    test = promtool_test_file(rules, merge_openmetrics(texts), STEP, firing, names)
    result = run_promtool_test(tmp_path, test)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]


def test_the_webhook_diagnoses_a_fleet_alert_as_a_fleet(kb, fleets_server):
    """A fleet alert names a fleet (job, model_name), not a replica: the receiver diagnoses every replica of it and
    leads with the fleet cause its own fleet diagnosis confirms, with the evidence."""
    from triage.alerting.receiver.config import ReceiverConfig
    from triage.alerting.receiver.message import slack_text
    from triage.alerting.receiver.payload import AlertmanagerAlert
    from triage.service.webhook import Receiver
    from triage.sources.metrics.simulator import MODEL_NAME

    server, stop = fleets_server
    alert = AlertmanagerAlert(status="firing", startsAt=stop,
                              labels={"alertname": "TriageFleetRoutingSkew", "cause": "fleet.routing_skew",
                                      "symptom": "fleet", "job": "skew", "model_name": MODEL_NAME})
    receiver = Receiver(ReceiverConfig(prometheus=server.url, window=f"{WINDOW_MIN}m", timeout=10.0))
    out = receiver.diagnose(alert, receiver.replica_of(alert))
    assert not out.error, out.error
    assert out.replica == {"job": "skew", "model_name": MODEL_NAME}
    assert out.diagnosis is not None and out.diagnosis.matched_ids == ["fleet.routing_skew"]
    assert out.contract["format"] == "fleet" and "queue_spread" in out.contract["signals"]
    assert "fleet.routing_skew" in slack_text(kb, out)
