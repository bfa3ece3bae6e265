"""From a source's typed data to a Diagnosis: signals, then rules, for one benchmark run."""

from __future__ import annotations

from triage.diagnosis.client_signals import benchmark_signals
from triage.diagnosis.roofline import Hardware, add_roofline
from triage.diagnosis.rules import Diagnosis, Slo, diagnose, resolve_slo
from triage.errors import TriageError
from triage.knowledge.loader import KnowledgeBase
from triage.run import Benchmark, Run


def pick_run(bench: Benchmark, run_number: int | None) -> Run:
    """Run ``run_number`` (1-based); without one, the last run (a sweep's heaviest load point)."""
    if run_number is None:
        return bench.runs[-1]
    if not 1 <= run_number <= len(bench.runs):
        raise TriageError(f"run {run_number} does not exist; the file has {len(bench.runs)} run(s)",
                          where=bench.source, key="--run")
    return bench.runs[run_number - 1]


def diagnose_run(kb: KnowledgeBase, run: Run, slo: Slo | None = None, hardware: Hardware | None = None) -> Diagnosis:
    """Client-side signals of the run (plus the roofline comparison when the hardware is named), then rules."""
    slo = slo or resolve_slo(kb)
    signals = benchmark_signals(kb, run, slo.values)
    if hardware is not None:
        add_roofline(kb, signals, run.summary, hardware)
    diag = diagnose(kb, signals, slo)
    diag.empty = run.empty_reason()
    return diag


def diagnose_benchmark(kb: KnowledgeBase, bench: Benchmark, run_number: int | None = None,
                       slo: Slo | None = None, hardware: Hardware | None = None) -> Diagnosis:
    return diagnose_run(kb, pick_run(bench, run_number), slo, hardware)
