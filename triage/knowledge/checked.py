"""Knowledge bases already checked: what `python -m triage tree` printed for a tree directory that passed
validation, kept until any file of that directory or of the loader's code changes.

With a record, `tree` answers without parsing YAML or building the pydantic schemas (the CLI starts about
as fast as `import yaml, pydantic`); without one, or after any change, everything is read and checked again.
Only successes are recorded. This module imports nothing heavy on purpose.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

CODE_DIRS = (Path(__file__).resolve().parent, Path(__file__).resolve().parent.parent / "cli")
VERSION = 1


def signature(root: Path) -> list[tuple[str, str, int, int]]:
    """Path, size and modification time of every file under ``root``, sorted."""
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            st = os.stat(os.path.join(dirpath, name))
            out.append((dirpath, name, st.st_size, st.st_mtime_ns))
    return sorted(out)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "inference-triage" / "checked-trees"


def _key(root: Path) -> tuple[Path, str]:
    root = root.resolve()
    stamp = json.dumps([VERSION, str(root), signature(root), *[signature(d) for d in CODE_DIRS]])
    name = hashlib.sha256(str(root).encode()).hexdigest()[:24]
    return _cache_dir() / f"{name}.json", hashlib.sha256(stamp.encode()).hexdigest()


def recall(root: Path) -> tuple[dict[str, Any] | None, tuple[Path, str] | None]:
    """The record of ``root`` if nothing changed since it passed (else None), and the key to record it under —
    taken before the caller reads the files, so a change made while they are checked is never recorded."""
    try:
        key = _key(root)
    except OSError:
        return None, None
    try:
        data = json.loads(key[0].read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, key
    found = data.get("record") if isinstance(data, dict) and data.get("stamp") == key[1] else None
    return found, key


def remember(key: tuple[Path, str] | None, record: dict[str, Any]) -> None:
    """Record what the tree gave after passing validation (best effort: an unwritable cache is skipped)."""
    if key is None:
        return
    path, stamp = key
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, delete=False,
                                         suffix=".tmp") as tmp:
            json.dump({"stamp": stamp, "record": record}, tmp, ensure_ascii=False)
        os.replace(tmp.name, path)
    except OSError:
        return
