"""Exact order statistics of large columns faster than numpy's general routines, with numpy's own results.

``quantiles`` equals ``np.quantile`` (linear method) bit for bit and ``positions`` equals ``np.searchsorted``;
both only do less work on a million values. Tests compare them with numpy on random data.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

BRACKET_FROM = 100_000  # values; below this np.quantile is already fast
SAMPLE = 16_384  # sampled values that bracket each order statistic
SPREAD_SIGMAS = 5.0  # bracket half-width in standard deviations of a sampled rank: a miss is ~1e-6 likely
GRID_PER_POINT = 16  # grid cells per searched point: few values share a cell with a point


def quantiles(x: np.ndarray, qs: tuple[float, ...]) -> np.ndarray:
    """``np.quantile(x, qs)`` of a 1-D float array without NaN. A sample brackets each order statistic, then only
    the values inside the bracket are partitioned (a million values: a partition of a few thousand per
    quantile); the interpolation is numpy's ``_lerp``, so the results are numpy's to the last bit."""
    q = np.asarray(qs, dtype=np.float64)
    n = x.size
    if n < BRACKET_FROM:
        return np.quantile(x, q)
    virtual = (n - 1) * q  # numpy's "linear" virtual index and its neighbours (_get_indexes)
    prev = np.floor(virtual)
    nxt = prev + 1
    above = virtual >= n - 1
    prev[above] = -1
    nxt[above] = -1
    gamma = virtual - prev  # numpy takes gamma after the bounds fix (the weight is moot where both ends are equal)
    lower = [int(k) % n for k in prev.tolist()]
    upper = [int(k) % n for k in nxt.tolist()]
    stats = _order_stats(x, sorted({*lower, *upper}))
    if stats is None:  # the sample missed a bracket (very unlikely): numpy's own way
        return np.quantile(x, q)
    a = np.array([stats[k] for k in lower])
    b = np.array([stats[k] for k in upper])
    diff = b - a
    out = np.add(a, diff * gamma)
    np.subtract(b, diff * (1 - gamma), out=out, where=gamma >= 0.5)
    return out


def _order_stats(x: np.ndarray, ranks: list[int]) -> dict[int, float] | None:
    """The values of rank ``ranks`` (0-based, ascending) of ``x``; None when a sampled bracket misses one."""
    n = x.size
    out: dict[int, float] = {}
    sample: np.ndarray | None = None
    for k in ranks:
        if k in out:
            continue
        if k == 0 or k == n - 1:
            out[k] = float(x.min() if k == 0 else x.max())
            continue
        if sample is None:
            sample = np.sort(x[np.random.default_rng(0).integers(0, n, SAMPLE)])
        f = k / (n - 1)
        spread = SPREAD_SIGMAS * (math.sqrt(SAMPLE * f * (1 - f)) + 1)
        lo_i, hi_i = int(f * SAMPLE - spread), int(f * SAMPLE + spread) + 1
        lo = sample[lo_i] if lo_i > 0 else -np.inf
        hi = sample[hi_i] if hi_i < SAMPLE - 1 else np.inf
        below = int(np.count_nonzero(x < lo))
        # the values of ranks below … below + inside.size - 1, in some order (a few percent of x: gathered by index,
        # which is several times faster than a boolean index over a million values)
        inside = x.take(np.flatnonzero((x >= lo) & (x <= hi)))
        here = [r for r in ranks if r not in out and below <= r < below + inside.size]
        if k not in here:
            return None
        part = np.partition(inside, [r - below for r in here])
        out.update((r, float(part[r - below])) for r in here)
    return out


def positions(points: np.ndarray, values: np.ndarray, side: Literal["left", "right"]) -> np.ndarray:
    """``np.searchsorted(points, values, side)`` for sorted ``points`` and finite ``values``. A million unsorted
    values searched among 50,000 points mispredict most of their binary search's branches; here a uniform grid
    over the points' range places each value by arithmetic, and only the values that share a cell with a point
    are searched. Exact: the cell of a value is monotone in the value, so a cell holding no point has the same
    position for every value in it."""
    m = points.size
    if m < 2 or not points[-1] > points[0] or not np.isfinite(points[[0, -1]]).all():
        return np.searchsorted(points, values, side=side)
    lo = points[0]
    cells = GRID_PER_POINT * m
    scale = cells / (points[-1] - lo)

    def cell(v: np.ndarray) -> np.ndarray:
        c = np.subtract(v, lo)
        c *= scale
        np.clip(c, -1.0, cells + 1.0, out=c)
        return c.astype(np.intp) + 1  # truncation is monotone too; cells 0 and cells + 2 are outside the points

    per = np.bincount(cell(points), minlength=cells + 3)
    start = np.cumsum(per) - per  # points in the cells before each cell: the position of a value in an empty cell
    start[per > 0] = -1
    out = start[cell(values)]
    exact = np.flatnonzero(out < 0)  # a few percent of the values: gathered by index, not a boolean mask
    out[exact] = np.searchsorted(points, values.take(exact), side=side)
    return out
