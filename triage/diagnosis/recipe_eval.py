"""Server signals computed from their recipes (tree/signals.yaml) over a window's readings, with how each was measured.

The arithmetic is the PromQL compiler's (triage/alerting/promql.py): a ÷ b is absent when b is absent or 0, ``first``
takes the first alternative with a value, a ``need`` is one reading, a ``signal`` another signal's value as the
signal set holds it (so a recorded value stands in for the readings, as the recording rules' ratios do)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import lru_cache

from triage.diagnosis.signals import SignalSet
from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.messages import Msg
from triage.knowledge.model import How, NeedRef, Recipe
from triage.knowledge.needs import Need
from triage.safe_text import one_line
from triage.sources.readings import Readings

Value = float | bool | None
MAX_PARTS = 6  # a breakdown lists at most this many label values (the largest rates), the rest summed as "other"


@lru_cache(maxsize=256)
def need_of(ref: NeedRef) -> Need:
    """The Need a recipe's reading names (a fleet reads the same few dozen needs for every replica)."""
    return Need(ref.kind, ref.key, ref.q, ref.engine)


def breakdown_of(ref: NeedRef) -> Need | None:
    """The per-label reading of a need with ``by`` (its rate per value of that label), None without one."""
    return Need(ref.kind, ref.key, ref.q, ref.engine, by=ref.by) if ref.by else None


def recipe_breakdowns(r: Recipe) -> Iterator[Need]:
    """The per-label readings a recipe's needs with ``by`` ask for, depth first (read beside the needs, only where a
    single window is diagnosed: they change no value, only what the evidence says about it)."""
    if r.need is not None and (b := breakdown_of(r.need)) is not None:
        yield b
    for part in (r.div or []) + (r.first or []):
        yield from recipe_breakdowns(part)


def breakdown_text(rates: dict[str, str]) -> str:
    """``a 0.2/s, b 0.1/s`` from {label value: rate as text}, largest first, zero rates left out; "" when none."""
    parsed = []
    for label, text in rates.items():
        try:
            rate = float(text)
        except ValueError:
            continue
        if rate > 0 and math.isfinite(rate):
            parsed.append((rate, one_line(label or "(none)", 64)))
    parsed.sort(key=lambda p: (-p[0], p[1]))
    shown = [f"{label} {rate:.3g}/s" for rate, label in parsed[:MAX_PARTS]]
    rest = sum(rate for rate, _ in parsed[MAX_PARTS:])
    return ", ".join(shown + ([f"other {rest:.3g}/s"] if rest else []))


def recipe_readings(r: Recipe, deferred: bool = True) -> Iterator[Need]:
    """Every reading a recipe names (the info metric of a ``flag`` too), depth first; without ``deferred``, not
    those of ``later`` alternatives."""
    if r.later and not deferred:
        return
    if r.need is not None:
        yield need_of(r.need)
    if r.flag is not None:
        yield Need("info", r.flag.key)
    for part in (r.div or []) + (r.first or []):
        yield from recipe_readings(part, deferred)


def message(how: How) -> Msg:
    return Msg(how.id, **how.params)


def built_message(r: Recipe, parts: list[Msg | None]) -> Msg | None:
    """The message of a recipe part that names no ``how``, from the recipe itself."""
    if r.need is not None:
        q = {} if r.need.q is None else {"p": f"p{r.need.q * 100:g}"}
        return Msg(f"recipe.{r.need.kind}", key=r.need.key, **q)
    if r.signal is not None:
        return Msg("recipe.signal", signal=r.signal)
    if r.div is not None:
        a, b = parts
        return Msg("recipe.div", a=a, b=b) if a is not None and b is not None else None
    if r.flag is not None:
        return Msg("recipe.flag", label=r.flag.label, key=r.flag.key)
    return None


class RecipeEvaluator:
    """Evaluates the server signals' recipes over ``readings`` into ``out``: each signal once, a signal another
    reads first (any order of the catalogue works), every computed value put through ``out`` (a RecordedSignals
    replaces it by the recorded one)."""

    def __init__(self, kb: KnowledgeBase, readings: Readings, out: SignalSet) -> None:
        self.kb, self.readings, self.out = kb, readings, out
        self.done: set[str] = set()

    def put_all(self) -> None:
        for name, sig in self.kb.signals.items():
            if sig.recipe is not None:
                self.signal(name)

    def signal(self, name: str) -> Value:
        """The value of ``name`` as ``out`` holds it, computed from its recipe first if it was not yet."""
        recipe = self.kb.signals[name].recipe if name in self.kb.signals else None
        if name not in self.done and recipe is not None:
            self.done.add(name)  # before evaluating: a recipe reading itself sees it absent, never loops
            value, how = self.evaluate(recipe)
            self.out.put(self.kb, name, value, how or Msg("recipe.signal", signal=name))
        got = self.out.get(name)
        return None if got is None else got.value

    def evaluate(self, r: Recipe) -> tuple[Value, Msg | None]:
        """(value, how it was measured) of one recipe part; (None, None) when not measurable."""
        parts: list[Msg | None] = []
        value: Value = None
        if r.need is not None:
            got = self.readings.get(need_of(r.need))
            value = float(got) if isinstance(got, (int, float)) and not math.isnan(got) else None
        elif r.signal is not None:
            value = self.signal(r.signal)
        elif r.div is not None:
            (top, a), (bottom, b) = (self.evaluate(x) for x in r.div)
            value, parts = (top / bottom if top is not None and bottom else None), [a, b]
        elif r.first is not None:
            for alternative in r.first:
                value, how = self.evaluate(alternative)
                if value is not None:
                    return value, message(r.how) if r.how is not None else how
            return None, None
        else:
            assert r.flag is not None
            labels = self.readings.get(Need("info", r.flag.key))
            label = labels.get(r.flag.label) if isinstance(labels, dict) else None
            value = label == "True" if label in ("True", "False") else None
        if value is None:
            return None, None
        how = message(r.how) if r.how is not None else built_message(r, parts)
        return value, self.broken_down(r.need, how) if r.need is not None and r.need.by else how

    def broken_down(self, ref: NeedRef, how: Msg | None) -> Msg | None:
        """``how`` followed by the rate per value of the need's ``by`` label, when the window gave that breakdown."""
        need = breakdown_of(ref)
        rates = self.readings.get(need) if need is not None else None
        parts = breakdown_text(rates) if isinstance(rates, dict) else ""
        if not parts or how is None:
            return how
        return Msg("server.by_label", how=how, label=ref.by, parts=parts)

    def wanted_later(self, r: Recipe) -> Iterator[Need]:
        """The readings of the ``later`` alternatives this window needs: those whose earlier alternatives gave
        nothing over the readings so far."""
        if r.first is not None:
            for alternative in r.first:
                if alternative.later:
                    yield from recipe_readings(alternative)
                elif self.evaluate(alternative)[0] is not None:
                    return
                else:
                    yield from self.wanted_later(alternative)
            return
        for part in r.div or []:
            yield from self.wanted_later(part)
