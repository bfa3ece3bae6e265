"""Tree YAML files kept parsed, as JSON keyed by their text's hash: a start reads JSON (~10x faster than PyYAML's
constructor) and the loader validates it as it validates a fresh parse.

Only plain data is kept (mappings with text keys, lists, text, numbers, booleans, null): what a JSON round trip
gives back unchanged. A file whose parse holds anything else (a date, a number as a key) is parsed every time.
The folder must be this user's own and writable by no one else, since what it holds becomes the tree; otherwise
nothing is read from it or written to it. Every failure to read or write the cache falls back to parsing.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from triage.knowledge.checked import private_folder

VERSION = 1  # bump when the parse itself changes (the loader's YAML options)
MAX_FILES = 256  # parsed files kept; the oldest go first


def load(text: str, parse: Callable[[str], Any]) -> Any:
    """``parse(text)``, or the value kept for the same text by an earlier start."""
    folder = _folder()
    path = folder / f"{_digest(text)}.json" if folder is not None else None
    if path is not None:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
    value = parse(text)
    if path is not None and plain(value):
        _keep(path, value)
    return value


def plain(value: Any) -> bool:
    """Whether a JSON round trip gives ``value`` back unchanged (walked without recursion)."""
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            if not all(type(k) is str for k in item):
                return False
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
        elif isinstance(item, float):
            if not math.isfinite(item):
                return False
        elif not (item is None or type(item) in (str, int, bool)):
            return False
    return True


def _digest(text: str) -> str:
    import yaml  # the parser's version is part of the key: another PyYAML may parse the same text differently

    seed = f"{VERSION}\0{yaml.__version__}\0".encode()
    return hashlib.blake2b(seed + text.encode("utf-8", "surrogatepass"), digest_size=20).hexdigest()


def _folder() -> Path | None:
    return private_folder("parsed-yaml")


def _keep(path: Path, value: Any) -> None:
    try:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, delete=False, suffix=".tmp") as tmp:
            json.dump(value, tmp, ensure_ascii=False, allow_nan=False)
        os.replace(tmp.name, path)
        kept = sorted(path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in kept[MAX_FILES:]:
            old.unlink(missing_ok=True)
    except OSError:
        return
