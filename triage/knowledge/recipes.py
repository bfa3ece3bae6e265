"""Walks over the server signals' recipes: which readings and which other signals a signal is computed from."""

from __future__ import annotations

from collections.abc import Iterator

from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.model import NeedRef, Recipe


def _parts(r: Recipe) -> Iterator[Recipe]:
    """The recipe and every recipe nested in it, depth first."""
    yield r
    for child in (r.div or []) + (r.first or []):
        yield from _parts(child)


def recipe_signals(kb: KnowledgeBase, name: str) -> list[str]:
    """The other signals a signal's recipe reads (recording rules it depends on), once each."""
    recipe = kb.signals[name].recipe
    parts = _parts(recipe) if recipe is not None else iter(())
    return list(dict.fromkeys(p.signal for p in parts if p.signal is not None))


def recipe_needs(kb: KnowledgeBase, name: str, stop: frozenset[str] | set[str] = frozenset()) -> list[NeedRef]:
    """The readings a signal is computed from, through the other signals its recipe reads (except those in
    ``stop``, e.g. signals already recorded), once each, in recipe order; none for an unknown signal."""
    found: list[NeedRef] = []

    def visit(signal: str, seen: frozenset[str]) -> None:
        recipe = kb.signals[signal].recipe if signal in kb.signals else None
        for part in _parts(recipe) if recipe is not None else ():
            if part.need is not None and part.need not in found:
                found.append(part.need)
            if part.signal is not None and part.signal not in seen and part.signal not in stop:
                visit(part.signal, seen | {part.signal})

    visit(name, frozenset({name}))
    return found
