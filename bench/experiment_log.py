"""Experiment-log latency on SQLite and PostgreSQL with a large log: one save, the full list, a filtered list,
and one page of the Log page against the full list.

The log is filled to ``--rows`` rows in bulk (one multi-row INSERT per 5,000, not timed), then timed through the
public API: ``--writes`` single ``save()`` calls (each its own connection checkout and committed transaction:
SQLite fsyncs with ``synchronous = FULL``), ``list()`` of every row (JSON parsed into entries, as the Log page
and the CSV export do), ``list(technique=…)`` (the indexed filter, 1 row in 50) and ``page()`` (what the Log page
reads per run: 50 rows newest first and the count, at the first page, the middle and one filtered).

Usage (from the repo root):
    .venv/bin/python -m bench.experiment_log [--rows 100000] [--writes 200] [--postgres URL]
Without --postgres a throw-away PostgreSQL 15 is started like the tests do (tests/pg_harness.py), but with fsync on,
so both engines' commits reach the disk.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from tests.test_experiment_log import entry
from triage.store.schema import experiments
from triage.verify.experiment_log import ExperimentLog

ROOT = Path(__file__).resolve().parents[1]

BATCH = 5_000
PAGE = 50  # the Log page's page size (components/log_view.PAGE_SIZE)


def fill(log: ExperimentLog, rows: int) -> None:
    template = {"created_at": "2026-12-01T00:00:00+00:00", "who": "bench", "workload": json.dumps(
        {"baseline": {"model": "llama", "prompt_tokens_median": 800.0}}), "baseline_name": "base.json",
        "baseline_sha256": "a" * 64, "candidate_name": "cand.json", "candidate_sha256": "b" * 64,
        "metrics": json.dumps([{"metric": "ttft_p50", "delta": -42.0, "verdict": "gain"}]),
        "overall": "gain confirmed", "note": "", "created_by": "bench"}
    done = 0
    while done < rows:
        n = min(BATCH, rows - done)
        batch = [{**template, "technique": "rare" if (done + i) % 50 == 0 else "chunked_prefill"} for i in range(n)]
        with log.engine.connect().execution_options(triage_write=True) as conn, conn.begin():
            conn.execute(experiments.insert(), batch)
        done += n


def timed(fn: Callable[[], object], times: int) -> list[float]:
    out = []
    for _ in range(times):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) >= 2 else values[0]


def run(name: str, target: str, rows: int, writes: int) -> None:
    log = ExperimentLog(target)
    start = time.perf_counter()
    fill(log, rows)
    filled = time.perf_counter() - start
    saves = timed(lambda: log.save(entry(note="timed")), writes)
    full = timed(lambda: log.list(), 3)
    rare = timed(lambda: log.list(technique="rare"), 20)
    count = len(log.list(technique="rare"))
    first = timed(lambda: log.page(PAGE), 20)
    middle = timed(lambda: log.page(PAGE, offset=(rows + writes) // 2), 20)
    filtered = timed(lambda: log.page(PAGE, technique="rare"), 20)
    print(f"{name:<10} {rows + writes:>8,} rows (bulk fill {filled:5.1f} s) | save p50 {pct(saves, 50):7.2f} ms "
          f"p99 {pct(saves, 99):7.2f} ms | list all {statistics.median(full):8.1f} ms | "
          f"list one technique ({count:,} rows) {statistics.median(rare):7.1f} ms", flush=True)
    print(f"{'':<10} page of {PAGE} + count: first {statistics.median(first):6.1f} ms | middle "
          f"{statistics.median(middle):6.1f} ms | one technique {statistics.median(filtered):6.1f} ms | "
          f"{statistics.median(full) / statistics.median(first):,.0f}x faster than the full list", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--postgres", default=None, help="an empty database's postgresql:// URL")
    args = parser.parse_args()
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="triage-bench-log-")))
        run("sqlite", str(folder / "log.sqlite3"), args.rows, args.writes)
        url = args.postgres
        if url is None:
            from tests.pg_harness import postgres_server

            url = stack.enter_context(postgres_server(durable=True)).new_database()
        run("postgresql", url, args.rows, args.writes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
