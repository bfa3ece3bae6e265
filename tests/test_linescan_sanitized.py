"""The C line scanner built with AddressSanitizer and UndefinedBehaviorSanitizer runs its own tests clean: it reads
untrusted logs, so an out-of-bounds read or undefined behaviour must fail a test, not pass unseen."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "triage" / "sources" / "logs" / "_linescan.c"


def _runtime(gcc: str, name: str) -> str:
    return subprocess.run([gcc, f"-print-file-name={name}"], capture_output=True, text=True, check=True).stdout.strip()


def test_the_scanner_tests_pass_under_the_sanitizers(tmp_path: Path) -> None:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no gcc: the scanner is not built either (test_linescan fails on that)")
    asan, ubsan = _runtime(gcc, "libasan.so"), _runtime(gcc, "libubsan.so")
    if not (os.path.isabs(asan) and os.path.isabs(ubsan)):
        pytest.skip("gcc has no sanitizer runtime here")
    # a copy of the package tree whose scanner is the sanitized build: the tests import it from there
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "triage", tree / "triage", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copytree(ROOT / "tests", tree / "tests", ignore=shutil.ignore_patterns("__pycache__", "artifacts"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    (tree / "tree").symlink_to(ROOT / "tree")  # the knowledge the tests' conftest loads
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                    "-fno-omit-frame-pointer", f"-I{sysconfig.get_paths()['include']}", "-o",
                    str(tree / "triage" / "sources" / "logs" / f"_linescan{suffix}"), str(SOURCE)], check=True)
    env = {**os.environ, "LD_PRELOAD": f"{asan}:{ubsan}", "ASAN_OPTIONS": "detect_leaks=0",
           "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-c",
                          str(tree / "pyproject.toml"), str(tree / "tests" / "test_linescan.py"),
                          str(tree / "tests" / "test_log_blocks.py"), "-k", "not numpy"],
                         capture_output=True, text=True, cwd=tree, env=env, timeout=240)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "passed" in run.stdout and str(tree) in _imported(tree, env)


def _imported(tree: Path, env: dict[str, str]) -> str:
    """Where the child imports the scanner from (the sanitized copy, not the installed one)."""
    return subprocess.run([sys.executable, "-c", "import triage.sources.logs._linescan as m; print(m.__file__)"],
                          capture_output=True, text=True, cwd=tree, env=env, check=True).stdout
