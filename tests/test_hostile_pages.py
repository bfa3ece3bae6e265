"""Pages under crafted URLs and crafted imports (AppTest): a short message, never a traceback, never a link.

TRIAGE_DEBUG is unset here so the pages' error boundaries behave as they do for visitors."""

from __future__ import annotations

import base64
import json
import re

import pytest

from tests.apptest_tools import new_app, texts
from triage.report.retro import RetroState
from triage.verify.experiment_log import Entry, ExperimentLog

INJECT = "![x](http://evil.example/x.png) [click](http://evil.example) <img src=x onerror=alert(1)> www.evil.example"


@pytest.fixture(autouse=True)
def visitor_mode(monkeypatch, tmp_path):
    monkeypatch.delenv("TRIAGE_DEBUG", raising=False)
    monkeypatch.setenv("TRIAGE_LOG_DB", str(tmp_path / "log.db"))


def page(path: str, **query: str):
    at = new_app(**query).run()
    at.switch_page(path)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def no_trace(at) -> str:
    assert not at.exception, at.exception
    shown = texts(at)
    assert "Traceback" not in shown and "File \"/" not in shown
    return shown


def no_link(markdown: str) -> None:
    """The crafted text is there only as escaped literal text: once every backslash escape is taken out, no
    image, link, HTML or bare autolink syntax is left in any line that carries it."""
    for line in markdown.splitlines():
        if "evil" not in line:
            continue
        bare = re.sub(r"\\.", "", line)
        assert "](" not in bare and "<img" not in bare and "www.evil" not in bare and "://evil" not in bare, line


@pytest.mark.parametrize("value", ["99999999999999999999999", "-1", "abc", "1e5", "²", INJECT, "0x10", " 7 "])
def test_verify_experiment_param(value):
    at = page("pages/verify.py", experiment=value)
    shown = no_trace(at)
    assert any("not an experiment id" in e.value or "no experiment with id" in e.value for e in at.error), shown
    no_link(shown)


def test_stored_experiment_note_is_escaped(tmp_path, monkeypatch):
    db = tmp_path / "notes.db"
    monkeypatch.setenv("TRIAGE_LOG_DB", str(db))
    ExperimentLog(db).save(Entry("chunked_prefill", {}, INJECT, "0" * 64, "b.csv", "1" * 64, [], "no effect",
                                 note=INJECT, who=INJECT))
    for at in (page("pages/verify.py", experiment="1"), page("pages/log.py")):
        no_trace(at)
        no_link(markdown_only(at))
        for body in (str(el.proto.body) for el in at.get("html")):  # static tables: HTML-escaped literal text
            assert "<img src=x" not in body and ("evil" not in body or "&lt;img src=x" in body)


def markdown_only(at) -> str:
    """The page's Markdown text (not its HTML tables, where Markdown syntax is literal text)."""
    kinds = ("markdown", "caption", "title", "header", "subheader", "info", "warning", "error", "success")
    return "\n".join(str(e.value) for kind in kinds for e in at.get(kind))


@pytest.mark.parametrize(("path", "param"), [("pages/technique.py", "id"), ("pages/diagnose.py", "node")])
def test_unknown_ids_are_escaped(path, param):
    at = page(path, **{param: INJECT})
    shown = no_trace(at)
    assert at.warning, shown
    no_link(shown)


@pytest.mark.parametrize("step", ["abc", "²", "-3", "999999999999999999999999", "0", INJECT])
def test_retro_step_param(step):
    no_link(no_trace(page("pages/retro.py", step=step)))


class Raw(str):
    """JSON text as is (a nesting json.dumps itself could not write)."""


def _report(state: object) -> bytes:
    text = state if isinstance(state, Raw) else json.dumps(state)
    payload = base64.b64encode(text.encode()).decode()
    return f"# report\n<!-- triage-retro:{payload} -->\n".encode()


def _deep(n: int) -> list:
    data: object = []
    for _ in range(n):
        data = [data]
    return data


CRAFTED = [
    {"step": "abc"}, {"step": 10**30}, {"step": -1}, {"step": True}, {"symptom": "no-such-symptom"},
    {"cause": "nope"}, {"techniques": ["no_such_technique"]}, {"techniques": "chunked_prefill"},
    {"techniques": ["chunked_prefill"] * 1000}, {"notes": {"symptom": {"x": 1}}}, {"notes": {"x" * 40: "y"}},
    {"checklist": {"symptom": ["yes"]}}, {"timeline": [{"at": 1}]}, {"timeline": "x"}, {"title": ["a"]},
    {"title": "x" * 100_000}, {"unknown_field": 1}, {"verification": {"a": 1}}, {"timeline": [_deep(50)]},
    Raw('{"timeline": ' + "[" * 100_000 + "]" * 100_000 + "}"), "just a string",
    {"title": INJECT, "source": INJECT, "notes": {"symptom": INJECT}},
]


@pytest.mark.parametrize("state", CRAFTED, ids=range(len(CRAFTED)))
def test_crafted_retro_imports(state):
    at = page("pages/retro.py")
    at.file_uploader(key="retro_import").upload("crafted.md", _report(state), "text/markdown").run()
    shown = no_trace(at)
    no_link(shown)
    if isinstance(state, dict) and set(state) == {"title", "source", "notes"}:
        assert not at.error  # a valid walk with hostile text imports, its text shown inertly
    else:
        assert any("retro" in e.value.lower() or "walk" in e.value.lower() for e in at.error), shown


def test_a_valid_walk_still_round_trips(kb):
    state = RetroState(title="t", step=2, symptom="ttft", cause="ttft.queueing", techniques=["chunked_prefill"])
    restored = RetroState.from_dict(json.loads(json.dumps(state.to_dict())), kb)
    assert restored.to_dict() == state.to_dict()


def test_boundary_turns_a_failure_into_one_line(monkeypatch):
    """A page body that raises shows the short message with a reference; the detail goes to the log."""
    import components.verify_view as verify_view

    def broken(_slo) -> None:
        raise RuntimeError("/srv/secret/path/app.py exploded with http://u:PLANTED@host")

    monkeypatch.setattr(verify_view, "verify_page", broken)
    at = page("pages/verify.py")
    shown = no_trace(at)
    assert any("reference" in e.value for e in at.error), shown
    assert "exploded" not in shown and "PLANTED" not in shown
