"""Who may import whom, and who may write which session key: checked on the source (ast), without Streamlit."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from components import session

ROOT = Path(__file__).resolve().parent.parent
UI_FILES = sorted([ROOT / "app.py", *(ROOT / "components").glob("*.py"), *(ROOT / "pages").glob("*.py")])
CORE_FILES = sorted((ROOT / "triage").rglob("*.py"))
WRITES = {"set", "setdefault", "clear", "pop"}


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in the file, at any depth (lazy imports inside functions count)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out += [(node.lineno, node.module)]
            out += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return out


def _offenders(files: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    return [f"{_rel(path)}:{line} imports {name}" for path in files for line, name in imported_modules(path)
            if name in forbidden or name.startswith(tuple(f"{f}." for f in forbidden))]


def _core_below_service(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of triage other than triage.service and its modules, at any depth
    (lazy and TYPE_CHECKING imports count): ``from triage import errors`` names triage.errors, ``import triage``
    the package itself."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{alias.name}" for alias in node.names] if node.module == "triage" \
                else [node.module]
        else:
            continue
        out += [(node.lineno, name) for name in names if (name == "triage" or name.startswith("triage."))
                and name != "triage.service" and not name.startswith("triage.service.")]
    return out


def test_ui_imports_the_core_only_through_the_service() -> None:
    """app.py, pages and components reach triage only through triage.service (issue 25); the import-linter
    contract in pyproject.toml says the same for the packages, this covers app.py and runs without it."""
    offenders = [f"{_rel(path)}:{line} imports {name}" for path in UI_FILES for line, name in _core_below_service(path)]
    assert not offenders, "app.py, components/ and pages/ import triage only through triage.service:\n" + \
        "\n".join(offenders)


def test_the_service_checker_sees_every_form(tmp_path: Path) -> None:
    ui = tmp_path / "ui.py"
    ui.write_text("from triage.service.model import Diagnosis\nfrom triage.service import windows\n"
                  "import triage.service.live\nfrom triage import errors, service\nimport triage.run\n"
                  "if TYPE_CHECKING:\n    from triage.diagnosis.rules import Slo\n"
                  "def f():\n    from triage.safe_text import md_escape\nimport triage\n", encoding="utf-8")
    assert sorted(_core_below_service(ui)) == [(4, "triage.errors"), (5, "triage.run"), (7, "triage.diagnosis.rules"),
                                       (9, "triage.safe_text"), (10, "triage")]


def test_core_imports_no_ui() -> None:
    offenders = _offenders(CORE_FILES, ("streamlit", "components", "pages"))
    assert not offenders, "triage/ must not import streamlit, components or pages:\n" + "\n".join(offenders)


def test_the_walker_sees_lazy_and_from_imports(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from triage.sources.files import load_benchmark\n"
                   "import triage.sources.metrics.scrape as s\nfrom triage import sources\n", encoding="utf-8")
    names = [name for _, name in imported_modules(bad)]
    assert {"triage.sources.files", "triage.sources.metrics.scrape", "triage.sources"} <= set(names)


# ---------------------------------------------------------------- session keys


def _session_key_uses(path: Path) -> list[tuple[int, str, str]]:
    """(line, key constant, method) for each ``session.KEY.method(...)`` call in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    uses = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Attribute) and isinstance(node.func.value.value, ast.Name)
                and node.func.value.value.id == "session"):
            uses.append((node.lineno, node.func.value.attr, node.func.attr))
    return uses


def _session_state_lines(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "session_state"]


def test_only_the_session_module_touches_session_state() -> None:
    offenders = [f"{_rel(p)}:{line}" for p in UI_FILES if p.name != "session.py" for line in _session_state_lines(p)]
    assert not offenders, "use a typed key of components/session.py, not st.session_state:\n" + "\n".join(offenders)


def test_each_key_is_written_only_by_its_owner() -> None:
    offenders, written = [], set()
    for path in UI_FILES:
        for line, name, method in _session_key_uses(path):
            key = getattr(session, name, None)
            if not isinstance(key, session.StateKey) or method not in WRITES:
                continue
            written.add(name)
            if key.owner != _module(path):
                offenders.append(f"{_rel(path)}:{line} writes {key.name!r} (owner {key.owner})")
    assert not offenders, "\n".join(offenders)
    declared = {name for name in vars(session) if isinstance(getattr(session, name), session.StateKey)}
    assert declared == written, f"declared but never written: {declared - written}"


def test_keys_are_declared_once() -> None:
    names = [k.name for k in session.KEYS]
    assert len(names) == len(set(names))
    assert set(session.KEYS) == {v for v in vars(session).values() if isinstance(v, session.StateKey)}
    for key in session.KEYS:
        assert (ROOT / (key.owner.replace(".", "/") + ".py")).exists(), key


@pytest.mark.parametrize("literal", ["live_last", "verify_result", "bench_files", "live_by_source"])
def test_no_key_literal_outside_the_session_module(literal: str) -> None:
    """A key's name is written once, in components/session.py."""
    hits = [_rel(p) for p in UI_FILES if p.name != "session.py" and f'"{literal}"' in p.read_text(encoding="utf-8")]
    assert not hits, f'"{literal}" spelled outside components/session.py: {hits}'


# ---------------------------------------------------------------- widget keys


def _key_arguments(path: Path) -> list[tuple[int, ast.expr]]:
    """(line, value) of every ``key=`` argument in the file, except sort keys (``key=lambda …``, ``key=len``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [(kw.value.lineno, kw.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
            for kw in node.keywords if kw.arg == "key" and not isinstance(kw.value, ast.Lambda)]


def test_every_widget_key_is_a_declared_constant() -> None:
    """No widget key is spelled in a page or component: ``key=session.X.name`` / ``session.FAMILY.key(item)``."""
    offenders = [f"{_rel(path)}:{line}" for path in UI_FILES if path.name != "session.py"
                 for line, value in _key_arguments(path)
                 if any(isinstance(n, ast.JoinedStr) or (isinstance(n, ast.Constant) and isinstance(n.value, str))
                        for n in ast.walk(value))]
    assert not offenders, "declare the widget key in components/session.py:\n" + "\n".join(offenders)


def test_the_key_checker_sees_literals(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text('st.button("x", key="a")\nst.button("y", key=f"b:{i}")\nsorted(xs, key=lambda x: x["k"])\n'
                   "st.button('z', key=session.GOTO.key(i))\n", encoding="utf-8")
    literal = [line for line, value in _key_arguments(bad)
               if any(isinstance(n, (ast.JoinedStr, ast.Constant)) for n in ast.walk(value))]
    assert literal == [1, 2]


def test_widgets_are_declared_once_with_an_owner() -> None:
    widgets, families = session.widgets(), session.families()
    names = [w.name for w in widgets] + [k.name for k in session.KEYS]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    prefixes = [f.prefix for f in families]
    assert len(prefixes) == len(set(prefixes))
    assert not [n for n in names if n.startswith(tuple(prefixes))], "a family's prefix would cover another key"
    for item in [*widgets, *families]:
        assert (ROOT / (item.owner.replace(".", "/") + ".py")).exists(), item


def test_only_the_owner_seeds_a_widget() -> None:
    offenders = []
    for path in UI_FILES:
        for line, name, method in _session_key_uses(path):
            widget = getattr(session, name, None)
            if isinstance(widget, (session.Widget, session.WidgetFamily)) and method == "seed" \
                    and widget.owner != _module(path):
                offenders.append(f"{_rel(path)}:{line} seeds {name} (owner {widget.owner})")
    assert not offenders, "\n".join(offenders)
