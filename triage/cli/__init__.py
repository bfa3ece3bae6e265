"""Command line: ``python -m triage tree|diagnose …``; errors are one line and exit 2.

Each command's module is imported only when that command runs (``tree`` and ``--help`` stay free of
pandas, pyarrow and Streamlit). Every command that reads knowledge takes ``--tree-dir``, which makes that
directory the knowledge base of the whole run (``use_tree_dir``).
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from triage.errors import TriageError
from triage.knowledge import DEFAULT_TREE_DIR, checked
from triage.safe_text import install_log_redaction, one_line, redact_text, strip_control

if TYPE_CHECKING:
    from triage.knowledge.loader import KnowledgeBase

EXIT_BAD_INPUT = 2
# command → (module, its register function, one-line help shown by ``--help`` without importing the module)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "diagnose": ("triage.cli.diagnose", "register",
                 "diagnose a benchmark file, a Prometheus window or a /metrics endpoint"),
    "memory": ("triage.cli.memory", "register",
               "GPU memory calculator: weights + KV + activations per GPU, branch, what-ifs"),
    "report": ("triage.cli.report", "register",
               "write a Markdown report: findings, evidence, techniques as task lists"),
    "rules": ("triage.cli.rules", "register",
              "write the tree as Prometheus recording + alerting rules (or --evaluate them now)"),
    "simulate": ("triage.cli.simulate", "register",
                 "serve simulated vLLM /metrics for a scenario (or write a backfill file)"),
    "gate": ("triage.cli.gate", "register", "verify a change against its baseline; exit 1 on a regression"),
    "webhook": ("triage.cli.webhook", "register", "Alertmanager receiver: diagnose each alerting replica"),
    "formats": ("triage.cli.formats", "register",
                "list the file formats diagnose reads (benchmark files, server logs)"),
    "log": ("triage.cli.gate", "register_log",
            "the experiment log: list, show or export recorded gate results"),
    "lint-rules": ("triage.cli.lint", "register_rules",
                   "list renamed/removed metric names in Prometheus rule files (exit 1 if any)"),
    "lint-dashboard": ("triage.cli.lint", "register_dashboard",
                       "list renamed/removed metric names in Grafana dashboards (exit 1 if any)"),
}
NO_KNOWLEDGE = {"log", "formats"}  # commands that read no knowledge (no --tree-dir)
TREE_DIR_HELP = "read the knowledge base (every YAML file) from DIR instead of tree/"


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


def _tree_record(tree_dir: Path | None) -> dict[str, Any]:
    """What ``tree`` prints, from a record of this tree having passed (nothing changed since) or by loading and
    checking every file now (TriageError on the first problem)."""
    root = Path(tree_dir) if tree_dir is not None else DEFAULT_TREE_DIR
    if not root.is_dir():
        raise TriageError("not a directory", where=str(root))
    record, key = checked.recall(root)
    if record is None:
        from triage.knowledge.loader import load_knowledge

        kb = load_knowledge(root)
        # kept as the terminal will get it (redacted, no control characters): a recalled record is printed as is
        record = {"json": terminal_text(json.dumps(_tree_json(kb), ensure_ascii=False, indent=2)),
                  "text": {lang: terminal_text(_tree_text(kb, lang)) for lang in ("en", "zh")}}
        checked.remember(root, key, record)
    return record


def cmd_tree(args: argparse.Namespace) -> int:
    record = _tree_record(args.tree_dir)
    text = record["json"] if args.json else record["text"][args.lang]
    out = sys.stdout.inner if isinstance(sys.stdout, SafeStream) else sys.stdout  # already made terminal_text
    out.write(text + "\n")
    return 0


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only ``command``'s module is imported, the others are listed by name and help."""
    parser = argparse.ArgumentParser(prog="python -m triage", description="Inference Triage command line")
    sub = parser.add_subparsers(dest="command", required=True)
    tree = sub.add_parser("tree", help="check every file of the knowledge base and print the tree (or --json)")
    tree.add_argument("--json", action="store_true", help="dump the whole knowledge base as JSON")
    tree.add_argument("--lang", choices=("en", "zh"), default="en")
    tree.set_defaults(func=cmd_tree)
    for name, (module, register, text) in COMMANDS.items():
        if name == command:
            getattr(importlib.import_module(module), register)(sub)
        else:
            sub.add_parser(name, help=text, add_help=False)
    for name, p in sub.choices.items():
        if name not in NO_KNOWLEDGE and (name == command or name == "tree"):
            p.add_argument("--tree-dir", type=Path, default=None, metavar="DIR", help=TREE_DIR_HELP)
    return parser


class SafeStream(io.TextIOBase):
    """stdout/stderr as the CLI writes them: every URL redacted, ANSI escapes and control characters removed.

    A last line of defence: labels and messages are redacted where they are made; this catches what slips."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(terminal_text(text))
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8")


def terminal_text(text: str) -> str:
    """Redacted, without escape sequences or control characters; tab, newline and CRLF line ends stay."""
    return "\r\n".join(strip_control(part) for part in redact_text(text).split("\r\n"))


def main(argv: Sequence[str] | None = None) -> int:
    install_log_redaction()
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(out), SafeStream(err)
    try:
        return _run(argv)
    finally:
        if isinstance(sys.stdout, SafeStream):  # not swapped for devnull after a broken pipe
            try:
                sys.stdout.flush()
            except BrokenPipeError:
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115
            else:
                sys.stdout = out
        sys.stderr = err


def _command(argv: Sequence[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def _run(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _parser(_command(argv)).parse_args(argv)  # a bad option: argparse's one line and exit 2
        tree_dir = getattr(args, "tree_dir", None)
        if tree_dir is not None or "triage.knowledge.loader" in sys.modules:  # else nothing to reset
            from triage.knowledge.loader import use_tree_dir

            use_tree_dir(tree_dir)
        return args.func(args)
    except TriageError as exc:
        print(f"error: {exc.line()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # e.g. `… | head`: the reader left, which is not an error of ours
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115  # keep the interpreter's final flush quiet
        return 0
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - never a traceback, never exit 1 (gate's "regression")
        if os.environ.get("TRIAGE_DEBUG"):
            raise
        print(f"error: unexpected {type(exc).__name__}: {one_line(str(exc))} (this is a bug; TRIAGE_DEBUG=1 "
              "shows the traceback)", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:  # --tree-dir lasts one command (main may be called again in the same process)
        if "triage.knowledge.loader" in sys.modules:
            from triage.knowledge.loader import use_tree_dir

            use_tree_dir(None)
