"""Every signal of an incident window set against a baseline window, with its change."""

from __future__ import annotations

from dataclasses import dataclass

from triage.diagnosis.signals import SignalSet


@dataclass(frozen=True)
class SignalDelta:
    name: str
    unit: str
    current: float | bool | None
    baseline: float | bool | None

    @property
    def delta(self) -> float | None:
        if isinstance(self.current, bool) or isinstance(self.baseline, bool):
            return None
        if self.current is None or self.baseline is None:
            return None
        return self.current - self.baseline

    @property
    def pct(self) -> float | None:
        d = self.delta
        return d / abs(self.baseline) * 100 if d is not None and self.baseline else None


def signal_deltas(current: SignalSet, baseline: SignalSet) -> list[SignalDelta]:
    """One row per signal either side has, in the current set's order, then the baseline-only ones."""
    names = list(current.values) + [n for n in baseline.values if n not in current.values]
    rows = []
    for name in names:
        cur, base = current.get(name), baseline.get(name)
        unit = (cur or base).unit  # type: ignore[union-attr]
        rows.append(SignalDelta(name, unit, cur.value if cur else None, base.value if base else None))
    return rows
