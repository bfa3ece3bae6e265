"""Engines for the store's URL (a SQLite file path / ``sqlite:///`` URL, or ``postgresql://``) and its upgrade.

SQLite: WAL, a busy timeout, ``synchronous = FULL``, a fresh connection per use (NullPool, as the file may be
moved or replaced between uses) and ``BEGIN IMMEDIATE`` for writes so two writers queue instead of failing.
PostgreSQL (psycopg 3): one pooled engine per URL and process, ``pool_pre_ping`` so a restarted server is
survived. Migrations (Alembic, ``migrations/``) run at open, inside one transaction holding a lock (SQLite's
write lock, PostgreSQL's advisory lock), so replicas starting together upgrade once. One chain of revisions holds
both the experiment log and the receiver's incidents: one database (or file) can hold both, and whichever opens it
first upgrades both tables.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.pool import NullPool

from triage.errors import TriageError

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
BUSY_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10
WRITE = "triage_write"  # execution option: this transaction writes (SQLite: BEGIN IMMEDIATE)
# pg_advisory_xact_lock key for migrations: any constant shared by every replica ("triage" in ASCII)
MIGRATION_LOCK = 0x747269616765
POSTGRES_SCHEMES = ("postgresql", "postgresql+psycopg", "postgres")

_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def sqlite_path(url_or_path: str | Path) -> Path:
    """A plain path, ``sqlite:///relative.db`` or ``sqlite:////absolute.db`` as a file path."""
    text = str(url_or_path)
    if text.startswith("sqlite:///"):
        text = text.removeprefix("sqlite:///")
    elif "://" in text:
        raise TriageError("only sqlite:/// or postgresql:// URLs, or file paths, are supported", where=text)
    if not text or text == ":memory:":
        raise TriageError("give a database file (an in-memory log would be lost)", where=str(url_or_path))
    return Path(text).expanduser()


def is_postgres(url_or_path: str | Path) -> bool:
    text = str(url_or_path)
    return "://" in text and text.split("://", 1)[0].lower() in POSTGRES_SCHEMES


def postgres_url(text: str) -> URL:
    """``postgresql://`` / ``postgres://`` on the psycopg 3 driver (SQLAlchemy's default would be psycopg2)."""
    try:
        url = make_url(text)
    except sa.exc.ArgumentError:
        raise TriageError("is not a valid postgresql:// URL", where=shown(text)) from None
    if not url.database:
        raise TriageError("the postgresql:// URL names no database", where=shown(text))
    return url.set(drivername="postgresql+psycopg")


def shown(text: str) -> str:
    """The URL as it may be shown: password masked."""
    try:
        return make_url(text).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return "postgresql://…"  # unparseable: show nothing of it, it may hold a password


def _sqlite_wal(dbapi: sqlite3.Connection) -> None:
    """Switch to WAL. Two processes creating the file at once can get SQLITE_BUSY here without the busy
    handler being consulted, so retry briefly (bounded by the busy timeout)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            dbapi.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)  # back-off between retries of the pragma, not synchronization


def sqlite_engine(path: Path) -> Engine:
    engine = sa.create_engine(f"sqlite:///{path}", poolclass=NullPool,
                              connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi: Any, _record: Any) -> None:
        dbapi.isolation_level = None  # the driver's own implicit BEGINs off: ours below are explicit
        dbapi.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _sqlite_wal(dbapi)
        dbapi.execute("PRAGMA synchronous = FULL")

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # a writer takes the write lock up front (waiting up to the busy timeout) rather than failing on upgrade
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE) else "BEGIN")

    return engine


def postgres_engine(url: URL) -> Engine:
    """The process's pooled engine for this URL (Streamlit reruns and threads share it)."""
    key = url.render_as_string(hide_password=False)
    with _engines_lock:
        engine = _engines.get(key)
        if engine is None:
            engine = sa.create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=15,
                                      connect_args={"connect_timeout": CONNECT_TIMEOUT_S,
                                                    "application_name": "inference-triage"})
            _engines[key] = engine
        return engine


def sqlite_quick_check(path: Path) -> None:
    """``PRAGMA quick_check`` before anything is written, so a damaged file is refused, never written into."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        rows = [str(r[0]) for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
    finally:
        conn.close()
    if rows != ["ok"]:
        raise sqlite3.DatabaseError(f"database disk image is malformed ({'; '.join(rows)[:200]})")


# ---------------------------------------------------------------- migrations

_script: ScriptDirectory | None = None


def _config(conn: Connection) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["connection"] = conn
    return cfg


def script() -> ScriptDirectory:
    global _script
    if _script is None:
        _script = ScriptDirectory(str(MIGRATIONS_DIR))
    return _script


def head_version() -> int:
    """The newest revision as a number (revisions are "0001", "0002", …)."""
    head = script().get_current_head()
    assert head is not None  # the package ships its revisions
    return int(head)


def legacy_version(conn: Connection) -> int:
    """The hand-written SQLite log's ``schema_version`` (0 when absent); kept up to date as a guard, so a
    replica still running code from before Alembic refuses a newer file instead of re-creating tables."""
    if not sa.inspect(conn).has_table("schema_version"):
        return 0
    return int(conn.exec_driver_sql("SELECT MAX(version) FROM schema_version").scalar() or 0)


def upgrade(engine: Engine, where: str) -> int:
    """Bring the database to the newest revision in one locked transaction; returns the version number.

    A database newer than this code (an unknown revision, or a higher legacy version) is refused untouched."""
    head = head_version()
    known = {rev.revision for rev in script().walk_revisions()}
    with engine.connect().execution_options(**{WRITE: True}) as conn, conn.begin():
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        current = MigrationContext.configure(conn).get_current_revision()
        legacy = legacy_version(conn) if conn.dialect.name == "sqlite" else 0
        if (current is not None and current not in known) or legacy > head:
            shown_version = current if current is not None and current not in known else legacy
            raise TriageError(f"the log has schema version {shown_version}; this app knows up to {head}",
                              where=where)
        if current != f"{head:04d}":
            cfg = _config(conn)
            incidents_v1 = current is None and _set_aside_legacy_incidents(conn, where)
            if current is None and legacy:  # a log from before Alembic: its tables match revision `legacy`
                command.stamp(cfg, f"{legacy:04d}")
            command.upgrade(cfg, "head")
            if incidents_v1:
                _copy_legacy_incidents(conn)
        if conn.dialect.name == "sqlite" and legacy != head:
            conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            conn.exec_driver_sql("DELETE FROM schema_version")
            conn.exec_driver_sql(f"INSERT INTO schema_version (version) VALUES ({head})")
        if conn.dialect.name == "sqlite" and int(conn.exec_driver_sql("PRAGMA user_version").scalar() or 0) < head:
            # the receiver's hand-written store refused files whose user_version exceeds its own (1): an old
            # receiver now refuses this file instead of writing into a table it no longer knows the shape of
            conn.exec_driver_sql(f"PRAGMA user_version = {head}")
    return head


# the hand-written SQLite incident store's columns (its user_version 1); revision 0005 has the same ones
LEGACY_INCIDENT_COLUMNS = ("id", "fingerprint", "starts_at", "alertname", "labels", "replica", "status", "ends_at",
                           "cause", "message", "diagnosis", "error", "link", "received_at")
LEGACY_INCIDENTS = "incidents_v1"


def _set_aside_legacy_incidents(conn: Connection, where: str) -> bool:
    """A receiver's incident file from before Alembic (an ``incidents`` table, no Alembic revision): rename its
    table so revision 0005 can create the new one; the rows are copied back after the upgrade. True if so."""
    if conn.dialect.name != "sqlite" or not sa.inspect(conn).has_table("incidents"):
        return False
    if int(conn.exec_driver_sql("PRAGMA user_version").scalar() or 0) > 1:
        raise TriageError("written by a newer version of the receiver", where=where)
    found = {c["name"] for c in sa.inspect(conn).get_columns("incidents")}
    if not set(LEGACY_INCIDENT_COLUMNS) <= found:
        raise TriageError("has an incidents table that is not the receiver's; nothing was changed", where=where)
    conn.exec_driver_sql(f"ALTER TABLE incidents RENAME TO {LEGACY_INCIDENTS}")
    return True


def _copy_legacy_incidents(conn: Connection) -> None:
    """The set-aside rows into revision 0005's table, ids kept (SQLite's AUTOINCREMENT counter follows them)."""
    columns = ", ".join(LEGACY_INCIDENT_COLUMNS)
    conn.exec_driver_sql(f"INSERT INTO incidents ({columns}) SELECT {columns} FROM {LEGACY_INCIDENTS} ORDER BY id")
    conn.exec_driver_sql(f"DROP TABLE {LEGACY_INCIDENTS}")


def env_url() -> str | None:
    return os.environ.get("TRIAGE_LOG_DB") or None
