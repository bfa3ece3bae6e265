"""The pages/ workaround (components/navigation.py) rests on Streamlit internals: fail loudly when they change."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import streamlit
from streamlit.commands import navigation as st_navigation
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import script_runner
from streamlit.testing.v1 import app_test

from components import navigation

ROOT = Path(__file__).resolve().parent.parent
WHERE = "components/navigation.py adopt_navigation"


def _changed(what: str) -> str:
    return (f"Streamlit {streamlit.__version__} (the workaround was written for {navigation.STREAMLIT_VERSION}): "
            f"{what}. Re-check {WHERE} against this version (deep links such as /benchmark on a fresh server), "
            f"then update STREAMLIT_VERSION and the pin in requirements.txt.")


def test_streamlit_is_the_version_the_workaround_was_written_for() -> None:
    pinned = re.search(r"^streamlit==(\S+)$", (ROOT / "requirements.txt").read_text(encoding="utf-8"), re.M)
    assert pinned, "requirements.txt must pin streamlit exactly (the pages/ workaround depends on its internals)"
    assert pinned.group(1) == navigation.STREAMLIT_VERSION, _changed("requirements.txt pins another version")
    assert streamlit.__version__ == navigation.STREAMLIT_VERSION, _changed("the installed version differs")


def test_the_flag_exists_on_the_class() -> None:
    assert "uses_pages_directory" in vars(PagesManager), _changed("PagesManager.uses_pages_directory is gone")


@pytest.mark.parametrize("with_pages", [True, False])
def test_the_flag_is_set_from_a_pages_folder_once_per_process(tmp_path: Path, with_pages: bool) -> None:
    """A PagesManager sets the class flag from the pages/ folder beside the main script, only while it is None."""
    main = tmp_path / "app.py"
    main.write_text("", encoding="utf-8")
    if with_pages:
        (tmp_path / "pages").mkdir()
    saved = PagesManager.uses_pages_directory
    try:
        PagesManager.uses_pages_directory = None
        PagesManager(str(main), setup_watcher=False)
        assert PagesManager.uses_pages_directory is with_pages, _changed("the flag no longer follows pages/")
        PagesManager.uses_pages_directory = False
        PagesManager(str(main), setup_watcher=False)
        assert PagesManager.uses_pages_directory is False, _changed("a set flag is recomputed per PagesManager")
    finally:
        PagesManager.uses_pages_directory = saved


def test_the_script_runner_takes_the_legacy_path_on_the_flag() -> None:
    source = inspect.getsource(script_runner.ScriptRunner._run_script)
    assert "if PagesManager.uses_pages_directory:" in source and "_mpa_v1(" in source, \
        _changed("the script runner no longer switches to legacy multipage mode on the flag")


def test_navigation_clears_the_flag() -> None:
    source = inspect.getsource(st_navigation.navigation)
    assert "PagesManager.uses_pages_directory = False" in source, _changed("st.navigation no longer clears the flag")


def test_apptest_resets_the_flag_before_each_run() -> None:
    """adopt_navigation reruns once per process; it relies on AppTest resetting the flag to None per run."""
    source = inspect.getsource(app_test.AppTest)
    assert "PagesManager.uses_pages_directory = None" in source, _changed("AppTest no longer resets the flag")


def test_adopt_navigation_is_the_only_place_that_touches_the_flag() -> None:
    files = [ROOT / "app.py", *(ROOT / "components").glob("*.py"), *(ROOT / "pages").glob("*.py"),
             *(ROOT / "triage").rglob("*.py")]
    users = sorted(str(p.relative_to(ROOT)) for p in files if "uses_pages_directory" in p.read_text(encoding="utf-8"))
    assert users == ["components/navigation.py"], users


def test_every_page_adopts_navigation_first() -> None:
    """Each page file calls the workaround from components/navigation.py before drawing anything."""
    for page in sorted((ROOT / "pages").glob("*.py")):
        text = page.read_text(encoding="utf-8")
        assert "from components.navigation import adopt_navigation" in text, page.name
        assert "\nadopt_navigation()\n" in text, page.name


def _deep_link_first_run(root: Path, folder: str) -> list[str]:
    """The text of a fresh app's first run opened at a deep link: an entry that frames its pages (st.navigation
    over two file pages in ``folder``), the link to the second page."""
    (root / folder).mkdir()
    (root / folder / "home.py").write_text('import streamlit as st\nst.markdown("home page")\n', encoding="utf-8")
    (root / folder / "deep.py").write_text('import streamlit as st\nst.markdown("deep page")\n', encoding="utf-8")
    (root / "app.py").write_text(
        'import streamlit as st\nst.markdown("framed by the entry")\n'
        f'st.navigation([st.Page("{folder}/home.py", default=True), st.Page("{folder}/deep.py")]).run()\n',
        encoding="utf-8")
    at = app_test.AppTest.from_file(str(root / "app.py"))
    at.switch_page(f"{folder}/deep.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return [m.value for m in at.markdown]


def test_a_pages_folder_still_makes_the_first_run_skip_the_entry(tmp_path: Path) -> None:
    """The behaviour adopt_navigation exists for. When this fails, Streamlit frames a first-run deep link even
    with a pages/ folder beside the entry: delete components/navigation.py, its calls in pages/*.py and this file."""
    saved = PagesManager.uses_pages_directory
    try:
        assert _deep_link_first_run(tmp_path, "pages") == ["deep page"], _changed(
            "a first-run deep link is now framed by the entry despite pages/ (the workaround may be unneeded)")
    finally:
        PagesManager.uses_pages_directory = saved


def test_page_modules_in_another_folder_need_no_workaround(tmp_path: Path) -> None:
    """The supported way out (not taken yet, see components/navigation.py): with the page modules in a folder not
    named pages/, the same first run goes through the entry."""
    saved = PagesManager.uses_pages_directory
    try:
        assert _deep_link_first_run(tmp_path, "views") == ["framed by the entry", "deep page"]
    finally:
        PagesManager.uses_pages_directory = saved
