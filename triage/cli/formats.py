"""``python -m triage formats``: the formats ``diagnose`` reads (benchmark files, server logs), from the registry."""

from __future__ import annotations

import argparse
import json

from triage.service.uploads import uploadable_formats

KIND_HEADINGS = {"benchmark": "benchmark files", "log": "server logs"}


def cmd_formats(args: argparse.Namespace) -> int:
    entries = uploadable_formats()
    if args.json:
        print(json.dumps([{"kind": e.kind, "id": e.id, "title": e.title} for e in entries], ensure_ascii=False,
                         indent=2))
        return 0
    width = max(len(e.id) for e in entries)
    for kind, heading in KIND_HEADINGS.items():
        print(f"{heading}:")
        for e in entries:
            if e.kind == kind:
                print(f"  {e.id:<{width}}  {e.title}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``formats`` subcommand to the CLI's subparsers."""
    p = sub.add_parser("formats", help="list the file formats diagnose reads (benchmark files, server logs)")
    p.add_argument("--json", action="store_true", help="as a JSON list of {kind, id, title}")
    p.set_defaults(func=cmd_formats)
