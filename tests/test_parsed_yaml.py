"""Tree YAML kept parsed as JSON (triage/knowledge/parsed.py): read back only for the same text, only plain data,
only from a folder no one else may write to, and any damage means a fresh parse."""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from triage.knowledge import parsed


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TRIAGE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "parsed-yaml"


def _counting() -> tuple[list[str], Any]:
    calls: list[str] = []

    def parse(text: str) -> Any:
        calls.append(text)
        return yaml.safe_load(text)

    return calls, parse


def test_the_same_text_is_parsed_once(cache: Path) -> None:
    calls, parse = _counting()
    text = "a: [1, 2.5, true, null, x]\nb: {c: d}\n"
    assert parsed.load(text, parse) == parsed.load(text, parse) == {"a": [1, 2.5, True, None, "x"], "b": {"c": "d"}}
    assert calls == [text] and len(list(cache.glob("*.json"))) == 1
    assert parsed.load(text + "e: 1\n", parse)["e"] == 1 and len(calls) == 2  # another text: parsed


@pytest.mark.parametrize("text", ["when: 2026-12-02\n", "1: one\n", "x: .inf\n"])
def test_what_json_cannot_give_back_is_parsed_every_time(cache: Path, text: str) -> None:
    calls, parse = _counting()
    first = parsed.load(text, parse)
    assert parsed.load(text, parse) == first and len(calls) == 2 and not list(cache.glob("*.json"))
    assert not parsed.plain(first) and parsed.plain({"a": [1, "b", None, 2.5]})
    assert not parsed.plain({"d": datetime.date(2026, 12, 2)})


def test_a_damaged_record_means_a_fresh_parse(cache: Path) -> None:
    calls, parse = _counting()
    parsed.load("a: 1\n", parse)
    (record,) = cache.glob("*.json")
    record.write_text("{not json", encoding="utf-8")
    assert parsed.load("a: 1\n", parse) == {"a": 1} and len(calls) == 2


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_a_folder_others_may_write_to_is_never_read(cache: Path) -> None:
    calls, parse = _counting()
    parsed.load("a: 1\n", parse)
    (record,) = cache.glob("*.json")
    record.write_text('{"a": "planted"}', encoding="utf-8")
    os.chmod(cache, 0o777)
    assert parsed.load("a: 1\n", parse) == {"a": 1} and len(calls) == 2  # not the planted value
    os.chmod(cache, 0o700)
    assert parsed.load("a: 1\n", parse) == {"a": "planted"}  # its own folder: what it holds is trusted
