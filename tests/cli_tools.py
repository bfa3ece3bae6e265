"""`python -m triage …` run inside the test's process: the same ``main`` with the same argv, its exit code, stdout
and stderr, without paying a new interpreter's imports and knowledge-base load on every call (1-3 s each).

``run_triage`` returns a ``subprocess.CompletedProcess`` as ``subprocess.run(..., text=True)`` would: exit code as
``sys.exit(main())`` gives it (argparse's ``SystemExit`` included), output decoded and newline-translated like a
pipe read in text mode, and every warning the interpreter would print by default written to stderr (so a "one
line on stderr" assertion still catches a stray warning). ``isolated=True`` runs it in a forked child: a crash in
C (a SIGSEGV from a C stack overflow) is the child's exit status ``-11``, as for a real process, never pytest's.
A few tests still launch the real ``python -m triage`` (standard input, the interpreter's exit code)."""

from __future__ import annotations

import importlib
import io
import json
import os
import signal
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

from triage.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parent.parent
# What a plain `python` prints by default: these four categories are ignored (DeprecationWarning outside __main__)
QUIET_BY_DEFAULT = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def _text(raw: bytes, errors: str) -> str:
    """A pipe's bytes as subprocess.run(text=True) returns them: decoded, ``\\r\\n`` and ``\\r`` made ``\\n``."""
    return raw.decode("utf-8", errors).replace("\r\n", "\n").replace("\r", "\n")


def _exit_code(exc: SystemExit, err: io.TextIOBase) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=err)  # sys.exit("text"): the interpreter prints it and exits 1
    return 1


def _run(argv: list[str], cwd: Path, stdin: str | None, crash_as_exit: bool) -> subprocess.CompletedProcess[str]:
    out_raw, err_raw = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_raw, encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(err_raw, encoding="utf-8", errors="backslashreplace", write_through=True)
    saved = sys.stdout, sys.stderr, sys.stdin, os.getcwd()
    sys.stdout, sys.stderr = out, err
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8")
    os.chdir(cwd)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            try:
                code = main(argv)
            except SystemExit as exc:
                code = _exit_code(exc, err)
            except BaseException:  # noqa: BLE001 - in a child, what the interpreter does: a traceback, exit 1
                if not crash_as_exit:
                    raise
                traceback.print_exc(file=err)
                code = 1
        for w in caught:
            if not issubclass(w.category, QUIET_BY_DEFAULT):
                err.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line))
        out.flush()
        err.flush()
        return subprocess.CompletedProcess(["python", "-m", "triage", *argv], int(code or 0),
                                           _text(out_raw.getvalue(), "strict"),
                                           _text(err_raw.getvalue(), "backslashreplace"))
    finally:
        sys.stdout, sys.stderr, sys.stdin = saved[:3]
        os.chdir(saved[3])


def _warm(argv: list[str]) -> None:
    """Import the command's module and load the knowledge base in the parent once, so forked children share them."""
    command = next((a for a in argv if not a.startswith("-")), None)
    if command in COMMANDS:
        importlib.import_module(COMMANDS[command][0])
    from triage.knowledge.loader import load_knowledge

    load_knowledge()


def _forked(argv: list[str], cwd: Path, stdin: str | None) -> subprocess.CompletedProcess[str]:
    _warm(argv)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, send the result, leave without running any of pytest's exit handlers
        try:
            os.close(read_end)
            done = _run(argv, cwd, stdin, crash_as_exit=True)
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(json.dumps([done.returncode, done.stdout, done.stderr]).encode("utf-8"))
        finally:
            os._exit(0)
    os.close(write_end)
    finished = False
    try:
        with os.fdopen(read_end, "rb") as pipe:
            sent = pipe.read()
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        finished = True
    finally:
        if not finished:  # a timeout in the parent: the child goes too
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    if status != 0 or not sent:  # killed by a signal (-11 for SIGSEGV) before it could answer
        return subprocess.CompletedProcess(["python", "-m", "triage", *argv], status or -1, "", "")
    code, stdout, stderr = json.loads(sent)
    return subprocess.CompletedProcess(["python", "-m", "triage", *argv], code, stdout, stderr)


def run_triage(*argv: str, cwd: Path = ROOT, stdin: str | None = None,
               isolated: bool = False) -> subprocess.CompletedProcess[str]:
    """``python -m triage *argv`` in this process (or, ``isolated``, in a forked child of it)."""
    args = [str(a) for a in argv]
    if isolated:
        return _forked(args, cwd, stdin)
    return _run(args, cwd, stdin, crash_as_exit=False)


def python_m_triage(*argv: str, cwd: Path = ROOT, stdin: str | None = None,
                    env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real ``python -m triage *argv`` in a new interpreter: for standard input and the process's exit code."""
    return subprocess.run([sys.executable, "-m", "triage", *map(str, argv)], cwd=cwd, input=stdin, env=env,
                          capture_output=True, text=True, timeout=120)
