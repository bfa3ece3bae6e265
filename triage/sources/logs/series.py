"""What a server log says over time: per-engine stats samples, preemptions and speculation, and counts."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import repeat
from operator import itemgetter
from typing import NamedTuple, overload

import numpy as np


class Sample(NamedTuple):
    """One periodic stats line of one engine (None = the line's version does not print that field)."""

    t: float
    prompt_tps: float | None      # prompt tokens/s over the logging interval
    gen_tps: float | None         # generated tokens/s over the logging interval
    running: float | None
    waiting: float | None         # V1 Waiting, V0 Pending, SGLang #queue-req
    swapped: float | None         # V0 only
    kv: float | None              # KV cache usage, 0..1
    prefix_hit: float | None      # prefix-cache hit rate, 0..1
    preemptions: float | None     # preemptions in the interval (newest V1 prints it when > 0)


Columns = dict[str, np.ndarray]  # a Sample field → its float64 values, NaN where the line printed no value


def running_sum(values: np.ndarray) -> float:
    """``sum(values.tolist())``, bit for bit: the additions one after another (numpy's accumulate), where
    ``values.sum()`` adds pairwise and may differ in the last bit."""
    return float(np.cumsum(values)[-1]) if len(values) else 0


def printed(col: np.ndarray) -> np.ndarray:
    """The values a column holds (NaN: a field the line did not print); the column itself when every line printed
    it (read only: no copy of 200,000 values per field and reading)."""
    missing = np.isnan(col)
    return col[~missing] if missing.any() else col


def exact_sum(values: np.ndarray) -> float:
    """``math.fsum`` of a column (the correctly rounded sum), bit for bit, in a few numpy passes: each value is
    split into parts on fixed binary grids, coarse to fine; the parts on one grid add up exactly in any order (n
    of them fit in a double's 53 bits), and fsum of those few exact sums rounds the total once, as fsum does."""
    n = len(values)
    top = float(np.abs(values).max()) if n else 0.0
    if not n or not math.isfinite(top) or n.bit_length() > 40:
        return math.fsum(values.tolist())
    bits = 52 - n.bit_length()  # n values below 2^(g + bits) sum below 2^(g + 52): exact on the grid 2^g
    grid = math.frexp(top)[1] - bits
    parts, rest, on_grid = [], values.astype(np.float64), np.empty(n)
    while -1000 < grid < 900:
        anchor = math.ldexp(1.5, grid + 52)  # (x + anchor) - anchor: x rounded to a multiple of 2^grid
        np.subtract(np.add(rest, anchor, out=on_grid), anchor, out=on_grid)
        parts.append(float(on_grid.sum()))
        rest -= on_grid  # exact: what is left is below 2^(grid - 1), for the next, finer grid
        if not rest.any():
            return math.fsum(parts)
        grid -= bits
    return math.fsum(values.tolist())


def fmean(values: np.ndarray) -> float:
    """``statistics.fmean`` of a column: the correctly rounded sum (``exact_sum``) ÷ n."""
    if not len(values):
        return statistics.fmean([])  # its own error for no data
    return exact_sum(values) / len(values)


class SampleColumns(Sequence[Sample]):
    """Samples held as numpy columns (NaN = None): the parser's fast path fills them without a Python object per
    stats line, and the window and readings read them whole (``columns``); a Sample is built only when one is
    indexed or iterated, e.g. by a page listing them."""

    def __init__(self, cols: Columns) -> None:
        self.cols = cols
        self._rows: list[Sample] | None = None

    def __len__(self) -> int:
        return len(self.cols["t"])

    def rows(self) -> list[Sample]:
        if self._rows is None:
            lists = []
            for name in Sample._fields:
                col = self.cols[name]
                values = col.tolist()
                lists.append([None if x != x else x for x in values] if np.isnan(col).any() else values)
            self._rows = list(map(tuple.__new__, repeat(Sample), zip(*lists, strict=True)))
        return self._rows

    @overload
    def __getitem__(self, index: int) -> Sample: ...

    @overload
    def __getitem__(self, index: slice) -> list[Sample]: ...

    def __getitem__(self, index: int | slice) -> Sample | list[Sample]:
        return self.rows()[index]

    def __iter__(self) -> Iterator[Sample]:
        return iter(self.rows())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # mutable like the list it stands for

    def __repr__(self) -> str:
        return f"SampleColumns({self.rows()!r})"


class ColumnRuns:
    """One engine's samples as a parse appends them in runs of columns, joined once when the parse ends (columns
    doubling as runs came cost more CPU in all than the one join: 235-344 ms against 218-290 ms for the bench log)."""

    def __init__(self) -> None:
        self.runs: list[Columns] = []

    def append(self, run: Columns) -> None:
        self.runs.append(run)

    def columns(self) -> Columns:
        """The samples appended so far, by field, in order."""
        return {name: np.concatenate([run[name] for run in self.runs]) for name in Sample._fields}


def columns(group: Sequence[Sample]) -> Columns:
    """A group's samples as float64 columns by field name, NaN where a value is None."""
    if isinstance(group, SampleColumns):
        return group.cols
    return {name: np.array(list(map(itemgetter(i), group)), dtype=np.float64)
            for i, name in enumerate(Sample._fields)}


def concat(groups: Sequence[Sequence[Sample]]) -> Sequence[Sample]:
    """The samples of several groups one after another: columns stay columns."""
    if groups and all(isinstance(g, SampleColumns) for g in groups):
        if len(groups) == 1:
            return groups[0]
        cols = [columns(g) for g in groups]
        return SampleColumns({name: np.concatenate([c[name] for c in cols]) for name in Sample._fields})
    return [s for group in groups for s in group]


@dataclass
class SpecSample:
    t: float
    accepted: float | None = None
    drafted: float | None = None
    rate: float | None = None     # acceptance rate 0..1 as printed


@dataclass
class LogSeries:
    """A parsed server log. ``engines`` maps an engine label ("000", "aggregated", "TP0"…) to its samples.

    ``samples``, ``groups`` and ``span_s`` are computed once, when first read after the parse (a window and the
    readings ask for them many times over hundreds of thousands of samples)."""

    fmt: str
    title: str
    engine_id: str                                   # tree/engines/<id>.yaml whose map the readings use
    interval_s: float                                # the engine's default logging interval (for untimed lines)
    engines: dict[str, list[Sample] | SampleColumns] = field(default_factory=dict)
    preemption_times: list[float] = field(default_factory=list)
    preemptions_logged: bool = False                 # absence of a preemption line means none happened
    spec: list[SpecSample] = field(default_factory=list)
    retractions: int = 0                             # SGLang "Retract requests" / decode out of memory
    oom_lines: int = 0
    config: dict[str, float] = field(default_factory=dict)  # startup settings read from the log
    prompt_tokens: float | None = None               # prompt tokens prefilled, when counted per batch (SGLang)
    prefix_hit_total: float | None = None            # cached ÷ (cached + new) prompt tokens over the log (SGLang)
    lines: int = 0
    stats_lines: int = 0
    skipped: int = 0
    untimed: int = 0                                 # stats lines without a readable time (interval assumed)

    @cached_property
    def samples(self) -> Sequence[Sample]:
        """The samples the readings use: the aggregated line when vLLM prints one, else every engine's."""
        if "aggregated" in self.engines:
            return self.engines["aggregated"]
        return concat(list(self.engines.values()))

    @cached_property
    def groups(self) -> list[list[Sample] | SampleColumns]:
        if "aggregated" in self.engines:
            return [self.engines["aggregated"]]
        return list(self.engines.values())

    @cached_property
    def span_s(self) -> float:
        times = columns(self.samples)["t"]
        return float(times.max() - times.min()) if len(times) else 0.0

    def settle(self) -> None:
        """The parse is finished: every engine's samples become columns, once (each reading then takes them as they
        are, where a list would be turned into columns by every reading again: seconds for a large log)."""
        for key, group in self.engines.items():
            if isinstance(group, list):
                self.engines[key] = SampleColumns(columns(group))

    def group(self, key: str) -> list[Sample]:
        """The list a parser appends an engine's samples to (created at its first sample)."""
        group = self.engines.setdefault(key, [])
        if not isinstance(group, list):
            raise TypeError(f"engine {key}'s samples are columns: the parse is finished")
        return group

    def summary(self) -> str:
        """e.g. "vLLM V1 server log, 412 stats lines over 68 min, 3 lines skipped"."""
        span = self.span_s
        over = f"{span / 60:.0f} min" if span >= 120 else f"{span:.0f} s"
        parts = [f"{self.title}, {self.stats_lines} stats line{'s' if self.stats_lines != 1 else ''} over {over}"]
        named = [e for e in self.engines if e != "aggregated"]
        if len(named) > 1:
            parts.append(f"{len(named)} engines")
        parts.append(f"{self.skipped} line{'s' if self.skipped != 1 else ''} skipped")
        if self.untimed:
            parts.append(f"{self.untimed} without a time (the default {self.interval_s:g} s interval assumed)")
        return ", ".join(parts)


@dataclass
class Timeline:
    """When each record of a log happened: its own stamp, else the previous record's time plus the engine's
    logging interval (and the record is counted as untimed in ``series``)."""

    series: LogSeries
    last: float | None = None

    def place(self, t: float | None) -> float:
        if t is None:
            self.series.untimed += 1
            t = (self.last if self.last is not None else 0.0) + self.series.interval_s
        self.last = t
        return t


SUMMED = ("running", "waiting", "prompt_tps", "gen_tps")  # counts and token rates: summed over engines
MAXED = ("kv", "prefix_hit")  # ratios: the fullest engine, never a sum
MEANED = frozenset({"prompt_tps", "gen_tps"})  # rates: one engine's lines in a second averaged (gauges: its last)


def per_second(log: LogSeries, fields: Sequence[str] = SUMMED + MAXED) -> dict[int, dict[str, float]]:
    """One row per second of log time, in time order. Lines of one engine sharing a second are that engine's one
    state (SGLang prints a Prefill and a Decode batch line in the same second): its last value for a gauge, the
    mean for a rate; only different engines' values at that second are combined (summed, ratios maxed)."""
    rows: dict[int, dict[str, float]] = {}
    for group in log.groups:
        cols = columns(group)
        for name in fields:
            given = ~np.isnan(cols[name])
            mine: dict[int, list[float]] = {}
            for at, v in zip(cols["t"][given].tolist(), cols[name][given].tolist(), strict=True):
                mine.setdefault(int(at), []).append(v)
            for t, values in mine.items():
                v = statistics.fmean(values) if name in MEANED else values[-1]
                row = rows.setdefault(t, {})
                row[name] = (max(row[name], v) if name in MAXED else row[name] + v) if name in row else v
    return dict(sorted(rows.items()))
