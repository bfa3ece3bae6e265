"""Diagnose every replica of a fleet from one grouped read: each group as a single-window diagnosis of it would."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from triage.diagnosis.roofline import Hardware
from triage.diagnosis.rules import Diagnosis, Slo, diagnose
from triage.diagnosis.server_signals import FIRST_NEEDS, ITL_NEEDS, needs_itl, server_signals
from triage.diagnosis.window import LiveDiagnosis, empty_reason
from triage.knowledge.loader import KnowledgeBase
from triage.report.links import LiveLink, live_url
from triage.sources.metrics.prometheus_fleet import FleetWindow


@dataclass
class FleetRow:
    labels: dict[str, str]
    live: LiveDiagnosis

    @property
    def diagnosis(self) -> Diagnosis:
        return self.live.diagnosis

    @property
    def symptoms(self) -> list[str]:
        return [c.symptom for c in self.diagnosis.symptoms if c.present]

    @property
    def top_cause(self) -> str | None:
        return self.diagnosis.findings[0].cause if self.diagnosis.findings else None


def diagnose_fleet(kb: KnowledgeBase, window: FleetWindow, slo: Slo,
                   hardware: Hardware | None = None) -> list[FleetRow]:
    """One row per group of the window's labels, in label order."""
    rows = []
    groups = window.read_groups(FIRST_NEEDS)
    lacking = [key for key, readings in groups.items() if needs_itl(readings)]
    if lacking:  # as window_signals does for one replica, in one grouped round for all that need it
        second = window.read_groups(ITL_NEEDS, groups=lacking)
        for key in lacking:
            groups[key].merge(second[key])
    for key, readings in groups.items():
        signals = server_signals(kb, readings, hardware)
        diag = diagnose(kb, signals, slo)
        diag.empty = empty_reason(signals)
        rows.append(FleetRow(dict(key), LiveDiagnosis(diag, readings, window.engine.id)))
    return rows


def fleet_records(rows: list[FleetRow], *, profile: str | None, window: str,
                  end: datetime | None) -> list[dict[str, object]]:
    """One flat record per replica for a table: its labels, symptoms, top cause, and the link to its Live view (with
    the top cause lit)."""
    out: list[dict[str, object]] = []
    for row in rows:
        link = LiveLink(profile=profile, window=window, end=end, match=row.labels, node=row.top_cause)
        out.append({"replica": ", ".join(f"{k}={v}" for k, v in row.labels.items()), "labels": row.labels,
                    "symptoms": row.symptoms, "top_cause": row.top_cause or "",
                    "findings": len(row.diagnosis.findings), "empty": row.diagnosis.empty,
                    "link": live_url(link)})
    return out
