"""``python -m triage report …``: the Markdown incident report, from the same sources as ``diagnose``."""

from __future__ import annotations

import argparse

from triage.cli.diagnose import add_source_arguments, any_diagnosis
from triage.knowledge.loader import load_knowledge
from triage.report.markdown import report_markdown


def cmd_report(args: argparse.Namespace) -> int:
    kb = load_knowledge(args.tree_dir)
    diag, label = any_diagnosis(kb, args)
    print(report_markdown(kb, diag, source=label, lang=args.lang))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write a Markdown report: findings, evidence, techniques as task lists")
    add_source_arguments(p)
    p.add_argument("--lang", choices=("en", "zh"), default="en")
    p.set_defaults(func=cmd_report)
