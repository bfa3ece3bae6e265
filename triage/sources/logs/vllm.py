"""vLLM server logs: the periodic stats line of every version, SpecDecoding lines and preemption warnings.

Formats, read from vLLM's own logging code:
- V0 (``llm_engine.py`` up to 0.5, ``metrics.py`` LoggingStatLogger after): "Avg prompt throughput: %.1f tokens/s,
  Avg generation throughput: %.1f tokens/s, Running: %d reqs, Swapped: %d reqs, Pending: %d reqs, GPU KV cache
  usage: %.1f%%, CPU KV cache usage: %.1f%%." every 5 s, plus "Prefix cache hit rate: GPU: %.2f%%, CPU: %.2f%%"
  and the scheduler's WARNING "Sequence group X is preempted by PreemptionMode.Y mode because there is not enough
  KV cache space ... total_num_cumulative_preemption=N"; "Speculative metrics: Draft acceptance rate: %.3f, ...".
- V1 (``v1/metrics/loggers.py``): "[Engine %03d: ]Avg prompt throughput: %.1f tokens/s, Avg generation
  throughput: %.1f tokens/s, Running: %d reqs, Waiting: %d reqs, [Deferred: %d reqs, ][Preemptions: %d, ]GPU KV
  cache usage: %.1f%%, Prefix cache hit rate: %.1f%%" every 10 s ("N Engines Aggregated: " with data parallelism),
  and "SpecDecoding metrics: [Mean acceptance length: %.2f, ...]Accepted: %d tokens, Drafted: %d tokens, ...".
Any prefix before the message (``(APIServer pid=N)``, docker compose, Kubernetes, journald) is ignored.
"""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from triage.sources.logs import v1scan
from triage.sources.logs.lines import K8S_PARTIAL, Clock, iter_lines, vllm_stamp
from triage.sources.logs.registry import LogFormat, register
from triage.sources.logs.series import (
    ColumnRuns,
    Columns,
    LogSeries,
    Sample,
    SampleColumns,
    SpecSample,
    Timeline,
    columns,
)
from triage.sources.logs.v1block import FRONT, PAD, ZERO_DIGITS, Block, Form, Rows, stats_rows
from triage.sources.logs.v1scan import SpecRows

STATS = re.compile(rb"(?:Engine (\d+): |(\d+) Engines Aggregated: )?Avg prompt throughput: ")
FIELD = re.compile(rb"(Avg prompt throughput|Avg generation throughput|Running|Waiting|Pending|Swapped|Deferred|"
                   rb"Preemptions|GPU KV cache usage|CPU KV cache usage|Prefix cache hit rate): (-?[\d.]+)")
V0_PREFIX = re.compile(rb"Prefix cache hit rate: GPU: ([\d.]+)%")
PREEMPTED = re.compile(rb"is preempted by PreemptionMode\.\w+ mode")
SPEC_V1 = re.compile(rb"SpecDecoding metrics: ")
SPEC_V0 = re.compile(rb"Speculative metrics: Draft acceptance rate: ([\d.]+)")
SPEC_FIELD = re.compile(rb"(Accepted|Drafted): (\d+) tokens|(?:Avg )?Draft acceptance rate: ([\d.]+)%")
MAX_NUM_SEQS = re.compile(rb"""['"]?max_num_seqs['"]?\s*[:=]\s*(\d+)""")
# A line of vLLM's own logger: "INFO 09-07 06:35:30 [loggers.py:123]" (0.7+) or "INFO 01-25 11:26:53
# llm_engine.py:706]" (older), with any wrapper before it.
SIGNATURE = re.compile(rb"(?:DEBUG|INFO|WARNING|ERROR) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w.]+\.py:\d+\]")
STATS_TEXT = re.compile(rb"Avg prompt throughput: [\d.]+ tokens/s, ")

# The last field every version prints: a stats line without it was cut (or wrapped) before its end.
COMPLETE = re.compile(rb"(?:Prefix cache hit rate|CPU KV cache usage): [\d.]+%")
# What starts a new record: a log level with vLLM's stamp, an ISO time, or a "(Process pid=N)" prefix.
NEW_RECORD = re.compile(rb"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\b|\d{4}-\d\d-\d\d[T ]\d\d:|"
                        rb"^\(\w+ pid=\d+\)|^\S+\s+\| ")
RECORD_START = re.compile(rb"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d")
# The common V1 line in one match (a fast path; any other form goes field by field through FIELD).
V1_FAST = re.compile(rb"Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: ([\d.]+) tokens/s, "
                     rb"Running: (\d+) reqs, Waiting: (\d+) reqs, (?:Preemptions: (\d+), )?GPU KV cache usage: "
                     rb"([\d.]+)%, Prefix cache hit rate: ([\d.]+)%")
# What makes a line worth reading; every other line is only counted (skipped) without a Python step of its own.
KEYWORDS = re.compile(rb"Avg prompt throughput|preempted by|Prefix cache hit rate: GPU|SpecDecoding metrics|"
                      rb"Speculative metrics|max_num_seqs")
STATS_KEY = b"Avg prompt throughput: "
V0_PREFIX_TEXT = b"Prefix cache hit rate: GPU: "  # V0's own prefix-cache line
RARE_KEYS = (b"preempted by", b"Prefix cache hit rate: GPU", b"SpecDecoding metrics", b"Speculative metrics",
             b"max_num_seqs")
ENGINE_AT = re.compile(rb"(?:Engine (\d+): |(\d+) Engines Aggregated: )$")
# Keywords of the rarer records, each behind a byte it holds that most logs never print (a memchr-speed test):
# only when the byte occurs is the keyword itself searched for.
RARE_BY_BYTE = ((b"D", (b"SpecDecoding metrics", b"Speculative metrics")), (b"M", (b"preempted by",)),
                (b"_", (b"max_num_seqs",)))
SCAN_RARE_BY_BYTE = ((b"D", (b"Speculative metrics",)), *RARE_BY_BYTE[1:])  # the C scanner reads SpecDecoding lines
SPEC_TEXT = b"SpecDecoding metrics"
MARK = b"Av"  # what read_bulk counts, in the block and in each line read, for the stats keyword
STATS_WORD = b"Avg prompt throughput"  # without the colon: also what feed counts to split records on one line
# Bytes of whole lines per block of parse_chunks (half that with threads), blocks read ahead of the parser and
# threads reading them: 2 MB blocks on one thread cost ~20 % less CPU than 1 MB ones; with threads, 1 MB blocks two
# ahead keep test_log_memory's bound (6.1 MB at once; 2 MB blocks three ahead held 15 MB).
BLOCK = 2 * 1024 * 1024
AHEAD = 2
WORKERS = 2
SMALL_BLOCK = 4096  # bytes: a block shorter than this goes line by line (a bulk read costs ~0.2 ms whatever its size)
V0_INTERVAL_S, V1_INTERVAL_S = 5.0, 10.0
PCT_FIELDS = {b"GPU KV cache usage", b"CPU KV cache usage", b"Prefix cache hit rate"}


def detect(head: bytes) -> bool:
    """Whether the text's head is a vLLM server log: its stats line, or lines of vLLM's logger naming a vLLM
    source file (a log that starts with the startup output has no stats line in its first 64 kB)."""
    if STATS_TEXT.search(head):
        return True
    stamped = SIGNATURE.findall(head)
    return len(stamped) >= 3 and b"vllm" in head.lower()


class VllmLogParser:
    """Feed lines one at a time (``feed``), then ``result()``; holds only the numbers, never the text."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.series = LogSeries("vllm_log", "vLLM server log", "vllm", V1_INTERVAL_S)
        self.v0 = self.v1 = False
        self.times = Timeline(self.series)
        self.held: bytes | None = None  # a stats line that ends early: the paste may have wrapped it
        self._parts: dict[str, ColumnRuns] = {}  # per engine, the samples read as columns, in order

    def feed(self, line: bytes) -> None:
        """One line; a stats line cut short is joined with the next line when that one starts no new record
        (an issue paste or a terminal wraps long lines at a fixed width)."""
        if self.held is not None:
            held, self.held = self.held, None
            if not NEW_RECORD.search(line[:80]):
                self.series.lines -= 1  # the two pieces are one line of the log
                line = held + line
            else:
                self._line(held, final=True)
        if line.count(b"Avg prompt throughput") > 1:
            for piece in _records(line):  # several records pasted on one line (newlines lost)
                self._line(piece)
            return
        self._line(line)

    def feed_block(self, block: bytes) -> None:
        """Whole lines (``block`` ends with a newline): only lines holding a keyword are read, one at a time as
        ``feed`` would; the others are counted and skipped in bulk."""
        if self.held is not None or b" stdout P " in block or b" stderr P " in block:
            for line in iter_lines([block]):  # a Kubernetes partial line or a held line: the careful path
                self.feed(line)
            return
        s = self.series
        physical = block.count(b"\n")
        consumed = 0
        line_end = -1
        for at in self._hits(block):
            if at <= line_end:
                continue  # a second keyword on a line already read
            start = block.rfind(b"\n", 0, at) + 1
            line_end = block.find(b"\n", at)
            consumed += 1
            self.feed(block[start:line_end].rstrip(b"\r"))
            if self.held is not None:  # a stats line cut short: its continuation is the next line
                nxt = block.find(b"\n", line_end + 1)
                if nxt < 0:
                    continue  # the block ends here: the held line waits for the next block's first line
                consumed += 1
                self.feed(block[line_end + 1:nxt].rstrip(b"\r"))
                line_end = nxt
        s.lines += physical - consumed
        s.skipped += physical - consumed

    def feed_buffer(self, buf: bytes, start: int, end: int, bulk: Bulk | None | bool = True) -> None:
        """The whole lines ``buf[start:end]`` (``buf`` holds FRONT bytes before and at least PAD after, never read
        as lines): when the block's stats lines are all of forms the careful path reads as V1 stats lines and no
        other line holds a keyword, they are read by numpy at once (``read_bulk``) and the rest counted; anything
        else goes to ``feed_block``. ``bulk``: ``read_bulk``'s answer when a worker thread read it already (True:
        read it here)."""
        if self.held is not None:
            bulk = None  # a stats line cut short at the last block's end: its continuation is read line by line
        elif bulk is True:
            bulk = read_bulk(buf, start, end)
        if not isinstance(bulk, Bulk):
            self.feed_block(buf[start:end])  # a line of another form somewhere: line by line
            return
        rows, s = bulk.rows, self.series
        times = self._times(*(bulk.spec.stamps if bulk.spec is not None else
                              (rows.month, rows.day, rows.hh, rows.mm, rows.ss)))
        if bulk.spec is not None:
            self._add_spec(bulk.spec, times[bulk.spec.spec])
            times = times[~bulk.spec.spec]
        if len(rows):
            self._add_stats(rows, times)
            self.v1 = True
        read = len(rows) + (len(bulk.spec) if bulk.spec is not None else 0)
        s.stats_lines += len(rows)
        s.lines += bulk.lines
        s.skipped += bulk.lines - read

    def _times(self, month: np.ndarray, day: np.ndarray, hh: np.ndarray, mm: np.ndarray,
               ss: np.ndarray) -> np.ndarray:
        """Times of a block's stamps, in line order: one midnight per day of the stamps (the clock moves on a year
        as it does line by line); a stamp that is no time sends them all through the timeline one by one."""
        n = len(month)
        if not n:
            return np.empty(0)
        days = month * 100 + day
        starts = [0, *(np.flatnonzero(days[1:] != days[:-1]) + 1).tolist()]
        clock = self.clock
        before = (clock.year, clock.last_month, clock.yearless)
        midnights = np.empty(n)
        for a, b in zip(starts, [*starts[1:], n], strict=True):
            midnight = clock.yearless_time(int(month[a]), int(day[a]), 0, 0, 0)
            midnights[a:b] = np.nan if midnight is None else midnight
        if ((hh > 23) | (mm > 59) | (ss > 60) | np.isnan(midnights)).any():
            clock.year, clock.last_month, clock.yearless = before  # a stamp that is no time: line by line
            stamps = zip(month.tolist(), day.tolist(), hh.tolist(), mm.tolist(), ss.tolist(), strict=True)
            return np.array([self.times.place(clock.yearless_time(*stamp)) for stamp in stamps])
        times = midnights + hh * 3600 + mm * 60 + ss
        self.times.last = float(times[-1])
        return times

    def _add_spec(self, spec: SpecRows, times: np.ndarray) -> None:
        """A block's SpecDecoding lines, as ``_spec`` reads each (NaN: a field the line does not print)."""
        cols = [times.tolist(), *([None if x != x else x for x in c.tolist()]
                                  for c in (spec.accepted, spec.drafted, spec.rate))]
        self.series.spec.extend(SpecSample(t, a, d, r) for t, a, d, r in zip(*cols, strict=True))

    def _add_stats(self, rows: Rows, times: np.ndarray) -> None:
        """Samples of a block's standard lines (``times``: theirs), by column, engines in the order their first line
        appears."""
        n = len(rows)
        cols: Columns = {"t": times, **rows.numbers, "swapped": np.full(n, np.nan)}
        labels = rows.engine
        if len(set(labels)) == 1:
            self._add_columns(labels[0], cols)
            return
        named = np.array(labels)[rows.form]
        for key in dict.fromkeys(named.tolist()):  # engines in the order they first appear, as line by line
            mine = named == key
            self._add_columns(key, {name: col[mine] for name, col in cols.items()})

    def _add_columns(self, key: str, cols: Columns) -> None:
        """A run of one engine's samples as columns, after any samples the careful path appended before it."""
        group = self.series.group(key)
        parts = self._parts.setdefault(key, ColumnRuns())
        if group:
            parts.append(columns(group))
            self.series.engines[key] = []  # the same key: the engines' order stays that of their first line
        parts.append(cols)

    @staticmethod
    def _hits(block: bytes) -> list[int]:
        """Offsets of the keywords in the block, in order: the stats keyword by bytes.find (memchr speed), the
        rarer ones by a regex only when one of them occurs in the block at all."""
        hits = []
        at = block.find(STATS_KEY)
        while at >= 0:
            hits.append(at)
            at = block.find(STATS_KEY, at + len(STATS_KEY))
        if any(k in block for k in RARE_KEYS):
            hits = sorted({*hits, *(m.start() for m in KEYWORDS.finditer(block))})
        return hits

    def _time(self, line: bytes) -> float:
        return self.times.place(self.clock.stamp(line))

    def _line(self, line: bytes, final: bool = False) -> None:
        s = self.series
        s.lines += 1
        if (key_at := line.find(STATS_KEY)) >= 0 and (m := _stats_match(line, key_at)):
            if not final and not COMPLETE.search(line, m.end()):
                s.lines -= 1
                self.held = line
                return
            self._stats(line, m)
        elif b"preempted by" in line and PREEMPTED.search(line):
            s.preemption_times.append(self._time(line))
        elif b"Prefix cache hit rate: GPU" in line and (p := V0_PREFIX.search(line)):
            self._v0_prefix(float(p.group(1)) / 100)
        elif b"SpecDecoding metrics" in line and (sm := SPEC_V1.search(line)):
            self._spec(line[sm.end():], self._time(line))
        elif b"Speculative metrics" in line and (sv := SPEC_V0.search(line)):
            s.spec.append(SpecSample(self._time(line), rate=float(sv.group(1))))
        elif b"max_num_seqs" in line and (mn := MAX_NUM_SEQS.search(line)):
            s.config["max_num_seqs"] = float(mn.group(1))
        else:
            s.skipped += 1

    def _stats(self, line: bytes, m: re.Match[bytes]) -> None:
        fast = V1_FAST.match(line, m.end() - len(b"Avg prompt throughput: "))
        if fast is not None:
            p, g, r, w, pre, kv, hit = fast.groups()
            self.v1 = True
            engine = m.group(1).decode() if m.group(1) else ("aggregated" if m.group(2) else "000")
            self.series.group(engine).append(Sample(
                self._time(line), float(p), float(g), float(r), float(w), None, float(kv) / 100, float(hit) / 100,
                float(pre) if pre is not None else None))
            self.series.stats_lines += 1
            return
        fields: dict[bytes, float] = {}
        for name, value in FIELD.findall(line, m.start()):
            try:
                fields[name] = float(value) / 100 if name in PCT_FIELDS else float(value)
            except ValueError:
                continue  # a number cut by the end of a paste
        if b"Avg generation throughput" not in fields and b"Running" not in fields:
            self.series.skipped += 1  # only the start of a stats line survived
            return
        self.v0 |= b"Pending" in fields or b"Swapped" in fields
        self.v1 |= b"Waiting" in fields
        if self.v0 and not self.v1:
            self.series.interval_s = V0_INTERVAL_S
        engine = m.group(1).decode() if m.group(1) else ("aggregated" if m.group(2) else "000")
        waiting = fields.get(b"Waiting", fields.get(b"Pending"))
        sample = Sample(self._time(line), fields.get(b"Avg prompt throughput"),
                        fields.get(b"Avg generation throughput"), fields.get(b"Running"), waiting,
                        fields.get(b"Swapped"), fields.get(b"GPU KV cache usage"),
                        fields.get(b"Prefix cache hit rate"), fields.get(b"Preemptions"))
        self.series.group(engine).append(sample)
        self.series.stats_lines += 1

    def _v0_prefix(self, rate: float) -> None:
        """V0 prints the prefix hit rate on its own line right after the stats line: attach it to that sample."""
        group = self.series.engines.get("000")
        if isinstance(group, list) and group and group[-1].prefix_hit is None:
            group[-1] = group[-1]._replace(prefix_hit=rate)

    def _spec(self, rest: bytes, t: float) -> None:
        sample = SpecSample(t)
        for name, count, pct in SPEC_FIELD.findall(rest):
            if name == b"Accepted":
                sample.accepted = float(count)
            elif name == b"Drafted":
                sample.drafted = float(count)
            elif pct:
                sample.rate = float(pct) / 100
        self.series.spec.append(sample)

    def result(self) -> LogSeries:
        if self.held is not None:
            held, self.held = self.held, None
            self._line(held, final=True)
        s = self.series
        for key, parts in self._parts.items():
            rest = s.engines[key]
            if rest:
                parts.append(columns(rest))
            s.engines[key] = SampleColumns(parts.columns())
        self._parts = {}
        s.settle()
        if self.v1:
            s.title, s.fmt = "vLLM V1 server log", "vllm_v1_log"
        elif self.v0:
            s.title, s.fmt = "vLLM V0 server log", "vllm_v0_log"
            s.preemptions_logged = True  # V0's scheduler warns on every preemption
        if not np.isnan(columns(s.samples)["preemptions"]).all():
            s.preemptions_logged = True  # newer V1 prints "Preemptions: N" whenever there was one
        return s


def _unusual(buf: bytes, start: int, end: int, pairs: tuple[np.ndarray, np.ndarray]) -> bool:
    """Whether the block ``buf[start:end]`` may hold a record other than a stats line or a line without keyword
    (V0's prefix line, speculation, preemption, max_num_seqs) or a Kubernetes partial line: then it is read line by
    line. ``pairs``: the block's 2-byte words at both alignments (``_pairs``)."""
    if any(byte in buf and any(k in buf for k in keys) for byte, keys in RARE_BY_BYTE):
        return True
    # V0's prefix line holds "U:" ("GPU: "), a Kubernetes partial line "P " (" stdout P "): 2-byte words found by
    # numpy (the GIL released), the substrings searched only in a block that holds the word
    if _holds(pairs, b"U:") and V0_PREFIX_TEXT in buf[start:end]:
        return True
    return _holds(pairs, b"P ") and (b" stdout P " in buf[start:end] or b" stderr P " in buf[start:end])


def _pairs(buf: bytes, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
    """The 2-byte words of ``buf[start:end]`` at even and at odd offsets: between them, every pair of bytes."""
    return (np.frombuffer(buf, "<u2", count=(end - start) // 2, offset=start),
            np.frombuffer(buf, "<u2", count=(end - start - 1) // 2, offset=start + 1))


def _holds(pairs: tuple[np.ndarray, np.ndarray], two: bytes) -> bool:
    word = int.from_bytes(two, "little")
    return bool((pairs[0] == word).any() or (pairs[1] == word).any())


def _count(pairs: tuple[np.ndarray, np.ndarray], two: bytes) -> int:
    word = int.from_bytes(two, "little")
    return int(np.count_nonzero(pairs[0] == word)) + int(np.count_nonzero(pairs[1] == word))


@dataclass(frozen=True)
class Bulk:
    """What the bulk path read of a block: its standard stats lines, its SpecDecoding lines (the C scanner only)
    and its count of lines."""

    rows: Rows
    spec: SpecRows | None
    lines: int


def read_bulk(buf: bytes, start: int, end: int) -> Bulk | None:
    """The block's stats lines read by numpy (v1block) after the C line scanner (v1scan) when it was built, or None
    when a line of it must be read line by line (a rare record, a Kubernetes partial line, a stats line of another
    form). Depends on the block alone, so blocks are read on worker threads while the parser, in order, takes what
    they read. A block of a few lines (the line two chunks cut) is read line by line: cheaper than the bulk steps."""
    if end - start < SMALL_BLOCK:
        return None
    if v1scan.available():
        return _scanned(buf, start, end)
    pairs = _pairs(buf, start, end)
    if _unusual(buf, start, end, pairs):
        return None
    blk = Block(buf)
    newlines = np.flatnonzero(blk.bytes[start:end] == 10)
    newlines += start
    rows = stats_rows(blk, start, newlines, _form)
    if rows is None:
        return None
    # Every stats keyword is in a line read: when the block holds no "Av" (of "Avg prompt throughput") beyond those
    # of the lines read, a numpy count, else by counting the keyword itself
    if _count(pairs, MARK) != int(np.array(rows.marks, dtype=np.int64)[rows.form].sum()) and \
            len(rows) != buf.count(STATS_WORD, start, end):
        return None
    return Bulk(rows, None, len(newlines))


def _scanned(buf: bytes, start: int, end: int) -> Bulk | None:
    """``read_bulk`` by the C line scanner: the same rare-record screens but SpecDecoding lines, which it reads too,
    and every stats and SpecDecoding keyword in a line read (each read line holds exactly one)."""
    if any(byte in buf and any(k in buf for k in keys) for byte, keys in SCAN_RARE_BY_BYTE) or \
            v1scan.count(buf, start, end, V0_PREFIX_TEXT):
        return None
    got = v1scan.scanned_rows(buf, start, end, _scan_form)  # None: a Kubernetes partial line, or too many forms
    if got is None:
        return None
    rows, spec, lines = got
    specs = v1scan.count(buf, start, end, SPEC_TEXT) if b"D" in buf else 0
    if len(rows) != v1scan.count(buf, start, end, STATS_WORD) or specs != (len(spec) if spec is not None else 0):
        return None
    return Bulk(rows, spec, lines)


def _scan_form(line: bytes) -> Form | v1scan.SpecForm | None:
    """``_form``, or the SpecDecoding form of a line ``feed`` reads as one (``_spec_form``)."""
    return _form(line) or _spec_form(line)


def _spec_form(line: bytes) -> v1scan.SpecForm | None:
    """Where ``feed`` reads a SpecDecoding line's numbers (``_line``'s branches in their order, then ``_spec``), or
    None when it would read the line any other way or without a stamp. As for ``_form``, what is read depends on
    where the line's digits are: kept per pattern by the caller."""
    if line.count(STATS_WORD) or line.count(SPEC_TEXT) != 1:
        return None  # a stats keyword: the stats branch or several records (feed splits them)
    if b"preempted by" in line and PREEMPTED.search(line) or \
            b"Prefix cache hit rate: GPU" in line and V0_PREFIX.search(line):
        return None  # an earlier branch of _line
    sm = SPEC_V1.search(line)
    stamp = vllm_stamp(line)
    if sm is None or stamp is None:
        return None
    spans = {b"Accepted": (-1, -1), b"Drafted": (-1, -1), b"%": (-1, -1)}
    for m in SPEC_FIELD.finditer(line, sm.end()):  # _spec: the last of each field wins
        spans[m.group(1) or b"%"] = m.span(2) if m.group(1) else m.span(3)
    return v1scan.SpecForm((spans[b"Accepted"], spans[b"Drafted"], spans[b"%"]), stamp.start(1))


def _form(line: bytes) -> Form | None:
    """Where ``feed`` reads a V1 stats line's values (v1block.Form), by the same steps (``_line``, ``_stats``,
    ``Clock.stamp``), or None when it would read it any other way (held, field by field, untimed, several
    records). Every pattern of those steps matches digits as ``\\d``: the reading depends on where a line's digits
    are, not on which, so it is kept per line with its digits zeroed (one read per form of the log, not per block)
    and only the engine's label is taken from the line's own digits."""
    form = _zeroed_form(line.translate(ZERO_DIGITS))
    if form is None or form.engine_digits is None:
        return form
    return replace(form, engine=line[form.engine_digits[0]:form.engine_digits[1]].decode())


@lru_cache(maxsize=1024)
def _zeroed_form(line: bytes) -> Form | None:
    key_at = line.find(STATS_KEY)
    if key_at < 0 or line.count(STATS_WORD) != 1:
        return None
    m = _stats_match(line, key_at)
    fast = V1_FAST.match(line, key_at) if m is not None else None
    if m is None or fast is None or not COMPLETE.search(line, m.end()):
        return None
    stamp = vllm_stamp(line)
    if stamp is None:
        return None
    engine = m.group(1).decode() if m.group(1) else ("aggregated" if m.group(2) else "000")
    return Form(tuple(fast.span(i) for i in range(1, 8)), stamp.start(1), engine,
                m.span(1) if m.group(1) else None, line.count(MARK))


def _stats_match(line: bytes, key_at: int) -> re.Match[bytes] | None:
    """STATS at the stats keyword found at ``key_at`` (the engine prefix, if any, just before it)."""
    head = max(0, key_at - 32)
    prefix = ENGINE_AT.search(line, head, key_at)
    return STATS.match(line, prefix.start() if prefix else key_at)


def _records(line: bytes) -> list[bytes]:
    """A line holding several log records, split where each record's level and stamp begin."""
    starts = [m.start() for m in RECORD_START.finditer(line)] or [0]
    starts[0] = 0
    return [line[a:b] for a, b in zip(starts, [*starts[1:], len(line)], strict=True)]


def parse(lines: Iterable[bytes]) -> LogSeries:
    parser = VllmLogParser()
    for line in lines:
        parser.feed(line)
    return parser.result()


def parse_chunks(chunks: Iterable[bytes]) -> LogSeries:
    """``parse`` over byte chunks: whole lines handed over in blocks (the fast path for large logs), the line cut by
    a block's end kept for the next one. With the C line scanner, each chunk's whole lines are a block read in place
    (``_spans``), on this thread: worker threads made it slower (0.173 s against 0.136 s for the bench log, the
    other core busy). Without it, blocks of about BLOCK bytes are joined for numpy, and when the machine has a core
    to spare (``_threads``) blocks of half that size are read on WORKERS threads from the second block on (numpy
    and the file's reads release the GIL), at most AHEAD blocks ahead of the parser, which takes them in order."""
    parser = VllmLogParser()
    threads = 0 if v1scan.available() else _threads()  # with the C scanner, threads cost more than they gave
    ahead = AHEAD if threads else 0
    pending: deque[tuple[Future[Bulk | None] | None, bytes, int, int]] = deque()
    with ExitStack() as stack:
        pool: ThreadPoolExecutor | None = None
        blocks: _blocks | _spans = _spans(chunks) if v1scan.available() else \
            _blocks(chunks, max(1, BLOCK // 2) if threads else BLOCK)
        for buf, start, end in blocks:
            if pool is None and pending and threads:  # a second block: the log is large enough for threads
                pool = stack.enter_context(ThreadPoolExecutor(threads, thread_name_prefix="vllm-log"))
                pending = deque((pool.submit(read_bulk, b, s, e), b, s, e) for _, b, s, e in pending)
            pending.append((pool.submit(read_bulk, buf, start, end) if pool else None, buf, start, end))
            while len(pending) > ahead:
                _take(parser, *pending.popleft())
        while pending:
            _take(parser, *pending.popleft())
    if blocks.rest:
        for line in iter_lines([blocks.rest]):  # a paste cut mid-line still counts what it holds
            parser.feed(line)
    return parser.result()


def _threads() -> int:
    """WORKERS when this process may use two cores or more and the load average leaves one of them idle, else 0:
    the threads hand the GIL to each other at every numpy call, which cost 25-40 % more CPU in all (a 2-core
    machine at load 5: 0.41-0.44 s of CPU and no shorter wall time than 0.28-0.33 s on one thread), so they pay
    only with a core nothing else wants."""
    try:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        load = os.getloadavg()[0]
    except (OSError, AttributeError):  # no load average (Windows): one thread
        return 0
    return WORKERS if cores >= 2 and load <= cores - 1 else 0


def _take(parser: VllmLogParser, read: Future[Bulk | None] | None, buf: bytes, start: int, end: int) -> None:
    parser.feed_buffer(buf, start, end, read.result() if read is not None else True)


class _blocks:
    """Blocks of whole lines from byte chunks, as (buffer, start, end): about ``size`` bytes each, with FRONT bytes
    before and PAD after; ``rest`` holds what follows the last whole line once the chunks are used up."""

    def __init__(self, chunks: Iterable[bytes], size: int) -> None:
        self.chunks = chunks
        self.size = size
        self.rest = b""

    def __iter__(self) -> Iterator[tuple[bytes, int, int]]:
        parts: list[bytes] = []
        size = 0
        for chunk in self.chunks:
            parts.append(chunk)
            size += len(chunk)
            if size >= self.size:
                yield from self._cut(parts)
                parts, size = [], 0
        yield from self._cut(parts)

    def _cut(self, parts: list[bytes]) -> Iterator[tuple[bytes, int, int]]:
        """The whole lines of ``rest`` + ``parts`` as a block; what follows them becomes ``rest``."""
        buf = b"".join([bytes(FRONT), self.rest, *parts, bytes(PAD)])
        size = len(buf) - PAD
        end = _lines_end(buf, FRONT, size)
        self.rest = buf[end:size]
        if end > FRONT:
            yield buf, FRONT, end


class _spans:
    """Blocks of whole lines from byte chunks without copying them, as (buffer, start, end), for the C line scanner
    (which needs no FRONT or PAD): each chunk's whole lines in place, the line cut between two chunks joined on its
    own; ``rest`` holds what follows the last whole line once the chunks are used up."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self.chunks = chunks
        self.rest = b""

    def __iter__(self) -> Iterator[tuple[bytes, int, int]]:
        for chunk in self.chunks:
            start = 0
            if self.rest:
                nl = chunk.find(b"\n")
                if nl < 0:
                    self.rest += chunk
                    continue
                head, self.rest = self.rest + chunk[:nl + 1], b""
                yield from self._whole(head, 0)
                if self.rest:  # a Kubernetes partial line continues in this chunk: the two are read as one block
                    chunk, self.rest = self.rest + chunk[nl + 1:], b""
                else:
                    start = nl + 1
            yield from self._whole(chunk, start)

    def _whole(self, buf: bytes, start: int) -> Iterator[tuple[bytes, int, int]]:
        """The whole lines of ``buf[start:]`` as a block; what follows them becomes ``rest``."""
        end = _lines_end(buf, start, len(buf))
        self.rest = buf[end:]
        if end > start:
            yield buf, start, end


def _lines_end(buf: bytes, start: int, stop: int) -> int:
    """Where the whole lines of ``buf[start:stop]`` end (``start``: none), a last Kubernetes partial line left out:
    the next line completes it, so it waits for the next block."""
    end = buf.rfind(b"\n", start, stop) + 1
    if end <= start:
        return start
    last = max(buf.rfind(b"\n", start, end - 1) + 1, start)
    return last if K8S_PARTIAL.match(buf[last:end - 1]) else end


register(LogFormat("vllm_log", "vLLM server log", detect, parse, parse_chunks, rank=10))
