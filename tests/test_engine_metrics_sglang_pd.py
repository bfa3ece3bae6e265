"""SGLang's PD-disaggregation transfer metrics read from scrapes in its names through the snapshot window: the prefill
server's transfer stage (sglang:per_stage_req_latency_seconds{stage="prefill_transfer_kv_cache"}) against its TTFT,
and the failed-transfer and failed-bootstrap counters, light the KV-transfer cause with the numbers as evidence; fast
transfers do not; a server without them (unified, or a decode server, whose decode_transferred stage also waits for
the prefill) leaves the transfer not measurable, never healthy."""

from __future__ import annotations

import shlex

import pytest

from tests.scrape_tools import diagnosis, held, window
from triage.diagnosis.window import window_signals
from triage.knowledge import DEFAULT_TREE_DIR
from triage.knowledge.knobs import FLAGS_DIR, check_argv, load_dump
from triage.knowledge.loader import load_knowledge
from triage.knowledge.messages import message_text
from triage.knowledge.needs import Need
from triage.report.text import evidence_line

LE = ("0.001", "0.1", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf")
TRANSFER_SIGNALS = ("kv_transfer_share_of_ttft", "kv_transfer_mean_s", "kv_transfer_failures_per_s",
                    "kv_bootstrap_failures_per_s", "kv_transfer_expired_per_s", "kv_transfer_speed_gib_s")


@pytest.fixture(scope="module")
def kb():
    return load_knowledge(DEFAULT_TREE_DIR)


def labels(role: str) -> str:
    return f'model_name="m",engine_type="{role}",tp_rank="0",pp_rank="0",moe_ep_rank="0"'


# SGLang's own buckets for its per-request transfer histograms (sgl-project/sglang @016d8605
# python/sglang/srt/observability/metrics_collector.py SchedulerMetricsCollector: kv_transfer_latency_ms in ms,
# kv_transfer_speed_gb_s in GB/s), written from those definitions
LATENCY_MS_LE = ("1", "2", "5", "10", "25", "50", "100", "250", "500", "1000", "2500", "5000", "+Inf")
SPEED_LE = ("0.1", "0.5", "1", "5", "10", "25", "50", "100", "200", "400", "+Inf")


def hist(name: str, lab: str, n: float, mean: float, bounds: tuple[str, ...] = LE) -> list[str]:
    """A histogram after ``n`` observations of ``mean`` each (all in the first bucket at or above it)."""
    rows = [f'{name}_bucket{{{lab},le="{le}"}} {0 if le != "+Inf" and float(le) < mean else n}' for le in bounds]
    return rows + [f"{name}_sum{{{lab}}} {mean * n}", f"{name}_count{{{lab}}} {n}"]


def scrape(n: float, role: str = "prefill", stages: dict[str, float] | None = None,
           failed: tuple[float, float] | None = None, transfer: tuple[float, float] | None = None,
           gauges: bool = False) -> str:
    """An SGLang /metrics body after ``n`` requests with TTFT 4 s each (over the chat SLO), queue time 0.1 s, the
    per-stage latencies given (stage → mean s), the (transfer, bootstrap) failure counters when given, SGLang's
    transfer histograms when ``transfer`` gives their (latency ms, speed GB/s) per request, and with ``gauges`` the
    same names as the last-value gauges they were before SGLang PR 19009 (left at 0)."""
    lab = labels(role)
    rows = [f"# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{{{lab}}} 8",
            f"# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{{{lab}}} 0",
            f"# TYPE sglang:num_requests_total counter\nsglang:num_requests_total{{{lab}}} {n}",
            "# TYPE sglang:time_to_first_token_seconds histogram",
            *hist("sglang:time_to_first_token_seconds", lab, n, 4.0),
            "# TYPE sglang:queue_time_seconds histogram", *hist("sglang:queue_time_seconds", lab, n, 0.1)]
    if stages:
        rows.append("# TYPE sglang:per_stage_req_latency_seconds histogram")
        for stage, mean in stages.items():
            rows += hist("sglang:per_stage_req_latency_seconds", f'{lab},stage="{stage}"', n, mean)
    if failed is not None:
        lost, bootstrap = failed
        rows += ["# TYPE sglang:num_transfer_failed_reqs_total counter",
                 f"sglang:num_transfer_failed_reqs_total{{{lab}}} {lost}",
                 "# TYPE sglang:num_bootstrap_failed_reqs_total counter",
                 f"sglang:num_bootstrap_failed_reqs_total{{{lab}}} {bootstrap}"]
    if transfer is not None:
        latency_ms, speed = transfer
        rows += ["# TYPE sglang:kv_transfer_latency_ms histogram",
                 *hist("sglang:kv_transfer_latency_ms", lab, n, latency_ms, LATENCY_MS_LE),
                 "# TYPE sglang:kv_transfer_speed_gb_s histogram",
                 *hist("sglang:kv_transfer_speed_gb_s", lab, n, speed, SPEED_LE)]
    if gauges:
        rows += [f"# TYPE sglang:{name} gauge\nsglang:{name}{{{lab}}} 0"
                 for name in ("kv_transfer_latency_ms", "kv_transfer_speed_gb_s")]
    return "\n".join(rows) + "\n"


def finding(diag, cause: str):
    return next((f for f in diag.findings if f.cause == cause), None)


# a PD prefill server: bootstrap, prefill and the KV transfer, each observed once per request
def prefill_stages(transfer_s: float) -> dict[str, float]:
    return {"prefill_bootstrap": 0.01, "prefill_forward": 1.0, "prefill_transfer_kv_cache": transfer_s}


def test_a_slow_transfer_stage_lights_the_kv_transfer_cause_with_its_numbers(kb):
    # 100 requests in 60 s; each spends 2.4 s of its 4 s TTFT sending its KV to the decode server: 60 %
    win = window(kb, scrape(100, stages=prefill_stages(2.4), failed=(3, 1)),
                 scrape(200, stages=prefill_stages(2.4), failed=(3, 1)))
    assert win.engine.id == "sglang"
    signals, _ = window_signals(kb, win)
    assert signals.get("kv_transfer_share_of_ttft").value == pytest.approx(0.6)
    assert signals.get("kv_transfer_mean_s").value == pytest.approx(2.4)
    # the stage is read alone: prefill_forward (1 s) is the prefill share, never added to the transfer
    assert signals.get("prefill_share_of_ttft").value == pytest.approx(0.25)
    assert signals.get("kv_transfer_failures_per_s").value == 0.0  # measured: no transfer failed in the window
    assert signals.get("kv_bootstrap_failures_per_s").value == 0.0
    assert signals.get("kv_transfer_expired_per_s") is None  # vLLM's NIXL expiry has no SGLang counterpart
    diag = diagnosis(kb, win)
    found = finding(diag, "ttft.kv_transfer")
    assert found is not None
    assert held(found) == {"kv_transfer_share_of_ttft": pytest.approx(0.6)}
    assert diag.findings[0].cause == "ttft.kv_transfer"
    context = {e.signal: e.value for e in found.evidence if e.context}
    assert context["kv_transfer_mean_s"] == pytest.approx(2.4)
    share = next(e for e in found.evidence if e.signal == "kv_transfer_share_of_ttft")
    line = evidence_line(share, "en")
    assert line.startswith("kv_transfer_share_of_ttft = 60") and "[rule >= 30" in line and ": met]" in line, line
    assert "SGLang: the prefill server's transfer stage" in message_text(share.source, "en")
    assert "prefill 服务的传输阶段" in message_text(share.source, "zh")
    mean = next(e for e in found.evidence if e.signal == "kv_transfer_mean_s")
    assert evidence_line(mean, "en").startswith("kv_transfer_mean_s = 2.4")


def test_sglangs_transfer_histograms_give_the_transfer_time_in_seconds_and_the_speed(kb):
    # PR 19009+: the prefill server also observes each request's transfer in ms (1.8 s here, in its 2500 ms bucket)
    # and speed (3 GiB/s); the transfer time reads the ms histogram in seconds, the share of TTFT keeps the stage
    win = window(kb, scrape(100, stages=prefill_stages(2.4), transfer=(1800.0, 3.0)),
                 scrape(200, stages=prefill_stages(2.4), transfer=(1800.0, 3.0)))
    signals, _ = window_signals(kb, win)
    assert signals.get("kv_transfer_mean_s").value == pytest.approx(1.8)
    assert signals.get("kv_transfer_share_of_ttft").value == pytest.approx(0.6)
    assert signals.get("kv_transfer_speed_gib_s").value == pytest.approx(3.0)
    # a quantile of the ms histogram is in seconds too: all 100 observations in (1000, 2500] ms
    p50 = win.read([Need("quantile", "kv_xfer_latency", 0.5)]).values[Need("quantile", "kv_xfer_latency", 0.5)]
    assert p50 == pytest.approx(1.75)
    found = finding(diagnosis(kb, win), "ttft.kv_transfer")
    assert found is not None
    context = {e.signal: e for e in found.evidence if e.context}
    assert context["kv_transfer_mean_s"].value == pytest.approx(1.8)
    assert evidence_line(context["kv_transfer_mean_s"], "en").startswith("kv_transfer_mean_s = 1.8 s")
    assert "sglang:kv_transfer_latency_ms" in message_text(context["kv_transfer_mean_s"].source, "en")
    assert "毫秒 ÷ 1000" in message_text(context["kv_transfer_mean_s"].source, "zh")
    assert evidence_line(context["kv_transfer_speed_gib_s"], "en").startswith("kv_transfer_speed_gib_s = 3 GiB/s")


def test_the_gauges_before_pr_19009_are_never_read_as_the_histograms(kb):
    # the same names as last-value gauges (stuck at 0): no _bucket/_sum/_count, so no transfer time or speed from
    # them; the transfer time falls back to the stage, the speed is not measurable
    win = window(kb, scrape(100, stages=prefill_stages(2.4), gauges=True),
                 scrape(200, stages=prefill_stages(2.4), gauges=True))
    signals, _ = window_signals(kb, win)
    assert signals.get("kv_transfer_mean_s").value == pytest.approx(2.4)
    assert "prefill_transfer_kv_cache" in message_text(signals.get("kv_transfer_mean_s").source, "en")
    assert signals.get("kv_transfer_speed_gib_s") is None
    readings = win.read([Need("hist_mean", "kv_xfer_latency")])
    assert readings.values[Need("hist_mean", "kv_xfer_latency")] is None
    assert "sglang:kv_transfer_latency_ms_bucket" in readings.missing[Need("hist_mean", "kv_xfer_latency")]


def test_failed_transfers_and_bootstraps_light_the_cause(kb):
    # 60 s: 6 requests failed their KV transfer, 3 their bootstrap handshake; the transfers that worked were fast
    win = window(kb, scrape(100, stages=prefill_stages(0.05), failed=(10, 2)),
                 scrape(200, stages=prefill_stages(0.05), failed=(16, 5)))
    found = finding(diagnosis(kb, win), "ttft.kv_transfer")
    assert found is not None
    assert held(found) == {"kv_transfer_failures_per_s": pytest.approx(0.1),
                           "kv_bootstrap_failures_per_s": pytest.approx(0.05)}
    lines = {e.signal: evidence_line(e, "en") for e in found.evidence if e.holds}
    assert lines["kv_transfer_failures_per_s"].startswith("kv_transfer_failures_per_s = 0.1/s [rule > 0")
    assert lines["kv_bootstrap_failures_per_s"].startswith("kv_bootstrap_failures_per_s = 0.05/s [rule > 0")
    bootstrap = next(e for e in found.evidence if e.signal == "kv_bootstrap_failures_per_s")
    assert message_text(bootstrap.source, "zh") == "PD bootstrap 失败计数器的速率（请求数）"


def test_a_fast_healthy_transfer_is_no_cause(kb):
    # 50 ms of a 4 s TTFT (1.25 %) and no failure: the time is elsewhere, and the transfer was measured
    win = window(kb, scrape(100, stages=prefill_stages(0.05), failed=(4, 1)),
                 scrape(200, stages=prefill_stages(0.05), failed=(4, 1)))
    signals, _ = window_signals(kb, win)
    assert signals.get("kv_transfer_share_of_ttft").value == pytest.approx(0.0125)
    assert signals.get("kv_transfer_failures_per_s").value == 0.0
    diag = diagnosis(kb, win)
    assert finding(diag, "ttft.kv_transfer") is None
    assert "ttft.kv_transfer" not in diag.matched_ids


@pytest.mark.parametrize("role, stages", [
    ("unified", {"request_process": 0.002, "prefill_forward": 1.0}),
    # a decode server's transfer-queue stage also waits for the prefill server's queue and prefill: no transfer time
    ("decode", {"decode_prepare": 0.001, "decode_bootstrap": 0.01, "decode_transferred": 3.5}),
])
def test_without_the_prefill_servers_series_the_transfer_is_not_measurable_never_healthy(kb, role, stages):
    win = window(kb, scrape(100, role=role, stages=stages), scrape(200, role=role, stages=stages))
    signals, _ = window_signals(kb, win)
    for name in TRANSFER_SIGNALS:
        assert signals.get(name) is None, name
    diag = diagnosis(kb, win)
    assert not any(f.cause == "ttft.kv_transfer" for f in diag.findings + diag.notes)
    # the cause is neither found nor cleared: its evidence reads not measurable, with why from the engine map
    assert "prefill_transfer_kv_cache" in win.engine.metric("kv_xfer_time").missing.en
    assert "--disaggregation-mode" in win.engine.metric("kv_xfer_failed").missing.en


def test_the_failure_counters_alone_are_read_on_a_decode_server(kb):
    # the decode server counts the transfers it saw fail; no transfer time there, so no share, but the failures count
    stages = {"decode_transferred": 3.5}
    win = window(kb, scrape(100, role="decode", stages=stages, failed=(0, 0)),
                 scrape(200, role="decode", stages=stages, failed=(12, 0)))
    signals, _ = window_signals(kb, win)
    assert signals.get("kv_transfer_share_of_ttft") is None
    found = finding(diagnosis(kb, win), "ttft.kv_transfer")
    assert found is not None and held(found) == {"kv_transfer_failures_per_s": pytest.approx(0.2)}


def test_the_sglang_keys_name_the_sources_names_and_the_first_action_is_sglangs_own_flag(kb):
    engine = kb.engines["sglang"]
    xfer = engine.metric("kv_xfer_time")
    assert xfer.names == ["per_stage_req_latency_seconds"] and xfer.select == {"stage": "prefill_transfer_kv_cache"}
    assert engine.metric("kv_xfer_failed").names == ["num_transfer_failed_reqs_total"]
    assert engine.metric("kv_bootstrap_failed").names == ["num_bootstrap_failed_reqs_total"]
    dump = load_dump("sglang", "0.5.23", FLAGS_DIR)
    argv = tuple(shlex.split(kb.causes["ttft.kv_transfer"].first_action.command("sglang")))
    assert argv[0] == "--disaggregation-ib-device" and not check_argv(dump, argv)
