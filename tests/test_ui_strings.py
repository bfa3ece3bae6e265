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
