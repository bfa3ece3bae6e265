"""Verify against a baseline: known shifts are found, no shift is 'no effect', unsound comparisons are refused."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.synthetic import requests, run
from triage.diagnosis.rules import resolve_slo
from triage.errors import TriageError
from triage.run import Run
from triage.verify.bootstrap import boot_quantile
from triage.verify.comparison import SUMMARY_ONLY, Comparison, compare, comparison_json, metric_specs
from triage.verify.gate import apply_gate, load_gate, parse_tolerance


@pytest.fixture(scope="module")
def slo(kb):
    return resolve_slo(kb, "chat")


def shifted(seed: int, ttft_factor: float = 1.0, n: int = 2000, **kw) -> pd.DataFrame:
    """Synthetic requests whose TTFT is scaled by ``ttft_factor`` (E2E moves with it)."""
    df = requests(n, seed, **kw)
    df["e2e_s"] = df["e2e_s"] + df["ttft_s"] * (ttft_factor - 1)
    df["ttft_s"] = df["ttft_s"] * ttft_factor
    return df


def cmp(kb, slo, base: pd.DataFrame, cand: pd.DataFrame, technique=None, **summaries) -> Comparison:
    return compare(run(base, **summaries.get("b", {})), run(cand, **summaries.get("c", {})), slo,
                   technique=technique, kb=kb)


def test_real_30pct_ttft_gain_is_a_gain_with_interval_excluding_zero(kb, slo):
    c = cmp(kb, slo, shifted(1), shifted(2, 0.7), technique="chunked_prefill")
    m = c.get("ttft_p50")
    assert m.verdict == "gain" and m.direction == "lower"
    assert m.interval is not None and m.interval[1] < 0 and m.interval[0] < -25
    assert -33 < m.change_pct < -27 and m.interval[0] <= m.change_pct <= m.interval[1]
    assert c.overall == "gain confirmed" and not c.refused
    assert c.expected_gain_text and c.headline.startswith("expected: ")
    assert "TTFT p50 -30" in c.headline and "−" not in c.headline  # one minus sign: ASCII


def test_15pct_regression_is_detected(kb, slo):
    c = cmp(kb, slo, shifted(1), shifted(2, 1.15))
    m = c.get("ttft_p50")
    assert m.verdict == "regression" and m.interval[0] > 2
    assert c.overall == "regression"


def test_no_change_is_no_effect_and_interval_spans_zero(kb, slo):
    c = cmp(kb, slo, shifted(1), shifted(2, 1.0))
    m = c.get("ttft_p50")
    assert m.verdict == "no effect" and m.interval[0] < 0 < m.interval[1]
    assert c.overall == "no effect"
    assert all(x.verdict == "no effect" for x in c.metrics)


def test_every_metric_has_direction_and_itl_only_when_present(kb, slo):
    c = cmp(kb, slo, shifted(1), shifted(2))
    ids = [m.metric for m in c.metrics]
    assert ids == ["ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50", "tpot_p99", "e2e_p50", "e2e_p99",
                   "req_per_s", "out_tok_per_s", "goodput", "error_rate"]
    assert {m.metric: m.direction for m in c.metrics}["goodput"] == "higher"
    base, cand = shifted(1), shifted(2)
    base["itl_s"], cand["itl_s"] = base["tpot_s"], cand["tpot_s"]  # each request's mean gap: not ITL
    assert cmp(kb, slo, base, cand).get("itl_p50") is None
    pooled = cmp(kb, slo, base, cand, b={"itl_p50_s": 0.020}, c={"itl_p50_s": 0.021}).get("itl_p50")
    assert pooled is not None and pooled.baseline == 0.020 and pooled.interval is None  # one number per run
    assert "preemptions_per_s" not in ids and "kv_usage_max" not in ids


def test_throughput_and_goodput_have_rate_intervals(kb, slo):
    c = cmp(kb, slo, shifted(1), shifted(2))
    for metric in ("req_per_s", "out_tok_per_s", "goodput"):
        lo, hi = c.get(metric).interval
        assert lo < 0 < hi and hi - lo > 2  # arrival noise of a 2,000-request run is several percent


def test_goodput_counts_requests_within_both_slos(kb, slo):
    base = shifted(1)
    cand = shifted(2)
    cand.loc[cand.index[:500], "ttft_s"] = 5.0  # a quarter miss the 2 s TTFT SLO
    m = cmp(kb, slo, base, cand).get("goodput")
    assert m.verdict == "regression" and -28 < m.change_pct < -22


def test_error_rate_is_compared_in_percentage_points(kb, slo):
    cand = shifted(2)
    cand.loc[cand.index[::25], "ok"] = False  # 4 % fail
    c = cmp(kb, slo, shifted(1), cand)
    m = c.get("error_rate")
    assert m.scale == "pp" and m.delta == pytest.approx(4.0) and m.verdict == "regression"
    assert m.change_pct is None  # baseline 0 %: no relative change
    assert c.overall == "regression"


def summary_run(**values: float) -> Run:
    base = {"ttft_p50_s": 0.2, "ttft_p99_s": 0.5, "tpot_p50_s": 0.03, "tpot_p99_s": 0.05, "e2e_p50_s": 6.0,
            "e2e_p99_s": 10.0, "req_per_s": 8.0, "out_tok_per_s": 2000.0, "completed": 500, "failed": 0}
    return Run(label="summary", summary={**base, **values}, meta={"model": "m"})


def test_summary_only_gives_no_interval_and_says_so(slo):
    c = compare(summary_run(), summary_run(ttft_p99_s=0.55, ttft_p50_s=0.206, out_tok_per_s=2200.0), slo)
    assert c.basis.startswith(SUMMARY_ONLY)
    assert "summary statistics only: no confidence interval can be given" in c.basis
    assert all(m.interval is None and m.basis.startswith("summary only") for m in c.metrics)
    verdicts = {m.metric: m.verdict for m in c.metrics}
    assert verdicts["ttft_p99"] == "regression" and verdicts["ttft_p50"] == "no effect"
    assert verdicts["out_tok_per_s"] == "gain"
    assert "goodput" not in verdicts  # needs per-request data
    assert c.overall == "regression"


def test_one_side_summary_only_falls_back_to_summaries(slo):
    per_request = run(shifted(1), completed=2000.0, failed=0.0, ttft_p50_s=0.16, ttft_p99_s=0.24)
    c = compare(per_request, summary_run(ttft_p50_s=0.16, ttft_p99_s=0.24), slo)
    assert c.basis.startswith(SUMMARY_ONLY) and all(m.interval is None for m in c.metrics)


def test_server_metrics_in_summaries_are_compared(slo):
    c = compare(summary_run(preemptions_per_s=2.0, kv_usage_max=0.9),
                summary_run(preemptions_per_s=0.5, kv_usage_max=0.95), slo)
    assert c.get("preemptions_per_s").verdict == "gain"
    assert c.get("kv_usage_max") is not None


def test_different_model_is_refused_but_numbers_kept(kb, slo):
    b, c_ = run(shifted(1)), run(shifted(2, 0.7))
    b.meta["model"], c_.meta["model"] = "llama-3.1-8b", "qwen2.5-7b"
    c = compare(b, c_, slo, kb=kb)
    assert c.overall == "unsound" and any("different models" in r for r in c.refused)
    assert c.get("ttft_p50").verdict == "gain"


def test_offered_rate_difference_is_refused(kb, slo):
    c = cmp(kb, slo, shifted(1), shifted(2), b={"offered_rate": 10.0}, c={"offered_rate": 12.0})
    assert c.overall == "unsound" and any("offered rate differs" in r for r in c.refused)
    c = cmp(kb, slo, shifted(1), shifted(2), b={"max_concurrency": 64.0}, c={"max_concurrency": 32.0})
    assert any("max concurrency differs" in r for r in c.refused)


def test_arrival_rate_difference_without_recorded_rate_is_a_warning(kb, slo):
    c = cmp(kb, slo, shifted(1, rate=10.0), shifted(2, rate=20.0))
    assert not c.refused and any("arrived at different rates" in w for w in c.warnings)
    assert not any("arrived" in w for w in cmp(kb, slo, shifted(1), shifted(2)).warnings)


def test_too_few_requests_is_refused_with_the_number(kb, slo):
    c = cmp(kb, slo, shifted(1), shifted(2, n=60))
    assert c.overall == "unsound"
    assert any("too few requests" in r and "60" in r for r in c.refused)


def test_two_techniques_are_refused(kb, slo):
    c = cmp(kb, slo, shifted(1), shifted(2, 0.7), technique=["chunked_prefill", "prefix_caching"])
    assert c.overall == "unsound" and any("one change at a time" in r for r in c.refused)


def test_input_length_change_is_refused(kb, slo):
    cand = shifted(2)
    cand["prompt_tokens"] *= 1.5
    c = cmp(kb, slo, shifted(1), cand)
    assert any("prompt lengths differ" in r for r in c.refused)


def test_unknown_technique_is_a_warning(kb, slo):
    c = cmp(kb, slo, shifted(1), shifted(2), technique="no_such_thing")
    assert c.expected_gain_text is None and any("unknown technique" in w for w in c.warnings)


def test_fixed_seed_is_reproducible_and_n_boot_is_bounded(kb, slo):
    a, b = cmp(kb, slo, shifted(1), shifted(2)), cmp(kb, slo, shifted(1), shifted(2))
    assert [m.interval for m in a.metrics] == [m.interval for m in b.metrics]
    with pytest.raises(ValueError):
        compare(run(shifted(1)), run(shifted(2)), slo, n_boot=100)


def test_quantile_bootstrap_matches_naive_resampling():
    rng = np.random.default_rng(3)
    x = np.sort(rng.lognormal(0, 0.8, 301))
    boots = 40_000
    idx = np.random.default_rng(4).integers(0, x.size, (boots, x.size))
    for q in (0.5, 0.9, 0.99):
        naive = np.quantile(x[idx], q, axis=1)
        fast = boot_quantile(x, q, np.random.default_rng(5), boots)
        for p in (2.5, 25, 50, 75, 97.5):
            assert np.percentile(fast, p) == pytest.approx(np.percentile(naive, p), rel=0.02)


def test_comparison_json_is_plain_json(kb, slo):
    out = comparison_json(cmp(kb, slo, shifted(1), shifted(2, 0.7), technique="chunked_prefill"))
    again = json.loads(json.dumps(out))
    assert again["overall"] == "gain confirmed" and again["technique"] == "chunked_prefill"
    first = again["metrics"][0]
    assert set(first) >= {"metric", "direction", "baseline", "candidate", "change_pct", "interval", "verdict",
                          "basis"}
    assert isinstance(first["interval"], list) and len(first["interval"]) == 2


# ---------------------------------------------------------------- gate


def test_default_gate_loads():
    gate = load_gate()
    assert gate["ttft_p99"] == 5.0 and gate["error_rate"] == 0.5 and set(gate) <= set(metric_specs())


@pytest.mark.parametrize("text,metric,value", [("5%", "ttft_p99", 5.0), ("5", "ttft_p99", 5.0),
                                               ("2.5 %", "goodput", 2.5), ("0.5pp", "error_rate", 0.5),
                                               ("0.5%", "error_rate", 0.5)])
def test_parse_tolerance(text, metric, value):
    assert parse_tolerance(text, metric) == value


@pytest.mark.parametrize("text,metric", [("five", "ttft_p99"), ("-5%", "ttft_p99"), ("5pp", "ttft_p99"),
                                         ("nan", "ttft_p99"), ("5%", "ttft_p42")])
def test_parse_tolerance_refuses(text, metric):
    with pytest.raises(TriageError):
        parse_tolerance(text, metric)


def test_bad_gate_file_is_a_triage_error(tmp_path):
    bad = tmp_path / "gate.yaml"
    bad.write_text("metrics:\n  - metric: ttft_p99\n    max_regression: 5%\n    colour: red\n"
                   "    reason: {en: a, zh: b}\n", encoding="utf-8")
    with pytest.raises(TriageError, match="unknown field"):
        load_gate(bad)
    bad.write_text("metrics:\n  - metric: ttft_p99\n    max_regression: lots\n    reason: {en: a, zh: b}\n",
                   encoding="utf-8")
    with pytest.raises(TriageError, match="max_regression"):
        load_gate(bad)


def test_gate_fails_only_beyond_tolerance_and_noise(kb, slo):
    regress = cmp(kb, slo, shifted(1), shifted(2, 1.15))
    result = apply_gate(regress, {"ttft_p99": 5.0, "tpot_p99": 5.0})
    assert not result.passed and result.failed == ["ttft_p99"]
    assert apply_gate(regress, {"ttft_p99": 20.0}).passed
    gain = cmp(kb, slo, shifted(1), shifted(2, 0.7))
    assert apply_gate(gain, load_gate()).passed
    missing = apply_gate(gain, {"kv_usage_max": 5.0})
    assert missing.passed and missing.rows[0].status == "not measured"


@pytest.mark.parametrize("n", [4000, 30_000])
def test_mean_bootstrap_spread_matches_theory_on_both_paths(n):
    from triage.verify.bootstrap import boot_mean

    x = np.random.default_rng(6).exponential(1.0, n)
    boots = boot_mean(x, np.random.default_rng(7), 4000)
    assert boots.std() == pytest.approx(x.std() / np.sqrt(n), rel=0.08)
    assert boots.mean() == pytest.approx(x.mean(), rel=0.01)
