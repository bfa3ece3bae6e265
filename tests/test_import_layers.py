"""The import contracts of pyproject.toml (`lint-imports`): triage/ is a one-way stack, and a move upward breaks it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT_IMPORTS), "--no-logo", "--no-cache", "--contract", "triage-layers"], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_stack_holds() -> None:
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    """The readings moved out of diagnosis because sources imported them: importing one back up is refused."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for package in ("triage", "components", "pages"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    window = tmp_path / "triage" / "sources" / "logs" / "window.py"
    window.write_text(window.read_text(encoding="utf-8") + "\nfrom triage.diagnosis.window import window_signals\n",
                      encoding="utf-8")
    done = _lint(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "triage.sources is not allowed to import triage.diagnosis" in done.stdout
    assert "triage.sources.logs.window -> triage.diagnosis.window" in done.stdout
