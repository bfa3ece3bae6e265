"""Interface strings in English and Chinese, read from tree/ui.yaml."""

from __future__ import annotations

from pathlib import Path

from triage.knowledge.loader import load_knowledge
from triage.knowledge.model import Flag, Text


def load_strings(tree_dir: Path | None = None) -> dict[str, Text]:
    """All UI strings, each checked to have both languages (validated with the rest of the tree)."""
    return load_knowledge(tree_dir).strings


def tr(key: str, lang: str, **fmt: object) -> str:
    """The string for ``key`` in ``lang``, with ``{placeholders}`` filled."""
    text = load_strings()[key].get(lang)
    return text.format(**fmt) if fmt else text


def flag_text(flag: Flag, lang: str) -> str:
    """A knob's flag as the technique page shows it: an environment variable or a config's field says so."""
    if flag.env:
        return tr("knob_env", lang, name=flag.flag)
    if flag.inside:
        return tr("knob_inside", lang, field=flag.flag, option=flag.inside)
    return flag.flag


def default_text(flag: Flag, lang: str) -> str:
    """A knob's default in ``lang``: its value(s), unset in words, then its note or rule."""
    values = flag.default if isinstance(flag.default, list) else [flag.default]
    value = " / ".join(tr("knob_unset", lang) if v is None else str(v) for v in values)
    if flag.default_note is not None:
        return tr("knob_default_note", lang, value=value, note=flag.default_note.get(lang))
    if flag.default_rule is not None:
        return tr("knob_default_rule", lang, value=value, rule=flag.default_rule.get(lang))
    return value
