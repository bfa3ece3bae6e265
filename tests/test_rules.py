"""Rules over signals: symptoms gate findings, evidence is explicit, root causes rank first."""

from __future__ import annotations

import pytest

from tests.synthetic import requests, run
from triage.diagnosis.benchmark import diagnose_run
from triage.diagnosis.client_signals import benchmark_signals, in_flight_at_arrival
from triage.diagnosis.rules import diagnose, resolve_slo
from triage.diagnosis.signals import SignalSet
from triage.run import Run


def test_healthy_run_has_no_finding_and_says_why(kb):
    diag = diagnose_run(kb, run(requests()))
    assert diag.findings == []
    ttft = next(c for c in diag.symptoms if c.symptom == "ttft")
    assert ttft.present is False and ttft.evidence[0].value < 1.0
    memory = next(c for c in diag.symptoms if c.symptom == "memory")
    assert memory.present is None  # not measurable from a benchmark file, never "healthy"


def test_queueing_run_matches_queueing(kb):
    diag = diagnose_run(kb, run(requests(queue_growth=8.0)))
    assert diag.findings[0].cause == "ttft.queueing"
    finding = diag.findings[0]
    signals = {e.signal for e in finding.evidence if e.holds}
    assert {"ttft_load_corr", "ttft_rise_ratio"} <= signals
    assert finding.confidence == "high"
    assert "queue_share_of_ttft" in finding.not_measurable


def test_prefill_bound_run_matches_prefill_compute(kb):
    diag = diagnose_run(kb, run(requests(prefill_s_per_tok=0.004, rate=2.0)))
    causes = [f.cause for f in diag.findings]
    assert causes[0] == "ttft.prefill_compute"
    assert "ttft.queueing" not in causes


def test_long_prompts_light_tail_latency(kb):
    df = requests(prefill_s_per_tok=0.0002, long_share=0.02, prompt_sigma=0.3)
    diag = diagnose_run(kb, run(df))
    causes = [f.cause for f in diag.findings]
    assert "tail_latency.long_requests" in causes


def test_techniques_come_minimal_change_first(kb):
    diag = diagnose_run(kb, run(requests(queue_growth=8.0)))
    techniques = diag.findings[0].techniques
    levels = [kb.techniques[t].level for t in techniques]
    assert levels == sorted(levels, key=["config", "model", "architecture"].index)
    assert techniques[0] == "continuous_batching" and techniques[-1] == "pd_disaggregation"


def test_summary_only_run_lists_blind_spots(kb):
    summary = {"ttft_p50_s": 0.5, "ttft_p90_s": 2.0, "ttft_p99_s": 4.0, "tpot_p50_s": 0.03, "tpot_p99_s": 0.05,
               "completed": 1000, "failed": 0, "req_per_s": 9.0, "offered_rate": 10.0}
    signals = benchmark_signals(kb, Run("summary", summary=summary), resolve_slo(kb).values)
    assert signals.get("ttft_p99_s").source.startswith("tool summary")
    assert signals.get("ttft_load_corr") is None and signals.get("prompt_tail_ratio") is None
    diag = diagnose(kb, signals, resolve_slo(kb))
    assert any(c.symptom == "ttft" and c.present for c in diag.symptoms)


def _server_signals(kb, **values) -> SignalSet:
    out = SignalSet("server")
    for name, value in values.items():
        out.put(kb, name, value, "test")
    return out


def test_full_kv_cache_is_the_root_cause(kb):
    signals = _server_signals(kb, ttft_p99_s=5.0, ttft_p50_s=0.6, kv_usage_max=0.99, waiting_mean=6.0,
                              preemptions_per_s=0.8, queue_share_of_ttft=0.8, ttft_tail_ratio=8.3)
    diag = diagnose(kb, signals, resolve_slo(kb))
    first = diag.findings[0]
    assert first.cause == "memory.kv_cache"
    assert {"ttft.queueing", "tail_latency.preemption_storm"} <= set(first.explains)
    assert "ttft.queueing" in diag.matched_ids


def test_no_symptom_means_no_finding_only_a_note(kb):
    signals = _server_signals(kb, ttft_p99_s=0.5, ttft_p50_s=0.3, prefix_hit_rate=0.1, prefix_caching_enabled=True)
    diag = diagnose(kb, signals, resolve_slo(kb))
    assert diag.findings == []
    assert [n.cause for n in diag.notes] == ["ttft.repeated_prefill", "throughput.repeated_prefix"]


def test_batch_preset_counts_idle_capacity_as_a_symptom(kb):
    signals = _server_signals(kb, kv_usage_mean=0.05, waiting_mean=0.0, batch_fill=0.1, ttft_p99_s=0.3)
    chat = diagnose(kb, signals, resolve_slo(kb, "chat"))
    batch = diagnose(kb, signals, resolve_slo(kb, "batch"))
    assert chat.findings == []
    assert [f.cause for f in batch.findings] == ["throughput.low_batch_utilization"]


def test_slo_override_changes_the_verdict(kb):
    df = requests(ttft_base=0.9)
    assert diagnose_run(kb, run(df), resolve_slo(kb, "chat")).symptoms[0].present is False
    tight = resolve_slo(kb, "chat", ttft_p99_s=0.5)
    assert tight.name == "chat (custom)"
    assert diagnose_run(kb, run(df), tight).symptoms[0].present is True


def test_undeclared_signal_is_refused(kb):
    with pytest.raises(KeyError):
        SignalSet("server").put(kb, "made_up_signal", 1.0, "test")


def test_nan_and_inf_values_stay_absent(kb):
    s = SignalSet("server")
    s.put(kb, "kv_usage_max", float("nan"), "test")
    s.put(kb, "waiting_mean", float("inf"), "test")
    assert s.values == {}


def test_in_flight_counts_overlaps():
    import numpy as np

    start = np.array([0.0, 1.0, 2.0, 10.0])
    e2e = np.array([5.0, 5.0, 0.5, 1.0])
    assert in_flight_at_arrival(start, e2e).tolist() == [0, 1, 2, 0]
