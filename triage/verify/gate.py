"""The regression gate: tree/gate.yaml's per-metric tolerances, applied to a comparison."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, field_validator

from triage.errors import TriageError
from triage.knowledge.loader import DEFAULT_TREE_DIR, _parse, _read_yaml
from triage.knowledge.model import Strict, Text
from triage.verify.comparison import METRIC_IDS, NOT_COMPARABLE, REGRESSION, SPECS, Comparison, MetricDelta

GATE_PATH = DEFAULT_TREE_DIR / "gate.yaml"


_TOL_RE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*(%|pp)?\s*$", re.IGNORECASE)


def parse_tolerance(text: str | float, metric: str, key: str = "--max-regression") -> float:
    """'5%' / '5' → 5.0 (% of baseline); for error_rate '0.5pp' / '0.5%' → 0.5 percentage points."""
    if metric not in SPECS:
        raise TriageError(f"unknown metric '{metric}'; choose one of {', '.join(METRIC_IDS)}", key="--metric")
    m = _TOL_RE.match(str(text))
    if not m:
        raise TriageError(f"'{text}' is not a percentage like 5% (or 0.5pp for error_rate)", key=key)
    if (m.group(2) or "").lower() == "pp" and SPECS[metric].scale != "pp":
        raise TriageError(f"'{text}': {metric} is judged in % of the baseline, not percentage points", key=key)
    return float(m.group(1))


class GateRule(Strict):
    """One gated metric: the largest worsening tolerated, and why."""

    metric: str
    max_regression: str
    reason: Text

    @field_validator("metric")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in SPECS:
            raise ValueError(f"unknown metric; choose one of {', '.join(METRIC_IDS)}")
        return value


class GateSpec(Strict):
    metrics: list[GateRule] = Field(min_length=1)


def load_gate(path: Path | str = GATE_PATH) -> dict[str, float]:
    """The gate file as ``{metric: tolerance}`` (% of baseline, pp for error_rate); TriageError if invalid."""
    spec: GateSpec = _parse(GateSpec, _read_yaml(Path(path)), Path(path))
    out: dict[str, float] = {}
    for i, rule in enumerate(spec.metrics):
        if rule.metric in out:
            raise TriageError(f"metric '{rule.metric}' is gated twice", where=str(path), key=f"metrics[{i}]")
        try:
            out[rule.metric] = parse_tolerance(rule.max_regression, rule.metric)
        except TriageError as exc:
            raise TriageError(exc.reason, where=str(path), key=f"metrics[{i}].max_regression") from exc
    return out


def load_gate_rules(path: Path | str = GATE_PATH) -> list[GateRule]:
    """The gate file's rules with their reasons, for display."""
    load_gate(path)
    return _parse(GateSpec, _read_yaml(Path(path)), Path(path)).metrics


@dataclass
class GateRow:
    metric: str
    tolerance: float
    status: str  # "pass", "fail", "not measured" or "not comparable"


@dataclass
class GateResult:
    rows: list[GateRow]
    passed: bool
    failed: list[str]


def worsening(m: MetricDelta) -> float | None:
    """How much worse the candidate is, in the metric's scale (negative: better)."""
    if m.delta is None:
        return None
    return m.delta if m.direction == "lower" else -m.delta


def apply_gate(c: Comparison, tolerances: dict[str, float]) -> GateResult:
    """A gated metric fails when it worsens beyond its tolerance and, when it has an interval, beyond noise."""
    rows = []
    for metric, tol in tolerances.items():
        m = c.get(metric)
        worse = worsening(m) if m else None
        if m is None or worse is None:
            rows.append(GateRow(metric, tol, "not measured" if m is None else NOT_COMPARABLE))
            continue
        fails = worse is not None and worse > tol and (m.interval is None or m.verdict == REGRESSION)
        rows.append(GateRow(metric, tol, "fail" if fails else "pass"))
    failed = [r.metric for r in rows if r.status == "fail"]
    return GateResult(rows, not failed, failed)
