"""The simulator as NVIDIA Dynamo and as llm-d's endpoint picker in front of several vLLM replicas (issue 28): the
router's names and labels are the ones its engine map and its source know, its numbers agree with the replicas', and
through a real Prometheus every scenario behind either router lights its cause, and the straggler, skewed and
saturated fleets behind it light their fleet node grouped by pod."""

from __future__ import annotations

import json
import re
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from tests.cli_tools import run_triage
from tests.prom_harness import PROMETHEUS, PROMTOOL, start_prometheus
from tests.rules_harness import merge_openmetrics
from tests.test_fleet_causes import FLEETS, LIT
from tests.test_live_scenarios import EXPECTED, check
from triage.diagnosis.fleet import diagnose_fleet
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.window import diagnose_window
from triage.knowledge.engines import detect_engines
from triage.sources.metrics.exposition import parse_metrics_text, present_names
from triage.sources.metrics.prometheus_fleet import FleetWindow
from triage.sources.metrics.prometheus_window import PrometheusWindow
from triage.sources.metrics.stack import STACKS, Stack, log_buckets, write_stack_openmetrics

ROOT = Path(__file__).resolve().parent.parent
MAP = {"dynamo": "dynamo", "llm_d": "llm_d_epp"}
# the keys of each router map the simulated router exports (the rest need flow control, prefix-aware routing …)
SIMULATED = {"dynamo": ["ttft", "itl", "e2e", "prompt_len", "running", "waiting", "request_success",
                        "generation_tokens", "worker_inflight", "worker_duration", "kv_usage", "prefix_hit_rate"],
             "llm_d_epp": ["ttft", "ntpot", "e2e", "request_success", "pool_queue_avg", "pool_queue_spread",
                           "endpoint_queue", "pool_kv_avg", "pool_kv_spread", "ready_endpoints"]}
SAMPLE_RE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? (\S+)$")
LABEL_RE = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    out = []
    for line in text.splitlines():
        found = SAMPLE_RE.match(line)
        if found:
            out.append((found.group(1), dict(LABEL_RE.findall(found.group(2) or "")), float(found.group(3))))
    return out


@pytest.fixture(scope="module")
def scrapes():
    out = {}
    for kind in STACKS:
        stack = Stack(kind, [("queueing", {}), ("queueing", {"rate": 1.0}), ("healthy", {})], seed=2)
        stack.advance(90)
        out[kind] = (stack, stack.render())
    return out


@pytest.mark.parametrize("kind", STACKS)
def test_the_router_speaks_in_its_engine_maps_names(kb, scrapes, kind):
    stack, text = scrapes[kind]
    present = present_names(parse_metrics_text(text, stack.now, kind))  # as the scrape and Prometheus paths read it
    engine = kb.engines[MAP[kind]]
    assert engine.role == "router" and engine in detect_engines(present, kb.engines)
    missing = [k for k in SIMULATED[MAP[kind]] if engine.resolve(k, present) is None]
    assert missing == [], missing
    assert "vllm" in {e.id for e in detect_engines(present, kb.engines)}  # the replicas behind it


def test_labels_as_the_sources_set_them(scrapes):
    labels: dict[str, set[str]] = {}
    for kind in STACKS:
        for name, found, _ in samples(scrapes[kind][1]):
            labels.setdefault(name, set()).update(found)
    assert labels["dynamo_frontend_requests_total"] == {"model", "endpoint", "request_type", "status", "pod"}
    assert labels["dynamo_frontend_time_to_first_token_seconds_bucket"] == {"model", "le", "pod"}
    assert labels["dynamo_component_kvstats_gpu_cache_usage_percent"] == {
        "dynamo_namespace", "dynamo_component", "dynamo_endpoint", "pod"}
    assert labels["llm_d_epp_request_total"] == {"model_name", "target_model_name", "fairness_id", "priority", "pod"}
    assert labels["llm_d_epp_request_ttft_seconds_bucket"] == {
        "model_name", "target_model_name", "fairness_id", "priority", "streaming", "le", "pod"}
    assert labels["llm_d_epp_std_dev_queue_size"] == {"name", "pod"}
    assert labels["llm_d_epp_per_endpoint_queue_size"] == {"name", "model_server_endpoint", "pod"}
    assert labels["inference_pool_per_pod_queue_size"] == {"name", "model_server_pod", "pod"}  # the legacy twin
    assert labels["vllm:num_requests_waiting"] == {"model_name", "engine", "pod"}
    dynamo_ttft = [float(f["le"]) for n, f, _ in samples(scrapes["dynamo"][1])
                   if n == "dynamo_frontend_time_to_first_token_seconds_bucket" and f["le"] != "+Inf"]
    assert dynamo_ttft == log_buckets(0.001, 480.0, 18) and dynamo_ttft[:3] == [0.0, 0.0022, 0.0047]


@pytest.mark.parametrize("kind", STACKS)
def test_the_routers_numbers_are_the_replicas(scrapes, kind):
    """What the router counts is what its replicas did: requests, and (llm-d) the pool's queue statistics."""
    stack, text = scrapes[kind]
    rows = samples(text)
    done = sum(v for n, _, v in rows if n == "vllm:request_success_total")
    router = "dynamo_frontend_requests_total" if kind == "dynamo" else "llm_d_epp_request_total"
    # the router counts from its own start, the engines from theirs (two minutes of warm-up earlier)
    assert 0 < next(v for n, _, v in rows if n == router) <= done
    waiting = {f["pod"]: v for n, f, v in rows if n == "vllm:num_requests_waiting"}
    assert set(waiting) == set(stack.pods) and len(waiting) == 3
    if kind == "llm_d":
        per_endpoint = {f["model_server_endpoint"]: v for n, f, v in rows if n == "llm_d_epp_per_endpoint_queue_size"}
        assert per_endpoint == waiting
        std = next(v for n, _, v in rows if n == "llm_d_epp_std_dev_queue_size")
        assert std == pytest.approx(round(statistics.stdev(waiting.values()), 2))
        assert next(v for n, _, v in rows if n == "llm_d_epp_ready_endpoints") == 3
    else:
        inflight = next(v for n, _, v in rows if n == "dynamo_frontend_inflight_requests")
        running = sum(v for n, _, v in rows if n == "vllm:num_requests_running")
        assert inflight == sum(waiting.values()) + running


def test_an_unknown_stack_is_refused():
    from triage.errors import TriageError

    with pytest.raises(TriageError, match="unknown stack 'nginx'; valid: dynamo, llm_d"):
        Stack("nginx", [("healthy", {})])


def test_cli_writes_a_stack_backfill_and_refuses_to_serve_one(tmp_path):
    path = tmp_path / "stack.om"
    done = run_triage("simulate", "--scenario", "queueing", "--stack", "dynamo", "--replicas", "3", "--openmetrics",
                      str(path), "--minutes", "1")
    assert done.returncode == 0, done.stderr
    assert "on 3 replica(s) behind NVIDIA Dynamo's frontend" in done.stdout
    text = path.read_text(encoding="utf-8")
    assert text.endswith("# EOF\n") and 'dynamo_frontend_requests_total{' in text
    assert {f'pod="dynamo-vllm-worker-{i}"' in text for i in range(3)} == {True}
    served = run_triage("simulate", "--scenario", "queueing", "--stack", "llm_d")
    assert served.returncode == 2 and served.stderr.count("\n") == 1 and "--openmetrics FILE" in served.stderr


# ---- through a real Prometheus ------------------------------------------------------------------------------
WINDOW_MIN = 10
REPLICAS = 2


@pytest.fixture(scope="module")
def stacks_server(tmp_path_factory):
    """One Prometheus per router: every scenario as a stack of two replicas (job=<scenario>) and the three fleets of
    test_fleet_causes behind the router (job=fleet-<name>), backfilled by promtool."""
    if not (Path(PROMETHEUS).exists() and Path(PROMTOOL).exists()):
        pytest.fail("prometheus / promtool missing: scripts/test.sh installs the Debian package")
    end = int(time.time() // 60 * 60) - 120
    servers = {}
    try:
        for kind in STACKS:
            folder = tmp_path_factory.mktemp(f"stack-{kind}")
            texts = {}
            jobs = {sc: [(sc, {})] * REPLICAS for sc in EXPECTED}
            jobs.update({f"fleet-{name}": members for name, (_, members) in FLEETS.items()})
            for job, members in jobs.items():
                path = folder / f"{job}.om"
                write_stack_openmetrics(path, kind, members, minutes=WINDOW_MIN + 1, step=15, end=end, seed=5)
                texts[job] = path.read_text(encoding="utf-8")
            servers[kind] = start_prometheus(folder, merge_openmetrics(texts, label="job"), end)
        yield servers, datetime.fromtimestamp(end, UTC)
    finally:
        for server in servers.values():
            server.stop()


def _query(url: str, expr: str, at: datetime) -> list[dict]:
    answer = requests.get(f"{url}/api/v1/query", params={"query": expr, "time": at.timestamp()}, timeout=10).json()
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


@pytest.mark.prometheus
@pytest.mark.parametrize("scenario", EXPECTED)
@pytest.mark.parametrize("kind", STACKS)
def test_each_scenario_behind_the_router_lights_its_cause(kb, stacks_server, kind, scenario):
    servers, stop = stacks_server
    window = PrometheusWindow(servers[kind].url, stop - timedelta(minutes=WINDOW_MIN), stop, match={"job": scenario},
                              timeout=10)
    live = diagnose_window(kb, window, resolve_slo(kb, EXPECTED[scenario][0]))
    assert live.engine == "vllm" and not live.readings.errors
    check(live.diagnosis.matched_ids, scenario)


@pytest.mark.prometheus
@pytest.mark.parametrize("kind", STACKS)
def test_the_router_and_its_replicas_agree_in_prometheus(stacks_server, kind):
    """In Prometheus the router's request rate is its replicas' (each labelled with its pod), and its TTFT p50 is
    theirs within a bucket of either histogram."""
    servers, stop = stacks_server
    url, span = servers[kind].url, f"{WINDOW_MIN - 1}m"
    router, ttft = (("dynamo_frontend_requests_total", "dynamo_frontend_time_to_first_token_seconds_bucket")
                    if kind == "dynamo" else ("llm_d_epp_request_total", "llm_d_epp_request_ttft_seconds_bucket"))
    pods = _query(url, 'count by (pod) (vllm:num_requests_waiting{job="queueing"})', stop)
    assert len(pods) == REPLICAS
    rate = float(_query(url, f'sum(rate({router}{{job="queueing"}}[{span}]))', stop)[0]["value"][1])
    engines = float(_query(url, f'sum(rate(vllm:request_success_total{{job="queueing"}}[{span}]))',
                           stop)[0]["value"][1])
    assert rate == pytest.approx(engines, rel=0.05)
    p50 = [float(_query(url, f'histogram_quantile(0.5, sum by (le) (rate({name}{{job="queueing"}}[{span}])))',
                        stop)[0]["value"][1]) for name in (ttft, "vllm:time_to_first_token_seconds_bucket")]
    assert p50[0] == pytest.approx(p50[1], rel=0.6), p50


@pytest.mark.prometheus
@pytest.mark.parametrize("name", list(FLEETS))
@pytest.mark.parametrize("kind", STACKS)
def test_fleet_behind_the_router_lights_its_node_by_pod(kb, stacks_server, kind, name):
    servers, stop = stacks_server
    slo = resolve_slo(kb, FLEETS[name][0])
    window = FleetWindow(servers[kind].url, stop - timedelta(minutes=WINDOW_MIN), stop, by=["pod"],
                         match={"job": f"fleet-{name}"}, timeout=10)
    result = diagnose_fleet(kb, window, slo)
    assert len(result.rows) == len(FLEETS[name][1]) and result.fleet is not None  # the router's pod is no replica
    assert result.fleet.matched_ids == [LIT[name]], [(f.cause, [(e.signal, e.value, e.holds) for e in f.evidence])
                                                     for f in result.fleet.findings]


@pytest.mark.prometheus
def test_cli_diagnose_by_pod_behind_the_endpoint_picker(stacks_server):
    servers, stop = stacks_server
    done = run_triage("diagnose", "--prometheus", servers["llm_d"].url, "--end", stop.isoformat(), "--window",
                      f"{WINDOW_MIN}m", "--by", "pod", "--match", 'job="fleet-straggler"', "--slo",
                      FLEETS["straggler"][0], "--json")
    assert done.returncode == 0, done.stderr
    fleet = json.loads(done.stdout)["fleet"]
    assert [f["cause"] for f in fleet["findings"]] == ["fleet.straggler"]
    assert "pod=vllm-llama3-8b-instruct-3" in fleet["signals"]["replica_tpot_p99_over_median"]["source"]


@pytest.mark.prometheus
def test_the_exported_straggler_alert_fires_behind_the_endpoint_picker(stacks_server):
    """The rule file's fleet alerts over the llm-d stack (replicas told apart by pod, fleets by job): the straggler
    fires on the straggler fleet only, routing skew and out of capacity on theirs; the router's pod is no replica."""
    servers, stop = stacks_server
    done = run_triage("rules", "--evaluate", "--prometheus", servers["llm_d"].url, "--end", stop.isoformat(),
                      "--window", f"{WINDOW_MIN}m", "--slo", FLEETS["straggler"][0], "--json")
    assert done.returncode == 0, done.stderr
    alerts = json.loads(done.stdout)["alerts"]
    fleet = sorted((a["labels"].get("job"), a["cause"]) for a in alerts if a["symptom"] == "fleet")
    assert ("fleet-straggler", "fleet.straggler") in fleet
    assert [job for job, cause in fleet if cause == "fleet.straggler"] == ["fleet-straggler"], fleet
    assert ("fleet-skew", "fleet.routing_skew") in fleet and ("fleet-out_of_capacity", "fleet.out_of_capacity") in fleet
    assert not any(a["labels"].get("pod") == "epp-0" for a in alerts)
