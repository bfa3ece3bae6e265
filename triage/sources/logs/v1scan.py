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
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from triage.sources.logs.v1block import EMPTY_LAYOUT, FIELDS, ZERO_DIGITS, Form, Rows, number_layout

_linescan: ModuleType | None
try:
    _linescan = importlib.import_module("triage.sources.logs._linescan")  # built by setup.py (optional)
except ImportError:  # pragma: no cover - a machine without a C compiler
    _linescan = None

# Digits right after this text stay in a line's pattern: "Engine 001: " names the engine (VllmLogParser reads it)
ENGINE_MARK = b"Engine "
ENGINE_DIGITS = re.compile(re.escape(ENGINE_MARK) + rb"(\d*)")  # the digits the scanner keeps, for _reading's key
_READINGS: dict[tuple[bytes, tuple[bytes, ...], object], tuple[Form | SpecForm | None, list[int] | None]] = {}


def available() -> bool:
    """Whether the C line scanner was built."""
    return _linescan is not None


def count(buf: bytes, start: int, end: int, needle: bytes) -> int:
    """``buf.count(needle, start, end)`` by the C scanner (16 places at a time, then memcmp)."""
    assert _linescan is not None
    return int(_linescan.count(buf, start, end, needle))


@dataclass(frozen=True)
class SpecForm:
    """Where the careful path reads a SpecDecoding line (``VllmLogParser._spec``): the spans of the accepted and
    drafted token counts and of the acceptance rate's percent ((-1, -1): the line has none) and the offset of the
    stamp's month digits."""

    spans: tuple[tuple[int, int], tuple[int, int], tuple[int, int]]
    stamp: int


@dataclass
class SpecRows:
    """A block's SpecDecoding lines read in bulk, and where they fall among its stats lines: ``spec`` marks them in
    the block's rows (stats and SpecDecoding, in line order), whose stamps ``stamps`` holds (month, day, hour,
    minute, second columns) so that their times are placed in line order, as line by line."""

    spec: np.ndarray
    stamps: tuple[np.ndarray, ...]
    accepted: np.ndarray
    drafted: np.ndarray
    rate: np.ndarray  # 0..1, NaN: not printed

    def __len__(self) -> int:
        return len(self.accepted)


Reader = Callable[[bytes], "Form | SpecForm | None"]


def scanned_rows(buf: bytes, start: int, end: int, form_of: Reader) -> tuple[Rows, SpecRows | None, int] | None:
    """The stats lines (and SpecDecoding lines) of the whole lines ``buf[start:end]`` that read as a form
    ``form_of`` accepts, and the count of lines; None when a line is a Kubernetes partial line or the lines take
    more than 256 patterns (then the block is read line by line). Lines of one pattern share their engine's digits
    too (kept after ENGINE_MARK), so one form, read from the first line (once per pattern of the log), holds for
    all of them."""
    assert _linescan is not None
    got = _linescan.scan(buf, start, end, ENGINE_MARK)
    if got is None:
        return None
    lines, raw_rows, raw_firsts = got
    found = np.frombuffer(raw_rows, np.int64).reshape(-1, 3)
    firsts = np.frombuffer(raw_firsts, np.int64)  # at most 256 (the scanner's bound): a few µs each once known
    stats: list[tuple[Form, list[int]]] = []
    specs: list[list[int]] = []
    form_of_group = np.full(len(firsts) + 1, -1)  # the last: for no group
    kind_of_group = np.zeros(len(firsts) + 1, bool)  # True: a SpecDecoding pattern
    for g, first in enumerate(firsts.tolist()):
        form, layout = _reading(buf[int(found[first, 0]):int(found[first, 1])], form_of)
        if layout is None:
            continue  # no standard stats or SpecDecoding line: read some other way, or skipped
        if isinstance(form, SpecForm):
            kind_of_group[g] = True
            form_of_group[g] = len(specs)
            specs.append(layout)
        elif form is not None:
            form_of_group[g] = len(stats)
            stats.append((form, layout))
    return (*_read(buf, found, form_of_group, kind_of_group, stats, specs), lines)


def _read(buf: bytes, found: np.ndarray, form_of_group: np.ndarray, kind_of_group: np.ndarray,
          stats: list[tuple[Form, list[int]]], specs: list[list[int]]) -> tuple[Rows, SpecRows | None]:
    """The numbers and stamps of the rows of a known pattern, in one call of the scanner."""
    assert _linescan is not None
    forms = form_of_group[found[:, 2]]
    spec = kind_of_group[found[:, 2]]
    known = forms >= 0
    kept, forms, spec = found[known], forms[known], spec[known]
    layouts = [layout for _, layout in stats] + specs or [list(EMPTY_LAYOUT)]
    values, stamps = _linescan.numbers(buf, np.ascontiguousarray(kept[:, 0]), np.ascontiguousarray(kept[:, 1]),
                                       np.where(spec, forms + len(stats), forms).astype(np.int64),
                                       np.array(layouts, np.int64))
    value = np.frombuffer(values, np.float64).reshape(-1, len(FIELDS))
    stamp = np.frombuffer(stamps, np.int64).reshape(-1, 5)
    mixed = bool(spec.any())
    mine = value[~spec] if mixed else value
    month, day, hh, mm, ss = (stamp[~spec] if mixed else stamp).T
    numbers = {name: mine[:, i] for i, (name, _) in enumerate(FIELDS)}
    numbers["kv"] = numbers["kv"] / 100
    numbers["prefix_hit"] = numbers["prefix_hit"] / 100
    rows = Rows(month, day, hh, mm, ss, [f.engine for f, _ in stats], [f.marks for f, _ in stats],
                forms[~spec] if mixed else forms, numbers)
    if not mixed:
        return rows, None
    theirs = value[spec]
    return rows, SpecRows(spec, tuple(stamp.T), theirs[:, 0], theirs[:, 1], theirs[:, 2] / 100)


def spec_layout(form: SpecForm, line: bytes) -> list[int] | None:
    """A SpecDecoding form's numbers as ``numbers`` reads them (v1block.number_layout's order: the accepted and
    drafted counts and the rate in the first three fields, the others not printed), or None for a text it does not
    parse (more than 15 characters, a dot other than one before the last digit, as "%.1f" prints)."""
    k = len(FIELDS)
    ends, widths, dots = [8] * k, [0] * k, [0] * k
    for i, (a, b) in enumerate(form.spans):
        if a < 0:
            continue
        text = line[a:b]
        dot = text.count(b".")
        if not 0 < len(text) <= 15 or dot > 1 or (dot and text[-2:-1] != b"."):
            return None
        ends[i], widths[i], dots[i] = b, len(text), dot
    return [*ends, *widths, *dots, form.stamp]


def _reading(line: bytes, form_of: Reader) -> tuple[Form | SpecForm | None, list[int] | None]:
    """The form and number layout of a group's first line, kept per pattern (as the scanner forms it) and reader:
    a log repeats a few patterns in every block."""
    key = (line.translate(ZERO_DIGITS), tuple(ENGINE_DIGITS.findall(line)), form_of)
    if (known := _READINGS.get(key)) is not None:
        return known
    form = form_of(line)
    if isinstance(form, SpecForm):
        reading: tuple[Form | SpecForm | None, list[int] | None] = form, spec_layout(form, key[0])
    else:
        reading = form, number_layout(form, key[0], 0) if form is not None else None
    if len(_READINGS) >= 1024:
        _READINGS.clear()
    _READINGS[key] = reading
    return reading
