"""Sweep view of a multi-run file: one point per run, and the knee of the latency curve."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from triage.diagnosis.client_signals import benchmark_signals
from triage.knowledge.loader import KnowledgeBase
from triage.run import Benchmark


@dataclass(frozen=True)
class SweepPoint:
    number: int
    label: str
    req_per_s: float | None
    out_tok_per_s: float | None
    ttft_p99_s: float | None
    tpot_p99_s: float | None


def sweep_points(kb: KnowledgeBase, bench: Benchmark, slo: dict) -> list[SweepPoint]:
    points = []
    for i, run in enumerate(bench.runs, start=1):
        sig = benchmark_signals(kb, run, slo)

        def val(name: str, sig=sig) -> float | None:
            s = sig.get(name)
            return float(s.value) if s is not None else None

        points.append(SweepPoint(i, run.label, val("req_per_s"), val("out_tok_per_s"), val("ttft_p99_s"),
                                 val("tpot_p99_s")))
    return points


def knee_index(x: Sequence[float | None], y: Sequence[float | None]) -> int | None:
    """Kneedle on a rising latency curve: the point farthest below the chord, after sorting by x.

    Returns an index into the given lists (of a point with both values), or None when fewer than three usable
    points exist (a point missing either value is skipped).
    """
    pts = [(xi, yi, i) for i, (xi, yi) in enumerate(zip(x, y)) if xi is not None and yi is not None]
    if len(pts) < 3:
        return None
    pts.sort()
    xs = np.array([p[0] for p in pts], dtype=float)
    ys = np.array([p[1] for p in pts], dtype=float)
    if np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return None
    xn = (xs - xs.min()) / np.ptp(xs)
    yn = (ys - ys.min()) / np.ptp(ys)
    return pts[int(np.argmax(xn - yn))][2]
