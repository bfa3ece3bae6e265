"""Load a benchmark file: detect its registered format, parse it, check it; every failure is a TriageError."""

from __future__ import annotations

import time

import triage.sources.files.builtin  # noqa: F401 - registers the formats this version ships
from triage.errors import TriageError
from triage.run import Benchmark
from triage.sources.files.common import Ctx, dedupe_labels
from triage.sources.files.detect import sniff
from triage.sources.files.registry import BENCHMARK_FORMATS, BenchmarkFormat


def formats() -> list[BenchmarkFormat]:
    """Every benchmark format this process reads, in listing order (the shipped ones and any registered since)."""
    return BENCHMARK_FORMATS.all()


def _wrap(exc: BaseException, name: str, fmt: str | None) -> TriageError:
    """Any non-TriageError becomes one, naming the file and the format we tried."""
    if isinstance(exc, TriageError):
        return exc if exc.where else type(exc)(exc.reason, where=name, key=exc.key)
    if isinstance(exc, RecursionError):
        return TriageError("data is nested too deeply to read", where=name)
    if isinstance(exc, MemoryError):
        return TriageError("file is too large to read in memory", where=name)
    what = f"as {BENCHMARK_FORMATS.title(fmt)}" if fmt else "the file"
    detail = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
    return TriageError(f"could not read {what}: {type(exc).__name__}{': ' + detail if detail else ''}", where=name)


def detect_format(data: bytes, name: str, quote: bool = True) -> str:
    """The id of the registered format of a benchmark file; TriageError if it is not one we read."""
    try:
        return sniff(data, name, quote).fmt
    except Exception as exc:  # noqa: BLE001 - everything becomes a TriageError
        raise _wrap(exc, name, None) from exc


def load_benchmark(data: bytes, name: str, quote: bool = True) -> Benchmark:
    """Detect and parse a benchmark file into runs in canonical units; raises TriageError only. ``quote=False``
    when the bytes came from a path that is not a plain regular file of the user's: no message quotes them."""
    started = time.perf_counter()
    fmt: BenchmarkFormat | None = None
    ctx = Ctx(name, quote=quote)
    try:
        sniffed = sniff(data, name, quote)
        fmt = BENCHMARK_FORMATS.get(sniffed.fmt)
        if fmt is None:  # unregistered between the sniff and here (a test's restore): not a format we read now
            raise ctx.fail(f"format {sniffed.fmt} is no longer registered")
        runs = fmt.parse(sniffed.payload, ctx)
        if not runs:
            raise ctx.fail(f"no runs found in this {fmt.title}")
        dedupe_labels(runs)
    except Exception as exc:  # noqa: BLE001 - everything becomes a TriageError
        raise _wrap(exc, name, fmt.id if fmt else None) from exc
    return Benchmark(source=name, format=fmt.id, runs=runs, parse_seconds=time.perf_counter() - started,
                     notes=ctx.notes)
