"""Diagnose a server log: its window through the same signals and rules as /metrics, plus the log's readings."""

from __future__ import annotations

from dataclasses import dataclass

from triage.diagnosis.rules import Slo
from triage.diagnosis.window import LiveDiagnosis, diagnose_window
from triage.knowledge.loader import KnowledgeBase
from triage.sources.logs.derived import LogReading, log_readings, running_waiting
from triage.sources.logs.series import LogSeries, columns
from triage.sources.logs.window import LogWindow

BLIND = "a log"  # what the text report says a signal is not measurable from


@dataclass
class LogDiagnosis:
    log: LogSeries
    window: LogWindow
    live: LiveDiagnosis
    readings: list[LogReading]

    def as_json(self) -> dict:
        """The ``log`` member of ``diagnose --json``: what was read and what the text adds."""
        log = self.log
        return {"format": log.fmt, "title": log.title, "summary": log.summary(), "lines": log.lines,
                "stats_lines": log.stats_lines, "skipped": log.skipped, "untimed": log.untimed,
                "span_s": log.span_s, "engines": sorted(log.engines), "window": "the log's span",
                "readings": [r.as_json() for r in self.readings]}


def diagnose_log(kb: KnowledgeBase, log: LogSeries, slo: Slo) -> LogDiagnosis:
    window = LogWindow(log)
    known = log.config.get("max_num_seqs")  # SGLang's max_running_requests is read into the same key
    setting = "max_running_requests" if log.engine_id == "sglang" else "max_num_seqs"
    configured = (known, setting) if known else None
    # per engine, from the stats lines themselves (the window's series average neighbours down to a few hundred points)
    samples = [running_waiting(columns(g)) for g in log.groups]
    live = diagnose_window(kb, window, slo, configured_cap=configured, cap_samples=samples)
    return LogDiagnosis(log, window, live, log_readings(log, samples))
