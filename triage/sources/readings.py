"""The typed answers a metric window returns to needs, and the window every source of server metrics provides."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from triage.knowledge.engines import EngineSpec
from triage.knowledge.needs import Need, SeriesPoint


@dataclass
class Readings:
    """Answers to needs. A need the server cannot answer maps to None, with the reason in ``missing``."""

    values: dict[Need, float | dict[str, str] | None] = field(default_factory=dict)
    missing: dict[Need, str] = field(default_factory=dict)  # need → why (metric not exported, no data …)
    window_seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    def get(self, need: Need) -> float | dict[str, str] | None:
        return self.values.get(need)

    def merge(self, other: Readings) -> None:
        """Add a second read's answers (an error already reported is not repeated)."""
        self.values.update(other.values)
        self.missing.update(other.missing)
        self.errors += [e for e in other.errors if e not in self.errors]


class MetricWindow(Protocol):
    """A window of server metrics: scrapes held in memory, or a Prometheus range."""

    engine: EngineSpec          # the detected serving engine
    addons: list[EngineSpec]    # e.g. DCGM, when present

    def read(self, needs: list[Need]) -> Readings: ...

    def series(self, needs: list[Need], points: int = 60) -> dict[Need, list[SeriesPoint]]: ...
