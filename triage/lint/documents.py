"""The PromQL a user's file holds: a Prometheus rule file (or PrometheusRule resource) or a Grafana dashboard.

Each expression comes with where it sits (group/rule, panel title/refId, template variable) so a finding can
point at it. Files are read with the bounded reader; anything unreadable or of the wrong shape is a
TriageError (exit 2), never an empty, "clean" result.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from triage.bounded import MB, read_text_bounded
from triage.errors import TriageError
from triage.lint.promql_names import label_values_query, metric_names

MAX_DOCUMENT_BYTES = 16 * MB  # an exported dashboard with many panels stays well below this


@dataclass(frozen=True)
class Use:
    """One metric name used at one place of a file."""

    name: str
    where: str


@dataclass
class Document:
    path: str
    uses: list[Use]
    expressions: int
    defined: set[str]  # series the file itself records (a rule file's `record:` names)


def _read(path: Path) -> str:
    text = read_text_bounded(path, MAX_DOCUMENT_BYTES)
    if not text.strip():
        raise TriageError("is empty; nothing to check", where=str(path))
    return text


# ------------------------------------------------------------------ Prometheus rule files


def rule_file(path: Path) -> Document:
    text = _read(path)
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise TriageError(f"{where}not valid YAML ({getattr(exc, 'problem', None) or 'parse error'})",
                          where=str(path)) from None
    groups: list[Any] = []
    for doc in docs:
        if isinstance(doc, dict) and isinstance(doc.get("spec"), dict):  # a prometheus-operator PrometheusRule
            doc = doc["spec"]
        if not isinstance(doc, dict) or not isinstance(doc.get("groups"), list):
            raise TriageError("not a Prometheus rule file (no top-level 'groups:' list)", where=str(path))
        groups.extend(doc["groups"])
    uses: list[Use] = []
    defined: set[str] = set()
    count = 0
    for g, group in enumerate(groups):
        if not isinstance(group, dict) or not isinstance(group.get("rules", []), list):
            raise TriageError("a group must be a mapping with a 'rules:' list", where=str(path), key=f"groups[{g}]")
        gname = str(group.get("name", g))
        for r, rule in enumerate(group.get("rules") or []):
            if not isinstance(rule, dict) or "expr" not in rule:
                raise TriageError("a rule must be a mapping with 'expr:'", where=str(path),
                                  key=f"groups[{g}].rules[{r}]")
            title = rule.get("record") or rule.get("alert") or f"rules[{r}]"
            if rule.get("record"):
                defined.add(str(rule["record"]))
            count += 1
            uses += [Use(n, f"{gname} / {title}") for n in metric_names(str(rule["expr"]))]
    if count == 0:
        raise TriageError("has no rules; nothing to check", where=str(path))
    return Document(str(path), uses, count, defined)


# ------------------------------------------------------------------ Grafana dashboards


def _panels(panels: Any) -> Iterator[dict[str, Any]]:
    """Every panel, rows' nested panels included (collapsed rows keep theirs under `panels`)."""
    for panel in panels if isinstance(panels, list) else []:
        if isinstance(panel, dict):
            yield panel
            yield from _panels(panel.get("panels"))


def _datasource_type(source: Any) -> str:
    return str(source.get("type") or "") if isinstance(source, dict) else ""


def _target_expr(target: dict[str, Any], panel_source: str) -> str | None:
    """The PromQL of a target; a target of another data source (Loki, SQL, …) is not PromQL and is skipped."""
    kind = _datasource_type(target.get("datasource")) or panel_source
    if kind and kind != "prometheus" and not kind.startswith("${"):
        return None
    expr = target.get("expr")
    return expr if isinstance(expr, str) and expr.strip() else None


def dashboard(path: Path) -> Document:
    text = _read(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TriageError(f"line {exc.lineno}: not valid JSON ({exc.msg})", where=str(path)) from None
    if isinstance(data, dict) and isinstance(data.get("dashboard"), dict):  # the API's {"dashboard": …, "meta": …}
        data = data["dashboard"]
    if not isinstance(data, dict) or not ("panels" in data or "rows" in data):
        raise TriageError("not a Grafana dashboard (no 'panels')", where=str(path))
    uses: list[Use] = []
    count = 0
    panels = list(_panels(data.get("panels")))
    for row in data.get("rows") or []:  # the schema before Grafana 5 kept panels under rows
        if isinstance(row, dict):
            panels += list(_panels(row.get("panels")))
    for panel in panels:
        title = str(panel.get("title") or f"panel {panel.get('id', '?')}")
        source = _datasource_type(panel.get("datasource"))
        for target in panel.get("targets") or []:
            expr = _target_expr(target, source) if isinstance(target, dict) else None
            if expr is not None:
                count += 1
                ref = target.get("refId", "")
                uses += [Use(n, f"panel '{title}' {ref}".rstrip()) for n in metric_names(expr)]
    templating = data.get("templating", {})
    for var in (templating.get("list") if isinstance(templating, dict) else None) or []:
        if not isinstance(var, dict) or var.get("type") != "query":
            continue
        query = var.get("query")
        query = query.get("query") if isinstance(query, dict) else query
        if isinstance(query, str) and query.strip():
            count += 1
            uses += [Use(n, f"variable ${var.get('name', '?')}") for n in label_values_query(query)]
    annotations = data.get("annotations", {})
    for ann in (annotations.get("list") if isinstance(annotations, dict) else None) or []:
        expr = ann.get("expr") if isinstance(ann, dict) else None
        if isinstance(expr, str) and expr.strip():
            count += 1
            uses += [Use(n, f"annotation '{ann.get('name', '?')}'") for n in metric_names(expr)]
    if count == 0:
        raise TriageError("has no Prometheus queries in its panels or variables; nothing to check", where=str(path))
    return Document(str(path), uses, count, set())
