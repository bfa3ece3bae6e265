"""Today's vLLM metrics for PD disaggregation and KV residency, diagnosed from scrapes in their exposed names through
the snapshot window: NIXL transfer time and failures light the KV-transfer cause, prompt tokens by source support it,
the KV block residency histograms (--kv-cache-metrics) support the KV-capacity and prefix-caching causes; without
those series every one of them is not measurable, never healthy."""

from __future__ import annotations

import shlex

import pytest

from tests.scrape_tools import finding, held, window
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.window import diagnose_window, window_signals
from triage.knowledge import DEFAULT_TREE_DIR
from triage.knowledge.knobs import FLAGS_DIR, check_argv, load_dump
from triage.knowledge.loader import load_knowledge
from triage.knowledge.messages import message_text
from triage.report.text import evidence_line

LAB = 'engine="0",model_name="m"'
TTFT_LE = ("0.5", "1.0", "2.5", "5.0", "10.0", "+Inf")
RESIDENCY_LE = ("1", "2", "5", "10", "20", "30", "60", "+Inf")


@pytest.fixture(scope="module")
def kb():
    return load_knowledge(DEFAULT_TREE_DIR)


def histogram(name: str, les: tuple[str, ...], n: float, total: float, within: float) -> list[str]:
    """``n`` observations summing to ``total``, all in the first bucket at or above ``within``."""
    rows = [f"# TYPE {name} histogram"]
    rows += [f'{name}_bucket{{{LAB},le="{le}"}} {0 if float(le) < within else n}' for le in les]
    return rows + [f"{name}_sum{{{LAB}}} {total}", f"{name}_count{{{LAB}}} {n}"]


def counter(name: str, value: float, extra: str = "") -> list[str]:
    return [f"# TYPE {name} counter", f"{name}{{{LAB}{extra}}} {value}"]


def decode_scrape(n: float, ttft_total: float, xfer: tuple[float, float] | None = None, failed: float | None = None,
                  expired: float | None = None, by_source: dict[str, float] | None = None,
                  residency: dict[str, tuple[float, float]] | None = None, cached: float = 0.0,
                  deferred: float | None = None, capacity: float = 0.0, waiting: float | None = None) -> str:
    """A vLLM /metrics body after ``n`` requests (TTFT between 2.5 and 5 s, summing to ``ttft_total``), with the
    NIXL series (``xfer`` = transfers, seconds), prompt tokens by source and the residency histograms when given;
    ``waiting`` requests wait (default: ``capacity`` + ``deferred``), split by reason when ``deferred`` is given."""
    total = capacity + (deferred or 0.0) if waiting is None else waiting
    rows = [f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{LAB}}} 8",
            f"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{{LAB}}} {total}",
            f"# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{{{LAB}}} 0.3",
            *counter("vllm:request_success_total", n, ',finished_reason="stop"'),
            *counter("vllm:prompt_tokens_total", 1000 * n),
            # cached = local prefix-cache hits + KV received over the connector (loggers.py), as vLLM counts it
            *counter("vllm:prompt_tokens_cached_total", sum(v for k, v in (by_source or {}).items()
                                                            if k != "local_compute") or cached * n),
            *histogram("vllm:time_to_first_token_seconds", TTFT_LE, n, ttft_total, 5.0)]
    if xfer is not None:
        rows += histogram("vllm:nixl_xfer_time_seconds", ("0.5", "1.0", "5.0", "+Inf"), xfer[0], xfer[1], 5.0)
    if failed is not None:
        rows += counter("vllm:nixl_num_failed_transfers_total", failed)
    if expired is not None:
        rows += counter("vllm:nixl_num_kv_expired_reqs_total", expired)
    if deferred is not None:  # waiting by reason: ``capacity`` for room in the batch, ``deferred`` for a transient one
        rows += ["# TYPE vllm:num_requests_waiting_by_reason gauge",
                 f'vllm:num_requests_waiting_by_reason{{{LAB},reason="capacity"}} {capacity}',
                 f'vllm:num_requests_waiting_by_reason{{{LAB},reason="deferred"}} {deferred}']
    if by_source is not None:
        rows.append("# TYPE vllm:prompt_tokens_by_source_total counter")
        rows += [f'vllm:prompt_tokens_by_source_total{{{LAB},source="{s}"}} {v}' for s, v in by_source.items()]
    for name, (count, total) in (residency or {}).items():
        rows += histogram(f"vllm:kv_block_{name}_seconds", RESIDENCY_LE, count, total, total / count)
    return "\n".join(rows) + "\n"


def test_transfer_time_share_lights_the_kv_transfer_cause(kb):
    # 100 requests in 60 s, mean TTFT 4 s; 100 NIXL transfers taking 2.4 s on average: 60 % of TTFT
    before = decode_scrape(100, 400, xfer=(100, 240), failed=0, by_source={"local_compute": 1600,
                           "local_cache_hit": 0, "external_kv_transfer": 98_400}, deferred=5)
    after = decode_scrape(200, 800, xfer=(200, 480), failed=0, by_source={"local_compute": 3200,
                          "local_cache_hit": 0, "external_kv_transfer": 196_800}, deferred=7)
    win = window(kb, before, after)
    signals, _ = window_signals(kb, win)
    assert signals.get("kv_transfer_share_of_ttft").value == pytest.approx(0.6)
    assert signals.get("kv_transfer_mean_s").value == pytest.approx(2.4)
    assert signals.get("kv_transfer_failures_per_s").value == 0.0  # measured, none failed
    # by source: 98 400 of 100 000 prompt tokens arrived over the connector, 1 600 were prefilled here
    assert signals.get("prompt_transferred_share").value == pytest.approx(0.984)
    assert signals.get("prompt_computed_over_transferred").value == pytest.approx(1600 / 98_400)
    found = finding(kb, win, "ttft.kv_transfer")
    assert found is not None
    assert held(found) == {"kv_transfer_share_of_ttft": pytest.approx(0.6)}
    # the flat 4 s TTFT also reads as slow prefill (p5 over the SLO); the transfer explains it and ranks first
    live = diagnose_window(kb, win, resolve_slo(kb, "chat"))
    assert live.diagnosis.findings[0].cause == "ttft.kv_transfer"
    assert live.diagnosis.findings[0].explains == ["ttft.prefill_compute"]
    assert "ttft.repeated_prefill" not in live.diagnosis.matched_ids  # 98.4 % of the prompt came cached
    context = {e.signal: e.value for e in found.evidence if e.context}
    # 6 requests on average wait for their KV (reason="deferred"), read apart from the capacity queue (none here)
    assert context == {"kv_transfer_mean_s": pytest.approx(2.4), "prompt_transferred_share": pytest.approx(0.984),
                       "waiting_deferred_mean": pytest.approx(6.0), "kv_transfer_speed_gib_s": None}
    assert "kv_transfer" in [t.id for t in kb.causes["ttft.kv_transfer"].techniques]
    # the whole queue waits 6 on average, but for its KV alone: no capacity queue, so no queueing cause
    assert signals.get("waiting_mean").value == pytest.approx(6.0)
    assert signals.get("waiting_capacity_mean").value == 0.0
    assert "ttft.queueing" not in live.diagnosis.matched_ids


def test_a_capacity_queue_beside_a_slow_transfer_shows_both_causes(kb):
    # the same slow transfers (60 % of TTFT, 6 waiting for their KV), and 4 requests on average waiting for room
    src = {"local_compute": 1600, "local_cache_hit": 0, "external_kv_transfer": 98_400}
    win = window(kb, decode_scrape(100, 400, xfer=(100, 240), failed=0, by_source=src, deferred=5, capacity=3),
                 decode_scrape(200, 800, xfer=(200, 480), failed=0, by_source={k: 2 * v for k, v in src.items()},
                               deferred=7, capacity=5))
    signals, _ = window_signals(kb, win)
    assert signals.get("waiting_capacity_mean").value == pytest.approx(4.0)
    assert signals.get("waiting_mean").value == pytest.approx(10.0)
    queueing = finding(kb, win, "ttft.queueing")
    assert queueing is not None and held(queueing) == {"waiting_capacity_mean": pytest.approx(4.0)}
    row = next(e for e in queueing.evidence if e.signal == "waiting_capacity_mean")
    assert message_text(row.source, "en").startswith('mean of the waiting gauge with reason="capacity"')
    assert "reason=\"capacity\" 的 waiting 指标的均值" in message_text(row.source, "zh")
    assert evidence_line(row, "en").startswith("waiting_capacity_mean = 4 req [rule >= 1")
    live = diagnose_window(kb, win, resolve_slo(kb, "chat"))
    assert {"ttft.kv_transfer", "ttft.queueing"} <= set(live.diagnosis.matched_ids)
    assert live.diagnosis.findings[0].cause == "ttft.kv_transfer"  # it still explains the queue time it adds


def test_without_the_by_reason_gauge_queueing_reads_the_whole_queue(kb):
    # a vLLM that does not split its queue: the waiting gauge (6 on average) is read as today
    win = window(kb, decode_scrape(100, 400, xfer=(100, 240), failed=0, waiting=5),
                 decode_scrape(200, 800, xfer=(200, 480), failed=0, waiting=7))
    signals, _ = window_signals(kb, win)
    got = signals.get("waiting_capacity_mean")
    assert got.value == pytest.approx(6.0) and got.source.id == "server.waiting_mean"
    assert signals.get("waiting_deferred_mean") is None
    queueing = finding(kb, win, "ttft.queueing")
    assert queueing is not None and held(queueing) == {"waiting_capacity_mean": pytest.approx(6.0)}


def test_fast_transfers_are_no_cause(kb):
    # 0.2 s of a 4 s TTFT (5 %): the time is elsewhere
    win = window(kb, decode_scrape(100, 400, xfer=(100, 20), failed=0),
                 decode_scrape(200, 800, xfer=(200, 40), failed=0))
    assert window_signals(kb, win)[0].get("kv_transfer_share_of_ttft").value == pytest.approx(0.05)
    assert finding(kb, win, "ttft.kv_transfer") is None


def test_failed_and_expired_transfers_light_the_cause_and_recompute_supports_it(kb):
    # 6 failed transfers and 3 expired requests in 60 s; the decode side prefilled 40 000 tokens itself against
    # 60 000 received (0.67 per token received): transfers fall back to recomputation
    before = decode_scrape(100, 400, xfer=(100, 20), failed=4, expired=1,
                           by_source={"local_compute": 0, "local_cache_hit": 0, "external_kv_transfer": 0})
    after = decode_scrape(200, 800, xfer=(200, 40), failed=10, expired=4,
                          by_source={"local_compute": 40_000, "local_cache_hit": 0, "external_kv_transfer": 60_000})
    win = window(kb, before, after)
    found = finding(kb, win, "ttft.kv_transfer")
    assert found is not None
    assert held(found) == {"kv_transfer_failures_per_s": pytest.approx(0.1),
                           "kv_transfer_expired_per_s": pytest.approx(0.05),
                           "prompt_computed_over_transferred": pytest.approx(40_000 / 60_000)}


def test_without_nixl_series_the_transfer_is_not_measurable_never_healthy(kb):
    # a colocated vLLM (no connector): no transfer signal has a value, the cause is neither found nor cleared
    win = window(kb, decode_scrape(100, 400), decode_scrape(200, 800))
    signals, _ = window_signals(kb, win)
    for name in ("kv_transfer_share_of_ttft", "kv_transfer_mean_s", "kv_transfer_failures_per_s",
                 "kv_transfer_expired_per_s", "prompt_transferred_share", "prompt_computed_over_transferred",
                 "waiting_deferred_mean"):
        assert signals.get(name) is None, name
    live = diagnose_window(kb, win, resolve_slo(kb, "chat"))
    assert not any(f.cause == "ttft.kv_transfer" for f in live.diagnosis.findings + live.diagnosis.notes)
    # why each reading is absent comes from the engine map
    assert "NIXL" in win.engine.metric("kv_xfer_time").missing.en


def test_nothing_transferred_leaves_the_recompute_ratio_absent(kb):
    # a prefill instance: every prompt token computed here, none received; a ratio over 0 received is no number
    src = {"local_compute": 0, "local_cache_hit": 0, "external_kv_transfer": 0}
    after = {"local_compute": 100_000, "local_cache_hit": 0, "external_kv_transfer": 0}
    win = window(kb, decode_scrape(100, 400, by_source=src), decode_scrape(200, 800, by_source=after))
    signals, _ = window_signals(kb, win)
    assert signals.get("prompt_transferred_share").value == 0.0
    assert signals.get("prompt_computed_over_transferred") is None


def test_reuse_gap_near_the_idle_time_lights_kv_capacity(kb):
    # 50 sampled evictions in 60 s: blocks sat idle 4 s on average before eviction; 80 reuse gaps of 3 s on average
    before = decode_scrape(100, 400, residency={"idle_before_evict": (50, 200), "reuse_gap": (80, 240),
                                                "lifetime": (50, 600)})
    after = decode_scrape(200, 800, residency={"idle_before_evict": (100, 400), "reuse_gap": (160, 480),
                                               "lifetime": (100, 1200)})
    win = window(kb, before, after)
    signals, _ = window_signals(kb, win)
    assert signals.get("kv_reuse_gap_over_idle").value == pytest.approx(0.75)
    assert signals.get("kv_idle_before_evict_mean_s").value == pytest.approx(4.0)
    assert signals.get("kv_block_lifetime_mean_s").value == pytest.approx(12.0)
    kv = finding(kb, win, "memory.kv_cache")
    assert kv is not None and held(kv) == {"kv_reuse_gap_over_idle": pytest.approx(0.75)}
    # with few cached prompt tokens the same ratio supports the repeated-prefill cause and says how long blocks live
    repeated = finding(kb, win, "ttft.repeated_prefill")
    assert repeated is not None
    assert held(repeated) == {"prompt_cached_share": 0.0, "kv_reuse_gap_over_idle": pytest.approx(0.75)}
    # SGLang's evictable share is context too: not measurable on vLLM (None), never read as zero
    assert {e.signal: e.value for e in repeated.evidence if e.context} == {
        "kv_idle_before_evict_mean_s": pytest.approx(4.0), "kv_evictable_share": None}


def test_reuse_well_inside_the_idle_time_is_no_capacity_cause(kb):
    # blocks survive 60 s unused while reuses come every 3 s: the cache holds the reuse pattern
    before = decode_scrape(100, 400, residency={"idle_before_evict": (50, 3000), "reuse_gap": (80, 240)})
    after = decode_scrape(200, 800, residency={"idle_before_evict": (100, 6000), "reuse_gap": (160, 480)})
    win = window(kb, before, after)
    assert window_signals(kb, win)[0].get("kv_reuse_gap_over_idle").value == pytest.approx(0.05)
    assert finding(kb, win, "memory.kv_cache") is None


def test_without_kv_cache_metrics_residency_is_not_measurable(kb):
    win = window(kb, decode_scrape(100, 400), decode_scrape(200, 800))
    signals, _ = window_signals(kb, win)
    assert signals.get("kv_reuse_gap_over_idle") is None and signals.get("kv_idle_before_evict_mean_s") is None
    kv = finding(kb, win, "memory.kv_cache")
    assert kv is None  # nothing held; not a healthy verdict either: the reading is missing
    assert "--kv-cache-metrics" in win.engine.metric("kv_block_reuse_gap").missing.en


def test_prompt_tokens_by_source_are_read_by_their_label_only(kb):
    # the same counter name carries three sources: each key reads one, never their sum
    engine = kb.engines["vllm"]
    assert {engine.metric(k).select["source"] for k in ("prompt_tokens_computed", "prompt_tokens_local_hit",
                                                         "prompt_tokens_transferred")} == {
        "local_compute", "local_cache_hit", "external_kv_transfer"}


def test_the_kv_transfer_first_action_is_vllms_own_flag(kb):
    dump = load_dump("vllm", "0.33.0", FLAGS_DIR)
    argv = tuple(shlex.split(kb.causes["ttft.kv_transfer"].first_action.command("vllm")))
    assert argv[0] == "--kv-transfer-config" and not check_argv(dump, argv)


def rejection_scrape(n: float, rejected: dict[str, float]) -> str:
    """A vLLM body whose TTFT is over the SLO and whose queue limits refused requests, by reason."""
    rows = [f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{LAB}}} 8",
            *counter("vllm:request_success_total", n, ',finished_reason="stop"'),
            *histogram("vllm:time_to_first_token_seconds", TTFT_LE, n, 4 * n, 5.0),
            "# TYPE vllm:admission_rejections_total counter",
            *[f'vllm:admission_rejections_total{{{LAB},reason="{r}"}} {v}' for r, v in rejected.items()]]
    return "\n".join(rows) + "\n"


def test_admission_rejections_evidence_names_the_limit_by_reason(kb):
    # 60 s: 12 refusals at the request-count limit, 6 at the token limit, none at a third reason
    before = rejection_scrape(100, {"max_num_queued_reqs": 10, "max_num_queued_tokens": 4, "other_limit": 1})
    after = rejection_scrape(200, {"max_num_queued_reqs": 22, "max_num_queued_tokens": 10, "other_limit": 1})
    win = window(kb, before, after)
    found = finding(kb, win, "ttft.queueing")
    assert found is not None
    evidence = next(e for e in found.evidence if e.signal == "admission_rejections_per_s")
    assert evidence.holds and evidence.value == pytest.approx(0.3)  # the total stays the value the rule reads
    assert message_text(evidence.source, "en") == ("rate of the admission-rejection counter (503s from the queue "
                                                   "limits, all reasons); by reason: max_num_queued_reqs 0.2/s, "
                                                   "max_num_queued_tokens 0.1/s")
    assert "按 reason：max_num_queued_reqs 0.2/s" in message_text(evidence.source, "zh")
    # the terminal report names them on the evidence line itself
    assert evidence_line(evidence, "en").startswith("admission_rejections_per_s = 0.3/s (by reason: "
                                                    "max_num_queued_reqs 0.2/s, max_num_queued_tokens 0.1/s) [rule")
    assert "(按 reason：max_num_queued_reqs 0.2/s" in evidence_line(evidence, "zh")


def test_no_rejection_in_the_window_lists_no_reason(kb):
    flat = {"max_num_queued_reqs": 3}
    win = window(kb, rejection_scrape(100, flat), rejection_scrape(200, flat))
    signals, _ = window_signals(kb, win)
    got = signals.get("admission_rejections_per_s")
    assert got.value == 0.0 and got.source.id == "server.admission_rejections"  # no breakdown of nothing
