"""``python -m triage lint-rules|lint-dashboard FILE…``: metric names that no longer exist (renamed or removed in
the engine maps, or absent from a live Prometheus). Exit 0 clean, 1 stale names found, 2 unreadable input."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from triage.errors import TriageError
from triage.knowledge.loader import load_knowledge
from triage.lint.documents import Document, dashboard, rule_file
from triage.lint.stale import check, prometheus_names, table

EXIT_STALE = 1


def _run(args: argparse.Namespace, read: Callable[[Path], Document]) -> int:
    if args.timeout <= 0:
        raise TriageError("must be a positive number of seconds", key="--timeout")
    docs = [read(path) for path in args.files]  # every file read first: one unreadable file is exit 2
    engines = load_knowledge(args.tree_dir).engines
    present = None
    if args.prometheus:
        from triage.sources.metrics.profiles import resolve_profile

        present = prometheus_names(resolve_profile(args.prometheus), args.timeout)
    defined = set().union(*(doc.defined for doc in docs))  # one file may use what another records
    results = [(doc, check(doc, engines, present, args.lang, defined)) for doc in docs]
    stale = any(findings for _, findings in results)
    if args.json:
        print(json.dumps({"files": [{"path": doc.path, "expressions": doc.expressions,
                                     "findings": [f.as_json() for f in findings]} for doc, findings in results],
                          "checked_against_prometheus": present is not None}, ensure_ascii=False, indent=2))
        return EXIT_STALE if stale else 0
    for doc, findings in results:
        checked = " and the names in Prometheus" if present is not None else ""
        if not findings:
            print(f"{doc.path}: {doc.expressions} expression(s), no stale names (engine maps{checked})")
            continue
        print(f"{doc.path}: {len(findings)} name(s) that no longer exist, in {doc.expressions} expression(s):")
        print(table(findings))
    return EXIT_STALE if stale else 0


def cmd_lint_rules(args: argparse.Namespace) -> int:
    return _run(args, rule_file)


def cmd_lint_dashboard(args: argparse.Namespace) -> int:
    return _run(args, dashboard)


def _common(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help=what)
    p.add_argument("--prometheus", metavar="URL|PROFILE", default=None,
                   help="also list every name this Prometheus does not have (base URL or profile name)")
    p.add_argument("--timeout", type=float, default=10.0, help="timeout of the Prometheus query in seconds")
    p.add_argument("--lang", choices=("en", "zh"), default="en", help="language of the notes")
    p.add_argument("--json", action="store_true", help="print JSON")


def register_rules(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lint-rules", help="list renamed/removed metric names in Prometheus rule files (exit 1 if any)")
    _common(p, "a Prometheus rule file or PrometheusRule resource (YAML)")
    p.set_defaults(func=cmd_lint_rules)


def register_dashboard(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lint-dashboard", help="list renamed/removed metric names in Grafana dashboards (exit 1 if any)")
    _common(p, "a Grafana dashboard JSON (as exported, or the API's {dashboard: …})")
    p.set_defaults(func=cmd_lint_dashboard)
