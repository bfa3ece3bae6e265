"""Interface strings in English and Chinese, read from tree/ui.yaml."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

from triage.errors import TriageError
from triage.knowledge.loader import DEFAULT_TREE_DIR
from triage.knowledge.model import LANGS, Text


@lru_cache(maxsize=4)
def load_strings(tree_dir: Path = DEFAULT_TREE_DIR) -> dict[str, Text]:
    """All UI strings, each checked to have both languages."""
    path = Path(tree_dir) / "ui.yaml"
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise TriageError("expected a mapping of key → {en, zh}", where=str(path))
    strings: dict[str, Text] = {}
    for key, value in raw.items():
        try:
            strings[key] = Text.model_validate(value)
        except Exception as exc:  # pydantic's message is long; one line is enough here
            raise TriageError(f"needs non-blank {' and '.join(LANGS)}", where=str(path), key=key) from exc
    return strings


def tr(key: str, lang: str, **fmt: object) -> str:
    """The string for ``key`` in ``lang``, with ``{placeholders}`` filled."""
    text = load_strings()[key].get(lang)
    return text.format(**fmt) if fmt else text
