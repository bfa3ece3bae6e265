"""The experiment log: every verified change, its workload, files and measured deltas, in one SQLite file."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from triage.errors import TriageError
from triage.safe_text import csv_cell

APP_DIR = "inference-triage"
DB_NAME = "experiments.sqlite3"
BUSY_TIMEOUT_MS = 30_000

# Ordered; version N is MIGRATIONS[N - 1]. Never edit a shipped step: append a new one.
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
SCHEMA_VERSION = len(MIGRATIONS)
COLUMNS = ("id", "created_at", "who", "technique", "workload", "baseline_name", "baseline_sha256",
           "candidate_name", "candidate_sha256", "metrics", "overall", "note")


@dataclass
class Entry:
    """One verified change. ``metrics`` holds the comparison's per-metric rows (see verify.comparison_json)."""

    technique: str | None
    workload: dict[str, Any]
    baseline_name: str
    baseline_sha256: str
    candidate_name: str
    candidate_sha256: str
    metrics: list[dict[str, Any]]
    overall: str
    note: str = ""
    who: str | None = None
    id: int | None = None
    created_at: str | None = None


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def default_path() -> Path:
    """``$XDG_DATA_HOME/inference-triage/experiments.sqlite3``, else ``~/.local/share/inference-triage/…``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / APP_DIR / DB_NAME


def resolve_path(url_or_path: str | Path | None) -> Path:
    """A plain path, ``sqlite:///relative.db`` or ``sqlite:////absolute.db``; None is the default path."""
    if url_or_path is None:
        return default_path()
    text = str(url_or_path)
    if text.startswith("sqlite:///"):
        text = text.removeprefix("sqlite:///")
    elif "://" in text:
        raise TriageError("only sqlite:/// URLs or file paths are supported", where=text)
    if not text or text == ":memory:":
        raise TriageError("give a database file (an in-memory log would be lost)", where=str(url_or_path))
    return Path(text).expanduser()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL. Two processes creating the file at once can get SQLITE_BUSY here without the busy
    handler being consulted, so retry briefly (bounded by the busy timeout)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)  # back-off between retries of the pragma, not synchronization


def _connect(path: Path, check: bool = False) -> sqlite3.Connection:
    """A connection in WAL mode; with ``check``, ``PRAGMA quick_check`` first, so nothing is written into a
    damaged file (a TriageError instead)."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)  # explicit transactions
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if check:
            rows = [str(r[0]) for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
            if rows != ["ok"]:
                raise sqlite3.DatabaseError(f"database disk image is malformed ({'; '.join(rows)[:200]})")
        _wal(conn)
        conn.execute("PRAGMA synchronous = FULL")
    except BaseException:
        conn.close()
        raise
    return conn


def db_problem(exc: BaseException, path: Path) -> TriageError:
    """One clear line for what SQLite or the file system said: corrupt, read-only, busy, or unreadable."""
    text = str(exc).lower()
    if isinstance(exc, PermissionError) or "readonly" in text or "read-only" in text or "permission" in text:
        reason = ("the experiment log is read-only here; make it writable or choose another file with --db "
                  "(or TRIAGE_LOG_DB)")
    elif "not a database" in text or "malformed" in text or "corrupt" in text:
        reason = ("the experiment log is damaged (not a readable SQLite database); nothing was written to it — "
                  "move it aside or restore a copy, or choose another file with --db")
    elif "locked" in text or "busy" in text:
        reason = "the experiment log is locked by another writer; try again"
    elif isinstance(exc, OSError):
        reason = f"cannot open the experiment log: {exc.strerror or exc}"
    else:
        reason = f"cannot open the experiment log: {exc}"
    return TriageError(reason, where=str(path))


@contextmanager
def _write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction: BEGIN IMMEDIATE takes the write lock up front (waiting up to the busy timeout)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def schema_version(conn: sqlite3.Connection) -> int:
    """The file's schema version; 0 for a new file."""
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").fetchone()
    if not found:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0] or 0)


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every migration the file lacks, each in its own transaction; returns the final version."""
    if schema_version(conn) >= SCHEMA_VERSION:
        return schema_version(conn)
    for version, steps in enumerate(MIGRATIONS, start=1):
        with _write(conn):
            if schema_version(conn) >= version:  # re-read under the lock: another process may have done it
                continue
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            for sql in steps:
                conn.execute(sql)
            conn.execute("DELETE FROM schema_version")
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
    return schema_version(conn)


def _row_entry(row: sqlite3.Row) -> Entry:
    try:
        return _entry(row)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise TriageError(f"experiment {row['id']} is damaged in the log ({type(exc).__name__})") from None


def _entry(row: sqlite3.Row) -> Entry:
    return Entry(technique=row["technique"], workload=json.loads(row["workload"]), baseline_name=row["baseline_name"],
                 baseline_sha256=row["baseline_sha256"], candidate_name=row["candidate_name"],
                 candidate_sha256=row["candidate_sha256"], metrics=json.loads(row["metrics"]),
                 overall=row["overall"], note=row["note"], who=row["who"], id=row["id"], created_at=row["created_at"])


class ExperimentLog:
    """An SQLite experiment log (WAL, busy timeout): opening it creates or upgrades the schema."""

    def __init__(self, url_or_path: str | Path | None = None) -> None:
        self.path = resolve_path(url_or_path)
        if self.path.exists() and not self.path.is_file():
            raise TriageError("is not a regular file, so not an experiment log", where=str(self.path))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise db_problem(exc, self.path) from None
        with self._conn(check=True) as conn:
            self.version = migrate(conn)
        if self.version > SCHEMA_VERSION:
            raise TriageError(f"the log has schema version {self.version}; this app knows up to {SCHEMA_VERSION}",
                              where=str(self.path))

    @contextmanager
    def _conn(self, check: bool = False) -> Iterator[sqlite3.Connection]:
        """A connection; any SQLite or file-system failure inside becomes one clear TriageError."""
        try:
            conn = _connect(self.path, check)
        except (OSError, sqlite3.Error) as exc:
            raise db_problem(exc, self.path) from None
        try:
            yield conn
        except (OSError, sqlite3.Error) as exc:
            raise db_problem(exc, self.path) from None
        finally:
            conn.close()

    def save(self, entry: Entry) -> int:
        """Insert one entry in its own transaction; returns its id."""
        created = entry.created_at or _now()
        values = (created, entry.who, entry.technique, json.dumps(entry.workload, ensure_ascii=False),
                  entry.baseline_name, entry.baseline_sha256, entry.candidate_name, entry.candidate_sha256,
                  json.dumps(entry.metrics, ensure_ascii=False), entry.overall, entry.note or "")
        with self._conn() as conn, _write(conn):
            cur = conn.execute(f"INSERT INTO experiments ({', '.join(COLUMNS[1:])}) VALUES "
                               f"({', '.join('?' * len(values))})", values)
            assert cur.lastrowid is not None  # an INSERT always sets it
            return int(cur.lastrowid)

    def list(self, technique: str | None = None, verdict: str | None = None) -> list[Entry]:
        """Entries, oldest first, optionally only one technique and/or one overall verdict."""
        where, args = [], []
        for column, value in (("technique", technique), ("overall", verdict)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        sql = "SELECT * FROM experiments" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
        with self._conn() as conn:
            return [_row_entry(r) for r in conn.execute(sql, args)]

    def get(self, entry_id: int) -> Entry:
        with self._conn() as conn:
            row = conn.execute("SELECT * FROM experiments WHERE id = ?", (entry_id,)).fetchone()
        if row is None:
            raise TriageError(f"no experiment with id {entry_id}", where=str(self.path))
        return _row_entry(row)

    def export_csv(self) -> str:
        """Every entry as CSV, one row each; see ``csv_rows`` for the columns and the formula escaping."""
        return csv_text(self.list())


# ---------------------------------------------------------------- CSV export


def escape_cell(value: Any) -> Any:
    """OWASP CSV-injection guard, cleaning first: ``safe_text.csv_cell`` (the one function for every CSV cell)."""
    return csv_cell(value)


def _metric_columns(entries: list[Entry]) -> list[str]:
    seen: dict[str, None] = {}
    for e in entries:
        for m in e.metrics:
            seen.setdefault(str(m.get("metric")), None)
    return list(seen)


def csv_rows(entries: list[Entry]) -> list[list[Any]]:
    """Header + one row per entry: the record, the workload, and per metric its change and verdict."""
    metrics = _metric_columns(entries)
    work_keys = ["model", "prompt_tokens_median", "output_tokens_median", "offered_rate", "max_concurrency"]
    header = [*COLUMNS[:4], *COLUMNS[5:9], "overall", "note", *work_keys]
    header += [f"{m}_{part}" for m in metrics for part in ("change", "verdict")]
    rows: list[list[Any]] = [header]
    for e in entries:
        base = e.workload.get("baseline", e.workload)
        by_id = {str(m.get("metric")): m for m in e.metrics}
        row = [e.id, e.created_at, e.who, e.technique, e.baseline_name, e.baseline_sha256, e.candidate_name,
               e.candidate_sha256, e.overall, e.note, *(base.get(k) for k in work_keys)]
        for m in metrics:
            found = by_id.get(m, {})
            row += [found.get("delta"), found.get("verdict")]
        rows.append(row)
    return rows


def csv_text(entries: list[Entry]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)  # \r\n rows: a \r or \n inside a cell is then quoted
    for row in csv_rows(entries):
        writer.writerow(["" if v is None else escape_cell(v) for v in row])
    return out.getvalue()


def entry_from(comparison_json: dict[str, Any], baseline: tuple[str, bytes | str], candidate: tuple[str, bytes | str],
               who: str | None = None, note: str = "") -> Entry:
    """An entry for a comparison (``verify.comparison_json``) of two files given as (name, bytes) or
    (name, the bytes' SHA-256 in hex, as the pages keep it once the upload's bytes are released)."""
    def digest(data: bytes | str) -> str:
        return data if isinstance(data, str) else sha256(data)

    return Entry(technique=comparison_json.get("technique"), workload=comparison_json.get("workload", {}),
                 baseline_name=baseline[0], baseline_sha256=digest(baseline[1]),
                 candidate_name=candidate[0], candidate_sha256=digest(candidate[1]),
                 metrics=comparison_json.get("metrics", []), overall=comparison_json["overall"], note=note, who=who)
