"""One Fleet refresh: a grouped Prometheus read → every replica's diagnosis → table records (with Live links)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from triage.diagnosis.fleet import FleetRead, FleetRow, diagnose_fleet
from triage.diagnosis.rules import Diagnosis, Slo
from triage.knowledge.loader import KnowledgeBase
from triage.report.links import LiveLink, live_url
from triage.sources.metrics.profiles import Profile
from triage.sources.metrics.prometheus_fleet import FleetWindow

DEFAULT_TIMEOUT_S = 10.0


def fleet_window(profile: Profile | str, end: datetime | None, minutes: float, by: tuple[str, ...],
                 match: dict[str, str] | None = None, timeout: float | None = None) -> FleetWindow:
    """A Prometheus window of ``minutes`` ending at ``end`` (None: now), every need grouped by the ``by`` labels."""
    stop = end or datetime.now(UTC)
    if timeout is None:
        timeout = (profile.timeout if isinstance(profile, Profile) else None) or DEFAULT_TIMEOUT_S
    return FleetWindow(profile, stop - timedelta(minutes=minutes), stop, by=by, match=match, timeout=timeout)


@dataclass
class FleetTable:
    records: list[dict[str, object]]
    read: FleetRead  # recorded (the rules' series) or raw, and why
    fleet: Diagnosis | None = None  # the causes only a fleet answers (straggler, routing skew, out of capacity)


def fleet_refresh(kb: KnowledgeBase, profile: Profile, minutes: float, window: str, by: tuple[str, ...],
                  end: datetime | None, slo: Slo) -> FleetTable:
    """One fleet read (the recording rules' series when Prometheus evaluates them for this window, else one grouped
    query per need) and every replica's diagnosis, as table records.

    ``window`` is the label of the span (``15m``) the records' Live links carry; ``end`` None means now.
    """
    fleet = fleet_window(profile, end, minutes, by)
    result = diagnose_fleet(kb, fleet, slo)
    return FleetTable(fleet_records(result.rows, profile=profile.name or None, window=window, end=end), result.read,
                      result.fleet)


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
