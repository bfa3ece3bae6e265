"""Rules over signals: symptoms gate findings, evidence is explicit, root causes rank first."""

from __future__ import annotations

import numpy as np
import pytest

from tests.synthetic import requests, run
from triage.diagnosis.benchmark import diagnose_run
from triage.diagnosis.client_signals import benchmark_signals, in_flight_at_arrival
from triage.diagnosis.rules import diagnose, resolve_slo
from triage.diagnosis.signals import SignalSet
from triage.knowledge.messages import message_text
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
    assert message_text(signals.get("ttft_p99_s").source, "en").startswith("tool summary")
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


# ---------------------------------------------------------------- flat TTFT and memory-bound decode


def _flat(prompt: float = 512.0, ttft: float = 0.8, rate: float = 2.0, n: int = 600):
    """Every prompt the same length, TTFT flat and high at any load: a slow prefill (or fixed cost) per request."""
    df = requests(n, rate=rate, ttft_base=ttft, prompt_sigma=0.0, prompt_median=prompt)
    df["ttft_s"] = ttft + np.random.default_rng(1).uniform(0.0, 0.04, n)
    df["e2e_s"] = df["ttft_s"] + (df["output_tokens"] - 1) * 0.02
    df["tpot_s"] = 0.02
    return df


def test_flat_high_ttft_points_at_prefill_with_its_speed(kb):
    diag = diagnose_run(kb, run(_flat()), resolve_slo(kb, "chat", ttft_p99_s=0.3))
    first = diag.findings[0]
    assert first.cause == "ttft.prefill_compute" and first.confidence == "high"
    ev = {e.signal: e for e in first.evidence}
    assert ev["ttft_p5_s"].holds and ev["ttft_p5_s"].value > 0.3 and ev["ttft_spread"].value < 1.1
    speed = ev["prefill_tok_per_s"]
    assert speed.context and speed.value == pytest.approx(512 / ev["ttft_p5_s"].value)
    assert "tpot_over_roofline" in first.not_measurable and "ttft.queueing" not in diag.matched_ids


def test_flat_ttft_against_the_roofline_when_hardware_is_named(kb):
    from triage.diagnosis.roofline import Hardware

    diag = diagnose_run(kb, run(_flat(), prompt_tokens_mean=512.0, output_tokens_mean=275.0),
                        resolve_slo(kb, "chat", ttft_p99_s=0.3), Hardware("llama-3.1-8b", "h100"))
    ev = {e.signal: e for e in diag.findings[0].evidence}
    assert ev["prefill_over_roofline"].holds and ev["prefill_over_roofline"].value > 50  # 0.8 s vs a few ms
    assert ev["tpot_over_roofline"].context and ev["tpot_over_roofline"].value > 0


def test_ttft_that_grows_with_load_is_not_called_flat(kb):
    diag = diagnose_run(kb, run(requests(queue_growth=8.0, ttft_base=0.5)), resolve_slo(kb, "chat", ttft_p99_s=0.3))
    assert diag.findings[0].cause == "ttft.queueing"
    prefill = next((f for f in diag.findings if f.cause == "ttft.prefill_compute"), None)
    assert prefill is None or not next(e for e in prefill.evidence if e.signal == "ttft_p5_s").holds


def test_flat_ttft_from_a_tool_summary(kb):
    summary = {"ttft_p5_s": 0.78, "ttft_p50_s": 0.80, "ttft_p90_s": 0.82, "ttft_p99_s": 0.83, "tpot_p50_s": 0.02,
               "tpot_p99_s": 0.021, "completed": 100, "prompt_tokens_mean": 512.0}
    diag = diagnose_run(kb, Run("summary", summary=summary), resolve_slo(kb, "chat", ttft_p99_s=0.3))
    assert diag.findings[0].cause == "ttft.prefill_compute"
    assert diag.signals.get("prefill_tok_per_s").value == pytest.approx(512 / 0.78)


def test_large_batch_high_tpot_no_preemption_is_memory_bound(kb):
    signals = _server_signals(kb, tpot_p99_s=0.1, tpot_p50_s=0.08, running_mean=100.0, preemptions_per_s=0.0,
                              kv_usage_max=0.8, kv_usage_mean=0.7, waiting_mean=0.0, decode_gb_per_step=34.5)
    diag = diagnose(kb, signals, resolve_slo(kb, "interactive"))
    first = diag.findings[0]
    assert first.cause == "tpot.memory_bound" and first.confidence == "high"
    ev = {e.signal: e for e in first.evidence}
    assert ev["running_mean"].holds and ev["decode_gb_per_step"].context and ev["decode_gb_per_step"].value == 34.5


@pytest.mark.parametrize("change", [{"preemptions_per_s": 0.5}, {"kv_usage_max": 0.99}, {"running_mean": 4.0}])
def test_preemption_full_kv_or_small_batch_is_not_memory_bound(kb, change):
    values = dict(tpot_p99_s=0.1, tpot_p50_s=0.08, running_mean=100.0, preemptions_per_s=0.0, kv_usage_max=0.8)
    diag = diagnose(kb, _server_signals(kb, **{**values, **change}), resolve_slo(kb, "interactive"))
    assert "tpot.memory_bound" not in diag.matched_ids


def test_context_evidence_never_counts(kb):
    """A context number is shown with a finding; it cannot make one or change its confidence."""
    alone = diagnose(kb, _server_signals(kb, tpot_p99_s=0.1, decode_gb_per_step=34.5), resolve_slo(kb, "interactive"))
    assert "tpot.memory_bound" not in alone.matched_ids


def test_bytes_per_step_from_the_served_model_label(kb):
    from triage.diagnosis.roofline import add_server_roofline, dcgm_gpu, served_model

    assert served_model("meta-llama/Llama-3.1-8B-Instruct").id == "llama-3.1-8b"
    assert served_model("Qwen/Qwen2.5-72B-Instruct").id == "qwen2.5-72b"
    assert served_model("my-finetune") is None
    assert dcgm_gpu("NVIDIA H100 80GB HBM3").id == "h100" and dcgm_gpu("NVIDIA A100-SXM4-40GB") is None
    signals = _server_signals(kb, running_mean=64.0, kv_usage_mean=0.5, tpot_p50_s=0.03)
    config = {"num_gpu_blocks": "10000", "block_size": "16", "cache_dtype": "auto"}
    add_server_roofline(kb, signals, "meta-llama/Llama-3.1-8B-Instruct", config, "NVIDIA H100 80GB HBM3")
    kv_gb = 0.5 * 10000 * 16 * 32 * 2 * 8 * 128 * 2 / 1e9  # tokens × layers × (K, V) × kv heads × head_dim × bf16
    gb = signals.get("decode_gb_per_step").value
    assert gb == pytest.approx(8.03 * 2 + kv_gb, rel=0.02)
    assert signals.get("tpot_over_roofline").value == pytest.approx(30 / (gb / 3350 * 1e3), rel=1e-6)


def test_flat_ttft_with_many_requests_awaiting_a_first_token_is_a_queue(kb):
    """A closed-loop client keeps the queue steady, so TTFT is flat too; Little's law tells it from slow prefill."""
    diag = diagnose_run(kb, run(_flat(ttft=2.4, rate=20.0)), resolve_slo(kb, "chat", ttft_p99_s=0.3))
    assert diag.signals.get("awaiting_first_token_mean").value > 8  # ≈ 20 req/s × 2.4 s, less the drain
    assert diag.findings[0].cause == "ttft.queueing"
    assert "ttft.prefill_compute" not in diag.matched_ids


def test_steady_tpot_with_many_requests_in_flight_is_memory_bound_from_a_file(kb):
    df = _flat(ttft=0.2, rate=40.0)
    df["tpot_s"] = 0.09 + np.random.default_rng(2).uniform(0.0, 0.01, len(df))
    df["e2e_s"] = df["ttft_s"] + (df["output_tokens"] - 1) * df["tpot_s"]
    diag = diagnose_run(kb, run(df), resolve_slo(kb, "interactive", ttft_p99_s=5.0))
    assert diag.signals.get("inflight_mean").value > 16
    assert diag.findings[0].cause == "tpot.memory_bound"


def test_a_comparison_that_holds_but_is_blocked_names_its_unmet_requirement(kb):
    """TTFT p50 5× its floor counts for queueing only with prompts alike: with a wide prompt spread the row is
    ✘ though 6 >= 5, and the evidence says which requirement failed, with its value (shown and in the JSON)."""
    from triage.report.json_contract import _evidence

    signals = _server_signals(kb, ttft_p99_s=5.0, ttft_p50_s=1.2, ttft_median_over_floor=6.0,
                              prompt_tail_ratio=3.1, ttft_prompt_corr=0.1, waiting_capacity_mean=4.0)
    diag = diagnose(kb, signals, resolve_slo(kb))
    queueing = next(f for f in diag.findings if f.cause == "ttft.queueing")
    row = next(e for e in queueing.evidence if e.signal == "ttft_median_over_floor")
    assert row.holds is False and row.value >= row.threshold
    assert [(r.signal, r.value, r.holds) for r in row.unmet] == [("prompt_tail_ratio", 3.1, False)]
    assert _evidence(row, "en")["unmet"][0]["signal"] == "prompt_tail_ratio"
    plain = next(e for e in queueing.evidence if e.signal == "waiting_capacity_mean")
    assert plain.holds and plain.unmet == []


def test_in_flight_counts_match_a_full_sort_for_sampled_and_unsorted_arrivals():
    """The sampled path places each end among the sorted sample points instead of sorting a million ends; the
    counts must be those of the plain sort-and-search, with ties, missing durations and unsorted starts."""
    rng = np.random.default_rng(3)

    def plain(start, e2e, at):
        end = start + e2e
        return (np.searchsorted(np.sort(start), at, side="left")
                - np.searchsorted(np.sort(end[np.isfinite(end)]), at, side="right"))

    for n, m, ordered in ((2000, 150, False), (2000, 150, True), (500, 500, False)):
        start = rng.integers(0, 300, n).astype(float)  # many ties on purpose
        start = np.sort(start) if ordered else start
        e2e = rng.integers(0, 40, n).astype(float)
        e2e[::9] = np.nan
        at = start[rng.choice(n, m, replace=False)]
        assert in_flight_at_arrival(start, e2e, at).tolist() == plain(start, e2e, at).tolist()
