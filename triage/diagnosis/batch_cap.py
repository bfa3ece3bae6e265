"""The running batch's cap as the data shows it: a startup log's setting, or running pinned while requests wait.

vLLM exports no max_num_seqs on /metrics (vllm:cache_config_info carries CacheConfig fields only; the cap is a
SchedulerConfig field), so a window shows the cap only by its effect: the running count held at one value in
most samples that have a queue (sources/running_plateau.py). The verdict sets the queueing cause's first action
relative to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from triage.diagnosis.signals import SignalSet
from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.messages import Msg
from triage.knowledge.needs import Need, SeriesPoint
from triage.sources.readings import MetricWindow
from triage.sources.running_plateau import Plateau, Samples, plateau

SERIES_POINTS = 240
RUNNING = Need("gauge_mean", "running")
WAITING = Need("gauge_mean", "waiting")


def queued(signals: SignalSet) -> bool:
    """Whether requests waited while some ran on average: only then can a running plateau show a cap (and only
    then is the running/waiting series worth reading)."""
    waiting_mean, running_mean = signals.get("waiting_mean"), signals.get("running_mean")
    return bool(waiting_mean is not None and running_mean is not None and waiting_mean.value and running_mean.value)


def series_samples(series: Mapping[Need, list[SeriesPoint]]) -> Samples:
    """(running, waiting) at the times both series have a point, in time order."""
    waiting = {p.t: p.value for p in series.get(WAITING, [])}
    return [(p.value, waiting[p.t]) for p in series.get(RUNNING, []) if p.t in waiting]


def put_running_cap(kb: KnowledgeBase, out: SignalSet, window: MetricWindow,
                    configured: tuple[float, str] | None = None, groups: Sequence[Samples] | None = None) -> None:
    """Record ``running_cap``: the cap a startup log names (value, setting), else the first running plateau of
    ``groups`` (a log's stats lines per engine; a fleet replica's series, read for the whole fleet at once) or of
    the window's series. Read only when requests waited (the series costs range queries on a Prometheus
    window)."""
    if configured is not None:
        out.put(kb, "running_cap", configured[0], Msg("server.cap_configured", flag=configured[1]))
        return
    if not queued(out):
        return
    if groups is None:
        groups = [series_samples(window.series([RUNNING, WAITING], SERIES_POINTS))]
    put_plateau(kb, out, next((p for g in groups if (p := plateau(g)) is not None), None))


def put_plateau(kb: KnowledgeBase, out: SignalSet, found: Plateau | None) -> None:
    """Record a running plateau found as ``running_cap`` (nothing when none was)."""
    if found is not None:
        out.put(kb, "running_cap", found.cap, Msg("server.running_plateau", held=found.held, queued=found.queued))
