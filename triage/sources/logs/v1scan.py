"""vLLM V1 stats lines of a block found by the C line scanner (``_linescan``), read like ``v1block.stats_rows``.

The scanner groups the lines ending in "%" by their text with digits zeroed (the engine's digits kept): lines of one
group differ only in the digits, so the careful path reads them all as it reads the group's first line (``form_of``,
once per pattern of the log), at the same places, where the scanner then parses the numbers and stamps. Without a C
compiler the extension is absent: ``available()`` is False and the caller uses ``v1block.stats_rows``.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from types import ModuleType

import numpy as np

from triage.sources.logs.v1block import FIELDS, FORM_LINES, MIN_FORMS, ZERO_DIGITS, Form, Rows, number_layout

_linescan: ModuleType | None
try:
    _linescan = importlib.import_module("triage.sources.logs._linescan")  # built by setup.py (optional)
except ImportError:  # pragma: no cover - a machine without a C compiler
    _linescan = None

EMPTY_LAYOUT = (0,) * (3 * len(FIELDS) + 1)
# Digits right after this text stay in a line's pattern: "Engine 001: " names the engine (VllmLogParser reads it)
ENGINE_MARK = b"Engine "
ENGINE_DIGITS = re.compile(re.escape(ENGINE_MARK) + rb"(\d*)")  # the digits the scanner keeps, for _reading's key
_READINGS: dict[tuple[bytes, tuple[bytes, ...], object], tuple[Form | None, list[int] | None]] = {}


def available() -> bool:
    """Whether the C line scanner was built."""
    return _linescan is not None


def count(buf: bytes, start: int, end: int, needle: bytes) -> int:
    """``buf.count(needle, start, end)`` by the C scanner (glibc's memmem)."""
    assert _linescan is not None
    return int(_linescan.count(buf, start, end, needle))


def scanned_rows(buf: bytes, start: int, end: int,
                 form_of: Callable[[bytes], Form | None]) -> tuple[Rows, int] | None:
    """The stats lines of the whole lines ``buf[start:end]`` that read as a form ``form_of`` accepts, and the count
    of lines; None when a line is a Kubernetes partial line or the lines take more than one pattern per FORM_LINES
    lines (then the block is read line by line). Lines of one pattern share their engine's digits too (kept after
    ENGINE_MARK), so one form, read from the first line, holds for all of them."""
    assert _linescan is not None
    got = _linescan.scan(buf, start, end, ENGINE_MARK)
    if got is None:
        return None
    lines, raw_rows, raw_firsts = got
    found = np.frombuffer(raw_rows, np.int64).reshape(-1, 3)
    firsts = np.frombuffer(raw_firsts, np.int64)
    if len(firsts) > max(MIN_FORMS, len(found) // FORM_LINES):
        return None
    engines: list[str] = []
    marks: list[int] = []
    layouts: list[list[int]] = []
    form_of_group = np.full(len(firsts) + 1, -1)  # the last: for no group
    for g, first in enumerate(firsts.tolist()):
        form, layout = _reading(buf[int(found[first, 0]):int(found[first, 1])], form_of)
        if form is not None and layout is not None:  # else: no standard stats line, read some other way or skipped
            form_of_group[g] = len(layouts)
            engines.append(form.engine)
            marks.append(form.marks)
            layouts.append(layout)
    forms = form_of_group[found[:, 2]]
    kept = found[forms >= 0]
    forms = forms[forms >= 0]
    values, stamps = _linescan.numbers(buf, np.ascontiguousarray(kept[:, 0]), np.ascontiguousarray(kept[:, 1]),
                                       forms.astype(np.int64), np.array(layouts or [list(EMPTY_LAYOUT)], np.int64))
    value = np.frombuffer(values, np.float64).reshape(-1, len(FIELDS))
    month, day, hh, mm, ss = np.frombuffer(stamps, np.int64).reshape(-1, 5).T
    numbers = {name: value[:, i] for i, (name, _) in enumerate(FIELDS)}
    numbers["kv"] = numbers["kv"] / 100
    numbers["prefix_hit"] = numbers["prefix_hit"] / 100
    return Rows(month, day, hh, mm, ss, engines, marks, forms, numbers), lines


def _reading(line: bytes, form_of: Callable[[bytes], Form | None]) -> tuple[Form | None, list[int] | None]:
    """The form and number layout of a group's first line, kept per pattern (as the scanner forms it) and reader:
    a log repeats a few patterns in every block."""
    key = (line.translate(ZERO_DIGITS), tuple(ENGINE_DIGITS.findall(line)), form_of)
    if (known := _READINGS.get(key)) is not None:
        return known
    form = form_of(line)
    reading = form, number_layout(form, key[0], 0) if form is not None else None
    if len(_READINGS) >= 1024:
        _READINGS.clear()
    _READINGS[key] = reading
    return reading
