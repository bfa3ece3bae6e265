"""Interface strings in English and Chinese, read from tree/ui.yaml."""

from __future__ import annotations

from pathlib import Path

from triage.knowledge.loader import load_knowledge
from triage.knowledge.model import Text


def load_strings(tree_dir: Path | None = None) -> dict[str, Text]:
    """All UI strings, each checked to have both languages (validated with the rest of the tree)."""
    return load_knowledge(tree_dir).strings


def tr(key: str, lang: str, **fmt: object) -> str:
    """The string for ``key`` in ``lang``, with ``{placeholders}`` filled."""
    text = load_strings()[key].get(lang)
    return text.format(**fmt) if fmt else text
