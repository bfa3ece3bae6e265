"""The experiment log: every verified change, its workload, files, measured deltas and who recorded it."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from triage.errors import TriageError
from triage.safe_text import csv_cell
from triage.store import database
from triage.store.schema import experiments

APP_DIR = "inference-triage"
DB_NAME = "experiments.sqlite3"
BUSY_TIMEOUT_MS = database.BUSY_TIMEOUT_MS
LOCAL_USER = "local"  # created_by when nobody signed in (sign-in off, or the command line)

SCHEMA_VERSION = database.head_version()
COLUMNS = ("id", "created_at", "who", "technique", "workload", "baseline_name", "baseline_sha256",
           "candidate_name", "candidate_sha256", "metrics", "overall", "note")


@dataclass
class Entry:
    """One verified change. ``metrics`` holds the comparison's per-metric rows (see verify.comparison_json);
    ``who`` is the person the form names, ``created_by`` the account that recorded it."""

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
    created_by: str | None = None


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def default_path() -> Path:
    """``$XDG_DATA_HOME/inference-triage/experiments.sqlite3``, else ``~/.local/share/inference-triage/…``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / APP_DIR / DB_NAME


def resolve_path(url_or_path: str | Path | None) -> Path:
    """A SQLite log's file: a plain path, ``sqlite:///relative.db`` or ``sqlite:////absolute.db``; None is the
    default path. (A ``postgresql://`` URL is no file: ExperimentLog takes it, this refuses it.)"""
    return default_path() if url_or_path is None else database.sqlite_path(url_or_path)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def db_problem(exc: BaseException, where: str | Path) -> TriageError:
    """One clear line for what the database or the file system said: corrupt, read-only, busy, unreachable."""
    orig = getattr(exc, "orig", None) or exc  # SQLAlchemy wraps the driver's error
    text = str(orig).lower()
    first = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
    if isinstance(orig, PermissionError) or "readonly" in text or "read-only" in text or "permission" in text:
        reason = ("the experiment log is read-only here; make it writable or choose another file with --db "
                  "(or TRIAGE_LOG_DB)")
    elif "not a database" in text or "malformed" in text or "corrupt" in text:
        reason = ("the experiment log is damaged (not a readable SQLite database); nothing was written to it — "
                  "move it aside or restore a copy, or choose another file with --db")
    elif "locked" in text or "busy" in text:
        reason = "the experiment log is locked by another writer; try again"
    elif isinstance(orig, OSError):
        reason = f"cannot open the experiment log: {orig.strerror or orig}"
    elif isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError):
        reason = f"cannot reach the experiment log database: {first}"
    else:
        reason = f"cannot open the experiment log: {first}"
    return TriageError(reason, where=str(where))


def schema_version(conn: sqlite3.Connection) -> int:
    """A SQLite log file's ``schema_version`` guard table (see ``database.legacy_version``); 0 for a new file."""
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").fetchone()
    if not found:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0] or 0)


def _row_entry(row: sa.Row[Any]) -> Entry:
    try:
        return _entry(row._mapping)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise TriageError(f"experiment {row._mapping['id']} is damaged in the log ({type(exc).__name__})") from None


def _entry(row: Any) -> Entry:
    return Entry(technique=row["technique"], workload=json.loads(row["workload"]), baseline_name=row["baseline_name"],
                 baseline_sha256=row["baseline_sha256"], candidate_name=row["candidate_name"],
                 candidate_sha256=row["candidate_sha256"], metrics=json.loads(row["metrics"]),
                 overall=row["overall"], note=row["note"], who=row["who"], id=row["id"], created_at=row["created_at"],
                 created_by=row["created_by"])


Entries = list[Entry]  # (in ExperimentLog, ``list`` names its method)


def _filtered(query: Any, technique: str | None, verdict: str | None) -> Any:
    """``query`` restricted to one technique and/or one overall verdict (None: any)."""
    if technique is not None:
        query = query.where(experiments.c.technique == technique)
    if verdict is not None:
        query = query.where(experiments.c.overall == verdict)
    return query


class ExperimentLog:
    """The experiment log on SQLAlchemy Core: an SQLite file (the default) or PostgreSQL (``postgresql://``).

    Opening it creates or upgrades the schema (Alembic, ``triage/store/migrations``). ``None`` means
    ``TRIAGE_LOG_DB`` when set, else the SQLite file in the user's data directory.
    """

    def __init__(self, url_or_path: str | Path | None = None) -> None:
        target = url_or_path if url_or_path is not None else database.env_url()
        self.path: Path | None = None
        self.engine: Engine
        if target is not None and database.is_postgres(target):
            url = database.postgres_url(str(target))
            self.where = database.shown(str(target))
            self.engine = database.postgres_engine(url)
        else:
            self.path = resolve_path(target)
            self.where = str(self.path)
            if self.path.exists() and not self.path.is_file():
                raise TriageError("is not a regular file, so not an experiment log", where=self.where)
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if self.path.exists():
                    database.sqlite_quick_check(self.path)
            except (OSError, sqlite3.Error) as exc:
                raise db_problem(exc, self.where) from None
            self.engine = database.sqlite_engine(self.path)
        with self._guard():
            self.version = database.upgrade(self.engine, self.where)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Any driver or file-system failure inside becomes one clear TriageError (never the URL's password)."""
        try:
            yield
        except (OSError, sqlite3.Error, sa.exc.SQLAlchemyError) as exc:
            raise db_problem(exc, self.where) from None

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._guard(), self.engine.connect() as conn, conn.begin():
            yield conn

    def save(self, entry: Entry) -> int:
        """Insert one entry in its own transaction; returns its id."""
        values = {"created_at": entry.created_at or _now(), "who": entry.who, "technique": entry.technique,
                  "workload": json.dumps(entry.workload, ensure_ascii=False), "baseline_name": entry.baseline_name,
                  "baseline_sha256": entry.baseline_sha256, "candidate_name": entry.candidate_name,
                  "candidate_sha256": entry.candidate_sha256,
                  "metrics": json.dumps(entry.metrics, ensure_ascii=False), "overall": entry.overall,
                  "note": entry.note or "", "created_by": entry.created_by or LOCAL_USER}
        with self._guard(), self.engine.connect().execution_options(**{database.WRITE: True}) as conn, conn.begin():
            new_id = conn.execute(experiments.insert().values(**values).returning(experiments.c.id)).scalar_one()
        return int(new_id)

    def list(self, technique: str | None = None, verdict: str | None = None) -> list[Entry]:
        """Entries, oldest first, optionally only one technique and/or one overall verdict."""
        query = _filtered(sa.select(experiments), technique, verdict).order_by(experiments.c.id)
        with self._read() as conn:
            rows = conn.execute(query).fetchall()
        return [_row_entry(r) for r in rows]

    def page(self, limit: int, offset: int = 0, technique: str | None = None,
             verdict: str | None = None) -> tuple[Entries, int]:
        """One page of entries, newest first, and how many match in all: the filters, the order and the
        LIMIT/OFFSET are the database's, so a page of 50 parses 50 rows whatever the log's size."""
        if limit < 1 or offset < 0:
            raise TriageError(f"a page needs a positive size and a non-negative start (got {limit}, {offset})")
        rows_query = _filtered(sa.select(experiments), technique, verdict).order_by(experiments.c.id.desc()) \
            .limit(limit).offset(offset)
        count_query = _filtered(sa.select(sa.func.count()).select_from(experiments), technique, verdict)
        with self._read() as conn:  # one transaction: the count and the page see the same rows
            total = int(conn.execute(count_query).scalar_one())
            rows = conn.execute(rows_query).fetchall()
        return [_row_entry(r) for r in rows], total

    def get(self, entry_id: int) -> Entry:
        with self._read() as conn:
            row = conn.execute(sa.select(experiments).where(experiments.c.id == entry_id)).first()
        if row is None:
            raise TriageError(f"no experiment with id {entry_id}", where=self.where)
        return _row_entry(row)

    def export_csv(self) -> str:
        """Every entry as CSV, one row each; see ``csv_rows`` for the columns and the formula escaping."""
        return csv_text(self.list())

    def copy_to(self, target: ExperimentLog) -> int:
        """Every row of this log into ``target``, which must be empty (a team moving its SQLite log onto
        PostgreSQL): ids, times, who and created_by kept, the id sequence moved past them; one transaction, so
        an interrupted copy leaves the target empty. Returns the number of rows copied."""
        with self._read() as conn:
            rows = [dict(r._mapping) for r in conn.execute(sa.select(experiments).order_by(experiments.c.id))]
        with target._guard(), target.engine.connect().execution_options(**{database.WRITE: True}) as conn, \
                conn.begin():
            if conn.execute(sa.select(sa.func.count()).select_from(experiments)).scalar_one():
                raise TriageError("the target log already holds experiments; copy only into a new, empty log "
                                  "(nothing was copied)", where=target.where)
            if rows:
                conn.execute(experiments.insert(), rows)
            if conn.dialect.name == "postgresql":  # explicit ids leave the sequence behind: the next save follows
                conn.execute(sa.text("SELECT setval(pg_get_serial_sequence('experiments', 'id'), "
                                     "COALESCE(MAX(id), 0) + 1, false) FROM experiments"))
        return len(rows)


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
               who: str | None = None, note: str = "", created_by: str | None = None) -> Entry:
    """An entry for a comparison (``verify.comparison_json``) of two files given as (name, bytes) or
    (name, the bytes' SHA-256 in hex, as the pages keep it once the upload's bytes are released)."""
    def digest(data: bytes | str) -> str:
        return data if isinstance(data, str) else sha256(data)

    return Entry(technique=comparison_json.get("technique"), workload=comparison_json.get("workload", {}),
                 baseline_name=baseline[0], baseline_sha256=digest(baseline[1]),
                 candidate_name=candidate[0], candidate_sha256=digest(candidate[1]),
                 metrics=comparison_json.get("metrics", []), overall=comparison_json["overall"], note=note, who=who,
                 created_by=created_by)
