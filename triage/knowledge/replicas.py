"""How PromQL tells replicas and recorded signals apart: the alerting target labels, every serving engine's replica
labels, the series that carries them all, and the recording rules' names ``triage:<signal>:<window>``.

The rule export writes these names and labels; the fleet and the Prometheus window read by them."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from triage.knowledge.engines import EngineSpec, serving_engines
from triage.knowledge.loader import active_tree_dir, load_alerting_config

CARRIER_KEY = "running"  # every serving engine exports it with all its replica labels: info labels join onto it


def target_labels() -> tuple[str, ...]:
    """The active tree's (the CLI's --tree-dir) alerting target labels (job, instance, …)."""
    return _target_labels(active_tree_dir())


@lru_cache(maxsize=8)
def _target_labels(tree_dir: Path) -> tuple[str, ...]:
    # read once per tree directory: the fleet and the info join ask for them on every refresh
    return tuple(load_alerting_config(tree_dir).target_labels)


def replica_labels(target: list[str] | tuple[str, ...], engines: Mapping[str, EngineSpec]) -> tuple[str, ...]:
    """Target labels, then every serving engine's replica labels, each once."""
    out: list[str] = list(target)
    for engine in serving_engines(engines):
        out += [label for label in engine.replica_labels if label not in out]
    return tuple(out)


def duration_seconds(text: str) -> int:
    """'15m' → 900 (s, m, h, d)."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    text = text.strip()
    if len(text) < 2 or text[-1] not in units or not text[:-1].isdigit() or int(text[:-1]) <= 0:
        raise ValueError(f"'{text}' is not a duration like 5m, 15m, 1h")
    return int(text[:-1]) * units[text[-1]]


def duration_text(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def record_name(signal: str, window: str) -> str:
    return f"triage:{signal}:{window}"
