"""Command line: ``python -m triage tree|diagnose …``; errors are one line and exit 2."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from triage.cli import diagnose as cli_diagnose
from triage.cli import gate as cli_gate
from triage.cli import memory as cli_memory
from triage.cli import report as cli_report
from triage.cli import rules as cli_rules
from triage.cli import simulate as cli_simulate
from triage.errors import TriageError
from triage.knowledge.loader import DEFAULT_TREE_DIR, KnowledgeBase, load_knowledge

EXIT_BAD_INPUT = 2


def _tree_text(kb: KnowledgeBase, lang: str) -> str:
    lines = [kb.guidance.root.get(lang)]
    for sym in kb.symptoms:
        lines.append(f"├─ {sym.title.get(lang)}  [{sym.id}]")
        for cause in sym.causes:
            names = " / ".join(kb.techniques[t.id].title.get(lang) for t in cause.techniques)
            lines.append(f"│    ├─ {cause.title.get(lang)}  [{cause.id}] → {names}")
    return "\n".join(lines)


def _tree_json(kb: KnowledgeBase) -> dict:
    return {
        "symptoms": [s.model_dump(mode="json") for s in kb.symptoms],
        "techniques": {tid: t.model_dump(mode="json") for tid, t in kb.techniques.items()},
        "guidance": kb.guidance.model_dump(mode="json"),
    }


def cmd_tree(args: argparse.Namespace) -> int:
    kb = load_knowledge(args.tree_dir)
    if args.json:
        print(json.dumps(_tree_json(kb), ensure_ascii=False, indent=2))
    else:
        print(_tree_text(kb, args.lang))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m triage", description="Inference Triage command line")
    sub = parser.add_subparsers(dest="command", required=True)
    tree = sub.add_parser("tree", help="print the decision tree (or --json)")
    tree.add_argument("--json", action="store_true", help="dump the whole knowledge base as JSON")
    tree.add_argument("--tree-dir", type=Path, default=DEFAULT_TREE_DIR, help="load another knowledge base")
    tree.add_argument("--lang", choices=("en", "zh"), default="en")
    tree.set_defaults(func=cmd_tree)
    cli_diagnose.register(sub)
    cli_memory.register(sub)
    cli_report.register(sub)
    cli_rules.register(sub)
    cli_simulate.register(sub)
    cli_gate.register(sub)
    cli_gate.register_log(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except TriageError as exc:
        print(f"error: {exc.line()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # e.g. `… | head`: the reader left, which is not an error of ours
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115  # keep the interpreter's final flush quiet
        return 0
