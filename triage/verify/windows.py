"""Runs for verification from server windows: the window's signals as a summary-only run."""

from __future__ import annotations

from triage.diagnosis.signals import SignalSet
from triage.run import Run
from triage.verify.comparison import METRICS

# the signals of the compared metrics (the metric catalogue's `compare`, tree/signals.yaml)
SUMMARY_SIGNALS = tuple(m.summary_key for m in METRICS)


def run_from_signals(signals: SignalSet, label: str) -> Run:
    """A summary-only run (no per-request rows, so comparisons carry no interval and say so)."""
    summary = {k: float(s.value) for k in SUMMARY_SIGNALS if (s := signals.get(k)) is not None}
    return Run(label=label, summary=summary, definitions={"source": "server metrics window (histogram quantiles)"})
