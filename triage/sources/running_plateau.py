"""The running count held at one value while requests wait: how a window or a log shows a cap on concurrency.

One rule for both readers: the log's own reading (sources/logs/derived.py, which adds "KV cache below 90 %") and
the verdict's ``running_cap`` (diagnosis/batch_cap.py) call ``plateau`` on the same (running, waiting) samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

PLATEAU_SHARE = 0.6  # the running count sits at its peak in at least this share of the samples with a queue
MIN_QUEUED = 3       # fewer samples with a queue show no plateau
MIN_RUNNING = 2      # one running request with a queue is as likely a stalled engine as a cap of 1
AT_PEAK = 0.5        # a sample within half a request of the peak holds it (series points are means)

Samples = list[tuple[float, float]] | np.ndarray  # (running, waiting) in time order, or an (n, 2) array


@dataclass(frozen=True)
class Plateau:
    """Running held at ``cap`` in ``held`` of the ``queued`` samples where requests waited; ``peak`` is the
    highest running value among them (series points are means: ``cap`` is it rounded)."""

    cap: int
    held: int
    queued: int
    peak: float


def queued_rows(running: np.ndarray, waiting: np.ndarray) -> np.ndarray:
    """The samples where requests waited while some ran (NaN, a value not printed, is neither)."""
    return (waiting > 0) & (running > 0)


def plateau(samples: Samples) -> Plateau | None:
    """The cap from (running, waiting) samples: the peak running count among the samples with a queue, when it
    holds (within AT_PEAK) in at least PLATEAU_SHARE of them; None when the running count moves."""
    pairs = np.asarray(samples, dtype=np.float64).reshape(-1, 2)
    running, waiting = pairs[:, 0], pairs[:, 1]
    return queued_plateau(running[queued_rows(running, waiting)])


def queued_plateau(running: Sequence[float] | np.ndarray) -> Plateau | None:
    """``plateau`` from the running counts of its queued rows only (e.g. kept by Prometheus, which compared the
    series)."""
    queued = np.asarray(running, dtype=np.float64)
    if len(queued) < MIN_QUEUED:
        return None
    peak = float(queued.max())
    if peak < MIN_RUNNING:
        return None
    held = int(np.count_nonzero(peak - queued < AT_PEAK))
    if held / len(queued) < PLATEAU_SHARE:
        return None
    return Plateau(round(peak), held, len(queued), peak)
