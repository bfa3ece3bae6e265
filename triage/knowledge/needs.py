"""What a metric window can be asked for (a need: kind + canonical metric key) and one point of its series."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

NeedKind = Literal["rate", "quantile", "hist_mean", "gauge_mean", "gauge_max", "gauge_last", "info"]


@dataclass(frozen=True)
class Need:
    """One number (or label set, for ``info``) over the window, by canonical metric key.

    rate        counter increase per second over the window
    quantile    histogram quantile ``q`` of the observations made in the window (bucket deltas)
    hist_mean   histogram sum delta ÷ count delta over the window
    gauge_mean / gauge_max / gauge_last   of the gauge over the window
    info        the labels of an info-style gauge (e.g. vllm:cache_config_info)

    A rate with ``by`` answers per value of that label instead: {label value: rate as text}, e.g. the admission
    rejections per ``reason`` that the evidence lists beside their total.
    """

    kind: NeedKind
    key: str
    q: float | None = None
    engine: str = ""  # which engine's map to use; "" = the window's serving engine
    by: str = ""  # a rate per value of this label (a breakdown), not one number

    @property
    def quantile(self) -> float:
        """``q`` of a quantile need (ValueError for a need without one)."""
        if self.q is None:
            raise ValueError(f"need {self.kind} {self.key} has no quantile")
        return self.q


@dataclass(frozen=True)
class SeriesPoint:
    t: float  # unix seconds
    value: float
