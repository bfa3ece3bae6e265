"""Messages with ids: the core names what it says (an id and parameters); each reader renders it in a language.

The templates are tree/provenance.yaml's (how each signal was measured), in English and Chinese. A parameter is a
text from the data (a replica, a model title, a tool's label: shown as is), a count (shown with thousands
separators, by the one formatter) or another message (rendered in the same language), so no English sentence has
to be matched back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from triage.knowledge.loader import load_knowledge
from triage.knowledge.units import count

Param = Union[str, int, "Msg"]


@dataclass(frozen=True, init=False)
class Msg:
    """One message: the id of its template and its parameters by name (hashable, picklable, comparable)."""

    id: str
    params: tuple[tuple[str, Param], ...]

    def __init__(self, id: str, /, **params: Param) -> None:  # noqa: A002 - the message's id, as the YAML names it
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "params", tuple(params.items()))

    def param(self, name: str) -> Param:
        return dict(self.params)[name]


def template(message_id: str, lang: str) -> str:
    """The template of ``message_id`` in ``lang``; KeyError for an id tree/provenance.yaml does not hold."""
    return load_knowledge().messages[message_id].get(lang)


def message_text(message: Msg | str | None, lang: str) -> str:
    """``message`` in ``lang`` with its parameters filled (nested messages in the same language); a plain text
    (from the data) as is, None as ""."""
    if message is None:
        return ""
    if isinstance(message, str):
        return message
    return template(message.id, lang).format_map({name: _param(value, lang) for name, value in message.params})


def _param(value: Param, lang: str) -> str:
    if isinstance(value, Msg):
        return message_text(value, lang)
    if isinstance(value, bool):  # a bool is an int: name it rather than print 1
        return str(value)
    if isinstance(value, int):
        return count(value)
    return value
