"""A first action's sentence in the reader's language, a batch-cap action's numbers through the one formatter."""

from __future__ import annotations

from triage.diagnosis.verdict import Action
from triage.knowledge.messages import message_text
from triage.knowledge.units import MISSING, fmt_value, number


def action_sentence(action: Action, lang: str) -> str:
    """What the action does; for a cap relative to the data, with the measured cap, the target, the queue and the
    KV peak ("Now 16 (running held at its peak in 38 of 40 samples …) while 31 requests wait …")."""
    advice = action.cap
    if advice is None:
        return action.do.get(lang)
    return advice.sentence.get(lang).format(
        cap=number(advice.cap) if advice.cap is not None else MISSING,
        target=number(advice.target) if advice.target is not None else MISSING,
        waiting=fmt_value(advice.waiting),
        kv=fmt_value(advice.kv, "fraction"),
        ceiling=fmt_value(advice.ceiling, "fraction"),
        factor=number(advice.factor),
        how=message_text(advice.how, lang),
    )
