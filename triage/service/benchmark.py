"""One benchmark file as the Benchmark page shows it: a run's diagnosis, the load tool's summary table and the
latency-throughput sweep across its runs with the knee."""

from __future__ import annotations

from triage.diagnosis.benchmark import diagnose_run
from triage.diagnosis.roofline import Hardware
from triage.diagnosis.rules import Diagnosis, Slo
from triage.diagnosis.sweep import SweepPoint, knee_index, sweep_points
from triage.knowledge.loader import KnowledgeBase
from triage.report.run_summary import RunSummary, run_summary
from triage.run import Benchmark, Run

__all__ = ["RunSummary", "diagnose_benchmark", "knee_index", "summary", "sweep"]


def diagnose_benchmark(kb: KnowledgeBase, run: Run, slo: Slo | None = None,
                       hardware: Hardware | None = None) -> Diagnosis:
    """The run's client-side signals (with the roofline when the hardware is named) judged by the tree's rules;
    the tree's default SLO when none is given."""
    return diagnose_run(kb, run, slo, hardware)


def summary(run: Run) -> RunSummary:
    """The run as the load tools print it: latencies (mean, median, p90, p99), counts, load and errors."""
    return run_summary(run)


def sweep(kb: KnowledgeBase, bench: Benchmark, slo_values: dict) -> list[SweepPoint]:
    """One point per run of a multi-run file (a rate or concurrency sweep): throughput against TTFT p99."""
    return sweep_points(kb, bench, slo_values)
