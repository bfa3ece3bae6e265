"""Generic per-request CSV / Parquet: aliased column names, units from the name's suffix, read with pyarrow."""

from __future__ import annotations

import re
from pathlib import PurePath

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from triage.run import Run
from triage.sources.files.common import Ctx, build_run, formula_reason, frame, not_utf8_reason, parallel_map
from triage.sources.files.registry import BenchmarkFormat, register

# Time columns: base name → canonical column; the unit comes from the suffix (none = seconds).
TIME_BASES: dict[str, str] = {
    "ttft": "ttft_s", "time_to_first_token": "ttft_s",
    "e2e": "e2e_s", "e2e_latency": "e2e_s", "e2el": "e2e_s", "latency": "e2e_s",
    "end_to_end_latency": "e2e_s", "request_latency": "e2e_s",
    "itl": "itl_s", "inter_chunk_latency": "itl_s",
    "queue": "queue_s", "queue_time": "queue_s",
    "start": "start_s", "start_time": "start_s", "timestamp": "start_s", "request_start": "start_s",
    "request_start_time": "start_s", "arrival_time": "start_s",
}
UNIT_FACTORS: dict[str, float] = {"s": 1.0, "sec": 1.0, "secs": 1.0, "seconds": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
TOKEN_NAMES: dict[str, str] = {
    **dict.fromkeys(("prompt_tokens", "input_tokens", "input_len", "prompt_len", "input_length", "prompt_length",
                     "isl", "num_input_tokens", "number_input_tokens"), "prompt_tokens"),
    **dict.fromkeys(("output_tokens", "output_len", "completion_tokens", "output_length", "osl",
                     "num_output_tokens", "number_output_tokens", "generated_tokens"), "output_tokens"),
}
FLAG_NAMES: dict[str, str] = {
    "ok": "ok", "success": "ok", "succeeded": "ok", "is_success": "ok",
    "error": "error", "errors": "error", "error_msg": "error", "error_message": "error",
}
REQUIRED: dict[str, str] = {
    "ttft_s": "ttft (ttft_s, ttft_ms, time_to_first_token_ms)",
    "e2e_s": "e2e latency (e2e_s, e2e_latency_ms, latency_ms, end_to_end_latency_s)",
    "output_tokens": "output tokens (output_tokens, output_len, completion_tokens)",
}
TRUE_STRINGS = ["true", "t", "yes", "y", "1", "ok", "success", "succeeded", "1.0"]
FALSE_STRINGS = ["false", "f", "no", "n", "0", "error", "fail", "failed", "failure", "0.0"]
NO_ERROR_STRINGS = ["", "none", "null", "nan", "n/a", "ok", "0", "false", "success"]
NA_STRINGS = ["", "n/a", "na", "nan", "none", "null", "-"]
_NUMBER_RE = r"(?i)^\s*[+-]?((\d[\d,]*(\.\d*)?|\.\d+)([eE][+-]?\d+)?|inf|infinity|nan)\s*$"
_FORMULA_RE = r"^\s*[=+\-@]."
_DELIMITERS = (",", "\t", ";")


# ---------------------------------------------------------------- column names


def normalize(name: str) -> str:
    """'TTFT (ms)' → 'ttft_ms', 'E2E-Latency' → 'e2e_latency'."""
    s = name.strip().strip('"').lower()
    s = re.sub(r"\s*\[\s*(\w+)\s*\]\s*$|\s*\(\s*(\w+)\s*\)\s*$", lambda m: "_" + (m.group(1) or m.group(2)), s)
    return re.sub(r"[^a-z0-9]+", "_", s).strip("_")


def match_column(name: str) -> tuple[str, float] | None:
    """(canonical column, factor to canonical unit) for a header cell, or None if not ours."""
    n = normalize(name)
    if n in TOKEN_NAMES:
        return TOKEN_NAMES[n], 1.0
    if n in FLAG_NAMES:
        return FLAG_NAMES[n], 1.0
    if n in TIME_BASES:
        return TIME_BASES[n], 1.0
    base, _, unit = n.rpartition("_")
    if base in TIME_BASES and unit in UNIT_FACTORS:
        return TIME_BASES[base], UNIT_FACTORS[unit]
    return None


def sniff_delimiter(line: str) -> str | None:
    counts = {d: line.count(d) for d in _DELIMITERS}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else None


def known_columns(line: str, delimiter: str) -> list[str]:
    return [c for c in line.split(delimiter) if match_column(c)]


def map_columns(names: list[str], ctx: Ctx) -> dict[str, tuple[str, float]]:
    """canonical → (source column, factor); the first matching column wins."""
    mapping: dict[str, tuple[str, float]] = {}
    for name in names:
        hit = match_column(name)
        if not hit:
            continue
        canon, factor = hit
        if canon in mapping:
            used = mapping[canon][0]
            ctx.notes.append(f"columns {used!r} and {name!r} both give {canon}; used {used!r}")
            continue
        mapping[canon] = (name, factor)
    missing = [desc for canon, desc in REQUIRED.items() if canon not in mapping]
    if missing:
        raise ctx.fail(f"missing columns: {'; '.join(missing)}. Found: {', '.join(names[:12])}"
                       f"{', ...' if len(names) > 12 else ''}. The accepted names are in the README, 'Benchmark files'")
    return mapping


# ---------------------------------------------------------------- reading


def read_csv_table(data: bytes, delimiter: str, ctx: Ctx) -> pa.Table:
    try:
        table = pacsv.read_csv(pa.BufferReader(data), parse_options=pacsv.ParseOptions(delimiter=delimiter))
    except (pa.ArrowInvalid, pa.ArrowException) as exc:
        msg = str(exc).replace("CSV parse error: ", "")
        raise ctx.fail(f"malformed CSV: {msg[:200]}") from None
    for name, col in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type):
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ctx.fail(not_utf8_reason(data, exc.start)) from None
            raise ctx.fail(f"column {name} holds binary data")
    return table


def _nonempty(col: pa.ChunkedArray) -> tuple[pa.Array, pa.ChunkedArray]:
    """(row indices, values) of the non-empty cells of a string column: most cells of sparse columns are empty."""
    idx = pc.indices_nonzero(pc.fill_null(pc.greater(pc.binary_length(col), 0), False))
    return idx, col.take(idx)


def check_formulas(table: pa.Table, ctx: Ctx) -> None:
    """Refuse string cells a spreadsheet would execute (=, +, -, @ and not a number)."""
    for name, col in zip(table.column_names, table.columns, strict=True):
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            continue
        idx, values = _nonempty(col)
        if not len(values):
            continue
        suspect = pc.match_substring_regex(values, _FORMULA_RE)
        if not pc.any(suspect).as_py():
            continue
        bad = pc.and_(suspect, pc.invert(pc.match_substring_regex(values, _NUMBER_RE)))
        i = pc.index(bad, True).as_py()
        if i is not None and i >= 0:
            raise ctx.fail(formula_reason(values[i].as_py(), name, idx[i].as_py() + 2))


def _string_to_float(col: pa.ChunkedArray, src: str, ctx: Ctx, row_offset: int) -> pa.ChunkedArray:
    trimmed = pc.utf8_trim_whitespace(col)
    is_na = pc.is_in(pc.utf8_lower(trimmed), value_set=pa.array(NA_STRINGS))
    cleaned = pc.if_else(is_na, pa.scalar(None, pa.string()), pc.replace_substring(trimmed, ",", ""))
    bad = pc.and_(pc.is_valid(cleaned), pc.invert(pc.match_substring_regex(cleaned, _NUMBER_RE)))
    i = pc.index(bad, True).as_py()
    if i is not None and i >= 0:
        shown = str(col[i].as_py())[:40]
        raise ctx.fail(f"non-numeric value {shown!r} in column {src} (row {i + row_offset})")
    return pc.cast(cleaned, pa.float64())


def _pool_floats(n: int) -> np.ndarray:
    """A writable float64 array in Arrow's memory pool: it reuses the pages the CSV parser freed (a numpy
    allocation would add to the peak while the pool keeps them)."""
    return np.frombuffer(pa.allocate_buffer(n * 8), dtype=np.float64) if n else np.empty(0)


def _to_numpy(arr: pa.ChunkedArray | pa.Array, factor: float) -> np.ndarray:
    """float64 values × factor, NaN for nulls, in one pass: each chunk is read in place (a numpy view of Arrow's
    buffer when it has no null) and written, scaled and cast, straight into the result. Integers are rounded to
    the nearest float64 as numpy does (epoch nanoseconds are beyond 2**53; an Arrow safe cast refused them)."""
    chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
    out = _pool_floats(len(arr))
    if arr.null_count == 0 and (pa.types.is_floating(arr.type) or pa.types.is_integer(arr.type)) and chunks:
        np.concatenate([chunk.to_numpy(zero_copy_only=True) for chunk in chunks], out=out, casting="same_kind")
        if factor != 1.0:
            np.multiply(out, factor, out=out)
        return out
    at = 0
    for chunk in chunks:
        n = len(chunk)
        if not n:
            continue
        if chunk.null_count == 0 and (pa.types.is_floating(chunk.type) or pa.types.is_integer(chunk.type)):
            values = chunk.to_numpy(zero_copy_only=True)
        else:  # nulls, booleans, decimals: Arrow's float64 with NaN for the nulls first
            values = pc.fill_null(pc.cast(chunk, pa.float64()), np.nan).to_numpy(zero_copy_only=False)
        if factor != 1.0:
            np.multiply(values, factor, out=out[at:at + n])
        else:
            out[at:at + n] = values
        at += n
    return out


def to_float(col: pa.ChunkedArray, src: str, ctx: Ctx, row_offset: int, factor: float = 1.0) -> np.ndarray:
    """A numeric column in canonical units (value × factor), NaN for empty cells."""
    t = col.type
    if pa.types.is_null(t):
        return np.full(len(col), np.nan)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_boolean(t):
        return _to_numpy(col, factor)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _to_numpy(_string_to_float(col, src, ctx, row_offset), factor)
    raise ctx.fail(f"column {src} holds {t} values, expected numbers")


def _epoch_factor(x: np.ndarray, factor: float, src: str, ctx: Ctx) -> float:
    """Unit-less epoch timestamps in ms or ns are recognised by size (with a note)."""
    if factor != 1.0 or not np.isfinite(x).any():
        return factor
    big = float(max(np.fmax.reduce(x), -np.fmin.reduce(x)))  # the largest |value|, NaN left out, no copy
    if big > 1e14:
        ctx.notes.append(f"column {src} read as epoch nanoseconds")
        return 1e-9
    if big > 1e11:
        ctx.notes.append(f"column {src} read as epoch milliseconds")
        return 1e-3
    return factor


def to_start(col: pa.ChunkedArray, src: str, factor: float, ctx: Ctx, row_offset: int) -> np.ndarray:
    """Start times (epoch/relative numbers or ISO dates) as seconds since the first request."""
    t = col.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        ns = pc.cast(pc.cast(col, pa.timestamp("ns")), pa.int64()).to_numpy().astype(np.float64)
        ns[pc.is_null(col).to_numpy(zero_copy_only=False)] = np.nan
        x = ns * 1e-9
    elif (pa.types.is_string(t) or pa.types.is_large_string(t)) and not pc.all(
            pc.match_substring_regex(col, _NUMBER_RE)).as_py():
        ser = col.to_pandas()
        parsed = pd.to_datetime(ser, errors="coerce", utc=True, format="ISO8601")
        bad = np.flatnonzero(parsed.isna().to_numpy() & ser.notna().to_numpy() & (ser.str.strip() != "").to_numpy())
        if bad.size:
            i = int(bad[0])
            raise ctx.fail(f"can't read {str(ser.iloc[i])[:40]!r} in column {src} as a number or ISO date "
                           f"(row {i + row_offset})")
        x = parsed.astype("int64").to_numpy().astype(np.float64) * 1e-9
        x[parsed.isna().to_numpy()] = np.nan
    else:
        x = to_float(col, src, ctx, row_offset)
        scale = _epoch_factor(x, factor, src, ctx)
        if scale != 1.0:
            x *= scale  # x is this function's own array: scaled and shifted in place
    if np.isfinite(x).any():
        x -= np.nanmin(x)
    return x


def _string_flags(col: pa.ChunkedArray, src: str, ctx: Ctx, row_offset: int) -> np.ndarray:
    low = pc.utf8_lower(pc.utf8_trim_whitespace(col))
    yes = pc.is_in(low, value_set=pa.array(TRUE_STRINGS))
    no = pc.is_in(low, value_set=pa.array(FALSE_STRINGS))
    bad = pc.and_(pc.is_valid(low), pc.invert(pc.or_(yes, no)))
    i = pc.index(bad, True).as_py()
    if i is not None and i >= 0:
        raise ctx.fail(f"can't read {str(col[i].as_py())[:40]!r} in column {src} as true/false (row {i + row_offset})")
    return pc.fill_null(yes, False).to_numpy(zero_copy_only=False)


def to_ok(col: pa.ChunkedArray, src: str, ctx: Ctx, row_offset: int) -> np.ndarray:
    t = col.type
    if pa.types.is_boolean(t):
        return pc.fill_null(col, False).to_numpy(zero_copy_only=False)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _string_flags(col, src, ctx, row_offset)
    x = to_float(col, src, ctx, row_offset)
    return np.nan_to_num(x, nan=0.0) != 0


def to_failed(col: pa.ChunkedArray, src: str, ctx: Ctx, row_offset: int) -> np.ndarray:
    """An error column: empty / null / 'none' means success; anything else (or a true value) is a failure."""
    t = col.type
    if pa.types.is_null(t):
        return np.zeros(len(col), dtype=bool)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        failed = np.zeros(len(col), dtype=bool)
        idx, values = _nonempty(col)
        if len(values):
            low = pc.utf8_lower(pc.utf8_trim_whitespace(values))
            fine = pc.is_in(low, value_set=pa.array(NO_ERROR_STRINGS)).to_numpy(zero_copy_only=False)
            failed[idx.to_numpy()[~fine]] = True
        return failed
    return to_ok(col, src, ctx, row_offset)


# ---------------------------------------------------------------- table → run


def table_to_frame(table: pa.Table, ctx: Ctx, row_offset: int) -> tuple[pd.DataFrame, dict[str, str]]:
    """Canonical per-request columns (seconds, tokens) and, per column, the file's own name for messages."""
    if table.num_rows == 0:
        raise ctx.fail("no data rows (only a header)")
    names = [str(n) for n in table.column_names]
    mapping = map_columns(names, ctx)
    numeric = [(canon, src, factor) for canon, (src, factor) in mapping.items() if canon not in ("ok", "error")]
    # the success flags are one more job, the last: a bad number is still reported before a bad flag
    flags = [("ok", "", 1.0)] if "ok" in mapping or "error" in mapping else []

    def convert(item: tuple[str, str, float]) -> np.ndarray | None:
        canon, src, factor = item
        if canon == "ok":
            return _ok_column(table, names, mapping, ctx, row_offset)
        col = table.column(names.index(src))
        if canon == "start_s":
            return to_start(col, src, factor, ctx, row_offset)
        return to_float(col, src, ctx, row_offset, factor)

    arrays = parallel_map(convert, numeric + flags, table.num_rows)
    cols = {canon: x for (canon, _, _), x in zip(numeric + flags, arrays, strict=True) if x is not None}
    _unit_hint(cols, mapping, ctx)
    return frame(cols), {canon: src for canon, src, _ in numeric}


def frame_to_run(converted: tuple[pd.DataFrame, dict[str, str]], ctx: Ctx, row_offset: int) -> Run:
    """Checks, TPOT and summary; the caller has dropped the Arrow table, so its pool pages can go first."""
    pa.default_memory_pool().release_unused()
    requests, sources = converted
    label = f"{PurePath(ctx.where).stem or 'requests'} ({len(requests):,} requests)"
    return build_run(label, ctx, requests=requests, names=sources, rows=("row", row_offset),
                     definitions={"ttft": "from the file, per request", "e2e": "from the file, per request"})


def _ok_column(table: pa.Table, names: list[str], mapping: dict[str, tuple[str, float]], ctx: Ctx,
               row_offset: int) -> np.ndarray | None:
    ok = None
    if "ok" in mapping:
        src = mapping["ok"][0]
        ok = to_ok(table.column(names.index(src)), src, ctx, row_offset)
    if "error" in mapping:
        src = mapping["error"][0]
        failed = to_failed(table.column(names.index(src)), src, ctx, row_offset)
        ok = ~failed if ok is None else ok & ~failed
    return ok


def _unit_hint(cols: dict[str, np.ndarray], mapping: dict[str, tuple[str, float]], ctx: Ctx) -> None:
    """Seconds are assumed when a latency column has no unit suffix; say so when values look like ms."""
    for canon in ("ttft_s", "e2e_s"):
        src, factor = mapping[canon]
        x = cols[canon]
        if normalize(src) in TIME_BASES and np.isfinite(x).any() and float(np.nanmedian(x)) > 100:
            ctx.notes.append(f"column {src} has no unit suffix and was read as seconds, but its median is "
                             f"{float(np.nanmedian(x)):.0f}; rename it {normalize(src)}_ms if it is milliseconds")


def parse_csv(data: bytes, ctx: Ctx) -> list[Run]:
    start = data[:4096].lstrip(b"\xef\xbb\xbf").lstrip()
    first = start.split(b"\n", 1)[0].decode("utf-8", "replace")
    delimiter = sniff_delimiter(first) or ","
    table = read_csv_table(data, delimiter, ctx)
    check_formulas(table, ctx)
    converted = table_to_frame(table, ctx, row_offset=2)
    del table
    return [frame_to_run(converted, ctx, row_offset=2)]


def parse_parquet(data: bytes, ctx: Ctx) -> list[Run]:
    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ctx.fail(f"not a readable Parquet file: {str(exc)[:200]}") from None
    converted = table_to_frame(table, ctx, row_offset=1)
    del table
    return [frame_to_run(converted, ctx, row_offset=1)]


def is_table_header(line: str) -> bool:
    """A per-request table: delimited column names, at least one of which we know."""
    delimiter = sniff_delimiter(line)
    return delimiter is not None and bool(known_columns(line, delimiter))


def is_parquet(data: bytes) -> bool:
    return data[:4] == b"PAR1"


register(BenchmarkFormat("generic_csv", "per-request CSV", "header", is_table_header, parse_csv, payload="bytes",
                         fallback=True))
register(BenchmarkFormat("generic_parquet", "per-request Parquet", "bytes", is_parquet, parse_parquet,
                         payload="bytes"))
