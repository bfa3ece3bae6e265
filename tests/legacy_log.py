"""The experiment log's hand-written SQLite schema from before SQLAlchemy/Alembic (issue 29), verbatim, so tests
can build the files that deployed apps wrote and check they upgrade in place."""

from __future__ import annotations

import sqlite3
from pathlib import Path

# Copied from triage/verify/experiment_log.py at commit 6555ea0: version N is MIGRATIONS[N - 1].
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    ("""CREATE TABLE experiments (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            created_at TEXT NOT NULL,
            technique TEXT,
            workload TEXT NOT NULL,
            baseline_name TEXT NOT NULL,
            baseline_sha256 TEXT NOT NULL,
            candidate_name TEXT NOT NULL,
            candidate_sha256 TEXT NOT NULL,
            metrics TEXT NOT NULL,
            overall TEXT NOT NULL)""",),
    ("ALTER TABLE experiments ADD COLUMN who TEXT",
     "ALTER TABLE experiments ADD COLUMN note TEXT NOT NULL DEFAULT ''"),
    ("CREATE INDEX experiments_technique_overall ON experiments (technique, overall)",),
)


def legacy_sqlite_log(path: Path, version: int = 3, rows: int = 3) -> None:
    """A log file as the old code left it at ``version``, holding ``rows`` experiments (ids 1..rows)."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for steps in MIGRATIONS[:version]:
        for sql in steps:
            conn.execute(sql)
    conn.execute("INSERT INTO schema_version VALUES (?)", (version,))
    extra = ", who, note" if version >= 2 else ""
    for i in range(1, rows + 1):
        values = [f"2024-01-0{i % 9 + 1}T00:00:00+00:00", "prefix_caching" if i % 2 else "chunked_prefill",
                  '{"baseline": {"model": "llama"}}', f"base{i}.json", "a" * 64, f"cand{i}.json", "b" * 64,
                  '[{"metric": "ttft_p99", "delta": -12.5, "verdict": "gain"}]', "gain confirmed"]
        if version >= 2:
            values += [f"person{i}", f"note {i}"]
        conn.execute("INSERT INTO experiments (created_at, technique, workload, baseline_name, baseline_sha256, "
                     f"candidate_name, candidate_sha256, metrics, overall{extra}) VALUES "
                     f"({', '.join('?' * len(values))})", values)
    conn.commit()
    conn.close()
