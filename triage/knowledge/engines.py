"""Engine metric maps (tree/engines/*.yaml): canonical keys to exposed names, aliases and prefixes."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from triage.knowledge.model import Strict, Text

MetricType = Literal["counter", "gauge", "histogram", "info"]


class MetricSpec(Strict):
    """One canonical metric as an engine exposes it; ``names`` are tried in order (newest first)."""

    key: str
    type: MetricType
    names: list[str] = Field(min_length=1)
    unit: str = ""
    missing: Text  # shown on a panel when the server does not export it, saying why
    # replica labels this series does not carry (vllm:cache_config_info has `engine` but no `model_name`):
    # the rule export joins it onto the replica on the labels it does carry
    lacks_labels: list[str] = Field(default_factory=list)


class EngineSpec(Strict):
    id: str
    title: str
    prefixes: list[str] = Field(min_length=1)
    detect: list[str] = Field(min_length=1)
    labels: list[str] = Field(default_factory=list)
    # the labels that tell one replica of this engine from another beside the target's own (job, instance,
    # pod, namespace): Prometheus rules and fleet views group by them; per-rank labels (tp_rank) are summed
    replica_labels: list[str] = Field(default_factory=list)
    metrics: list[MetricSpec] = Field(min_length=1)

    def metric(self, key: str) -> MetricSpec | None:
        return next((m for m in self.metrics if m.key == key), None)

    def candidates(self, key: str) -> list[str]:
        """Every exposed name that may carry ``key``, in preference order (new name, then prefixes)."""
        spec = self.metric(key)
        return [] if spec is None else [p + n for n in spec.names for p in self.prefixes]

    def resolve(self, key: str, present: set[str]) -> str | None:
        """The first candidate that is present (names without _total/_bucket suffixes)."""
        return next((c for c in self.candidates(key) if c in present), None)

    def detected_in(self, present: set[str]) -> bool:
        return any(p + d in present for d in self.detect for p in self.prefixes)


def load_engines(tree_dir: Path | None = None) -> dict[str, EngineSpec]:
    """The engine maps of tree/engines/*.yaml (validated with the rest of the tree)."""
    from triage.knowledge.loader import load_knowledge  # the loader imports this module's schema

    return load_knowledge(tree_dir).engines


def detect_engines(present: set[str], engines: dict[str, EngineSpec] | None = None) -> list[EngineSpec]:
    """Engines whose detection metrics are present; DCGM is an add-on, listed after the serving engine."""
    engines = engines or load_engines()
    return [e for e in engines.values() if e.detected_in(present)]
