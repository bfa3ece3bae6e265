"""Diagnose a metric window: read every need at once, compute server signals, run the rules."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from triage.diagnosis.batch_cap import put_running_cap
from triage.diagnosis.roofline import Hardware
from triage.diagnosis.rules import Diagnosis, Slo, diagnose
from triage.diagnosis.server_signals import breakdown_needs, first_needs, more_needs, server_signals
from triage.diagnosis.signals import SignalSet
from triage.knowledge.loader import KnowledgeBase
from triage.sources.readings import MetricWindow, Readings
from triage.sources.running_plateau import Samples


@dataclass
class LiveDiagnosis:
    diagnosis: Diagnosis
    readings: Readings
    engine: str


def window_signals(kb: KnowledgeBase, window: MetricWindow,
                   hardware: Hardware | None = None) -> tuple[SignalSet, Readings]:
    """Every need read at once (the recipes' ``later`` alternatives, e.g. the ITL quantiles, in a second round, only
    when the window needs them), then the server signals they give."""
    readings = window.read(first_needs(kb) + breakdown_needs(kb))
    more = more_needs(kb, readings)
    if more:
        readings.merge(window.read(more))
    return server_signals(kb, readings, hardware), readings


# inflight_mean: a router's window of one worker may hold only its requests in flight (the SGLang Model Gateway)
ACTIVITY = ("running_mean", "waiting_mean", "req_per_s", "inflight_mean")


def empty_reason(signals: SignalSet) -> str:
    """Why the window gives nothing to judge ("" when it does): no latency observed and no request in flight."""
    if any(signals.get(f"{m}_p50_s") for m in ("ttft", "tpot", "e2e")):
        return ""
    if any((s := signals.get(name)) is not None and s.value > 0 for name in ACTIVITY):
        return ""
    if not signals.values:
        return "the window holds no samples of the engine's metrics"
    return "no request finished in the window and none was running or waiting: there is no traffic to judge"


def diagnose_window(kb: KnowledgeBase, window: MetricWindow, slo: Slo,
                    hardware: Hardware | None = None,
                    configured_cap: tuple[float, str] | None = None,
                    cap_samples: Sequence[Samples] | None = None) -> LiveDiagnosis:
    """``configured_cap``: the running cap a startup log names, with its setting's name; ``cap_samples``: a log's
    (running, waiting) per engine, for the running plateau (else read from the window's series)."""
    signals, readings = window_signals(kb, window, hardware)
    put_running_cap(kb, signals, window, configured_cap, cap_samples)
    diag = diagnose(kb, signals, slo)
    diag.empty = empty_reason(signals)
    return LiveDiagnosis(diag, readings, window.engine.id)
