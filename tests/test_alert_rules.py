"""`python -m triage rules`: the tree as Prometheus rules, checked by promtool, unit-tested by promtool over the
simulator's scenarios, dry-run against a real Prometheus, and replayed by vmalert over VictoriaMetrics — the alerts
that fire are the causes the Python diagnosis finds."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote_plus

import pytest
import requests
import yaml

from tests.cli_tools import run_triage
from tests.conftest import edit_yaml
from tests.fleet_history import STEP, slo_of
from tests.prom_harness import PROMTOOL, backfill
from tests.rules_harness import (
    have_victoria,
    merge_openmetrics,
    promtool_test_file,
    run_promtool_test,
    series_count,
    start_victoria,
    vmalert_replay,
    vmctl_import,
    with_import_padding,
)
from triage.alerting.export import alert_name, build
from triage.cli import main
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.server_signals import first_needs
from triage.diagnosis.window import diagnose_window, window_signals
from triage.knowledge import DEFAULT_TREE_DIR
from triage.knowledge.loader import load_knowledge
from triage.knowledge.messages import message_text
from triage.knowledge.needs import Need
from triage.knowledge.replicas import record_name
from triage.sources.metrics.exposition import parse_metrics_text
from triage.sources.metrics.prometheus_window import PrometheusWindow
from triage.sources.metrics.simulator import ENGINE, MODEL_NAME, SCENARIOS, Simulator
from triage.sources.metrics.snapshot_window import SnapshotWindow

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(900)  # the session's simulated fleet (tests/fleet_history.py) takes minutes to build
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
        if kb.symptom(kb.parent[cause]).scope == "fleet":  # no replica to open: the cause's branch of the tree
            assert url == f"https://triage.example/?node={cause}"
            continue
        assert url.startswith("https://triage.example/live?source=prometheus&profile=prod&window=15m&end=")
        assert url.endswith(f"&node={cause}") and "match_model_name=" in url and "match_instance=" in url
        assert "{{ $value" in alert["annotations"]["summary"] and "{{ $value" in alert["annotations"]["description"]
        for name in {t for t in alert["expr"].replace("(", " ").replace(")", " ").split() if t.startswith("triage:")}:
            assert name in records, f"{alert['alert']} reads {name}, which no recording rule writes"
    assert all(r.startswith("triage:") and r.endswith(":15m") for r in records)


def test_recording_only_for_another_window(tmp_path, capsys):
    """A second window for the Fleet view: its recording rules alone, in their own group, no second alert set."""
    code, out, err = rules_cli(capsys, "--recording-only", "--window", "1h")
    assert code == 0 and not err
    group = yaml.safe_load(out)["groups"][0]
    assert group["name"] == "inference-triage-1h" and group["rules"]
    assert all("alert" not in r and r["record"].endswith(":1h") for r in group["rules"])
    path = tmp_path / "rules-1h.yml"
    path.write_text(out)
    checked = promtool_check(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


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


# ---------------------------------------------------------------- a recipe is the one definition of a signal

NEW_SIGNALS = [  # added to a copy of tree/signals.yaml only: a reading no other signal reads, and a ratio over it
    {"name": "decode_time_mean_s", "label": {"en": "Decode time (mean)", "zh": "decode 时间（均值）"}, "unit": "s",
     "worse": "higher", "meaning": {"en": "Mean time a request spends decoding", "zh": "请求 decode 的平均时间"},
     "sources": {"server": "mean request_decode_time_seconds"},
     "recipe": {"need": {"kind": "hist_mean", "key": "decode_time"}}},
    {"name": "decode_over_prefill", "label": {"en": "Decode ÷ prefill time", "zh": "decode ÷ prefill 时间"},
     "unit": "ratio", "worse": "neither", "meaning": {"en": "Mean decode ÷ mean prefill time",
                                                      "zh": "平均 decode ÷ 平均 prefill 时间"},
     "sources": {"server": "decode_time_mean_s ÷ mean request_prefill_time_seconds"},
     "recipe": {"div": [{"signal": "decode_time_mean_s"}, {"need": {"kind": "hist_mean", "key": "prefill_time"}}]}},
]


def _snapshots(scenario: str, minutes: int = 10) -> list:
    sim = Simulator(scenario, seed=3)
    snaps = []
    for _ in range(minutes * 4 + 1):
        snaps.append(parse_metrics_text(sim.render(), sim.now, scenario))
        sim.advance(15)
    return snaps


def test_a_signal_added_only_in_yaml_is_computed_from_a_window_and_compiled_to_promql(tmp_path):
    """The recipe is the one definition: a new signals.yaml entry is read, computed and told (its message built
    from the recipe) by the server diagnosis, and compiled to a recording rule, with no Python change."""
    tree = tmp_path / "tree"
    shutil.copytree(DEFAULT_TREE_DIR, tree)
    edit_yaml(tree / "signals.yaml", lambda data: data["signals"].extend(NEW_SIGNALS))
    kb = load_knowledge(tree)
    decode = Need("hist_mean", "decode_time")
    assert decode in first_needs(kb) and decode not in first_needs(load_knowledge())  # the window is asked for it

    signals, readings = window_signals(kb, SnapshotWindow(_snapshots("decode_bound")))
    mean, prefill = readings.get(decode), readings.get(Need("hist_mean", "prefill_time"))
    assert isinstance(mean, float) and isinstance(prefill, float) and mean > 0 and prefill > 0
    got, ratio = signals.get("decode_time_mean_s"), signals.get("decode_over_prefill")
    assert got is not None and ratio is not None
    assert got.value == pytest.approx(mean) and ratio.value == pytest.approx(mean / prefill)
    assert message_text(got.source, "en") == "mean decode_time (histogram sum ÷ count)"
    assert message_text(ratio.source, "en") == ("the decode_time_mean_s signal ÷ mean prefill_time "
                                                "(histogram sum ÷ count)")
    assert message_text(ratio.source, "zh").startswith("decode_time_mean_s 信号 ÷ prefill_time 的均值")
    assert signals.get("ttft_p99_s") is not None  # the catalogue's own signals still come with them

    rules = build(kb, resolve_slo(kb, "chat"))
    own = rules.records["decode_time_mean_s"]
    assert "vllm:request_decode_time_seconds_sum" in own and "vllm:request_decode_time_seconds_count" in own
    over = rules.records["decode_over_prefill"]
    assert record_name("decode_time_mean_s", "15m") in over and "request_prefill_time_seconds_sum" in over


# ---------------------------------------------------------------- real engines over the scenarios
# fleet_history (tests/fleet_history.py): every scenario is one replica, instance=<scenario>, of a real Prometheus.


def _rule_file(folder: Path, slo: str, *extra: str) -> Path:
    path = folder / f"rules-{slo}{''.join(extra)}.yml"
    if not path.exists():
        done = run_triage("rules", "--slo", slo, *extra)
        assert done.returncode == 0, done.stderr
        path.write_text(done.stdout)
    return path


def _alert_names(path: Path) -> list[str]:
    return [r["alert"] for r in yaml.safe_load(path.read_text())["groups"][0]["rules"] if "alert" in r]


def _severity(path: Path, cause: str) -> str:
    rules = yaml.safe_load(path.read_text())["groups"][0]["rules"]
    return next(r["labels"]["severity"] for r in rules if r.get("alert") == alert_name(cause))


def test_the_fleet_has_a_cause_per_sick_scenario(fleet_history):
    assert fleet_history.causes["healthy"] == [] and fleet_history.causes["decode_bound"] == []
    assert "ttft.queueing" in fleet_history.causes["queueing"]
    assert "memory.kv_cache" in fleet_history.causes["kv_pressure"]
    assert "throughput.low_batch_utilization" in fleet_history.causes["low_batch"]
    assert "ttft.kv_transfer" in fleet_history.causes["pd_slow_transfer"]


@pytest.mark.prometheus
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_dry_run_matches_python_diagnosis(fleet_history, scenario):
    done = run_triage("rules", "--evaluate", "--prometheus", fleet_history.server.url, "--end",
                      fleet_history.stop.isoformat(), "--slo", slo_of(scenario), "--match", f'instance="{scenario}"',
                      "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert sorted(a["cause"] for a in data["alerts"]) == fleet_history.causes[scenario]
    assert all(a["labels"] == {**REPLICA, "instance": scenario} and a["alert"] == alert_name(a["cause"])
               for a in data["alerts"])
    assert data["skipped"] and all({"cause", "symptom", "reason"} <= set(s) for s in data["skipped"])


@pytest.mark.prometheus
def test_dry_run_over_the_whole_fleet_fires_per_replica(fleet_history):
    """Without --match every replica is evaluated separately, in one query per alert."""
    done = run_triage("rules", "--evaluate", "--prometheus", fleet_history.server.url, "--end",
                      fleet_history.stop.isoformat())
    assert done.returncode == 0, done.stderr
    for scenario, causes in fleet_history.causes.items():
        if slo_of(scenario) != "chat":
            continue
        fired = sorted(line.split()[1] for line in done.stdout.splitlines()
                       if line.startswith("FIRING") and f"instance={scenario}," in line)
        assert fired == sorted(alert_name(c) for c in causes), scenario
    assert "cause(s) not decidable from server metrics" in done.stderr


@pytest.mark.prometheus
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_promtool_unit_tests_from_scenario(fleet_history, tmp_path, scenario):
    """promtool test rules over the scenario's samples: at the last sample exactly the Python causes fire."""
    rules = _rule_file(fleet_history.folder, slo_of(scenario))
    labels = {**REPLICA, "instance": scenario}
    firing = [{"alertname": alert_name(c), "alertstate": "firing", "cause": c, "symptom": c.split(".")[0],
               "severity": _severity(rules, c), **labels} for c in fleet_history.causes[scenario]]
    om = merge_openmetrics({scenario: fleet_history.texts[scenario]})
    test = promtool_test_file(rules, om, STEP, firing, _alert_names(rules))
    done = run_promtool_test(tmp_path, test)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def test_prometheus_renders_the_runbook_link(fleet_history, tmp_path):
    """promtool test rules: each firing alert of a sick replica carries a runbook_url naming its replica's labels,
    the window, the evaluation time (query "time()") and its node."""
    scenario, base = "queueing", "https://triage.example/"
    done = run_triage("rules", "--slo", slo_of(scenario), "--dashboard-url", base)
    assert done.returncode == 0, done.stderr
    doc = yaml.safe_load(done.stdout)
    order: list[str] = []
    for rule in doc["groups"][0]["rules"]:
        if "alert" in rule:  # only the link is checked here (the other annotations quote the evidence values)
            rule["annotations"] = {"runbook_url": rule["annotations"]["runbook_url"]}
            # a replica alert's link names its labels; a fleet alert's (listed last) opens the Diagnose page
            order = re.findall(r"&match_(\w+)=", rule["annotations"]["runbook_url"]) or order
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(doc, sort_keys=False, width=10**6))
    labels = {**REPLICA, "instance": scenario}
    causes = fleet_history.causes[scenario]
    assert causes and set(labels) <= set(order)
    test = promtool_test_file(rules, merge_openmetrics({scenario: fleet_history.texts[scenario]}), STEP, [], [])
    case = test["tests"][0]
    at = case.pop("promql_expr_test")[0]["eval_time"]
    match = "".join(f"&match_{k}={quote_plus(labels[k])}" for k in order if k in labels)
    case["alert_rule_test"] = [{
        "eval_time": at, "alertname": alert_name(c),
        "exp_alerts": [{"exp_labels": {"cause": c, "symptom": c.split(".")[0], "severity": _severity(rules, c),
                                       **labels},
                        "exp_annotations": {"runbook_url": f"{base.rstrip('/')}/live?source=prometheus&window=15m"
                                                           f"&end={at.removesuffix('s')}{match}&node={c}"}}]}
        for c in causes]
    done = run_promtool_test(tmp_path, test)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


# ---------------------------------------------------------------- VictoriaMetrics: the second backend


@pytest.fixture(scope="module")
def fleet_blocks(fleet_history, tmp_path_factory):
    """The fleet as promtool-built blocks (plus vmctl padding), and how many real series they hold."""
    if not have_victoria():
        pytest.fail("victoria-metrics / vmctl / vmalert missing: scripts/test.sh installs the Debian package")
    merged = merge_openmetrics(fleet_history.texts)
    return backfill(with_import_padding(merged), tmp_path_factory.mktemp("blocks")), series_count(merged)


@contextmanager
def victoria_with_fleet(fleet_blocks, folder: Path):
    """A VictoriaMetrics single-node holding the fleet, imported by vmctl from the promtool-built blocks."""
    blocks, expected = fleet_blocks
    server = start_victoria(folder)
    try:
        vmctl_import(blocks, server, expected=expected)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def victoria(fleet_blocks, tmp_path_factory):
    with victoria_with_fleet(fleet_blocks, tmp_path_factory.mktemp("victoria")) as server:
        yield server


@pytest.mark.prometheus
@pytest.mark.parametrize("slo", ["chat", "batch"])
def test_vmalert_replay_fires_the_python_causes(fleet_history, fleet_blocks, tmp_path, slo):
    """vmalert -replay of the rule file over the last 10 minutes, reading and writing a VictoriaMetrics holding the
    fleet (its recording rules written back for the alerts to read): at the end, per replica, the firing alerts are
    the causes the Python diagnosis finds; the healthy replica fires none. vmalert adds slo=<preset> to what it
    writes, as a deployment's external labels would: the alerts must still join their signals per replica."""
    rules = _rule_file(fleet_history.folder, slo, "--replayable")
    links = {r["labels"]["cause"]: r["annotations"]["runbook_url"] for r in
             yaml.safe_load(rules.read_text())["groups"][0]["rules"] if "alert" in r}
    assert links and all(url.endswith(f"node={cause}") and "&end=" not in url for cause, url in links.items())
    end = fleet_history.end
    iso = lambda t: datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    with victoria_with_fleet(fleet_blocks, tmp_path) as victoria:
        done = vmalert_replay(tmp_path, rules, victoria, iso(end - 600), iso(end), extra_label=f"slo={slo}")
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        victoria.flush()
        got = requests.get(victoria.url + "/api/v1/query", timeout=10,
                           params={"query": f'ALERTS{{alertstate="firing",slo="{slo}"}}', "time": end}).json()
    firing = [s["metric"] for s in got["data"]["result"]]
    for scenario, causes in fleet_history.causes.items():
        if slo_of(scenario) == slo:
            fired = sorted(m["cause"] for m in firing if m.get("instance") == scenario)  # fleet alerts: no instance
            assert fired == causes, (scenario, (done.stdout + done.stderr)[-1500:])
    if slo == slo_of("healthy"):
        assert not [m for m in firing if m.get("instance") == "healthy"]  # (under batch, idle capacity is a finding)


@pytest.mark.prometheus
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_victoria_window_diagnoses_like_prometheus(kb, fleet_history, victoria, scenario):
    """The Prometheus-window diagnosis pointed at VictoriaMetrics finds the same causes."""
    stop = fleet_history.stop
    window = PrometheusWindow(victoria.url, stop - timedelta(minutes=15), stop, match={"instance": scenario},
                              timeout=10)
    live = diagnose_window(kb, window, resolve_slo(kb, slo_of(scenario)))
    assert live.engine == "vllm" and not live.readings.errors
    assert sorted(live.diagnosis.matched_ids) == fleet_history.causes[scenario]


@pytest.mark.prometheus
def test_victoria_faults(fleet_history, victoria, tmp_path):
    """The Prometheus-window faults against a real VictoriaMetrics: a window before any data, a filter matching no
    replica, a server that stopped, and basic auth (401 names the profile; the right password reads)."""
    from triage.errors import TriageError
    from triage.sources.metrics.profiles import Profile

    stop = fleet_history.stop
    needs = [Need("rate", "prompt_tokens"), Need("gauge_mean", "running")]
    before = PrometheusWindow(victoria.url, stop - timedelta(hours=6), stop - timedelta(hours=5), timeout=10)
    readings = before.read(needs)
    assert all(readings.values[n] is None for n in needs) and "no samples between" in readings.errors[0]
    # a filter that selects nothing is refused by name, not diagnosed as an empty (healthy-looking) window
    with pytest.raises(TriageError) as nobody:
        PrometheusWindow(victoria.url, stop - timedelta(minutes=15), stop, match={"instance": "nobody"})
    assert nobody.value.key == "match" and 'instance="nobody"' in nobody.value.reason
    locked = start_victoria(tmp_path, auth=("triage", "s3cret"))
    try:
        with pytest.raises(TriageError) as err:
            PrometheusWindow(Profile(name="vm", url=locked.url, username="triage", password="wrong"),
                             stop - timedelta(minutes=15), stop, timeout=5)
        assert err.value.reason == "Prometheus answered HTTP 401: check the token / basic auth of profile 'vm'"
        with pytest.raises(TriageError, match="no vLLM, SGLang or TGI metrics"):  # the right password gets in
            PrometheusWindow(Profile(name="vm", url=locked.url, username="triage", password="s3cret"),
                             stop - timedelta(minutes=15), stop, timeout=5)
    finally:
        locked.stop()
    with pytest.raises(TriageError, match="unreachable"):
        PrometheusWindow(locked.url, stop - timedelta(minutes=15), stop, timeout=5)


def kb_of():
    from triage.knowledge.loader import load_knowledge

    return load_knowledge()


@pytest.mark.prometheus
def test_info_flag_found_when_matching_a_label_the_info_metric_lacks(kb, fleet_history):
    """`rules --evaluate --match model_name=…`: vllm:cache_config_info has no model_name, so its flag is selected
    without that matcher and joined onto the replica's running gauge, which applies it."""
    from triage.alerting.promql import Compiler
    from triage.knowledge.loader import load_alerting_config
    from triage.knowledge.replicas import replica_labels

    group = replica_labels(load_alerting_config().target_labels, kb.engines)
    for match, expected in (({"model_name": MODEL_NAME, "instance": "kv_pressure"}, 1),
                            ({"model_name": "another-model", "instance": "kv_pressure"}, 0)):
        query = Compiler(kb, kb.engines, "15m", group, match, inline=True).signal("prefix_caching_enabled")
        answer = requests.get(f"{fleet_history.server.url}/api/v1/query", timeout=30,
                              params={"query": query, "time": fleet_history.end}).json()["data"]["result"]
        assert len(answer) == expected, (match, answer)
        assert all(s["value"][1] == "1" and s["metric"]["model_name"] == MODEL_NAME for s in answer)
