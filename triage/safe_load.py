"""Structured text read from users (YAML, JSON, TOML) loaded within bounds: size and nesting depth checked first.

libyaml's loader (PyYAML's ``CSafeLoader`` composer) recurses in C once per nesting level: 50,000 ``[`` overflow
the C stack and the process dies with no handler run. The *event* stream of the same C parser is flat (libyaml
keeps its own stack), so the depth and any alias are counted on events before the loader ever sees the text.
``json`` and ``tomllib`` guard their recursion (a ``RecursionError`` near 1,000 levels at any depth tried, up to
1,000,000), so for them the error is caught and the built value's depth is checked without recursion: a document
a few hundred levels deep would otherwise break later recursive code (pickling for the cache, ``json.dumps``).
Every user file, upload, pasted config, gate file, imported report and secrets file goes through here.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from typing import Any

import yaml

from triage.errors import TriageError

MB = 1024 * 1024
MAX_DEPTH = 100             # benchmark reports nest about 10 levels, the tree 11; 100 is far beyond any real file
MAX_CHARS = 256 * MB        # the largest benchmark file read at all (bounded.MAX_BENCHMARK_BYTES)
MAX_ALIAS_NODES = 100_000   # nodes that aliases may add (a billion-laughs file adds 10**9 from a few lines)
_CONTAINERS = (list, dict)
_JSON_WS = re.compile(r"\s*")
_AT_LINE = re.compile(r" at line (\d+) col \d+")
_YAML_OPEN = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_YAML_CLOSE = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: same rules, faster


def _too_deep(kind: str, max_depth: int, where: str) -> TriageError:
    return TriageError(f"{kind} is nested too deeply (more than {max_depth} levels); not read", where=where)


def _check_size(text: str, kind: str, max_chars: int, where: str) -> None:
    if not isinstance(text, str):
        raise TriageError(f"expected {kind} text, got {type(text).__name__}", where=where)
    if len(text) > max_chars:
        raise TriageError(f"{kind} text is larger than {max_chars / MB:g} MB; not read", where=where)


def with_line_key(exc: TriageError) -> TriageError:
    """The same refusal with its line moved into the key (``where: line 3: invalid YAML: …``), the form the tree
    and config readers use."""
    m = _AT_LINE.search(exc.reason)
    if not m:
        return exc
    return TriageError(exc.reason[: m.start()] + exc.reason[m.end():], where=exc.where, key=f"line {m.group(1)}")


def value_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of lists and dicts in ``value`` (a scalar is 0), found without recursion; stops counting
    once past ``limit``. Only containers are pushed, and a container holding scalars alone is skipped in C."""
    if not isinstance(value, _CONTAINERS):
        return 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    deepest = 0
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if depth > limit:
                return depth
        children = node.values() if isinstance(node, dict) else node
        kinds = set(map(type, children))
        if list in kinds or dict in kinds or any(issubclass(k, _CONTAINERS) for k in kinds):
            stack.extend((c, depth + 1) for c in children if isinstance(c, _CONTAINERS))
    return deepest


def _checked(value: Any, kind: str, max_depth: int, where: str) -> Any:
    if value_depth(value, max_depth) > max_depth:
        raise _too_deep(kind, max_depth, where)
    return value


# ---------------------------------------------------------------- YAML


def _yaml_error(exc: yaml.YAMLError, where: str) -> TriageError:
    mark = getattr(exc, "problem_mark", None)
    at = f" at line {mark.line + 1} col {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc)
    return TriageError(f"invalid YAML{at}: {problem}", where=where)


def _yaml_events(text: str) -> Iterator[yaml.Event]:
    return yaml.parse(text, Loader=_YAML_LOADER)  # events only: nothing is built


def check_yaml(text: str, *, where: str = "", max_depth: int = MAX_DEPTH, aliases: bool = False) -> None:
    """Refuse YAML nested deeper than ``max_depth`` from its flat event stream, stopping at the first level too
    deep: linear, and no recursion that could overflow the C stack. An alias is refused unless ``aliases``; when
    allowed, it counts as the anchored node's whole depth and size, and more alias-expanded nodes than
    MAX_ALIAS_NODES (or than the text itself holds) is refused: no billion laughs."""
    depth = literal = expanded = 0
    frames: list[list[Any]] = []  # open collections: [anchor, literal nodes before it, height so far]
    anchored: dict[str, tuple[int, int]] = {}  # anchor → (nodes, height) of the node it names
    try:
        for event in _yaml_events(text):
            if isinstance(event, _YAML_OPEN):
                depth += 1
                if depth > max_depth:
                    raise _too_deep("YAML", max_depth, where)
                frames.append([event.anchor, literal + expanded, 1])
                literal += 1
            elif isinstance(event, _YAML_CLOSE):
                depth -= 1
                anchor, before, height = frames.pop()
                if frames:
                    frames[-1][2] = max(frames[-1][2], height + 1)
                if anchor:
                    anchored[anchor] = (literal + expanded - before, height)
            elif isinstance(event, yaml.ScalarEvent):
                literal += 1
                if event.anchor:
                    anchored[event.anchor] = (1, 0)
            elif isinstance(event, yaml.AliasEvent):
                if not aliases:  # an alias can expand exponentially; no benchmark report or config uses one
                    raise TriageError("YAML aliases (*name) are not accepted", where=where)
                nodes, height = anchored.get(event.anchor or "", (1, 0))
                if depth + height > max_depth:
                    raise _too_deep("YAML", max_depth, where)
                if frames:
                    frames[-1][2] = max(frames[-1][2], height + 1)
                expanded += nodes
                if expanded > max(MAX_ALIAS_NODES, literal):
                    raise TriageError("YAML aliases expand to far more data than the file holds; not read",
                                      where=where)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, where) from None


def load_yaml(text: str, *, where: str = "", max_chars: int = MAX_CHARS, max_depth: int = MAX_DEPTH,
              aliases: bool = False) -> Any:
    """One YAML document from a user, safely: size, depth and aliases checked on the event stream, then the
    safe loader (plain data only). Any problem is a TriageError naming the line; never a crash."""
    _check_size(text, "YAML", max_chars, where)
    check_yaml(text, where=where, max_depth=max_depth, aliases=aliases)
    try:
        return yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506 - a safe loader, depth already bounded
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, where) from None
    except RecursionError:  # cannot happen below max_depth; kept so a lower recursion limit still fails cleanly
        raise _too_deep("YAML", max_depth, where) from None


# ---------------------------------------------------------------- JSON


def _json_error(exc: json.JSONDecodeError, text: str, where: str) -> TriageError:
    at_end = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
    if at_end:
        return TriageError(f"truncated JSON at line {exc.lineno} col {exc.colno} (the file ends mid-value)",
                           where=where)
    return TriageError(f"invalid JSON at line {exc.lineno} col {exc.colno}: {exc.msg}", where=where)


def load_json(text: str | bytes, *, where: str = "", max_chars: int = MAX_CHARS, max_depth: int = MAX_DEPTH) -> Any:
    """One JSON document from a user, size and depth bounded; a TriageError for anything else."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise TriageError("JSON is not UTF-8 text", where=where) from None
    _check_size(text, "JSON", max_chars, where)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _json_error(exc, text, where) from None
    except RecursionError:
        raise _too_deep("JSON", max_depth, where) from None
    return _checked(value, "JSON", max_depth, where)


def load_json_values(text: str, *, where: str = "", max_chars: int = MAX_CHARS,
                     max_depth: int = MAX_DEPTH) -> list[Any]:
    """One JSON document, or several separated by whitespace/newlines (JSONL, ``--append-result``)."""
    _check_size(text, "JSON", max_chars, where)
    try:
        return [_checked(json.loads(text), "JSON", max_depth, where)]
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            raise _json_error(exc, text, where) from None
    except RecursionError:
        raise _too_deep("JSON", max_depth, where) from None
    decoder = json.JSONDecoder()
    values: list[Any] = []
    idx, n = 0, len(text)
    while True:
        gap = _JSON_WS.match(text, idx)
        idx = gap.end() if gap else idx
        if idx >= n:
            return values
        try:
            obj, idx = decoder.raw_decode(text, idx)
        except json.JSONDecodeError as exc:
            raise _json_error(exc, text, where) from None
        except RecursionError:
            raise _too_deep("JSON", max_depth, where) from None
        values.append(_checked(obj, "JSON", max_depth, where))


# ---------------------------------------------------------------- TOML


def load_toml(text: str, *, where: str = "", max_chars: int = 4 * MB, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """A TOML document (secrets, profiles), size and depth bounded; a TriageError naming the problem."""
    _check_size(text, "TOML", max_chars, where)
    try:
        value = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TriageError(f"not valid TOML: {exc}", where=where) from None
    except RecursionError:
        raise _too_deep("TOML", max_depth, where) from None
    return _checked(value, "TOML", max_depth, where)
