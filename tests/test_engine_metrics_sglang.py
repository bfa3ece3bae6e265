"""SGLang's newer metrics read by the rules from scrapes in its names: the per-stage request latency
(sglang:per_stage_req_latency_seconds{stage}) and the queue time tell a long prefill from a queue under high TTFT;
the KV pool's evictable (prefix-cached) tokens are reclaimable, never a memory shortage. Absent, each is not
measurable, never healthy."""

from __future__ import annotations

import pytest

from tests.scrape_tools import diagnosis, window
from triage.diagnosis.window import window_signals
from triage.knowledge import DEFAULT_TREE_DIR
from triage.knowledge.loader import load_knowledge
from triage.knowledge.messages import message_text
from triage.report.text import evidence_line
from triage.sources.metrics.exposition import parse_metrics_text
from triage.sources.metrics.snapshot_window import SnapshotWindow

SG = 'model_name="m",engine_type="unified",tp_rank="0",pp_rank="0"'
STAGE_LE = ("0.001", "0.1", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf")


@pytest.fixture(scope="module")
def kb():
    return load_knowledge(DEFAULT_TREE_DIR)


def hist(name: str, labels: str, n: float, mean: float) -> list[str]:
    """A histogram after ``n`` observations of ``mean`` seconds each (all in the bucket above it)."""
    rows = [f'{name}_bucket{{{labels},le="{le}"}} {0 if le != "+Inf" and float(le) < mean else n}'
            for le in STAGE_LE]
    return rows + [f"{name}_sum{{{labels}}} {mean * n}", f"{name}_count{{{labels}}} {n}"]


def scrape(n: float, queue: float | None, stages: dict[str, float], waiting: float = 0.0,
           pool: tuple[float, float, float] | None = None, token_usage: float | None = None) -> str:
    """An SGLang /metrics body after ``n`` requests with TTFT 5 s each (over the chat SLO of 2 s): queue time
    ``queue`` s (None: not exported), per-stage latencies by stage, the KV pool as (used, evictable, available)."""
    rows = [f"# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{{{SG}}} 8",
            f"# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{{{SG}}} {waiting}",
            f"# TYPE sglang:num_requests_total counter\nsglang:num_requests_total{{{SG}}} {n}",
            "# TYPE sglang:time_to_first_token_seconds histogram",
            *hist("sglang:time_to_first_token_seconds", SG, n, 5.0)]
    if queue is not None:
        rows += ["# TYPE sglang:queue_time_seconds histogram", *hist("sglang:queue_time_seconds", SG, n, queue)]
    if stages:
        rows.append("# TYPE sglang:per_stage_req_latency_seconds histogram")
        for stage, mean in stages.items():
            rows += hist("sglang:per_stage_req_latency_seconds", f'{SG},stage="{stage}"', n, mean)
    if pool is not None:
        used, evictable, available = pool
        rows += [f"# TYPE sglang:max_total_num_tokens gauge\nsglang:max_total_num_tokens{{{SG}}} 100000",
                 f"# TYPE sglang:kv_used_tokens gauge\nsglang:kv_used_tokens{{{SG}}} {used}",
                 f"# TYPE sglang:kv_evictable_tokens gauge\nsglang:kv_evictable_tokens{{{SG}}} {evictable}",
                 f"# TYPE sglang:kv_available_tokens gauge\nsglang:kv_available_tokens{{{SG}}} {available}"]
    if token_usage is not None:
        rows.append(f"# TYPE sglang:token_usage gauge\nsglang:token_usage{{{SG}}} {token_usage}")
    return "\n".join(rows) + "\n"


def evidence(diag, cause: str) -> dict:
    found = next((f for f in diag.findings if f.cause == cause), None)
    return {} if found is None else {e.signal: e for e in found.evidence}


# ---- per-stage latency: queueing vs a long prefill -------------------------------------------------------------
# PD stages a unified server never observes ride along; only stage="prefill_forward" is the prefill time
UNIFIED = {"request_process": 0.002, "chunked_prefill": 1.0}


def test_a_long_prefill_stage_lights_prefill_compute_not_queueing(kb):
    stages = {**UNIFIED, "prefill_forward": 4.0}
    win = window(kb, scrape(100, 0.2, stages), scrape(200, 0.2, stages))
    signals, _ = window_signals(kb, win)
    assert signals.get("prefill_share_of_ttft").value == pytest.approx(0.8)  # 4 s of a 5 s TTFT
    assert signals.get("queue_share_of_ttft").value == pytest.approx(0.04)
    diag = diagnosis(kb, win)
    ev = evidence(diag, "ttft.prefill_compute")
    assert ev["prefill_share_of_ttft"].holds
    assert "prefill_share_of_ttft = 80" in evidence_line(ev["prefill_share_of_ttft"], "en")
    assert message_text(ev["prefill_share_of_ttft"].source, "zh") == "平均 prefill 时间 ÷ 平均 TTFT"
    assert "ttft.queueing" not in diag.matched_ids


def test_a_long_queue_lights_queueing_and_counts_against_prefill(kb):
    stages = {**UNIFIED, "prefill_forward": 0.3}
    win = window(kb, scrape(100, 4.0, stages, waiting=12), scrape(200, 4.0, stages, waiting=12))
    diag = diagnosis(kb, win)
    ev = evidence(diag, "ttft.queueing")
    assert ev["queue_share_of_ttft"].holds and ev["queue_share_of_ttft"].value == pytest.approx(0.8)
    assert "queue_share_of_ttft = 80" in evidence_line(ev["queue_share_of_ttft"], "en")
    signals, _ = window_signals(kb, win)
    assert signals.get("prefill_share_of_ttft").value == pytest.approx(0.06)
    assert "ttft.prefill_compute" not in diag.matched_ids


def test_without_the_prefill_stage_the_share_is_not_measurable(kb):
    """A PD decode server observes other stages only; an older SGLang none: not measurable, never healthy."""
    decode_node = {"decode_prepare": 0.01, "decode_bootstrap": 0.05, "decode_transferred": 3.0, "decode_waiting": 0.1}
    for stages in (decode_node, {}):
        win = window(kb, scrape(100, 0.2, stages), scrape(200, 0.2, stages))
        signals, readings = window_signals(kb, win)
        assert signals.get("prefill_share_of_ttft") is None
        why = next(w for need, w in readings.missing.items() if need.key == "prefill_time")
        if stages:
            series = 'sglang:per_stage_req_latency_seconds_bucket{stage="prefill_forward"}'
            assert why == f"no series {series} in these scrapes"
        else:
            assert "sglang:per_stage_req_latency_seconds" in why
        ev = evidence(diagnosis(kb, win), "ttft.prefill_compute")
        assert not ev or ev["prefill_share_of_ttft"].holds is None


def test_the_prefill_stage_is_read_under_a_users_own_filter(kb):
    """The stage selector adds to the window's label filter (here the model), it does not replace it."""
    stages = {"prefill_forward": 4.0}
    snaps = [parse_metrics_text(scrape(n, 0.2, stages), at, "s") for n, at in ((100, 0.0), (200, 60.0))]
    win = SnapshotWindow(snaps, engines=kb.engines, match={"model_name": "m"})
    assert win.resolve(_need("prefill_time")).match == {"model_name": "m", "stage": "prefill_forward"}
    assert window_signals(kb, win)[0].get("prefill_share_of_ttft").value == pytest.approx(0.8)
    other = SnapshotWindow(snaps, engines=kb.engines, match={"model_name": "other"})
    assert window_signals(kb, other)[0].get("prefill_share_of_ttft") is None


def _need(key: str):
    from triage.knowledge.needs import Need

    return Need("hist_mean", key)


# ---- the KV pool: evictable prefix cache is reclaimable, not in use ---------------------------------------------
def test_a_pool_full_of_evictable_cache_is_no_memory_shortage(kb):
    """5 % in use, 90 % prefix cache new requests can evict, 5 % free: capacity − available would read 95 % full;
    SGLang's own accounting (and so the KV-usage signal) does not count the evictable tokens as used."""
    for usage in (None, 0.05):
        body = scrape(100, 0.2, {}, pool=(5_000, 90_000, 5_000), token_usage=usage)
        win = window(kb, body, body.replace(" 100\n", " 200\n"))
        signals, _ = window_signals(kb, win)
        assert signals.get("kv_usage_max").value == pytest.approx(0.05)
        assert signals.get("kv_evictable_share").value == pytest.approx(0.9)
        how = message_text(signals.get("kv_evictable_share").source, "zh")
        assert how == "可逐出（前缀缓存）KV token 的均值 ÷ KV 池 token 数"
        diag = diagnosis(kb, win)
        assert "memory.kv_cache" not in diag.matched_ids
        memory = next(c for c in diag.symptoms if c.symptom == "memory")
        assert [e.holds for e in memory.evidence if e.signal == "kv_usage_max"] == [False]


def test_a_pool_in_use_is_a_shortage_with_the_cache_share_beside_it(kb):
    body = scrape(100, 0.2, {}, pool=(96_000, 1_000, 3_000))
    win = window(kb, body, body.replace(" 100\n", " 200\n"))
    ev = evidence(diagnosis(kb, win), "memory.kv_cache")
    assert ev["kv_usage_max"].holds and ev["kv_usage_max"].value == pytest.approx(0.96)
    share = ev["kv_evictable_share"]
    assert share.context and share.value == pytest.approx(0.01)
    assert evidence_line(share, "en").startswith("kv_evictable_share = 1")


def test_without_the_evictable_gauge_its_share_is_not_measurable(kb):
    """A server before 0.5.11 (token_usage only): the share is absent with the map's reason, never 0."""
    body = scrape(100, 0.2, {}, token_usage=0.97)
    win = window(kb, body, body.replace(" 100\n", " 200\n"))
    signals, readings = window_signals(kb, win)
    assert signals.get("kv_evictable_share") is None
    why = next(w for need, w in readings.missing.items() if need.key == "kv_evictable_tokens")
    assert "0.5.11" in why
    ev = evidence(diagnosis(kb, win), "memory.kv_cache")
    assert ev["kv_usage_max"].holds and ev["kv_evictable_share"].holds is None
