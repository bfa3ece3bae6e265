"""The running batch's cap as the data shows it: a startup log's setting, or running pinned while requests wait.

vLLM exports no max_num_seqs on /metrics (vllm:cache_config_info carries CacheConfig fields only; the cap is a
SchedulerConfig field), so a window shows the cap only by its effect: the running count held at one value in
most samples that have a queue. The verdict sets the queueing cause's first action relative to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from triage.diagnosis.signals import SignalSet
from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.messages import Msg
from triage.knowledge.needs import Need
from triage.sources.readings import MetricWindow

PLATEAU_SHARE = 0.6  # the running count sits at its peak in at least this share of the samples with a queue
MIN_QUEUED = 3       # fewer samples with a queue show no plateau
MIN_RUNNING = 2      # one running request with a queue is as likely a stalled engine as a cap of 1
AT_PEAK = 0.5        # a sample within half a request of the peak holds it (series points are means)
SERIES_POINTS = 240
RUNNING = Need("gauge_mean", "running")
WAITING = Need("gauge_mean", "waiting")


@dataclass(frozen=True)
class Plateau:
    """Running held at ``cap`` in ``held`` of the ``queued`` samples where requests waited."""

    cap: int
    held: int
    queued: int


Samples = list[tuple[float, float]] | np.ndarray  # (running, waiting) in time order, or an array of such rows


def plateau(samples: Samples) -> Plateau | None:
    """The cap from (running, waiting) samples: the peak running count among the samples with a queue, when it
    holds in at least PLATEAU_SHARE of them; None when the running count moves (nothing caps it visibly)."""
    pairs = np.asarray(samples, dtype=np.float64).reshape(-1, 2)
    running, waiting = pairs[:, 0], pairs[:, 1]
    queued = running[(waiting > 0) & (running > 0)]
    if len(queued) < MIN_QUEUED:
        return None
    peak = float(queued.max())
    if peak < MIN_RUNNING:
        return None
    held = int(np.count_nonzero(peak - queued < AT_PEAK))
    if held / len(queued) < PLATEAU_SHARE:
        return None
    return Plateau(round(peak), held, len(queued))


def put_running_cap(kb: KnowledgeBase, out: SignalSet, window: MetricWindow,
                    configured: tuple[float, str] | None = None, groups: Sequence[Samples] | None = None) -> None:
    """Record ``running_cap``: the cap a startup log names (value, setting), else the first running plateau of
    ``groups`` (a log's stats lines per engine) or of the window's series. Read only when requests waited (the
    series costs range queries on a Prometheus window)."""
    if configured is not None:
        out.put(kb, "running_cap", configured[0], Msg("server.cap_configured", flag=configured[1]))
        return
    waiting_mean, running_mean = out.get("waiting_mean"), out.get("running_mean")
    if waiting_mean is None or running_mean is None or not waiting_mean.value or not running_mean.value:
        return
    if groups is None:
        series = window.series([RUNNING, WAITING], SERIES_POINTS)
        waiting = {p.t: p.value for p in series.get(WAITING, [])}
        groups = [[(p.value, waiting[p.t]) for p in series.get(RUNNING, []) if p.t in waiting]]
    found = next((p for g in groups if (p := plateau(g)) is not None), None)
    if found is not None:
        out.put(kb, "running_cap", found.cap, Msg("server.running_plateau", held=found.held, queued=found.queued))
