"""The running batch's cap as the data shows it: a startup log's setting, or running pinned while requests wait.

vLLM exports no max_num_seqs on /metrics (vllm:cache_config_info carries CacheConfig fields only; the cap is a
SchedulerConfig field), so a window shows the cap only by its effect: the running count held at one value in
most samples that have a queue (sources/running_plateau.py). The verdict sets the queueing cause's first action
relative to it.
"""

from __future__ import annotations

from collections.abc import Sequence

from triage.diagnosis.signals import SignalSet
from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.messages import Msg
from triage.knowledge.needs import Need
from triage.sources.readings import MetricWindow
from triage.sources.running_plateau import Samples, plateau

SERIES_POINTS = 240
RUNNING = Need("gauge_mean", "running")
WAITING = Need("gauge_mean", "waiting")


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
