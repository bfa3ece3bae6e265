"""The CLI starts light: `tree --json`, `--help` and a log's diagnosis import no pandas, pyarrow or Streamlit
(commands import what they need when they run), and a record of a passed check never hides a file changed since."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from triage.cli import main

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("pandas", "pyarrow", "streamlit")
PROBE = """
import contextlib, io, json, runpy, sys
sys.argv = ["triage", *json.loads(sys.argv[1])]
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        runpy.run_module("triage", run_name="__main__")
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"heavy": [m for m in HEAVY if m in sys.modules], "out": out.getvalue(), "code": code}))
""".replace("HEAVY", repr(HEAVY))


def _run(args: list[str], cache: Path) -> dict:
    env = {**os.environ, "TRIAGE_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], cwd=ROOT, capture_output=True, text=True,
                         timeout=180, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["tree", "--json"], ["--help"], ["tree", "--help"]])
def test_light_commands_import_no_heavy_module(tmp_path, args):
    for _ in ("cold", "warm"):  # an empty cache (every file checked), then with the record of that check
        got = _run(args, tmp_path)
        assert got["heavy"] == [] and got["code"] in (0, None), got
    if args == ["tree", "--json"]:
        data = json.loads(got["out"])
        assert data["symptoms"][0]["id"] == "ttft" and "chunked_prefill" in data["techniques"]


def test_a_command_imports_its_own_modules(tmp_path):
    """`diagnose` loads pandas and pyarrow for a benchmark file only: a server log (what `kubectl logs … | triage
    diagnose -` brings at 3 a.m.) starts without them."""
    log = ROOT / "tests" / "fixtures" / "real" / "logs" / "vllm_v0_2_one_line_paste.txt"
    got = _run(["diagnose", str(log)], tmp_path)
    assert got["heavy"] == [] and got["code"] in (0, None), got
    bench = ROOT / "tests" / "fixtures" / "bench" / "aiperf-concurrency16_profile_export_aiperf.csv"
    got = _run(["diagnose", str(bench)], tmp_path)
    assert "pandas" in got["heavy"] and "streamlit" not in got["heavy"], got


def test_a_file_changed_after_a_passing_check_is_checked_again(tiny_tree, capsys):
    assert main(["tree", "--tree-dir", str(tiny_tree)]) == 0
    assert main(["tree", "--tree-dir", str(tiny_tree), "--json"]) == 0  # from the record
    capsys.readouterr()
    (tiny_tree / "panels.yaml").write_text("panels: [\n", encoding="utf-8")
    assert main(["tree", "--tree-dir", str(tiny_tree)]) == 2
    assert str(tiny_tree / "panels.yaml") in capsys.readouterr().err


def test_a_same_size_edit_with_the_same_mtime_is_checked_again(tiny_tree, capsys):
    """The record is keyed by content: an edit that keeps the size and the modification time is still seen."""
    path = tiny_tree / "ui.yaml"
    assert main(["tree", "--tree-dir", str(tiny_tree)]) == 0
    before = os.stat(path)
    text = path.read_text(encoding="utf-8")
    broken = text.replace("zh:", "zx:", 1)  # a missing language, same size
    assert len(broken) == len(text) and broken != text
    path.write_text(broken, encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    capsys.readouterr()
    assert main(["tree", "--tree-dir", str(tiny_tree)]) == 2
    assert str(path) in capsys.readouterr().err


def test_a_passing_check_is_recalled_by_the_next_start(tiny_tree):
    """The record is written and read back: every file the key stats exists (a moved module once made every start
    a cold one, 0.66 s instead of 0.12 s, without an error)."""
    from triage.knowledge import checked

    assert all(path.exists() for path in checked.CODE)
    assert checked.recall(tiny_tree)[0] is None
    assert main(["tree", "--tree-dir", str(tiny_tree), "--json"]) == 0
    record, key = checked.recall(tiny_tree)
    assert record is not None and key is not None and key[0].exists()


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_a_record_in_a_folder_others_may_write_to_is_never_recalled(tiny_tree):
    from triage.knowledge import checked

    assert main(["tree", "--tree-dir", str(tiny_tree), "--json"]) == 0
    record, key = checked.recall(tiny_tree)
    assert record is not None and key is not None
    os.chmod(key[0].parent, 0o777)
    try:
        assert checked.recall(tiny_tree) == (None, None)
    finally:
        os.chmod(key[0].parent, 0o700)
    assert checked.recall(tiny_tree)[0] is not None
