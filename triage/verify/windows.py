"""Runs for verification from server windows: the window's signals as a summary-only run."""

from __future__ import annotations

from triage.diagnosis.signals import SignalSet
from triage.run import Run

SUMMARY_SIGNALS = ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s", "e2e_p50_s",
                   "e2e_p99_s", "req_per_s", "out_tok_per_s", "preemptions_per_s", "kv_usage_max")


def run_from_signals(signals: SignalSet, label: str) -> Run:
    """A summary-only run (no per-request rows, so comparisons carry no interval and say so)."""
    summary = {k: float(s.value) for k in SUMMARY_SIGNALS if (s := signals.get(k)) is not None}
    return Run(label=label, summary=summary, definitions={"source": "server metrics window (histogram quantiles)"})
