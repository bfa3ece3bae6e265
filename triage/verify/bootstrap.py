"""Bootstrap resampling of one run's requests: replicates of a quantile or a mean."""

from __future__ import annotations

import math

import numpy as np

CLT_ABOVE = 5_000  # above this many requests a mean is bootstrapped by its normal approximation


def boot_quantile(sorted_x: np.ndarray, q: float, rng: np.random.Generator, n_boot: int) -> np.ndarray:
    """The ``q`` quantile (numpy's linear rule) of ``n_boot`` resamples-with-replacement of ``sorted_x``.

    Exact, not an approximation: a resample of n requests is n uniform draws of an index into the
    sorted values, so its k-th smallest value is ``sorted_x[floor(n·U_(k))]`` where the k-th order
    statistic of n uniforms is Beta(k, n+1−k), and the next one follows it as the minimum of the
    n−k uniforms above it. O(n_boot) after one sort, so a million-request run costs no more.
    """
    n = sorted_x.size
    h = (n - 1) * q
    k = math.floor(h)
    frac = h - k
    u1 = rng.beta(k + 1, n - k, n_boot)
    values = sorted_x[np.minimum((u1 * n).astype(np.int64), n - 1)]
    if frac > 0 and k + 1 < n:
        u2 = u1 + (1 - u1) * rng.beta(1, n - k - 1, n_boot)
        upper = sorted_x[np.minimum((u2 * n).astype(np.int64), n - 1)]
        values = values + frac * (upper - values)
    return values


def boot_mean(x: np.ndarray, rng: np.random.Generator, n_boot: int) -> np.ndarray:
    """Means of ``n_boot`` resamples-with-replacement of ``x`` (chunked; normal approximation above CLT_ABOVE)."""
    n = x.size
    if n > CLT_ABOVE:
        return rng.normal(float(x.mean()), float(x.std()) / math.sqrt(n), n_boot)
    chunk = max(1, 4_000_000 // n)
    parts = [x[rng.integers(0, n, (min(chunk, n_boot - i), n))].mean(axis=1) for i in range(0, n_boot, chunk)]
    return np.concatenate(parts)
