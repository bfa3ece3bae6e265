"""The regression gate: tree/gate.yaml's per-metric tolerances, applied to a comparison."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from triage.errors import TriageError
from triage.knowledge.loader import load_knowledge, read_gate_file
from triage.knowledge.model import GateRule
from triage.verify.comparison import NOT_COMPARABLE, REGRESSION, Comparison, MetricDelta, metric_specs

_TOL_RE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*(%|pp)?\s*$", re.IGNORECASE)


def parse_tolerance(text: str | float, metric: str, key: str = "--max-regression") -> float:
    """'5%' / '5' → 5.0 (% of baseline); for error_rate '0.5pp' / '0.5%' → 0.5 percentage points. The metrics
    are the active tree's (the CLI's --tree-dir)."""
    specs = metric_specs()
    if metric not in specs:
        raise TriageError(f"unknown metric '{metric}'; choose one of {', '.join(specs)}", key="--metric")
    m = _TOL_RE.match(str(text))
    if not m:
        raise TriageError(f"'{text}' is not a percentage like 5% (or 0.5pp for error_rate)", key=key)
    if (m.group(2) or "").lower() == "pp" and specs[metric].scale != "pp":
        raise TriageError(f"'{text}': {metric} is judged in % of the baseline, not percentage points", key=key)
    return float(m.group(1))


def _tolerances(rules: tuple[GateRule, ...] | list[GateRule], where: str) -> dict[str, float]:
    out: dict[str, float] = {}
    specs = metric_specs()
    for i, rule in enumerate(rules):
        if rule.metric not in specs:
            raise TriageError(f"unknown metric '{rule.metric}'; choose one of {', '.join(specs)}", where=where,
                              key=f"metrics[{i}].metric")
        try:
            out[rule.metric] = parse_tolerance(rule.max_regression, rule.metric)
        except TriageError as exc:
            raise TriageError(exc.reason, where=where, key=f"metrics[{i}].max_regression") from exc
    return out


def load_gate_rules(path: Path | str | None = None) -> tuple[GateRule, ...]:
    """The gate rules with their reasons: a gate file, or (None) the active tree's gate.yaml."""
    if path is None:
        kb = load_knowledge()
        rules, where = kb.gate, str(kb.source_dir / "gate.yaml")
    else:
        rules, where = read_gate_file(Path(path)), str(path)
    _tolerances(rules, where)
    return rules


def load_gate(path: Path | str | None = None) -> dict[str, float]:
    """The gate as ``{metric: tolerance}`` (% of baseline, pp for error_rate); TriageError if invalid."""
    if path is None:
        kb = load_knowledge()
        return _tolerances(kb.gate, str(kb.source_dir / "gate.yaml"))
    return _tolerances(read_gate_file(Path(path)), str(path))


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
