"""Shared helpers for the benchmark parsers: errors, text, numbers, per-request checks and summaries."""

from __future__ import annotations

import csv
import io
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from triage.errors import TriageError, UnknownFormat
from triage.run import REQUEST_COLUMNS, Run
from triage.safe_text import strip_control
from triage.sources.fast_stats import quantiles

TPOT_RECOMPUTED = "recomputed per request: (e2e − ttft)/(out − 1)"
NON_NEGATIVE = ("start_s", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s", "itl_s", "queue_s", "client_wait_s",
                "tpot_s")
LATENCIES = ("ttft_s", "e2e_s")
# Summary keys where the tool's own number is kept even when per-request data exists.
TOOL_WINS = ("duration_s", "req_per_s", "out_tok_per_s", "total_tok_per_s", "offered_rate", "max_concurrency")
# Per-request statistics; ITL is left out on purpose: the per-request itl_s column is each request's MEAN gap
# (≈ its TPOT), while every tool that reports ITL pools all the gaps of all requests (pooled_itl below).
STATS = (("ttft_s", "ttft"), ("tpot_s", "tpot"), ("e2e_s", "e2e"))
# The quantiles taken of each STATS column (kept on the Run for the signals): the summary's p50, p90, p99, and for
# TTFT its floor, p5, which the signals read too
STATS_QS = (0.5, 0.9, 0.99)
TTFT_QS = (0.05, *STATS_QS)
ITL_KEYS = ("itl_mean_s", "itl_p50_s", "itl_p90_s", "itl_p99_s")
MAX_META = 80
QUOTE_CHARS = 40  # the most of a file a message quotes
_NA_STRINGS = {"", "n/a", "na", "nan", "none", "null"}
_NUMBER_RE = re.compile(r"^[+-]?(\d[\d,]*(\.\d*)?|\.\d+)([eE][+-]?\d+)?$|^[+-]?(inf|infinity|nan)$", re.IGNORECASE)
FORMULA_CHARS = "=+-@"
T = TypeVar("T")
PARALLEL_ROWS = 200_000  # above this many requests, per-column work runs in threads
_POOL: ThreadPoolExecutor | None = None


@dataclass
class Ctx:
    """Parsing context: the file name used in messages and the notes collected on the way."""

    where: str
    notes: list[str] = field(default_factory=list)
    quote: bool = True  # False: the file is not one the user could plainly read; messages quote none of it

    def fail(self, reason: str, key: str = "") -> TriageError:
        return TriageError(reason, where=self.where, key=key)

    def unknown(self, reason: str) -> UnknownFormat:
        """The error for bytes that are none of the formats tried (callers may go on to other kinds of input)."""
        return UnknownFormat(reason, where=self.where)

    def head(self, what: str, text: str) -> str:
        """``what`` with a short, printable quote of the file's ``text`` ("first line 'x,y'"), or without any
        when the file may not be quoted."""
        return f"{what} {quote_head(text)}" if self.quote else f"{what} (not quoted: not a plain regular file)"


def quote_head(text: str, limit: int = QUOTE_CHARS) -> str:
    """At most ``limit`` printable characters of ``text`` in quotes: escape sequences, control, bidi and other
    non-printable characters dropped, so a quote can neither restyle a terminal nor show more than a glimpse."""
    shown = "".join(ch for ch in strip_control(text[: limit * 4]) if ch.isprintable())
    return "'" + (shown if len(shown) <= limit else shown[:limit] + "…") + "'"


# ---------------------------------------------------------------- text


def not_utf8_reason(data: bytes, pos: int) -> str:
    line = data.count(b"\n", 0, pos) + 1
    col = pos - (data.rfind(b"\n", 0, pos) + 1) + 1
    return f"not UTF-8 text: invalid byte 0x{data[pos]:02x} at line {line} col {col} (save the file as UTF-8)"


def decode_text(data: bytes, ctx: Ctx) -> str:
    """The whole file as text; refuses bytes that are not UTF-8 and drops a BOM."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ctx.fail(not_utf8_reason(data, exc.start)) from None
    return text.removeprefix("\ufeff")


def read_csv_rows(text: str, ctx: Ctx) -> list[list[str]]:
    """Small tool CSVs (summaries) through the csv module; CRLF and quoted cells handled."""
    if "\x00" in text:
        raise ctx.fail("CSV holds NUL bytes (is it a binary file?)")
    try:
        return list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise ctx.fail(f"malformed CSV: {exc}") from None


def is_formula(cell: str) -> bool:
    """A string cell a spreadsheet would run: starts with = + - @ and is not a plain number."""
    s = cell.strip()
    return len(s) > 1 and s[0] in FORMULA_CHARS and not _NUMBER_RE.match(s)


def formula_reason(cell: str, column: str, row: int) -> str:
    shown = cell.strip()
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return f"cell looks like a spreadsheet formula: {shown!r} in column {column} (row {row})"


def check_formulas(rows: list[list[str]], ctx: Ctx, header: list[str] | None = None) -> None:
    """Refuse a tool CSV with a formula-looking cell; rows are 1-based file lines."""
    for r, row in enumerate(rows, start=1):
        for c, cell in enumerate(row):
            if cell and cell.lstrip()[:1] in FORMULA_CHARS and is_formula(cell):
                col = header[c] if header and c < len(header) and header[c] else f"#{c + 1}"
                raise ctx.fail(formula_reason(cell, col, r))


# ---------------------------------------------------------------- numbers


def num(value: Any) -> float | None:
    """A finite-or-infinite float from a JSON/CSV value ("4,613.39", "Infinity", "N/A" → None), else None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float, np.integer, np.floating)):
        try:
            x = float(value)
        except (OverflowError, ValueError):
            return None
    elif isinstance(value, str):
        s = value.strip().replace(",", "")
        if s.lower() in _NA_STRINGS:
            return None
        try:
            x = float(s)
        except (ValueError, OverflowError):
            return None
    else:
        return None
    return None if math.isnan(x) else x


def fmt_num(x: float) -> str:
    """8.0 → "8", 2.5 → "2.5", 0.3333 → "0.33"."""
    if math.isinf(x):
        return "inf"
    if float(x).is_integer():
        return str(int(x))
    return f"{x:.2f}".rstrip("0").rstrip(".")


def type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", type(None): "null"}.get(type(value), "a number")


def float_array(values: Any, key: str, ctx: Ctx, run: str = "") -> np.ndarray:
    """A JSON list of numbers (None → NaN) as float64; names the first bad item."""
    if not isinstance(values, list):
        raise ctx.fail(f"{key} should be a list of numbers, found {type_name(values)}", key=run)
    try:
        return np.asarray(values, dtype=np.float64).reshape(len(values))
    except (TypeError, ValueError, OverflowError):
        pass
    ser = pd.Series(values, dtype=object)
    out = pd.to_numeric(ser, errors="coerce").astype(np.float64)
    bad = np.flatnonzero(out.isna().to_numpy() & ser.notna().to_numpy())
    if bad.size:
        i = int(bad[0])
        raise ctx.fail(f"non-numeric value {str(values[i])[:40]!r} in {key} (index {i})", key=run)
    return out.to_numpy()


def ragged(values: Any, key: str, ctx: Ctx, run: str = "") -> tuple[np.ndarray, np.ndarray]:
    """A JSON list of lists of numbers as (flat float64 values, per-item lengths)."""
    if not isinstance(values, list):
        raise ctx.fail(f"{key} should be a list of lists, found {type_name(values)}", key=run)
    lists: list[list[Any]] = []
    for i, v in enumerate(values):
        if v is not None and not isinstance(v, list):
            raise ctx.fail(f"{key} item {i} should be a list, found {type_name(v)}", key=run)
        lists.append(v if v is not None else [])
    lengths = np.fromiter((len(v) for v in lists), dtype=np.int64, count=len(lists))
    flat = float_array(list(chain.from_iterable(lists)), key, ctx, run)
    return flat, lengths


def per_item_sum_mean(flat: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-item sum and mean of a ragged array (mean NaN for empty items); vectorized."""
    n = len(lengths)
    idx = np.repeat(np.arange(n), lengths)
    sums = np.bincount(idx, weights=flat, minlength=n) if flat.size else np.zeros(n)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(lengths > 0, sums / np.maximum(lengths, 1), np.nan)
    return sums, means


def deep_get(obj: Any, *path: str | int) -> Any:
    """obj[p0][p1]... or None when any step is missing or of the wrong type."""
    for p in path:
        if isinstance(p, int):
            obj = obj[p] if isinstance(obj, list) and -len(obj) <= p < len(obj) else None
        else:
            obj = obj.get(p) if isinstance(obj, dict) else None
        if obj is None:
            return None
    return obj


def find_key(obj: Any, keys: Iterable[str], depth: int = 6) -> Any:
    """First non-null value of any of `keys` in nested dicts (breadth first), else None."""
    keys = tuple(keys)
    level = [obj]
    for _ in range(depth):
        nxt: list[Any] = []
        for o in level:
            if isinstance(o, dict):
                for k in keys:
                    v = o.get(k)
                    if v is not None and not isinstance(v, (dict, list)):
                        return v
                nxt.extend(v for v in o.values() if isinstance(v, (dict, list)))
            elif isinstance(o, list):
                nxt.extend(v for v in o[:50] if isinstance(v, (dict, list)))
        level = nxt
    return None


# ---------------------------------------------------------------- runs


def short_meta(meta: Mapping[str, Any] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in (meta or {}).items():
        if v is None or isinstance(v, (dict, list)) or v == "":
            continue
        s = str(v).strip()
        if s:
            out[k] = s if len(s) <= MAX_META else s[: MAX_META - 3] + "..."
    return out


def clean_summary(tool: Mapping[str, Any], ctx: Ctx, key: str = "") -> dict[str, float]:
    """Tool numbers as finite floats; refuses negative times and counts."""
    out: dict[str, float] = {}
    for k, v in tool.items():
        x = num(v)
        if x is None or math.isinf(x):
            continue
        if x < 0:
            raise ctx.fail(f"negative {k} in the tool's summary ({fmt_num(x)})", key=key)
        out[k] = x
    return out


def rows_text(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def _first(mask: np.ndarray) -> int:
    return int(np.argmax(mask))


def _out_of_range(x: np.ndarray) -> bool:
    """Fast check, one pass each for min and max (NaN ignored): any negative or infinite value?"""
    return bool(x.size) and bool(np.fmin.reduce(x) < 0 or np.fmax.reduce(x) == np.inf)


def parallel_map(fn: Callable[..., T], items: list[Any], rows: int) -> list[T]:
    """fn over items, in threads when the table is large (numpy and pyarrow release the GIL)."""
    if rows >= PARALLEL_ROWS and len(items) > 1:
        return list(_pool().map(fn, items))
    return [fn(item) for item in items]


def check_requests(df: pd.DataFrame, ctx: Ctx, names: Mapping[str, str], rows: tuple[str, int], key: str) -> None:
    """Refuse negative or infinite values and e2e < ttft; names the column, the count and the first row."""
    word, offset = rows
    present = [c for c in NON_NEGATIVE if c in df]
    suspect = parallel_map(_out_of_range, [df[c].to_numpy() for c in present], len(df))
    for col, bad in zip(present, suspect, strict=True):
        if not bad:
            continue
        x = df[col].to_numpy()
        for mask, what in ((x < 0, "negative"), (np.isinf(x), "infinite")):
            if mask.any():
                i = _first(mask)
                raise ctx.fail(
                    f"{what} {names.get(col, col)} in {rows_text(int(mask.sum()))} (first: {word} {i + offset}, "
                    f"value {fmt_num(float(x[i]))})", key=key)
    if "ttft_s" in df and "e2e_s" in df:
        ttft, e2e = df["ttft_s"].to_numpy(), df["e2e_s"].to_numpy()
        short = e2e < ttft - 1e-6
        if short.any():
            i = _first(short)
            raise ctx.fail(
                f"{names.get('e2e_s', 'e2e_s')} shorter than {names.get('ttft_s', 'ttft_s')} in "
                f"{rows_text(int(short.sum()))} (first: {word} {i + offset}); are the units mixed?", key=key)


def mark_missing_latencies(df: pd.DataFrame, ctx: Ctx, names: Mapping[str, str], label: str, key: str) -> None:
    """All-NaN latency column → refuse; some NaN → those requests count as failed, with a note."""
    n = len(df)
    ok = df["ok"].to_numpy(dtype=bool, copy=True) if "ok" in df else np.ones(n, dtype=bool)
    bad = np.zeros(n, dtype=bool)
    shown = []
    for col in (c for c in LATENCIES if c in df):
        x = df[col].to_numpy()
        if n and not np.isnan(np.add.reduce(x)):
            continue  # fast path: no NaN (infinities were refused before)
        nan = np.isnan(x)
        if n and nan.all():
            if "ok" in df and not ok.any():
                raise ctx.fail(f"all {n} requests failed; there is no latency to analyse", key=key)
            raise ctx.fail(f"{names.get(col, col)} is empty or NaN in all {n} rows", key=key)
        if (nan & ok).any():
            shown.append(f"{names.get(col, col)} ({int((nan & ok).sum())})")
        bad |= nan
    if not bad.any():
        return
    newly = bad & ok
    if newly.any():
        ctx.notes.append(f"{label}: {int(newly.sum())} requests with an empty or NaN latency counted as failed: "
                         f"{', '.join(shown)}")
    df["ok"] = ok & ~bad


def add_tpot(df: pd.DataFrame) -> bool:
    """tpot_s = (e2e − ttft)/(out − 1) for out > 1, NaN otherwise. True when computed; a tpot_s column the parser
    took from the tool's own per-request token timestamps is kept (its E2E may include the stream's tail)."""
    if "tpot_s" in df.columns or not {"ttft_s", "e2e_s", "output_tokens"} <= set(df.columns):
        return False
    out = df["output_tokens"].to_numpy()
    tpot = np.subtract(df["e2e_s"].to_numpy(), df["ttft_s"].to_numpy())
    with np.errstate(invalid="ignore", divide="ignore"):
        np.divide(tpot, np.subtract(out, 1.0), out=tpot)
    tpot[~(out > 1)] = np.nan
    df["tpot_s"] = tpot
    return True


def _stats(x: np.ndarray, keep: np.ndarray | None, qs: tuple[float, ...]) -> tuple[float, dict[float, float]] | None:
    """(mean, {q: quantile}) of the non-NaN values (of the rows in `keep`), or None when there are none."""
    if keep is not None:
        x = x[keep]
    if np.isnan(np.add.reduce(x)):
        x = x[~np.isnan(x)]
    if not x.size:
        return None
    return float(x.mean()), dict(zip(qs, quantiles(x, qs).tolist(), strict=True))


def _percentiles(x: np.ndarray, keep: np.ndarray | None = None) -> tuple[float, ...] | None:
    """(mean, p50, p90, p99) of the non-NaN values (of the rows in `keep`), or None when there are none."""
    stats = _stats(x, keep, (0.5, 0.9, 0.99))
    return None if stats is None else (stats[0], *stats[1].values())


def pooled_itl(gaps: np.ndarray, lengths: np.ndarray, ok: np.ndarray | None) -> dict[str, float]:
    """ITL as vLLM, SGLang, AIPerf (inter_chunk_latency) and inference-perf report it: every inter-token gap of
    every successful request in one pool, then mean and linear-interpolation percentiles (np.percentile), so the
    numbers equal the tool's own. ``gaps`` is the flat ragged array, ``lengths`` the gaps per request."""
    stats = _percentiles(gaps, np.repeat(ok, lengths) if ok is not None else None)
    if stats is None:
        return {}
    return dict(zip(ITL_KEYS, stats, strict=True))


def ragged_gaps(times: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-token timestamps (flat ragged array) → the gaps between consecutive tokens of each request, as
    (flat gaps, gaps per request); a request with one timestamp or none has no gap."""
    if not times.size:
        return times, np.zeros_like(lengths)
    diffs = np.diff(times)
    starts = np.cumsum(lengths)[:-1]  # a diff that crosses into the next request's first timestamp is dropped
    keep = np.ones(diffs.size, dtype=bool)
    keep[starts[(starts > 0) & (starts <= diffs.size)] - 1] = False
    return diffs[keep], np.maximum(lengths - 1, 0)


def _pool() -> ThreadPoolExecutor:
    global _POOL  # noqa: PLW0603 - one lazily created pool for the whole process
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1), thread_name_prefix="triage-stats")
    return _POOL


def _token_sum(x: np.ndarray, keep: np.ndarray | None) -> tuple[float, int]:
    """(sum, count) of the non-NaN values in the kept rows, without copying the column."""
    valid = ~np.isnan(x)
    if keep is not None:
        valid &= keep
    return float(np.add.reduce(x, where=valid)), int(np.count_nonzero(valid))


def request_summary(df: pd.DataFrame, kept: dict[str, dict[float, float]] | None = None) -> dict[str, float]:
    """Canonical summary from the per-request table (successful requests only); ``kept`` receives the quantiles
    (STATS_QS) of each latency column whose values are all finite (those the signals would select again)."""
    n = len(df)
    ok = df["ok"].to_numpy(dtype=bool) if "ok" in df else np.ones(n, dtype=bool)
    completed = int(ok.sum())
    keep = None if completed == n else ok
    stats = [(col, key) for col, key in STATS if col in df]
    token_cols = [col for col in ("prompt_tokens", "output_tokens") if col in df]

    def work(col: str) -> Any:
        x = df[col].to_numpy()
        return _token_sum(x, keep) if col in token_cols else _stats(x, keep, TTFT_QS if col == "ttft_s" else STATS_QS)

    results = dict(zip([c for c, _ in stats] + token_cols,
                       parallel_map(work, [c for c, _ in stats] + token_cols, n), strict=True))
    out: dict[str, float] = {"completed": float(completed), "failed": float(n - completed)}
    for col, key in stats:
        if results[col] is not None:
            mean, qs = results[col]
            out[f"{key}_mean_s"] = mean
            for stat, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
                out[f"{key}_{stat}_s"] = qs[q]
            if kept is not None and math.isfinite(mean):  # a finite mean: no infinite value among them
                kept[col] = qs
    tokens: dict[str, float] = {}
    for col in token_cols:
        total, valid = results[col]
        if valid:
            tokens[col] = total
            out[f"{col}_mean"] = total / valid
    out.update(_throughput(df, completed, tokens))
    return out


def _throughput(df: pd.DataFrame, completed: int, tokens: dict[str, float]) -> dict[str, float]:
    if "start_s" not in df:
        return {}
    start = df["start_s"].to_numpy()
    end = start + df["e2e_s"].to_numpy() if "e2e_s" in df else start
    lo, hi = np.fmin.reduce(start), np.fmax.reduce(end)
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi <= lo:
        return {}
    duration = float(hi - lo)
    out = {"duration_s": duration, "req_per_s": completed / duration}
    if "output_tokens" in tokens:
        out["out_tok_per_s"] = tokens["output_tokens"] / duration
        if "prompt_tokens" in tokens:
            out["total_tok_per_s"] = (tokens["output_tokens"] + tokens["prompt_tokens"]) / duration
    return out


def build_run(
    label: str,
    ctx: Ctx,
    *,
    requests: pd.DataFrame | None = None,
    tool: Mapping[str, Any] | None = None,
    definitions: Mapping[str, str] | None = None,
    meta: Mapping[str, Any] | None = None,
    overrides: Mapping[str, float] | None = None,
    names: Mapping[str, str] | None = None,
    rows: tuple[str, int] = ("index", 0),
    key: str = "",
) -> Run:
    """Validate the per-request table, recompute TPOT, merge request and tool summaries into one Run."""
    defs = dict(definitions or {})
    summary = clean_summary(tool or {}, ctx, key)
    kept: dict[str, dict[float, float]] = {}
    if requests is not None:
        names = names or {}
        check_requests(requests, ctx, names, rows, key)
        mark_missing_latencies(requests, ctx, names, label, key)
        if "tpot_s" not in requests.columns and add_tpot(requests):  # a parser's own tpot_s is kept (defs say how)
            defs["tpot"] = TPOT_RECOMPUTED
        requests = requests[[c for c in REQUEST_COLUMNS if c in requests.columns]]
        merged = {**summary, **request_summary(requests, kept)}
        merged.update({k: summary[k] for k in TOOL_WINS if k in summary})
        summary = merged
    for k, v in (overrides or {}).items():
        if v is not None and math.isfinite(v):
            summary[k] = float(v)
    return Run(label=label, requests=requests, summary=summary, definitions=defs, meta=short_meta(meta),
               quantiles=kept)


def frame(columns: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """A DataFrame from equal-length numpy columns without consolidating copies."""
    return pd.DataFrame(dict(columns), copy=False)


def check_lengths(arrays: Mapping[str, Any], ctx: Ctx, key: str = "") -> int:
    """All per-request arrays must have the same length; returns it."""
    lengths = {k: len(v) for k, v in arrays.items() if v is not None}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{k} {n}" for k, n in lengths.items())
        raise ctx.fail(f"per-request arrays have different lengths: {shown}", key=key)
    return next(iter(lengths.values()), 0)


def dedupe_labels(runs: list[Run]) -> None:
    """Make run labels unique within a file ("rate 8 req/s", "rate 8 req/s #2")."""
    seen: dict[str, int] = {}
    for run in runs:
        base = run.label or "run"
        seen[base] = seen.get(base, 0) + 1
        if seen[base] > 1:
            run.label = f"{base} #{seen[base]}"


def describe_missing(doc: Any, keys: Iterable[str]) -> str:
    if not isinstance(doc, dict):
        return f"found {type_name(doc)}"
    return "missing keys: " + ", ".join(k for k in keys if k not in doc)
