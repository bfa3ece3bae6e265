"""The one tree loader: every YAML file of the tree, broken in turn, is refused by `tree --tree-dir` with exit 2
and one line naming that file; the loader knows every file; the result is cached until a file changes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from triage.cli import main
from triage.errors import TriageError
from triage.knowledge.loader import DEFAULT_TREE_DIR, load_knowledge, unknown_yaml_files, yaml_files

ROOT = Path(__file__).resolve().parent.parent
FILES = [p.relative_to(DEFAULT_TREE_DIR).as_posix() for p in yaml_files(DEFAULT_TREE_DIR)]


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "tree"
    shutil.copytree(DEFAULT_TREE_DIR, dest)
    return dest


def _syntax_error(path: Path) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "\nbroken: [unclosed\n", encoding="utf-8")


def _schema_error(path: Path) -> None:
    """A field no schema has, at the top of the file (every file of the tree is a mapping)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path}: expected a mapping at the top"
    data["zz_not_a_field"] = 1
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")


def _refused_line(tree_dir: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code = main(["tree", "--tree-dir", str(tree_dir)])
    err = capsys.readouterr().err
    assert code == 2, f"exit {code}, stderr {err!r}"
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_the_real_tree_loads_and_every_yaml_file_has_a_schema():
    assert unknown_yaml_files(DEFAULT_TREE_DIR) == [], "add a schema for these files to triage/knowledge/loader.py"
    kb = load_knowledge(DEFAULT_TREE_DIR)
    assert kb.engines and kb.panels and kb.gate and kb.retro and kb.models and kb.gpus and kb.strings
    assert kb.scenarios and kb.signals and kb.slo_presets and kb.techniques
    assert len(FILES) >= 30


@pytest.mark.parametrize("rel", FILES)
@pytest.mark.parametrize("breakage", [_syntax_error, _schema_error], ids=["syntax", "schema"])
def test_every_file_broken_in_turn_is_refused_by_name(tree_copy, capsys, rel, breakage):
    breakage(tree_copy / rel)
    assert str(tree_copy / rel) in _refused_line(tree_copy, capsys)


def test_cli_subprocess_refuses_a_broken_engine_file(tree_copy):
    (tree_copy / "engines" / "dcgm.yaml").write_text("id: dcgm\nmetrics: [\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "triage", "tree", "--tree-dir", str(tree_copy)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert out.stderr.startswith(f"error: {tree_copy / 'engines' / 'dcgm.yaml'}: line ")


def test_tree_dir_reaches_every_reader(tree_copy, capsys):
    """Another tree's scenario, model and UI string are the ones the commands read."""
    data = yaml.safe_load((tree_copy / "models.yaml").read_text(encoding="utf-8"))
    data["models"] = [m for m in data["models"] if m["id"] == "llama-3.1-8b"]
    (tree_copy / "models.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    assert main(["memory", "--model", "llama-3.1-70b", "--tree-dir", str(tree_copy)]) == 2
    assert "unknown 'llama-3.1-70b' (known: llama-3.1-8b)" in capsys.readouterr().err
    assert main(["memory", "--model", "llama-3.1-70b"]) == 0  # the repository's tree again
    capsys.readouterr()


def test_cached_until_a_file_changes(tree_copy):
    first = load_knowledge(tree_copy)
    assert load_knowledge(tree_copy) is first
    path = tree_copy / "ui.yaml"
    path.write_text(path.read_text(encoding="utf-8") + "zz_extra: {en: x, zh: y}\n", encoding="utf-8")
    again = load_knowledge(tree_copy)
    assert again is not first and again.strings["zz_extra"].en == "x"
    path.write_text("zz_bad: {en: x}\n", encoding="utf-8")
    with pytest.raises(TriageError) as exc:
        load_knowledge(tree_copy)
    assert exc.value.where == str(path) and exc.value.key == "zz_bad"


@pytest.mark.parametrize("edit,expected", [
    (lambda d: d["panels"][0].update(group="nowhere"), "unknown group 'nowhere'"),
    (lambda d: d["groups"].append({"id": "empty"}), "group 'empty' holds no panel"),
    (lambda d: d["groups"][0].update(symptoms=["no_such_symptom"]), "unknown symptom 'no_such_symptom'"),
    (lambda d: d.pop("groups"), "expected a non-empty 'groups' list"),
], ids=["unknown-group", "empty-group", "unknown-symptom", "no-groups"])
def test_live_panel_groups_are_checked(tree_copy, capsys, edit, expected):
    path = tree_copy / "panels.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    line = _refused_line(tree_copy, capsys)
    assert str(path) in line and expected in line


def test_a_panel_group_needs_its_tab_title(tree_copy, capsys):
    path = tree_copy / "ui.yaml"
    path.write_text("".join(line for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
                            if not line.startswith("live_group_load:")), encoding="utf-8")
    line = _refused_line(tree_copy, capsys)
    assert str(tree_copy / "panels.yaml") in line and "live_group_load" in line
