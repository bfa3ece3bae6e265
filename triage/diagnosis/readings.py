"""What server signals need from a metric window, and the typed answers a window returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from triage.knowledge.engines import EngineSpec

NeedKind = Literal["rate", "quantile", "hist_mean", "gauge_mean", "gauge_max", "gauge_last", "info"]


@dataclass(frozen=True)
class Need:
    """One number (or label set, for ``info``) over the window, by canonical metric key.

    rate        counter increase per second over the window
    quantile    histogram quantile ``q`` of the observations made in the window (bucket deltas)
    hist_mean   histogram sum delta ÷ count delta over the window
    gauge_mean / gauge_max / gauge_last   of the gauge over the window
    info        the labels of an info-style gauge (e.g. vllm:cache_config_info)
    """

    kind: NeedKind
    key: str
    q: float | None = None
    engine: str = ""  # which engine's map to use; "" = the window's serving engine

    @property
    def quantile(self) -> float:
        """``q`` of a quantile need (ValueError for a need without one)."""
        if self.q is None:
            raise ValueError(f"need {self.kind} {self.key} has no quantile")
        return self.q


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


@dataclass(frozen=True)
class SeriesPoint:
    t: float  # unix seconds
    value: float


class MetricWindow(Protocol):
    """A window of server metrics: scrapes held in memory, or a Prometheus range."""

    engine: EngineSpec          # the detected serving engine
    addons: list[EngineSpec]    # e.g. DCGM, when present

    def read(self, needs: list[Need]) -> Readings: ...

    def series(self, needs: list[Need], points: int = 60) -> dict[Need, list[SeriesPoint]]: ...
