"""Runs for verification from server windows: the window's signals as a summary-only run."""

from __future__ import annotations

from triage.diagnosis.signals import SignalSet
from triage.run import Run
from triage.verify.comparison import metric_specs


def run_from_signals(signals: SignalSet, label: str) -> Run:
    """A summary-only run (no per-request rows, so comparisons carry no interval and say so) of the signals of
    the compared metrics (the active tree's metric catalogue ``compare``, signals.yaml)."""
    keys = [m.summary_key for m in metric_specs().values()]
    summary = {k: float(s.value) for k in keys if (s := signals.get(k)) is not None}
    return Run(label=label, summary=summary, definitions={"source": "server metrics window (histogram quantiles)"})
