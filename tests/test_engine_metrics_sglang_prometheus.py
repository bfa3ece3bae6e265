"""SGLang's per-stage latency, its evictable KV and a router's per-worker series read from a real Prometheus: the
window's PromQL and the compiled rule select stage="prefill_forward" as the snapshot window does, and a Prometheus
holding only the vLLM Router's series, grouped by worker (the library and `diagnose --by worker`), lights routing
skew."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from tests.cli_tools import run_triage
from tests.prom_harness import serve_openmetrics
from triage.alerting.promql import Compiler
from triage.diagnosis.fleet import diagnose_fleet
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.window import window_signals
from triage.knowledge import DEFAULT_TREE_DIR
from triage.knowledge.loader import load_knowledge
from triage.sources.metrics.prometheus_fleet import FleetWindow
from triage.sources.metrics.prometheus_window import PrometheusWindow

ROOT = Path(__file__).resolve().parents[1]
STEP = 15
SPAN = 1800
SG = 'engine_type="unified",model_name="ms",tp_rank="0"'
LE = ("0.5", "1", "2.5", "5", "10", "+Inf")
WORKERS = {"http://w1:30000": (10, 40), "http://w2:30000": (1, 4), "http://w3:30000": (1, 4),
           "http://w4:30000": (1, 4)}  # routed req/s and requests in flight


def series(name: str, labels: str, times: list[int], value) -> list[str]:
    return [f"{name}{{{labels}}} {value(i)} {t}" for i, t in enumerate(times)]


def histogram(name: str, labels: str, times: list[int], per_step: float, mean: float) -> list[str]:
    """``per_step`` observations of ``mean`` seconds each per step (all in the first bucket at or above it)."""
    out = [f"# TYPE {name} histogram"]
    for le in LE:
        inside = le == "+Inf" or float(le) >= mean
        out += series(f"{name}_bucket", f'{labels},le="{le}"', times, lambda i, inside=inside: per_step * i * inside)
    out += series(f"{name}_sum", labels, times, lambda i: per_step * i * mean)
    return out + series(f"{name}_count", labels, times, lambda i: per_step * i)


def openmetrics(end: int) -> str:
    """SGLang: 15 requests per step, TTFT 5 s, queue 0.2 s, prefill_forward 4 s (and a PD stage that is no prefill);
    the KV pool 5 % in use and 90 % evictable prefix cache. The vLLM Router: four workers, one hot."""
    t = list(range(end - SPAN, end + 1, STEP))
    lines = ["# TYPE sglang:num_running_reqs gauge", *series("sglang:num_running_reqs", SG, t, lambda i: 8)]
    lines += histogram("sglang:time_to_first_token_seconds", SG, t, 15, 5.0)
    lines += histogram("sglang:queue_time_seconds", SG, t, 15, 0.2)
    stage = "sglang:per_stage_req_latency_seconds"
    lines += histogram(stage, SG + ',stage="prefill_forward"', t, 15, 4.0)[:]
    lines += histogram(stage, SG + ',stage="decode_transferred"', t, 15, 9.0)[1:]  # one TYPE line per family
    for name, value in (("max_total_num_tokens", 100_000), ("kv_used_tokens", 5_000),
                        ("kv_evictable_tokens", 90_000), ("kv_available_tokens", 5_000)):
        lines += [f"# TYPE sglang:{name} gauge", *series(f"sglang:{name}", SG, t, lambda i, v=value: v)]
    return "\n".join([*lines, "# EOF"]) + "\n"


def router_openmetrics(end: int) -> str:
    """The vLLM Router alone: four workers, the first gets 10 req/s with 40 in flight, the others 1 and 4."""
    t = list(range(end - SPAN, end + 1, STEP))
    lines = ["# TYPE vllm_router_running_requests gauge"]
    for w, (_, flight) in WORKERS.items():
        lines += series("vllm_router_running_requests", f'worker="{w}"', t, lambda i, f=flight: f)
    lines.append("# TYPE vllm_router_processed_requests counter")
    for w, (rate, _) in WORKERS.items():
        lines += series("vllm_router_processed_requests_total", f'worker="{w}"', t, lambda i, r=rate: r * STEP * i)
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    yield from serve_openmetrics(tmp_path_factory, "sglang", openmetrics, STEP)


@pytest.fixture(scope="module")
def router_prometheus(tmp_path_factory):
    yield from serve_openmetrics(tmp_path_factory, "router", router_openmetrics, STEP)


def span(server) -> tuple[datetime, datetime]:
    stop = datetime.fromtimestamp(server.end, UTC)
    return stop - timedelta(minutes=15), stop


@pytest.mark.prometheus
def test_prefill_stage_and_evictable_kv_through_prometheus(prometheus):
    kb = load_knowledge(DEFAULT_TREE_DIR)
    start, stop = span(prometheus)
    window = PrometheusWindow(prometheus.url, start, stop, match={"model_name": "ms"}, timeout=30, engines=kb.engines,
                              engine="sglang")
    got = window_signals(kb, window)[0]
    assert got.get("prefill_share_of_ttft").value == pytest.approx(0.8)  # prefill_forward only, not decode_transferred
    assert got.get("queue_share_of_ttft").value == pytest.approx(0.04)
    assert got.get("kv_usage_max").value == pytest.approx(0.05)
    assert got.get("kv_evictable_share").value == pytest.approx(0.9)


@pytest.mark.prometheus
def test_the_compiled_rule_selects_the_prefill_stage(prometheus):
    kb = load_knowledge(DEFAULT_TREE_DIR)
    query = Compiler(kb, kb.engines, "15m", ("model_name",), inline=True).signal("prefill_share_of_ttft")
    assert query is not None and 'stage="prefill_forward"' in query
    answer = requests.get(f"{prometheus.url}/api/v1/query", params={"query": query, "time": prometheus.end},
                          timeout=10).json()
    assert answer["status"] == "success", answer
    [row] = answer["data"]["result"]
    assert row["metric"] == {"model_name": "ms"} and float(row["value"][1]) == pytest.approx(0.8)


@pytest.mark.prometheus
def test_a_router_only_prometheus_by_worker_lights_routing_skew(router_prometheus):
    kb = load_knowledge(DEFAULT_TREE_DIR)
    start, stop = span(router_prometheus)
    window = FleetWindow(router_prometheus.url, start, stop, by=["worker"], timeout=30, engines=kb.engines)
    assert window.engine.id == "vllm_router"  # detected: no engine's own series in this Prometheus
    result = diagnose_fleet(kb, window, resolve_slo(kb, "chat"))
    assert sorted(r.labels["worker"] for r in result.rows if not r.diagnosis.empty) == sorted(WORKERS)
    sig = result.fleet.signals.values
    assert sig["req_rate_max_over_median"].value == pytest.approx(10.0)
    assert sig["inflight_max_over_median"].value == pytest.approx(10.0)
    skew = next(f for f in result.fleet.findings + result.fleet.notes if f.cause == "fleet.routing_skew")
    assert {e.signal for e in skew.evidence if e.holds} == {"req_rate_max_over_median", "inflight_max_over_median"}


@pytest.mark.prometheus
def test_cli_diagnose_by_worker_on_the_router(router_prometheus):
    stop = datetime.fromtimestamp(router_prometheus.end, UTC)
    done = run_triage("diagnose", "--prometheus", router_prometheus.url, "--end", stop.isoformat(), "--window", "15m",
                      "--by", "worker", "--slo", "chat", "--json")
    assert done.returncode == 0, done.stderr
    fleet = json.loads(done.stdout)["fleet"]
    lit = [f["cause"] for f in fleet["findings"] + fleet["notes"]]
    assert "fleet.routing_skew" in lit, fleet
