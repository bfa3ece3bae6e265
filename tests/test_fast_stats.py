"""The fast order statistics equal numpy's own results, and a large run's client signals equal plain numpy's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from triage.diagnosis.client_signals import CORRELATION_SAMPLE, benchmark_signals
from triage.diagnosis.rules import resolve_slo
from triage.knowledge.loader import load_knowledge
from triage.run import Run
from triage.sources import fast_stats
from triage.sources.fast_stats import positions, quantiles

QS = (0.0, 0.05, 0.5, 0.9, 0.99, 1.0)


def _columns(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    return [rng.lognormal(3, 1, n), rng.integers(0, 40, n).astype(float),  # heavy ties
            rng.normal(35, 3, n), np.sort(rng.random(n)), np.full(n, 2.5), rng.pareto(1.5, n)]


@pytest.mark.parametrize("n", [1_000, 100_000, 100_001, 262_147])
def test_quantiles_equal_numpy_to_the_last_bit(n):
    rng = np.random.default_rng(n)
    for x in _columns(rng, n):
        assert np.array_equal(quantiles(x, QS), np.quantile(x, QS)), n
        assert np.array_equal(quantiles(x, (0.99,)), np.quantile(x, (0.99,)))


def test_a_bracket_the_sample_misses_falls_back_to_numpy(monkeypatch):
    """With brackets of zero width the sample misses (almost) every order statistic: the answer stays numpy's."""
    monkeypatch.setattr(fast_stats, "SPREAD_SIGMAS", 0.0)
    rng = np.random.default_rng(5)
    for x in _columns(rng, 150_000):
        assert np.array_equal(quantiles(x, QS), np.quantile(x, QS))


def test_positions_equal_searchsorted():
    rng = np.random.default_rng(11)
    start = 1.7e9 + np.cumsum(rng.exponential(0.01, 300_000))
    end = start + rng.gamma(2.0, 5.0, start.size)
    points = start[np.sort(rng.choice(start.size, 20_000, replace=False))]
    edges = np.array([points[0], points[-1], points[0] - 1, points[-1] + 1, points[7], -1e300, 1e300,
                      np.inf, -np.inf])
    ties = np.round(end)  # many values equal to a point, and points repeated
    tied_points = np.sort(np.round(points))
    for pts, values in ((points, end), (points, np.concatenate([end, edges])), (tied_points, ties),
                        (np.array([3.0]), ties), (np.array([4.0, 4.0]), ties)):
        for side in ("left", "right"):
            assert np.array_equal(positions(pts, values, side), np.searchsorted(pts, values, side=side)), side


def test_large_run_signals_equal_plain_numpy():
    """A 150,000-request run (the fast paths' size) with failures and missing values: every percentile signal is
    np.quantile of the successful finite values, and the load correlation is the one from a full sort."""
    kb = load_knowledge()
    rng = np.random.default_rng(9)
    n = 150_000
    start = 1_700_000_000.0 + np.cumsum(rng.exponential(0.01, n))
    prompt = rng.lognormal(np.log(800), 0.7, n).round()
    ttft = rng.exponential(0.05, n) + prompt * 5e-5
    ttft[::97] = np.nan
    tpot = rng.normal(0.035, 0.003, n)
    output = rng.integers(150, 400, n).astype(float)
    e2e = ttft + tpot * (output - 1)
    ok = rng.random(n) > 0.01
    df = pd.DataFrame({"start_s": start, "prompt_tokens": prompt, "output_tokens": output, "ttft_s": ttft,
                       "tpot_s": tpot, "e2e_s": e2e, "queue_s": rng.exponential(0.02, n), "ok": ok})
    got = benchmark_signals(kb, Run("big", requests=df), resolve_slo(kb).values)

    def pct(col: str, q: float) -> float:
        x = df[col].to_numpy()[ok]
        return float(np.quantile(x[np.isfinite(x)], q))

    for metric in ("ttft", "tpot", "e2e"):
        for name, q in (("p5", 0.05), ("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            signal = got.get(f"{metric}_{name}_s")
            if f"{metric}_{name}_s" in kb.signals:
                assert signal is not None and signal.value == pct(f"{metric}_s", q), (metric, name)
    assert got.get("prompt_tail_ratio").value == pct("prompt_tokens", 0.99) / pct("prompt_tokens", 0.5)
    assert got.get("output_max_over_p99").value == pct("output_tokens", 1.0) / pct("output_tokens", 0.99)
    assert got.get("queue_share_of_ttft").value == pct("queue_s", 0.5) / pct("ttft_s", 0.5)

    s, d = start[ok], e2e[ok]
    idx = np.sort(np.random.default_rng(0).choice(s.size, CORRELATION_SAMPLE, replace=False))
    at, end = s[idx], (s + d)[np.isfinite(s + d)]
    flight = (np.searchsorted(s, at, side="left") - np.searchsorted(np.sort(end), at, side="right")).astype(float)
    sampled_ttft = ttft[ok][idx]
    keep = np.isfinite(sampled_ttft)
    rx = pd.Series(flight[keep]).rank().to_numpy()
    ry = pd.Series(sampled_ttft[keep]).rank().to_numpy()
    assert got.get("ttft_load_corr").value == pytest.approx(float(np.corrcoef(rx, ry)[0, 1]), abs=1e-12)


def test_quantiles_interpolate_as_numpy_does():
    """Sixty quantiles of one column, each from its own bracket and interpolated between two order statistics."""
    rng = np.random.default_rng(2)
    x = rng.lognormal(3, 1, 100_003)
    qs = tuple(rng.uniform(0.01, 0.99, 60).tolist())
    assert np.array_equal(quantiles(x, qs), np.quantile(x, qs))


def test_parsed_quantiles_are_numpys_and_the_signals_select_none_again(monkeypatch):
    """A parsed 120,000-row CSV keeps each latency column's quantiles (p50, p90, p99, and TTFT's p5, of the successful
    requests, np.quantile's to the bit) on its Run; the signals read them: only the token and queue columns, which
    the parse does not summarise by quantile, are selected again, and every signal equals a run without them."""
    from triage.diagnosis import client_signals
    from triage.sources.files import load_benchmark

    rng = np.random.default_rng(4)
    n = 120_000
    ttft = rng.exponential(50.0, n)
    e2e = ttft + rng.gamma(2.0, 900.0, n)
    ok = rng.random(n) > 0.02
    rows = "\n".join(f"{t!r},{e!r},{o},{p},{q!r},{'true' if k else 'false'}" for t, e, o, p, q, k in zip(
        ttft.tolist(), e2e.tolist(), rng.integers(2, 400, n).tolist(), rng.integers(10, 4000, n).tolist(),
        rng.exponential(20.0, n).tolist(), ok.tolist(), strict=True))
    data = ("ttft_ms,e2e_latency_ms,output_tokens,prompt_tokens,queue_ms,ok\n" + rows + "\n").encode()
    run = load_benchmark(data, "big.csv").runs[0]
    df = run.requests
    assert set(run.quantiles) == {"ttft_s", "tpot_s", "e2e_s"}
    for col, kept in run.quantiles.items():
        x = df[col].to_numpy()[ok]
        x = x[np.isfinite(x)]
        assert list(kept) == ([0.05] if col == "ttft_s" else []) + [0.5, 0.9, 0.99]
        assert np.array_equal(list(kept.values()), np.quantile(x, list(kept))), col
    assert run.summary["ttft_p90_s"] == run.quantiles["ttft_s"][0.9]

    kb = load_knowledge()
    slo = resolve_slo(kb).values
    selected: list[int] = []

    def counting(x: np.ndarray, qs: tuple[float, ...]) -> np.ndarray:
        selected.append(x.size)
        return quantiles(x, qs)

    monkeypatch.setattr(client_signals, "quantiles", counting)
    got = benchmark_signals(kb, run, slo)
    assert len(selected) == 3  # prompt, output, queue: none of the latency columns (the kb reads no TPOT/E2E p5)
    plain = benchmark_signals(kb, Run(run.label, requests=df, summary=run.summary), slo)
    assert len(selected) == 3 + 6  # without them, all six columns
    for name in kb.signals:
        a, b = got.get(name), plain.get(name)
        assert (a is None) == (b is None) and (a is None or a.value == b.value), name


def test_ranks_are_pandas_average_ranks():
    """The load correlation's ranks: pandas' rank() (ties share their mean rank), without building a Series."""
    from triage.diagnosis.client_signals import _ranks

    rng = np.random.default_rng(8)
    for x in (rng.random(1_000), rng.integers(0, 30, 50_000).astype(float), np.array([2.0]), np.array([1.0, 1.0]),
              np.array([3.0, 1.0, 3.0, 2.0, 1.0, 3.0])):
        assert np.array_equal(_ranks(x), pd.Series(x).rank().to_numpy())
