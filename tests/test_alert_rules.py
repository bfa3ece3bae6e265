"""`python -m triage rules`: the tree as Prometheus rules, checked by promtool, unit-tested by promtool over the
simulator's scenarios, dry-run against a real Prometheus, and replayed by vmalert over VictoriaMetrics — the alerts
that fire are the causes the Python diagnosis finds."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
import yaml

from tests.prom_harness import PROMETHEUS, PROMTOOL, start_prometheus
from tests.rules_harness import (
    have_victoria,
    promtool_test_file,
    run_promtool_test,
    start_victoria,
    vmalert_replay,
    vmctl_import,
)
from triage.alerting.export import alert_name, build
from triage.alerting.promql import evaluate_recipe
from triage.cli import main
from triage.diagnosis.readings import Need
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.server_signals import NEEDS, server_signals
from triage.diagnosis.window import diagnose_window
from triage.sources.metrics.exposition import parse_metrics_text
from triage.sources.metrics.prometheus_window import PrometheusWindow
from triage.sources.metrics.simulator import ENGINE, MODEL_NAME, SCENARIOS, Simulator, write_openmetrics
from triage.sources.metrics.snapshot_window import SnapshotWindow

ROOT = Path(__file__).resolve().parent.parent
SLO_OF = {"low_batch": "batch"}  # scenario → SLO preset (default chat)
STEP = 15
HISTORY_MIN = 20  # backfilled history; the rules read the last 15 min
WINDOW = "15m"
REPLICA = {"model_name": MODEL_NAME, "engine": ENGINE}


def rules_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["rules", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def promtool_check(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)


# ---------------------------------------------------------------- the rule file itself


@pytest.mark.parametrize("slo", ["chat", "interactive", "code", "batch"])
def test_rule_file_passes_promtool_check(tmp_path, capsys, slo):
    code, out, err = rules_cli(capsys, "--slo", slo)
    assert code == 0
    path = tmp_path / "rules.yml"
    path.write_text(out)
    checked = promtool_check(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "not decidable from server metrics" in err  # skipped causes on stderr, never silently dropped


def test_prometheus_rule_resource_passes_promtool_check(tmp_path, capsys):
    code, out, _ = rules_cli(capsys, "--format", "prometheus-rule", "--namespace", "monitoring", "--name", "triage")
    assert code == 0
    doc = yaml.safe_load(out)
    assert doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["kind"] == "PrometheusRule"
    assert doc["metadata"] == {"name": "triage", "namespace": "monitoring",
                               "labels": {"app.kubernetes.io/part-of": "inference-triage"}}
    path = tmp_path / "spec.yml"
    path.write_text(yaml.safe_dump(doc["spec"]))
    checked = promtool_check(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_alert_names_its_cause_and_links_to_its_node(kb, capsys):
    code, out, _ = rules_cli(capsys, "--dashboard-url", "https://triage.example/", "--profile", "prod", "--json")
    assert code == 0
    data = json.loads(out)
    rules = data["rules"]["groups"][0]["rules"]
    alerts = [r for r in rules if "alert" in r]
    records = {r["record"] for r in rules if "record" in r}
    assert alerts and len(alerts) == len(data["alerts"])
    decided = {a["labels"]["cause"] for a in alerts}
    skipped = {s["cause"]: s["reason"] for s in data["skipped"]}
    assert decided | set(skipped) == set(kb.causes) and not decided & set(skipped)  # every cause accounted for
    assert all(reason for reason in skipped.values())
    for alert in alerts:
        cause = alert["labels"]["cause"]
        assert alert["alert"] == alert_name(cause)
        assert alert["labels"]["symptom"] == kb.parent[cause]
        assert alert["labels"]["severity"] in ("critical", "warning", "info")
        assert alert["for"] == "5m"
        url = alert["annotations"]["runbook_url"]
        assert url.startswith("https://triage.example/live?source=prometheus&profile=prod&window=15m&end=")
        assert url.endswith(f"&node={cause}") and "match_model_name=" in url and "match_instance=" in url
        assert "{{ $value" in alert["annotations"]["summary"] and "{{ $value" in alert["annotations"]["description"]
        for name in {t for t in alert["expr"].replace("(", " ").replace(")", " ").split() if t.startswith("triage:")}:
            assert name in records, f"{alert['alert']} reads {name}, which no recording rule writes"
    assert all(r.startswith("triage:") and r.endswith(":15m") for r in records)


def test_recording_rules_cover_every_engine_map_and_old_names(capsys):
    _, out, _ = rules_cli(capsys)
    text = out
    for name in ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "vllm_kv_cache_usage_perc",
                 "vllm:time_per_output_token_seconds_bucket", "vllm:gpu_prefix_cache_hits_total",
                 "sglang:token_usage", "sglang:num_retracted_requests_total", "tgi_queue_size",
                 "tgi_request_mean_time_per_token_duration_bucket"):
        assert name in text, name
    assert "by (namespace, pod, job, instance, model_name, engine, engine_type" in text


def test_slo_options_move_the_thresholds(kb):
    rules = build(kb, resolve_slo(kb, "chat", ttft_p99_s=0.75))
    queueing = next(a for a in rules.alerts if a.cause == "ttft.queueing")
    assert "triage:ttft_p99_s:15m > 0.75" in queueing.expr


def test_bad_options_exit_2(capsys):
    assert rules_cli(capsys, "--slo", "nope")[0] == 2
    assert rules_cli(capsys, "--window", "fifteen")[0] == 2
    assert rules_cli(capsys, "--evaluate")[0] == 2  # needs --prometheus
    code, _, err = rules_cli(capsys, "--prometheus", "http://127.0.0.1:9")
    assert code == 2 and "--evaluate" in err


# ---------------------------------------------------------------- recipes = the Python server signals


def _snapshots(scenario: str, minutes: int = 10) -> list:
    sim = Simulator(scenario, seed=3)
    snaps = []
    for _ in range(minutes * 4 + 1):
        snaps.append(parse_metrics_text(sim.render(), sim.now, scenario))
        sim.advance(15)
    return snaps


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_signal_recipes_compute_what_the_server_diagnosis_computes(kb, scenario):
    """The recipes in signals.yaml (what the PromQL compiles from) give the server signals' values exactly."""
    readings = SnapshotWindow(_snapshots(scenario)).read(NEEDS)
    python = server_signals(kb, readings)

    def reading(ref):
        value = readings.get(Need(ref.kind, ref.key, ref.q, ref.engine))
        return value if isinstance(value, float) else None

    def info(key):
        value = readings.get(Need("info", key))
        return value if isinstance(value, dict) else {}

    computed: dict[str, float | bool | None] = {}

    def value_of(name):
        if name not in computed:
            computed[name] = evaluate_recipe(kb.signals[name].recipe, reading, info, value_of)
        return computed[name]

    for name, sig in kb.signals.items():
        if sig.recipe is None:
            assert python.get(name) is None, f"{name} is computed on the server side but has no recipe"
            continue
        got, want = value_of(name), python.get(name)
        assert (got is None) == (want is None), name
        if want is not None:
            assert got == pytest.approx(want.value, rel=1e-9), name


# ---------------------------------------------------------------- real engines over the scenarios


@pytest.fixture(scope="module")
def scenario_history(tmp_path_factory):
    """Per scenario: the simulator's history as OpenMetrics, a real Prometheus over its promtool-built blocks, and
    the Python diagnosis of the last 15 minutes (the causes the alerts must match)."""
    if not (Path(PROMETHEUS).exists() and Path(PROMTOOL).exists()):
        pytest.fail("prometheus / promtool missing: scripts/test.sh installs the Debian package")
    from triage.knowledge.loader import load_knowledge

    kb = load_knowledge()
    end = int(time.time() // 60 * 60) - 120
    out = {}
    for scenario in SCENARIOS:
        folder = tmp_path_factory.mktemp(f"rules-{scenario}")
        path = folder / "sim.om"
        write_openmetrics(path, scenario, minutes=HISTORY_MIN, step=STEP, end=end, seed=5)
        server = start_prometheus(folder, path.read_text(), end)
        stop = datetime.fromtimestamp(end, UTC)
        try:
            window = PrometheusWindow(server.url, stop - timedelta(minutes=15), stop, timeout=10)
            live = diagnose_window(kb, window, resolve_slo(kb, SLO_OF.get(scenario, "chat")))
        except Exception:
            server.stop()
            raise
        out[scenario] = {"folder": folder, "om": path, "server": server, "end": end,
                         "causes": sorted(live.diagnosis.matched_ids)}
    yield out
    for item in out.values():
        item["server"].stop()


def _rule_file(folder: Path, scenario: str) -> Path:
    path = folder / "rules.yml"
    done = subprocess.run([sys.executable, "-m", "triage", "rules", "--slo", SLO_OF.get(scenario, "chat")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    path.write_text(done.stdout)
    return path


def _alert_names(path: Path) -> list[str]:
    return [r["alert"] for r in yaml.safe_load(path.read_text())["groups"][0]["rules"] if "alert" in r]


@pytest.mark.prometheus
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_dry_run_matches_python_diagnosis(scenario_history, scenario):
    item = scenario_history[scenario]
    at = datetime.fromtimestamp(item["end"], UTC).isoformat()
    done = subprocess.run([sys.executable, "-m", "triage", "rules", "--evaluate", "--prometheus",
                           item["server"].url, "--end", at, "--slo", SLO_OF.get(scenario, "chat"), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert sorted(a["cause"] for a in data["alerts"]) == item["causes"]
    assert all(a["labels"] == REPLICA and a["alert"] == alert_name(a["cause"]) for a in data["alerts"])
    assert data["skipped"] and all({"cause", "symptom", "reason"} <= set(s) for s in data["skipped"])
    if scenario == "healthy":
        assert data["alerts"] == []


@pytest.mark.prometheus
def test_dry_run_match_narrows_to_one_replica(scenario_history):
    item = scenario_history["queueing"]
    at = datetime.fromtimestamp(item["end"], UTC).isoformat()
    base = [sys.executable, "-m", "triage", "rules", "--evaluate", "--prometheus", item["server"].url, "--end", at,
            "--json"]
    other = subprocess.run([*base, "--match", 'model_name="someone-else"'], cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
    assert other.returncode == 0 and json.loads(other.stdout)["alerts"] == []
    text = subprocess.run(base[:-1] + ["--match", f'engine="{ENGINE}"'], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert text.returncode == 0 and "FIRING TriageTtftQueueing" in text.stdout


@pytest.mark.prometheus
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_promtool_unit_tests_from_scenario(scenario_history, scenario):
    """promtool test rules over the scenario's samples: at the last sample exactly the Python causes fire."""
    item = scenario_history[scenario]
    rules = _rule_file(item["folder"], scenario)
    firing = [{"alertname": alert_name(c), "alertstate": "firing", "cause": c, "symptom": c.split(".")[0],
               "severity": _severity(rules, c), **REPLICA} for c in item["causes"]]
    test = promtool_test_file(rules, item["om"].read_text(), STEP, firing, _alert_names(rules))
    done = run_promtool_test(item["folder"], test)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def _severity(path: Path, cause: str) -> str:
    rules = yaml.safe_load(path.read_text())["groups"][0]["rules"]
    return next(r["labels"]["severity"] for r in rules if r.get("alert") == alert_name(cause))


# ---------------------------------------------------------------- VictoriaMetrics: the second backend


@pytest.fixture(scope="module")
def victoria_per_scenario(scenario_history, tmp_path_factory):
    """Per scenario: a VictoriaMetrics single-node with the same promtool-built blocks imported by vmctl."""
    if not have_victoria():
        pytest.fail("victoria-metrics / vmctl / vmalert missing: scripts/test.sh installs the Debian package")
    servers = {}
    try:
        for scenario, item in scenario_history.items():
            folder = tmp_path_factory.mktemp(f"vm-{scenario}")
            servers[scenario] = start_victoria(folder)
            vmctl_import(item["folder"] / "data", servers[scenario])
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def _firing_after_replay(server, end: int) -> list[dict[str, str]]:
    server.flush()
    got = requests.get(server.url + "/api/v1/query", params={"query": 'ALERTS{alertstate="firing"}', "time": end,
                                                            "step": "1m"}, timeout=10).json()
    return [s["metric"] for s in got["data"]["result"]]


@pytest.mark.prometheus
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_vmalert_replay_fires_the_python_causes(scenario_history, victoria_per_scenario, scenario):
    item = scenario_history[scenario]
    server = victoria_per_scenario[scenario]
    rules = _rule_file(server.folder, scenario)
    end = item["end"]
    start = end - 10 * 60  # 15-min windows need 15 min of history before the first evaluation
    iso = lambda t: datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    done = vmalert_replay(server.folder, rules, server, iso(start), iso(end))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    firing = _firing_after_replay(server, end)
    assert sorted(m["cause"] for m in firing) == item["causes"], (done.stdout + done.stderr)[-2000:]
    assert all(m["model_name"] == MODEL_NAME and m["engine"] == ENGINE for m in firing)


@pytest.mark.prometheus
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_victoria_window_diagnoses_like_prometheus(kb, scenario_history, victoria_per_scenario, scenario):
    """The Prometheus-window diagnosis pointed at VictoriaMetrics finds the same causes."""
    item = scenario_history[scenario]
    stop = datetime.fromtimestamp(item["end"], UTC)
    window = PrometheusWindow(victoria_per_scenario[scenario].url, stop - timedelta(minutes=15), stop, timeout=10)
    live = diagnose_window(kb, window, resolve_slo(kb, SLO_OF.get(scenario, "chat")))
    assert live.engine == "vllm" and not live.readings.errors
    assert sorted(live.diagnosis.matched_ids) == item["causes"]
