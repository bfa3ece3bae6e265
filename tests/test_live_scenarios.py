"""Every simulator scenario is diagnosed to its cause through each live source: scrapes, snapshot files
(CLI), a real Prometheus backfilled from the simulator (library and CLI), and a served /metrics endpoint."""

from __future__ import annotations

import functools
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.cli_tools import run_triage
from tests.prom_harness import PROMETHEUS, PROMTOOL, free_port, start_prometheus
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.window import diagnose_window
from triage.sources.metrics.exposition import parse_metrics_text
from triage.sources.metrics.prometheus_window import PrometheusWindow
from triage.sources.metrics.simulator import Simulator, serve, write_openmetrics
from triage.sources.metrics.snapshot_window import SnapshotWindow

ROOT = Path(__file__).resolve().parent.parent
# scenario → (SLO preset, the cause the diagnosis must name, whether it must come first)
EXPECTED = {
    "healthy": ("chat", None, True),
    "queueing": ("chat", "ttft.queueing", True),
    "prefill_bound": ("chat", "ttft.prefill_compute", True),
    "kv_pressure": ("chat", "memory.kv_cache", True),
    "preemption_storm": ("chat", "tail_latency.preemption_storm", False),
    "long_requests": ("chat", "tail_latency.long_requests", True),
    "low_batch": ("batch", "throughput.low_batch_utilization", True),
    "spec_low_acceptance": ("chat", "tpot.one_token_per_step", True),
    # the queue a decode instance reports includes the wait for the KV: the transfer explains it and comes first
    "pd_slow_transfer": ("chat", "ttft.kv_transfer", True),
}
WINDOW_MIN = 10


def check(causes: list[str], scenario: str) -> None:
    _, cause, first = EXPECTED[scenario]
    if cause is None:
        assert causes == [], f"{scenario}: expected no finding, got {causes}"
    elif first:
        assert causes[:1] == [cause], f"{scenario}: expected {cause} first, got {causes}"
    else:
        assert cause in causes, f"{scenario}: expected {cause} among {causes}"


def snapshots(scenario: str, minutes: int = WINDOW_MIN, step: float = 15.0):
    return list(_simulated(scenario, minutes, step))


@functools.cache  # the same seeded run each call; a window only reads its scrapes (three tests share two runs)
def _simulated(scenario: str, minutes: int, step: float) -> tuple:
    sim = Simulator(scenario, seed=3)
    snaps = []
    for _ in range(int(minutes * 60 / step) + 1):
        snaps.append(parse_metrics_text(sim.render(), sim.now, scenario))
        sim.advance(step)
    return tuple(snaps)


@pytest.mark.parametrize("scenario", EXPECTED)
def test_scrape_window_diagnoses_scenario(kb, scenario):
    slo = resolve_slo(kb, EXPECTED[scenario][0])
    live = diagnose_window(kb, SnapshotWindow(snapshots(scenario)), slo)
    assert live.engine == "vllm"
    check(live.diagnosis.matched_ids, scenario)


def test_a_queue_is_not_called_a_kv_shortage_or_slow_prefill(kb):
    """The queueing demo: requests wait (31 on average, 99 % of TTFT in the queue) with KV usage in single
    digits. Waiting alone is a queue, not 'the KV cache is too small' (that needs the cache full or
    preemptions); and a flat, slow TTFT spent in the queue is not 'prefill compute is slow'."""
    d = diagnose_window(kb, SnapshotWindow(snapshots("queueing")), resolve_slo(kb, "chat")).diagnosis
    value = {name: d.signals.get(name).value for name in ("kv_usage_max", "waiting_mean", "queue_share_of_ttft")}
    assert value["kv_usage_max"] < 0.5 and value["waiting_mean"] >= 1 and value["queue_share_of_ttft"] > 0.9, value
    named = d.matched_ids + [f.cause for f in d.notes]
    assert d.matched_ids[:1] == ["ttft.queueing"]
    assert "memory.kv_cache" not in named and "ttft.prefill_compute" not in named, named


def test_a_healthy_run_with_small_ttft_is_not_called_slow_prefill_or_blocked(kb):
    """With no queue, prefill is all of a small TTFT and prompts vary in length; neither share nor spread
    means anything until TTFT itself is material, so the healthy demo's notes name neither cause."""
    slo = resolve_slo(kb, "chat")
    d = diagnose_window(kb, SnapshotWindow(snapshots("healthy")), slo).diagnosis
    ttft_p99 = d.signals.get("ttft_p99_s").value
    assert ttft_p99 is not None and ttft_p99 < 0.5 * slo.values["ttft_p99_s"], ttft_p99
    assert d.signals.get("prefill_share_of_ttft").value >= 0.5  # the share alone would still fire
    noted = [f.cause for f in d.notes]
    assert d.matched_ids == []
    for cause in ("ttft.prefill_compute", "ttft.prefill_blocks_decode", "tail_latency.long_requests"):
        assert cause not in noted, noted


def test_a_slow_kv_transfer_is_named_before_the_queue_it_makes(kb):
    """The PD demo: a decode instance whose NIXL transfers take ~1.2 s. The transfer is most of TTFT and some transfers
    fail; the requests waiting for their KV are vLLM's deferred waiting, so the queue the engine reports is the
    transfer: ttft.kv_transfer comes first and explains the queueing finding, with the numbers as evidence."""
    d = diagnose_window(kb, SnapshotWindow(snapshots("pd_slow_transfer")), resolve_slo(kb, "chat")).diagnosis
    top = d.findings[0]
    assert top.cause == "ttft.kv_transfer" and top.explains == ["ttft.queueing"]
    held = {e.signal: e.value for e in top.evidence if e.holds and not e.context}
    assert held["kv_transfer_share_of_ttft"] >= 0.8 and held["kv_transfer_failures_per_s"] > 0, held
    context = {e.signal: e.value for e in top.evidence if e.context}
    assert 1.0 <= context["kv_transfer_mean_s"] <= 1.5, context
    # every waiting request waits for its KV: the deferred mean is the whole waiting mean, capacity never binds
    assert context["waiting_deferred_mean"] == pytest.approx(d.signals.get("waiting_mean").value)
    assert "memory.kv_cache" not in d.matched_ids


@pytest.mark.parametrize("scenario", EXPECTED)
def test_cli_two_snapshot_files(tmp_path, scenario):
    sim = Simulator(scenario, seed=4)
    before = tmp_path / "a.txt"
    before.write_text(sim.render())
    sim.advance(120)
    after = tmp_path / "b.txt"
    after.write_text(sim.render())
    out = run_triage("diagnose", "--scrape", str(before), str(after), "--interval", "120", "--slo",
                     EXPECTED[scenario][0], "--json")
    assert out.returncode == 0, out.stderr
    check([f["cause"] for f in json.loads(out.stdout)["findings"]], scenario)


@pytest.fixture(scope="module")
def prometheus_per_scenario(tmp_path_factory):
    """One real Prometheus per scenario, backfilled with promtool from the simulator's OpenMetrics."""
    if not (Path(PROMETHEUS).exists() and Path(PROMTOOL).exists()):
        pytest.fail("prometheus / promtool missing: scripts/test.sh installs the Debian package")
    end = int(time.time() // 15 * 15) - 60
    servers = {}
    for scenario in EXPECTED:
        folder = tmp_path_factory.mktemp(f"prom-{scenario}")
        path = folder / "sim.om"
        write_openmetrics(path, scenario, minutes=WINDOW_MIN + 5, step=15, end=end, seed=5)
        servers[scenario] = start_prometheus(folder, path.read_text(), end)
    yield servers, end
    for server in servers.values():
        server.stop()


@pytest.mark.prometheus
@pytest.mark.parametrize("scenario", EXPECTED)
def test_prometheus_window_diagnoses_scenario(kb, prometheus_per_scenario, scenario):
    servers, end = prometheus_per_scenario
    stop = datetime.fromtimestamp(end, UTC)
    window = PrometheusWindow(servers[scenario].url, stop - timedelta(minutes=WINDOW_MIN), stop, timeout=10)
    live = diagnose_window(kb, window, resolve_slo(kb, EXPECTED[scenario][0]))
    assert live.engine == "vllm" and not live.readings.errors
    check(live.diagnosis.matched_ids, scenario)


@pytest.mark.prometheus
@pytest.mark.parametrize("scenario", ["queueing", "kv_pressure"])
def test_cli_prometheus_agrees_with_library(kb, prometheus_per_scenario, scenario):
    servers, end = prometheus_per_scenario
    stop = datetime.fromtimestamp(end, UTC)
    out = run_triage("diagnose", "--prometheus", servers[scenario].url, "--window", f"{WINDOW_MIN}m", "--end",
                     stop.isoformat(), "--json")
    assert out.returncode == 0, out.stderr
    cli = [f["cause"] for f in json.loads(out.stdout)["findings"]]
    window = PrometheusWindow(servers[scenario].url, stop - timedelta(minutes=WINDOW_MIN), stop, timeout=10)
    assert cli == diagnose_window(kb, window, resolve_slo(kb)).diagnosis.matched_ids
    check(cli, scenario)


def test_cli_endpoint_scrapes_a_served_simulator():
    port = free_port()
    server = serve("queueing", port)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        out = run_triage("diagnose", "--endpoint", f"http://127.0.0.1:{port}/metrics", "--interval", "2", "--json")
    finally:
        server.shutdown()
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["format"] == "metrics:vllm"
    assert "kv_usage_max" in data["signals"]


def test_cli_unreachable_prometheus_is_one_line_and_exit_2():
    port = free_port()
    out = run_triage("diagnose", "--prometheus", f"http://127.0.0.1:{port}", "--timeout", "2")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "unreachable" in out.stderr

