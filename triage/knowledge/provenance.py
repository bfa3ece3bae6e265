"""How a signal was measured, in the reader's language: the core's English sentence matched to tree/provenance.yaml."""

from __future__ import annotations

import re
from functools import lru_cache

from triage.knowledge.loader import PLACEHOLDER, load_knowledge
from triage.knowledge.model import Text

MAX_DEPTH = 3  # a placeholder's text may itself be a phrase (" (5,000-request sample)"), not without end
Table = tuple[tuple[re.Pattern[str], str], ...]


@lru_cache(maxsize=8)
def _compiled(phrases: tuple[Text, ...]) -> Table:
    """Each phrase's English as a pattern (a {name} matches any text, as a named group), with its Chinese."""
    out = []
    for phrase in phrases:
        parts = PLACEHOLDER.split(phrase.en)  # literal, name, literal, name, …
        pattern = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.*?)" for i, p in enumerate(parts))
        out.append((re.compile(pattern, re.S), phrase.zh))
    return tuple(out)


def translate_provenance(text: str, lang: str) -> str:
    """``text`` in ``lang``: the first phrase whose English matches all of it, its placeholders filled (each
    translated in turn when it is a phrase too); ``text`` as given when none matches or ``lang`` is English."""
    if lang == "en" or not text:
        return text
    return _translate(text, _compiled(load_knowledge().provenance), 0) or text


def known_provenance(text: str) -> bool:
    """Whether a phrase matches ``text`` (a formula such as "ttft p99 ÷ p50" reads the same in both languages)."""
    return _translate(text, _compiled(load_knowledge().provenance), 0) is not None


def _translate(text: str, table: Table, depth: int) -> str | None:
    found = next(((hit, zh) for pattern, zh in table if (hit := pattern.fullmatch(text)) is not None), None)
    if found is None:
        return None
    hit, zh = found
    parts = {name: (_translate(value, table, depth + 1) if value and depth < MAX_DEPTH else None) or value
             for name, value in hit.groupdict().items()}
    return PLACEHOLDER.sub(lambda m: parts[m.group(1)], zh)
