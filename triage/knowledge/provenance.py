"""How a signal was measured, in the reader's language: the core's English sentence matched to tree/provenance.yaml."""

from __future__ import annotations

import re
from functools import lru_cache

from triage.knowledge.loader import PLACEHOLDER, load_knowledge
from triage.knowledge.model import Text

MAX_DEPTH = 3  # a placeholder's text may itself be a phrase (" (5,000-request sample)"), not without end


@lru_cache(maxsize=8)
def _compiled(phrases: tuple[tuple[str, str], ...]) -> tuple[tuple[re.Pattern[str], str], ...]:
    out = []
    for en, zh in phrases:
        parts = PLACEHOLDER.split(en)  # literal, name, literal, name, …
        pattern = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.*?)" for i, p in enumerate(parts))
        out.append((re.compile(pattern, re.S), zh))
    return tuple(out)


def translate_provenance(text: str, lang: str, phrases: tuple[Text, ...] | None = None) -> str:
    """``text`` in ``lang``: the first phrase whose English matches all of it, its placeholders filled (each
    translated in turn when it is a phrase too); ``text`` as given when none matches or ``lang`` is English."""
    if lang == "en" or not text:
        return text
    found = phrases if phrases is not None else load_knowledge().provenance
    return _translate(text, lang, _compiled(tuple((p.en, p.zh) for p in found)), 0) or text


def known_provenance(text: str) -> bool:
    """Whether a phrase matches ``text`` (a formula such as "ttft p99 ÷ p50" reads the same in both languages)."""
    phrases = load_knowledge().provenance
    return _translate(text, "zh", _compiled(tuple((p.en, p.zh) for p in phrases)), 0) is not None


def _translate(text: str, lang: str, compiled: tuple[tuple[re.Pattern[str], str], ...], depth: int) -> str | None:
    for pattern, zh in compiled:
        hit = pattern.fullmatch(text)
        if hit is None:
            continue
        parts = {name: (_translate(value, lang, compiled, depth + 1) if value and depth < MAX_DEPTH else None)
                 or value for name, value in hit.groupdict().items()}
        return _fill(zh, parts)
    return None


def _fill(template: str, parts: dict[str, str]) -> str:
    return PLACEHOLDER.sub(lambda m: parts[m.group(1)], template)
