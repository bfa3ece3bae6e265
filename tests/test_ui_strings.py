"""Every interface string the code asks for exists in both languages in tree/ui.yaml."""

from __future__ import annotations

import re
from pathlib import Path

from triage.knowledge.i18n import load_strings

ROOT = Path(__file__).resolve().parent.parent
LITERAL_KEY = re.compile(r"""\bt\(\s*["']([a-z0-9_]+)["']\s*[,)]""")


def test_literal_keys_exist():
    strings = load_strings()
    used = set()
    for path in [ROOT / "app.py", *ROOT.glob("pages/*.py"), *ROOT.glob("components/*.py")]:
        used |= set(LITERAL_KEY.findall(path.read_text(encoding="utf-8")))
    missing = sorted(used - set(strings))
    assert not missing, f"keys used but not in tree/ui.yaml: {missing}"
    assert len(used) > 100


NAV_KEYS = ("nav_diagnose", "nav_live", "nav_fleet", "nav_benchmark", "nav_verify", "nav_retro", "nav_log",
            "nav_memory", "nav_techniques")


def test_chinese_strings_name_pages_by_their_chinese_titles():
    """A 中文 sentence that sends the reader to a page names it as the 中文 navigation does ("在“压测结果”页"),
    never by its English title ("在 Benchmark 页面"), which the reader does not see in the sidebar. Quoted text
    (a tool's own output such as "Serving Benchmark Result") and `code` are left out."""
    strings = load_strings()
    titles = [strings[key].en for key in NAV_KEYS]
    title = re.compile(r"(?<![A-Za-z])(" + "|".join(map(re.escape, titles)) + r")(?![A-Za-z])")
    wrong = {}
    for key, text in strings.items():
        if key in NAV_KEYS:
            continue
        bare = re.sub(r'"[^"]*"|“[^”]*”|`[^`]*`|\{[^}]*\}', "", text.zh)
        found = title.findall(bare)
        if found:
            wrong[key] = found
    assert not wrong, f"中文 strings naming a page by its English title: {wrong}"


def test_text_filled_into_a_ui_string_is_not_escaped_before():
    """t() Markdown-escapes every text it fills in; a value escaped before as well shows its backslashes
    ("rtx\\_9999", "\\(e2e − ttft\\)")."""
    escaped_twice = re.compile(r"""\bt\(\s*f?["'][a-z0-9_{}.]+["'][^()]*?\w+=md_escape\(""", re.S)
    found = []
    for path in [ROOT / "app.py", *ROOT.glob("pages/*.py"), *ROOT.glob("components/*.py")]:
        found += [f"{path.name}: {m.group(0)[:60]}" for m in escaped_twice.finditer(path.read_text(encoding="utf-8"))]
    assert not found, found
