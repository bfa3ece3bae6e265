"""vLLM V1 stats lines read in bulk: each whole line checked byte for byte and its numbers parsed by numpy.

A block of a log is a bytes buffer of whole lines followed by at least ``PAD`` more bytes. Every line ending in
"%" is read backwards from its end as the standard V1 stats line (the form ``vllm.V1_LINE`` matches, ending at the
prefix hit rate): each literal piece is compared as 8-byte words, each number is a run of digits with at most one
dot before its last digit (vLLM prints "%.1f" and "%d"), parsed from its 8-byte word without a Python step per
line. Only lines that pass every check are returned; the caller decides, by counting the stats keyword, whether
they are all the block's stats lines (else the block goes the careful way, line by line).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from triage.sources.logs.lines import VLLM_STAMP

PAD = 16  # bytes after the block's end that a read of 8-byte words may touch (never parsed)
KEY = b"Avg prompt throughput: "
STAMP_LEN = len(b"INFO 09-07 06:35:30")
U64 = np.uint64
ZEROS = U64(0x3030303030303030)  # eight ASCII '0'


def _word_of(text: bytes) -> tuple[np.uint64, np.uint64]:
    """(value, mask) of up to 8 bytes as a little-endian word: byte 0 of the text is the word's lowest byte."""
    return U64(int.from_bytes(text.ljust(8, b"\0"), "little")), U64((1 << (8 * len(text))) - 1)


def _words(text: bytes) -> list[tuple[np.uint64, np.uint64]]:
    return [_word_of(text[i:i + 8]) for i in range(0, len(text), 8)]


def _table(f: Callable[[int], int]) -> np.ndarray:
    return np.array([f(v) for v in range(256)], dtype=np.int64)


def _trailing(v: int) -> int:
    """Set bits counted down from bit 7: how many of a word's last bytes are number characters."""
    n = 0
    while n < 8 and v >> (7 - n) & 1:
        n += 1
    return n


TRAIL = _table(_trailing)
# Top L bytes of a word (the number's characters when it ends the word), per L.
RUN_MASK = np.array([((1 << (8 * L)) - 1) << (8 * (8 - L)) if L else 0 for L in range(9)], dtype=np.uint64)
RUN_BITS = np.array([((1 << L) - 1) << (8 - L) for L in range(9)], dtype=np.int64)
DOT_AT_6 = 1 << 6  # "%.1f": the dot is the second last character


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

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.bytes = np.frombuffer(buf, np.uint8)
        self.words = np.frombuffer(buf, "<u8", count=len(buf) // 8)

    def word(self, pos: np.ndarray) -> np.ndarray:
        """The 8 bytes starting at each offset, as a word (two aligned reads shifted together)."""
        q = pos >> 3
        s = (pos & 7).astype(np.uint64) << U64(3)
        return (self.words[q] >> s) | ((self.words[q + 1] << U64(1)) << (U64(63) - s))

    def literal(self, start: np.ndarray, text: bytes) -> np.ndarray:
        """Where ``text`` is at each offset."""
        ok = np.ones(len(start), dtype=bool)
        for i, (value, mask) in enumerate(_words(text)):
            ok &= (self.word(start + 8 * i) & mask) == value
        return ok

    def number_before(self, end: np.ndarray, dot: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, value, ok) of the number that ends just before each offset: 1–7 digits, and with ``dot`` at
        most one dot as the second last character (as vLLM's "%.1f" prints). Not ok: anything else."""
        w = self.word(end - 8)
        b = w.astype("<u8", copy=False).view(np.uint8).reshape(-1, 8)
        digit = (b - np.uint8(48)) < 10
        dots = b == 46
        run = TRAIL[np.packbits(digit | dots, axis=1, bitorder="little")[:, 0]]
        in_run = np.packbits(dots, axis=1, bitorder="little")[:, 0].astype(np.int64) & RUN_BITS[run]
        padded = (w & RUN_MASK[run]) | (ZEROS & ~RUN_MASK[run])
        if dot:
            has_dot = in_run == DOT_AT_6
            ok = (run >= 1) & (run <= 7) & ((in_run == 0) | (has_dot & (run >= 2)))
            dotless = ((padded & U64(0x0000FFFFFFFFFFFF)) << U64(8)) | (padded & U64(0xFF00000000000000)) | U64(0x30)
            value = _eight_digits(np.where(has_dot, dotless, padded)).astype(np.float64)
            value = np.where(has_dot, value / 10, value)
        else:
            ok = (run >= 1) & (run <= 7) & (in_run == 0)
            value = _eight_digits(padded).astype(np.float64)
        return end - run, value, ok


# The stats line after the stamp's head, read backwards from its end: (literal, number field, has a dot).
TAIL = b"%, Prefix cache hit rate: "
GPU = b"GPU KV cache usage: "
PLAIN = b" reqs, "
PREEMPT = b" reqs, Preemptions: "
WAITING = b" reqs, Waiting: "
RUNNING = b" tokens/s, Running: "
GENERATION = b" tokens/s, Avg generation throughput: "


@dataclass
class Rows:
    """The standard stats lines of a block, in order: stamp fields, engine label and the Sample numbers."""

    month: np.ndarray
    day: np.ndarray
    hh: np.ndarray
    mm: np.ndarray
    ss: np.ndarray
    engine: list[str]        # one label per head form (see ``form``)
    form: np.ndarray         # per line, the index of its head form in ``engine``
    numbers: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.month)


MAX_FORMS = 8  # distinct heads (" [loggers.py:123] Engine 000: ") tried per block before giving up


def stats_rows(blk: Block, newlines: np.ndarray, engine_of: Callable[[bytes], str]) -> Rows | None:
    """The block's lines that are standard V1 stats lines (``newlines``: the offsets of its whole lines' ends),
    or None when their heads take more forms than MAX_FORMS."""
    a = blk.bytes
    idx = np.flatnonzero(a[np.maximum(newlines - 1, 0)] == 37)  # lines ending "%"
    idx = idx[newlines[idx] >= 1]
    line_end = newlines[idx]
    line_start = np.where(idx > 0, newlines[np.maximum(idx - 1, 0)] + 1, 0)
    ok = np.ones(len(idx), dtype=bool)

    def back(pos: np.ndarray, floor: int = 8) -> np.ndarray:
        """``pos`` where a read stays inside the buffer; rows that would read before it are not ok."""
        nonlocal ok
        ok &= pos >= floor
        return np.maximum(pos, floor)

    pos = back(line_end - 1)
    hit_start, hit, good = blk.number_before(pos, dot=True)
    ok &= good
    pos = back(hit_start - len(TAIL))
    ok &= blk.literal(pos, TAIL)
    kv_start, kv, good = blk.number_before(pos, dot=True)
    ok &= good
    pos = back(kv_start - len(GPU))
    ok &= blk.literal(pos, GPU)
    pos = back(pos, 16)
    plain = blk.literal(pos - len(PLAIN), PLAIN)
    pre_start, pre, good = blk.number_before(pos - 2, dot=False)
    preempted = ~plain & good & blk.literal(pos - 2, b", ")
    preempted &= blk.literal(np.maximum(pre_start - len(PREEMPT), 0), PREEMPT) & (pre_start >= len(PREEMPT) + 8)
    ok &= plain | preempted
    pos = back(np.where(plain, pos - len(PLAIN), pre_start - len(PREEMPT)))
    fields = {}
    for name, literal, dot in (("waiting", WAITING, False), ("running", RUNNING, False),
                               ("gen_tps", GENERATION, True), ("prompt_tps", KEY, True)):
        start, fields[name], good = blk.number_before(pos, dot)
        ok &= good
        pos = back(start - len(literal))
        ok &= blk.literal(pos, literal)
    key_at = pos
    form = np.full(len(idx), -1)
    heads: list[bytes] = []
    labels: list[str] = []
    todo = ok.copy()
    while todo.any():
        if len(heads) == MAX_FORMS:
            return None
        first = int(np.argmax(todo))
        head = _head(blk.buf, int(line_start[first]), int(key_at[first]))
        if head is None:
            todo[first] = ok[first] = False
            continue
        mine = todo & blk.literal(np.maximum(key_at - len(head), 0), head)
        form[mine] = len(heads)
        heads.append(head)
        labels.append(engine_of(head))
        todo &= ~mine
        todo[first] = False
    head_len = np.array([len(h) for h in heads] or [0])[np.maximum(form, 0)]
    stamp_at = key_at - head_len - STAMP_LEN
    ok &= (form >= 0) & (stamp_at >= line_start)
    stamp = np.stack([blk.word(np.maximum(stamp_at, 0) + 8 * i) for i in range(3)], axis=1)
    b = stamp.astype("<u8", copy=False).view(np.uint8).reshape(-1, 24)
    ok &= (stamp[:, 0] & U64(0xFFFFFFFFFF)) == U64(int.from_bytes(b"INFO ", "little"))
    for at, char in ((7, b"-"), (10, b" "), (13, b":"), (16, b":")):
        ok &= b[:, at] == char[0]
    digits = b[:, [5, 6, 8, 9, 11, 12, 14, 15, 17, 18]] - np.uint8(48)
    ok &= (digits < 10).all(axis=1)
    tens = digits.astype(np.int64)
    two = [tens[:, i] * 10 + tens[:, i + 1] for i in range(0, 10, 2)]
    long_prefix = np.flatnonzero(ok & (stamp_at - line_start >= STAMP_LEN))
    for row in long_prefix.tolist():  # a wrapper as long as a stamp: the line's first stamp must be this one
        if VLLM_STAMP.search(blk.buf, int(line_start[row]), int(stamp_at[row])):
            ok[row] = False
    keep = np.flatnonzero(ok)
    pre_col = np.where(preempted, pre, np.nan)
    numbers = {"prompt_tps": fields["prompt_tps"][keep], "gen_tps": fields["gen_tps"][keep],
               "running": fields["running"][keep], "waiting": fields["waiting"][keep],
               "kv": kv[keep] / 100, "prefix_hit": hit[keep] / 100, "preemptions": pre_col[keep]}
    month, day, hh, mm, ss = (t[keep] for t in two)
    return Rows(month, day, hh, mm, ss, labels, form[keep], numbers)


def _head(buf: bytes, line_start: int, key_at: int) -> bytes | None:
    """What a stats line holds between its stamp and the stats keyword (" [loggers.py:123] Engine 000: "), read
    by vLLM's own line pattern, or None when the line is not of that form."""
    from triage.sources.logs.vllm import V1_LINE

    m = V1_LINE.search(buf, line_start, buf.find(b"\n", key_at))
    if m is None or m.start(8) - len(KEY) != key_at:
        return None
    return buf[m.end(5):key_at]
