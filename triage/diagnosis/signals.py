"""Signals: named numbers with unit and provenance, the only thing rules read."""

from __future__ import annotations

from dataclasses import dataclass, field

from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.messages import Msg


@dataclass(frozen=True)
class Signal:
    """One measured value and how it was obtained (``source``, a message each reader renders in its language, is
    shown as evidence provenance)."""

    name: str
    value: float | bool
    unit: str
    source: Msg


@dataclass
class SignalSet:
    """The signals one source could provide; a name that is missing is *not measurable*, never zero."""

    kind: str  # benchmark | server | model
    values: dict[str, Signal] = field(default_factory=dict)

    def put(self, kb: KnowledgeBase, name: str, value: float | bool | None, source: Msg) -> None:
        """Record ``name`` if it has a finite value; refuse names signals.yaml does not declare."""
        if name not in kb.signals:
            raise KeyError(f"signal '{name}' is not declared in signals.yaml")
        if value is None or (isinstance(value, float) and value != value) or value in (float("inf"), float("-inf")):
            return
        if not isinstance(value, bool):
            value = float(value)
        self.values[name] = Signal(name, value, kb.signals[name].unit, source)

    def get(self, name: str) -> Signal | None:
        return self.values.get(name)

    def merged(self, other: SignalSet) -> SignalSet:
        """This set with ``other``'s signals added where this one has none."""
        return SignalSet(self.kind, {**other.values, **self.values})
