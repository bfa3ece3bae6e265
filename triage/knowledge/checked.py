"""Knowledge bases already checked: what `python -m triage tree` printed for a tree directory that passed
validation, kept while the content of every YAML file of that directory, the loader's code and the parsing
libraries stay the same.

The key is a hash of the *content* of every YAML file the loader reads (``yaml_files``: the same list the
loader walks), not of modification times, so an edit that keeps a file's size inside one clock tick is still
seen; plus the size and modification time of the loader's code (as Python's own bytecode cache does) and the
text of the pydantic and PyYAML version files. A record is written only after a passed check and only if
the key taken before the check equals the key taken after it, so a file changed while it was being read is
never vouched for. With a record, `tree` answers without parsing YAML or building the pydantic schemas;
without one, or after any change, every file is read and checked again. This module imports nothing heavy.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from importlib.util import find_spec
from pathlib import Path
from typing import Any

_TRIAGE = Path(__file__).resolve().parent.parent
# Code the check and the printed record depend on: the loader and its model, the CLI that prints the tree,
# the error line, the bounded reader.
CODE = (_TRIAGE / "knowledge", _TRIAGE / "cli" / "__init__.py", _TRIAGE / "errors.py", _TRIAGE / "safe_text.py",
        _TRIAGE / "bounded.py")
LIBRARIES = (("pydantic", "version.py"), ("yaml", "__init__.py"))  # files that carry each library's version
VERSION = 2
MAX_RECORDS = 32  # one record per tree directory; the oldest go first
MAX_HASHED_BYTES = 4 * 1024 * 1024  # a larger file is refused by the loader; its stat stands in for its content


def yaml_files(root: Path) -> list[Path]:
    """Every YAML file under the tree directory, sorted (the files the loader reads)."""
    return sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


def _file_digest(path: Path) -> str:
    info = os.stat(path)
    if info.st_size > MAX_HASHED_BYTES:
        return f"large:{info.st_size}:{info.st_mtime_ns}"
    with open(path, "rb") as fh:
        return hashlib.blake2b(fh.read(MAX_HASHED_BYTES + 1), digest_size=20).hexdigest()


def _code_stat(path: Path) -> list[tuple[str, int, int]]:
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return [(str(p), (s := os.stat(p)).st_size, s.st_mtime_ns) for p in files]


def _library_text(name: str, file: str) -> str:
    spec = find_spec(name)  # locates the package without importing it
    folders = list(spec.submodule_search_locations or []) if spec else []
    return Path(folders[0], file).read_text(encoding="utf-8") if folders else f"{name}: not found"


def content_key(root: Path) -> str:
    """A hash of every YAML file's path and content under ``root`` (OSError if one cannot be read)."""
    digest = hashlib.blake2b(digest_size=20)
    for path in yaml_files(root):
        digest.update(f"{path.relative_to(root).as_posix()}\0{_file_digest(path)}\n".encode())
    return digest.hexdigest()


def cache_root() -> Path:
    """This tool's cache folder: ``TRIAGE_CACHE_DIR``, else ``$XDG_CACHE_HOME/inference-triage`` (~/.cache)."""
    own = os.environ.get("TRIAGE_CACHE_DIR")
    if own:
        return Path(own)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "inference-triage"


def private_folder(name: str) -> Path | None:
    """The cache's folder ``name``, created private; None when it is not this user's own or others may write to it
    (what it holds is read back as the tree, so no one else may put anything there)."""
    folder = cache_root() / name
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = os.stat(folder)
    except OSError:
        return None
    if hasattr(os, "getuid") and (info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
        return None
    return folder


CHECKED = "checked-trees"  # the records' folder in the cache


def _cache_dir() -> Path:
    return cache_root() / CHECKED


def _key(root: Path) -> tuple[Path, str]:
    root = root.resolve()
    stamp = json.dumps([VERSION, str(root), content_key(root), [_code_stat(p) for p in CODE],
                        [_library_text(*lib) for lib in LIBRARIES]])
    name = hashlib.sha256(str(root).encode()).hexdigest()[:24]
    return _cache_dir() / f"{name}.json", hashlib.sha256(stamp.encode()).hexdigest()


def recall(root: Path) -> tuple[dict[str, Any] | None, tuple[Path, str] | None]:
    """The record of ``root`` if nothing changed since it passed (else None), and the key to record it under —
    taken before the caller reads the files (``remember`` compares it with the key after the check)."""
    try:
        key = _key(root)
    except OSError:
        return None, None
    if private_folder(CHECKED) is None:
        return None, None  # nothing is read from, or written to, a folder others may write to
    try:
        data = json.loads(key[0].read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, key
    found = data.get("record") if isinstance(data, dict) and data.get("stamp") == key[1] else None
    return found, key


def remember(root: Path, key: tuple[Path, str] | None, record: dict[str, Any]) -> None:
    """Record what the tree gave after passing validation, if no file changed during the check (best effort:
    an unwritable cache is skipped)."""
    try:
        if key is None or _key(root) != key:
            return
        path, stamp = key
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, delete=False,
                                         suffix=".tmp") as tmp:
            json.dump({"stamp": stamp, "record": record}, tmp, ensure_ascii=False)
        os.replace(tmp.name, path)
        _prune(path.parent)
    except OSError:
        return


def _prune(folder: Path) -> None:
    records = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in records[MAX_RECORDS:]:
        old.unlink(missing_ok=True)
