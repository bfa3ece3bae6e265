"""vLLM V1 stats lines read in bulk: lines compared byte for byte with one line of their form, numbers parsed by numpy.

A block of a log is a bytes buffer of whole lines, with FRONT zero bytes before and at least PAD after. Only lines
that a line of the same form proves to be read as the careful path reads them are returned, with their numbers (a
run of digits with at most one dot before the last: vLLM prints "%.1f" and "%d"), parsed from 8-byte words without
a Python step per line. The caller decides, by counting the stats keyword, whether they are all the block's stats
lines (else the block goes the careful way, line by line).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

PAD = 16  # bytes after the block's end that a read of 8-byte words may touch (never parsed)
U64 = np.uint64
ZEROS = U64(0x3030303030303030)  # eight ASCII '0'


# Top L bytes of a word (the number's characters when it ends the word), per L.
RUN_MASK = np.array([((1 << (8 * L)) - 1) << (8 * (8 - L)) if L else 0 for L in range(9)], dtype=np.uint64)


def _eight_digits(x: np.ndarray) -> np.ndarray:
    """The integers of words of eight ASCII digits (the first character most significant), in a few word
    operations per number (the SWAR method simdjson uses)."""
    v = x - ZEROS
    v = v * U64(10) + (v >> U64(8))
    lo = (v & U64(0x000000FF000000FF)) * U64(100 + (1000000 << 32))
    hi = ((v >> U64(16)) & U64(0x000000FF000000FF)) * U64(1 + (10000 << 32))
    return ((lo + hi) >> U64(32)) & U64(0xFFFFFFFF)


class Block:
    """A bytes buffer viewed as bytes and as aligned little-endian words, for reads at many offsets at once."""

    def __init__(self, buf: bytes | np.ndarray) -> None:
        self.buf = buf if isinstance(buf, bytes) else b""  # the text, for the lines read one by one
        self.bytes = np.frombuffer(buf, np.uint8)
        self.words = np.frombuffer(buf, "<u8", count=self.bytes.size // 8)

    def word(self, pos: np.ndarray) -> np.ndarray:
        """The 8 bytes starting at each offset, as a word (two aligned reads shifted together)."""
        q = pos >> 3
        s = (pos & 7).astype(np.uint64) << U64(3)
        return (self.words[q] >> s) | ((self.words[q + 1] << U64(1)) << (U64(63) - s))


@dataclass(frozen=True)
class Form:
    """Where the careful path (``VllmLogParser.feed``) reads the numbers of one stats line: the spans of the
    prompt, generation, running, waiting, preemptions ((-1, -1): not printed), KV and prefix-hit texts, the offset
    of the stamp's month digits, the engine label and the span of the engine's digits (compared as text); ``marks``:
    how often the line holds the caller's mark (a short text the caller counts in the whole block)."""

    spans: tuple[tuple[int, int], ...]
    stamp: int
    engine: str
    engine_digits: tuple[int, int] | None
    marks: int = 0


@dataclass
class Rows:
    """The standard stats lines of a block, in order: stamp fields, engine label and the Sample numbers."""

    month: np.ndarray
    day: np.ndarray
    hh: np.ndarray
    mm: np.ndarray
    ss: np.ndarray
    engine: list[str]        # one label per form (see ``form``)
    marks: list[int]         # per form, Form.marks
    form: np.ndarray         # per line, the index of its form in ``engine``
    numbers: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.month)


WIDTH = 320      # the longest line read in bulk (a stats line is about 220 bytes, plus a wrapper's prefix)
FRONT = WIDTH    # zero bytes before a block's first line, so that every line's window lies inside the buffer
FORM_LINES = 16  # a form is read by Python (~50 µs); past one form per FORM_LINES lines, line by line is cheaper
MIN_FORMS = 16
FIELDS = (("prompt_tps", True), ("gen_tps", True), ("running", False), ("waiting", False), ("preemptions", False),
          ("kv", True), ("prefix_hit", True))  # Form.spans' order; True: "%.1f", False: "%d"
MIX = U64(0x9E3779B97F4A7C15)
ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")
EMPTY_LAYOUT = (0,) * (3 * len(FIELDS) + 1)  # a layout table's one row when no line has a layout
STAMP_DIGITS = np.array([0, 1, 3, 4, 6, 7, 9, 10, 12, 13])  # the digits of "MM-DD hh:mm:ss" from the month's
# Per line length, the bits of a packed row that fall inside the line (rows are right-aligned).
IN_LINE = np.packbits(np.arange(WIDTH) >= WIDTH - np.arange(WIDTH + 1)[:, None], axis=1)


def number_layout(form: Form, line: bytes, offset: int) -> list[int] | None:
    """A form's numbers as the bulk parse takes them: per field its end column, its width (0: not printed) and
    whether it has a dot as its second last character, then the stamp's column; None for a number it does not
    parse (more than 7 characters, a dot elsewhere, two dots)."""
    ends, widths, dots = [], [], []
    for (start, end), (_, decimal) in zip(form.spans, FIELDS, strict=True):
        text = line[start:end] if start >= 0 else b""
        dot = text.count(b".")
        if len(text) > 7 or dot > 1 or (dot and (not decimal or text[-2:-1] != b".")):
            return None
        ends.append(offset + end if start >= 0 else 8)
        widths.append(len(text))
        dots.append(dot)
    return [*ends, *widths, *dots, offset + form.stamp]


@lru_cache(maxsize=1024)
def _first_line(zeroed: bytes, width: int, form: Form | None) -> tuple[np.ndarray, tuple[int, ...] | None]:
    """For the first line of a digit pattern (its digits zeroed: where they are is all that matters here), right-
    aligned in rows ``width`` wide: the mask of the bytes compared in the lines of its pattern (its own bytes but
    digits, and the engine's digits, which name the engine) and its numbers' layout (``number_layout``; None: its lines
    are read some other way). Kept per pattern: a log repeats a few in every block."""
    offset = width - len(zeroed)  # the column of the line's first byte
    compared = np.zeros(width, bool)
    compared[offset:] = np.frombuffer(zeroed, np.uint8) != ord("0")
    if form is not None and form.engine_digits is not None:
        compared[offset + form.engine_digits[0]:offset + form.engine_digits[1]] = True
    mask = np.where(compared, np.uint8(255), np.uint8(0)).view("<u8")
    mask.flags.writeable = False  # shared by every block that meets the pattern
    layout = number_layout(form, zeroed, offset) if form is not None else None
    return mask, tuple(layout) if layout is not None else None


def stats_rows(blk: Block, start: int, newlines: np.ndarray,
               form_of: Callable[[bytes], Form | None]) -> Rows | None:
    """The lines of a block (from ``start``; ``newlines``: the offsets of its lines' ends) that read as stats
    lines of a form ``form_of`` accepts, or None when they take more than one form per FORM_LINES lines.

    Lines ending in "%" (a "\\r" before the newline aside, as the careful path strips it) are copied right-aligned
    into rows as wide as the longest (zero before the line's start) and grouped by where their digits are; the first
    line of a group is read by ``form_of`` (the careful path's own reading), and every line identical to it in all
    but the digits of its numbers and stamp takes its form: the careful path reads those lines the same way, only
    the values differ. The values are then parsed from their positions."""
    a = blk.bytes
    last = a[newlines - 1]
    ends_pct = last == 37
    crlf = last == 13
    if crlf.any():  # "\r\n": the careful path strips the "\r" (a log without any skips this)
        crlf &= a[newlines - 2] == 37
        ends_pct |= crlf
    idx = np.flatnonzero(ends_pct)  # lines ending "%"
    line_end = newlines[idx] - crlf[idx]
    line_start = np.where(idx > 0, newlines[np.maximum(idx - 1, 0)] + 1, start)
    length = line_end - line_start
    n = len(idx)
    ok = length <= WIDTH
    width = min(WIDTH, -(-int(length.max(initial=1)) // 64) * 64)  # the longest line, in 64 bytes (8 words of bits)
    windows = np.lib.stride_tricks.as_strided(a, shape=(len(a) - width + 1, width), strides=(1, 1))
    rows = np.zeros((n + 1, width), np.uint8)  # one zero row more: a word read at a row's end stays inside
    rows[:n] = windows[line_end - width]  # right-aligned: a row's first columns may hold the lines before it
    words = rows.view("<u8")
    digit = (rows[:n] - np.uint8(48)) < 10
    in_line = IN_LINE[np.minimum(length, width), (WIDTH - width) // 8:]
    packed_words = (np.packbits(digit, axis=1) & in_line).view("<u8")  # where the line's own digits are
    h = length.astype(np.uint64)
    for word in packed_words.T:
        h = (h * MIX) ^ word
    form_of_row = np.full(n, -1)
    engines: list[str] = []
    marks: list[int] = []
    layouts: list[tuple[int, ...]] = []
    limit, read = max(MIN_FORMS, n // FORM_LINES), 0
    todo = np.flatnonzero(ok)
    while len(todo):  # a round: the first line of each digit pattern read, the others compared with it at once
        order = np.argsort(h[todo], kind="stable")
        ordered = h[todo][order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        group = np.empty(len(todo), np.int64)
        group[order] = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(todo)]))
        firsts = todo[order[starts]]
        read += len(firsts)
        if read > limit:
            return None
        masks = np.empty((len(firsts), width // 8), np.uint64)
        taken = np.full(len(firsts), -1)
        for i, first in enumerate(firsts.tolist()):
            line = blk.buf[int(line_start[first]):int(line_end[first])]
            form = form_of(line)
            masks[i], layout = _first_line(line.translate(ZERO_DIGITS), width, form)
            if form is not None and layout is not None:  # else these lines are read some other way
                taken[i] = len(layouts)
                engines.append(form.engine)
                marks.append(form.marks)
                layouts.append(layout)
        first_of = firsts[group]
        differ = np.bitwise_xor(words[:n] if len(todo) == n else words[todo], words[first_of])
        differ &= masks[group]  # in place: each temporary of a block's rows costs as much as the operation
        same = ~differ.any(axis=1)
        for mine, first in zip(packed_words[todo].T, packed_words[first_of].T, strict=True):
            same &= mine == first  # the digit bits, a column of words at a time (a few columns)
        form_of_row[todo[same]] = taken[group[same]]
        todo = todo[~same]  # lines that differ from their pattern's first line: read in the next round
    ok &= form_of_row >= 0
    table = np.array(layouts or [EMPTY_LAYOUT])[np.maximum(form_of_row, 0)]
    flat = Block(rows)  # the rows one after another
    base = np.arange(n) * width
    keep = np.flatnonzero(ok)
    return read_rows(flat, base[keep], table[keep], engines, marks, form_of_row[keep])


def read_rows(blk: Block, base: np.ndarray, table: np.ndarray, engines: list[str], marks: list[int],
              form: np.ndarray) -> Rows:
    """Rows of the lines whose first byte is at ``base`` in ``blk``, each read by the layout in its row of
    ``table`` (``number_layout``; ``form``: the index of each line's form in ``engines`` and ``marks``)."""
    k = len(FIELDS)
    ends, widths, dots = table[:, :k], table[:, k:2 * k], table[:, 2 * k:3 * k].astype(bool)
    value = _values(blk, (base[:, None] + ends - 8).ravel(), widths.ravel(), dots.ravel()).reshape(-1, k)
    value[widths == 0] = np.nan  # not printed (preemptions)
    numbers = {name: value[:, i] for i, (name, _) in enumerate(FIELDS)}
    numbers["kv"] = numbers["kv"] / 100
    numbers["prefix_hit"] = numbers["prefix_hit"] / 100
    at = base + table[:, 3 * k]
    digits_at = (blk.bytes[at[:, None] + STAMP_DIGITS] - np.uint8(48)).astype(np.int64)
    month, day, hh, mm, ss = (digits_at[:, 0::2] * 10 + digits_at[:, 1::2]).T  # "MM-DD hh:mm:ss"
    return Rows(month, day, hh, mm, ss, engines, marks, form, numbers)


def _values(blk: Block, pos: np.ndarray, widths: np.ndarray, dots: np.ndarray) -> np.ndarray:
    """The numbers whose text (``widths`` characters, with a dot as the second last where ``dots``) ends the 8
    bytes at each of ``pos``."""
    word = blk.word(pos)
    run = RUN_MASK[widths]
    digits = (word & run) | (ZEROS & ~run)
    dotless = ((digits & U64(0x0000FFFFFFFFFFFF)) << U64(8)) | (digits & U64(0xFF00000000000000)) | U64(0x30)
    value = _eight_digits(np.where(dots, dotless, digits)).astype(np.float64)
    return np.where(dots, value / 10, value)
