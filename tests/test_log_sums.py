"""A log's column sums in numpy give math.fsum's and statistics.fmean's values bit for bit."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from triage.sources.logs.series import exact_sum, fmean


def _columns() -> list[np.ndarray]:
    rng = np.random.default_rng(26)
    out = []
    for n in (1, 2, 3, 17, 1000, 200_000):
        out += [rng.random(n), rng.random(n) * 1e6, np.round(rng.random(n) * 1000, 1) / 100,
                rng.normal(size=n) * 10.0 ** rng.integers(-30, 30, n), rng.integers(0, 300, n) / 100,
                np.r_[1e16, rng.random(n - 1)], -rng.random(n), np.zeros(n), np.full(n, -0.0), rng.random(n) * 1e-310,
                np.r_[1e300, -1e300, rng.random(n)], np.r_[rng.random(n), np.inf]]
    return out


@pytest.mark.parametrize("values", _columns(), ids=lambda v: f"{len(v)}:{v[0]:.3g}")
def test_exact_sum_is_fsum_and_fmean_is_statistics_fmean(values: np.ndarray) -> None:
    want = math.fsum(values.tolist())
    got = exact_sum(values)
    assert got == want and math.copysign(1, got) == math.copysign(1, want)
    assert fmean(values) == statistics.fmean(values.tolist())


def test_a_pairwise_numpy_sum_would_differ() -> None:
    """The case the grids exist for: numpy's own sum rounds at every step and misses fsum's value."""
    values = np.r_[1e16, np.full(1000, 1.0), -1e16]
    assert float(values.sum()) != math.fsum(values.tolist())
    assert exact_sum(values) == 1000.0


def test_no_data_is_statistics_error() -> None:
    with pytest.raises(statistics.StatisticsError):
        fmean(np.empty(0))
