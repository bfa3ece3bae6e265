"""The vLLM and SGLang routers as engine maps (tree/engines/*router*.yaml): a scrape of the router alone is read by its
map, and its per-worker series, one window per worker, light the fleet's routing skew with the numbers (requests
routed to each worker, requests in flight on it; the production-stack router's queue per backend). What a router
does not export (the SGLang Model Gateway has no per-worker request counter) is not measurable, never even load."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.cli_tools import run_triage
from triage.diagnosis.fleet import FleetRow, fleet_diagnosis
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.window import diagnose_window
from triage.knowledge import DEFAULT_TREE_DIR
from triage.knowledge.loader import load_knowledge
from triage.knowledge.messages import message_text
from triage.report.text import evidence_line
from triage.sources.metrics.exposition import parse_metrics_text
from triage.sources.metrics.snapshot_window import SnapshotWindow

WORKERS = ["http://10.0.0.1:30000", "http://10.0.0.2:30000", "http://10.0.0.3:30000", "http://10.0.0.4:30000"]
HOT = WORKERS[0]
# per minute: the hot worker gets 600 requests and holds 40 in flight, the three others 60 and 4
ROUTED = {w: (600 if w == HOT else 60) for w in WORKERS}
IN_FLIGHT = {w: (40 if w == HOT else 4) for w in WORKERS}


@pytest.fixture(scope="module")
def kb():
    return load_knowledge(DEFAULT_TREE_DIR)


def rust_router(prefix: str, minute: int, running: str = "running_requests", processed: bool = True) -> str:
    """A vLLM Router (prefix vllm_router_) or sgl-router (sgl_router_) body after ``minute`` minutes; the SGLang
    Model Gateway (smg_) has smg_worker_requests_active and no per-worker request counter."""
    rows = [f"# TYPE {prefix}{running} gauge"]
    rows += [f'{prefix}{running}{{worker="{w}"}} {IN_FLIGHT[w]}' for w in WORKERS]
    rows += [f"# TYPE {prefix}worker_health gauge"] + [f'{prefix}worker_health{{worker="{w}"}} 1' for w in WORKERS]
    if processed:
        rows.append(f"# TYPE {prefix}processed_requests_total counter")
        rows += [f'{prefix}processed_requests_total{{worker="{w}"}} {ROUTED[w] * minute}' for w in WORKERS]
    rows += [f"# TYPE {prefix}requests_total counter", f'{prefix}requests_total{{route="/generate"}} {900 * minute}']
    return "\n".join(rows) + "\n"


def production_stack(minute: int) -> str:
    """The production-stack router re-exporting its backends' queues under vLLM's names, label server."""
    rows = ["# TYPE vllm:num_requests_running gauge"]
    rows += [f'vllm:num_requests_running{{server="{w}"}} {min(IN_FLIGHT[w], 8)}' for w in WORKERS]
    rows += ["# TYPE vllm:num_requests_waiting gauge"]
    rows += [f'vllm:num_requests_waiting{{server="{w}"}} {IN_FLIGHT[w] - min(IN_FLIGHT[w], 8)}' for w in WORKERS]
    rows += ["# TYPE vllm:current_qps gauge"] + [f'vllm:current_qps{{server="{w}"}} {ROUTED[w] / 60}' for w in WORKERS]
    rows += ["# TYPE vllm:healthy_pods_total gauge"] + [f'vllm:healthy_pods_total{{server="{w}"}} 1' for w in WORKERS]
    rows += ["# TYPE vllm:num_incoming_requests counter",
             f'vllm:num_incoming_requests_total{{model="m"}} {900 * minute}']
    return "\n".join(rows) + "\n"


def fleet(kb, bodies: list[str], label: str):
    """One window per worker of the same scrapes (as `diagnose --by worker` groups a Prometheus window)."""
    snaps = [parse_metrics_text(body, 60.0 * i, f"router@{i}") for i, body in enumerate(bodies)]
    slo = resolve_slo(kb, "chat")
    rows = []
    for w in WORKERS:
        win = SnapshotWindow(snaps, engines=kb.engines, match={label: w})
        rows.append(FleetRow({label: w}, diagnose_window(kb, win, slo)))
    return rows, fleet_diagnosis(kb, rows, slo)


def lit(diag, cause: str):
    """The cause as found or as a note (a router alone cannot measure the fleet's TTFT / TPOT SLO symptom)."""
    return next((f for f in diag.findings + diag.notes if f.cause == cause), None)


@pytest.mark.parametrize(("prefix", "engine"), [("vllm_router_", "vllm_router"), ("sgl_router_", "sglang_router")])
def test_a_rust_routers_workers_light_routing_skew(kb, prefix, engine):
    rows, diag = fleet(kb, [rust_router(prefix, m) for m in range(4)], "worker")
    assert {r.live.engine for r in rows} == {engine}  # the router's own map, not an engine's
    hot = rows[0].diagnosis.signals
    assert hot.get("req_per_s").value == pytest.approx(10.0) and hot.get("inflight_mean").value == pytest.approx(40)
    sig = diag.signals.values
    assert sig["req_rate_max_over_median"].value == pytest.approx(10.0)  # 10 req/s ÷ the median 1 req/s
    assert sig["inflight_max_over_median"].value == pytest.approx(10.0)  # 40 in flight ÷ 4
    skew = lit(diag, "fleet.routing_skew")
    assert skew is not None and skew.techniques == ["prefix_aware_routing"]
    held = {e.signal: e for e in skew.evidence if e.holds}
    assert set(held) == {"req_rate_max_over_median", "inflight_max_over_median"}
    # the router's per-worker counter counts a request when its policy picks the worker (record_processed_request in
    # the policies), not when it finishes: the evidence says routed, in both languages
    routed = held["req_rate_max_over_median"].source
    assert (f"req_per_s of worker={HOT} (10, rate of requests routed to it, counted when the router picks the worker "
            "(not when they finish)) ÷ the median of 4 replicas (1)") == message_text(routed, "en")
    assert "路由到它的请求的速率，在路由器选中该 worker 时计数" in message_text(routed, "zh")
    assert "finished" not in message_text(routed, "en")
    assert hot.get("req_per_s").source.id == "server.routed_rate"
    assert "inflight_max_over_median = 10" in evidence_line(held["inflight_max_over_median"], "en")
    assert message_text(held["inflight_max_over_median"].source, "zh") != message_text(
        held["inflight_max_over_median"].source, "en")
    # no TTFT / TPOT per worker at the router: the SLO symptom is not measurable, never "within the SLO"
    assert [(c.symptom, c.present) for c in diag.symptoms] == [("fleet", None)]
    assert lit(diag, "fleet.straggler") is None and lit(diag, "fleet.out_of_capacity") is None


def test_an_even_router_lights_nothing(kb):
    even = [rust_router("vllm_router_", m).replace(" 40\n", " 4\n").replace(f" {600 * m}\n", f" {60 * m}\n")
            for m in range(4)]
    _, diag = fleet(kb, even, "worker")
    assert diag.signals.values["req_rate_max_over_median"].value == pytest.approx(1.0)
    assert lit(diag, "fleet.routing_skew") is None


def test_the_sglang_model_gateway_has_no_requests_per_worker(kb):
    """smg_worker_requests_active alone: in-flight skew is measured, requests per worker are not (no counter by
    worker), so routing skew (two kinds of evidence) is not decided — and not called even."""
    bodies = [rust_router("smg_", m, running="worker_requests_active", processed=False) for m in range(4)]
    rows, diag = fleet(kb, bodies, "worker")
    assert {r.live.engine for r in rows} == {"sglang_router"}
    why = next(w for need, w in rows[0].live.readings.missing.items() if need.key == "request_routed")
    assert "sgl_router_processed_requests_total" in why
    sig = diag.signals.values
    assert "req_rate_max_over_median" not in sig and sig["inflight_max_over_median"].value == pytest.approx(10.0)
    assert lit(diag, "fleet.routing_skew") is None


def test_the_production_stack_router_is_read_as_a_router_not_an_engine(kb):
    rows, diag = fleet(kb, [production_stack(m) for m in range(4)], "server")
    assert {r.live.engine for r in rows} == {"production_stack_router"}
    hot = rows[0].diagnosis.signals
    assert hot.get("waiting_mean").value == pytest.approx(32) and hot.get("req_per_s").value == pytest.approx(10.0)
    assert message_text(hot.get("req_per_s").source, "zh") == "路由器每秒请求数指标的均值"
    assert diag.signals.values["queue_spread"].value == pytest.approx(32)
    skew = lit(diag, "fleet.routing_skew")
    held = {e.signal for e in skew.evidence if e.holds}
    assert {"queue_spread", "req_rate_max_over_median"} <= held


def test_an_engine_scrape_is_still_read_as_the_engine(kb):
    """vLLM's own series beside the names the production-stack router shares with it: the engine's map reads it."""
    body = ("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 4\n"
            "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n")
    win = SnapshotWindow([parse_metrics_text(body, 0.0, "a"), parse_metrics_text(body, 60.0, "b")], engines=kb.engines)
    assert win.engine.id == "vllm"


def test_a_newer_production_stack_router_counts_finished_requests_per_server(kb):
    """With vllm:request_latency_seconds (newer than @5ba88130) requests per server are its count's rate, ahead of
    the vllm:current_qps gauge (here deliberately off by 2×)."""
    def body(minute: int) -> str:
        rows = [production_stack(minute).replace(f'vllm:current_qps{{server="{HOT}"}} 10.0',
                                                 f'vllm:current_qps{{server="{HOT}"}} 20.0'),
                "# TYPE vllm:request_latency_seconds histogram"]
        for w in WORKERS:
            n = ROUTED[w] * minute
            labels = f'server="{w}",model="m",status="200"'
            rows += [f'vllm:request_latency_seconds_bucket{{{labels},le="1.0"}} {n}',
                     f'vllm:request_latency_seconds_bucket{{{labels},le="+Inf"}} {n}',
                     f"vllm:request_latency_seconds_sum{{{labels}}} {0.8 * n}",
                     f"vllm:request_latency_seconds_count{{{labels}}} {n}"]
        return "\n".join(rows) + "\n"

    rows, diag = fleet(kb, [body(m) for m in range(4)], "server")
    hot = rows[0].diagnosis.signals.get("req_per_s")
    assert hot.value == pytest.approx(10.0) and hot.source.id == "server.finished_rate"
    skew = diag.signals.values["req_rate_max_over_median"]
    assert skew.value == pytest.approx(10.0)
    # its latency histogram is observed when a request ends: the evidence names finished requests per server
    assert f"req_per_s of server={HOT} (10, rate of finished requests) ÷ the median" in message_text(skew.source, "en")
    assert f"server={HOT} 的 req_per_s（10，完成请求的速率）" in message_text(skew.source, "zh")


def test_a_new_router_is_one_yaml(tmp_path):
    """A router the tree does not know is refused; its one YAML in a tree copy (no Python change) reads its scrape."""
    root = Path(__file__).resolve().parents[1]
    tree = tmp_path / "tree"
    shutil.copytree(DEFAULT_TREE_DIR, tree)
    scrapes = []
    for minute in (1, 2):
        path = tmp_path / f"acme{minute}.txt"
        path.write_text(rust_router("acme_lb_", minute), encoding="utf-8")
        scrapes.append(str(path))

    def diagnose() -> subprocess.CompletedProcess:
        return run_triage("diagnose", "--scrape", *scrapes, "--interval", "60", "--json", "--tree-dir", str(tree),
                          cwd=root)

    unknown = diagnose()
    assert unknown.returncode == 2 and "no vLLM, SGLang or TGI metrics" in unknown.stderr
    spec = yaml.safe_load((DEFAULT_TREE_DIR / "engines" / "vllm_router.yaml").read_text(encoding="utf-8"))
    spec.update(id="acme_lb", title="Acme LB", prefixes=["acme_lb_"])
    (tree / "engines" / "acme_lb.yaml").write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    known = diagnose()
    assert known.returncode == 0, known.stderr
    data = json.loads(known.stdout)
    assert data["format"] == "metrics:acme_lb"
    assert data["signals"]["req_per_s"]["value"] == pytest.approx(13.0)  # 10 + 3 × 1 routed per second
    assert data["signals"]["inflight_mean"]["value"] == pytest.approx(52.0)
