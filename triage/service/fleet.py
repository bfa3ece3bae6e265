"""One Fleet refresh: a grouped Prometheus read → every replica's diagnosis → table records (with Live links)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from triage.diagnosis.fleet import diagnose_fleet, fleet_records
from triage.diagnosis.rules import Slo
from triage.knowledge.loader import KnowledgeBase
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


def fleet_refresh(kb: KnowledgeBase, profile: Profile, minutes: float, window: str, by: tuple[str, ...],
                  end: datetime | None, slo: Slo) -> list[dict[str, object]]:
    """One fleet read (one grouped query per need) and every replica's diagnosis, as table records.

    ``window`` is the label of the span (``15m``) the records' Live links carry; ``end`` None means now.
    """
    fleet = fleet_window(profile, end, minutes, by)
    rows = diagnose_fleet(kb, fleet, slo)
    return fleet_records(rows, profile=profile.name or None, window=window, end=end)
