"""The incident store: one row per alert (fingerprint + startsAt) the receiver handled, so a retro starts from what
on-call saw. The Retro page lists it.

It lives in the experiment log's database stack (``triage/store``: SQLAlchemy Core, Alembic revision 0005): a
SQLite file (a path or ``sqlite:///`` URL; the embedded default) or PostgreSQL (``postgresql://``), and may share
one database with the experiment log. Opening it migrates it; a file the receiver wrote before that (its
hand-written schema, ``PRAGMA user_version`` 1) is upgraded in place, rows and ids kept.

Table ``incidents`` (``triage/store/schema.py``)::

    incidents(id INTEGER PRIMARY KEY,
              fingerprint TEXT, starts_at TEXT,        -- the alert's identity (ISO 8601, UTC); UNIQUE together
              alertname TEXT, labels TEXT,              -- the alert's labels as a JSON object
              replica TEXT,                             -- the labels the diagnosis matched on (JSON object)
              status TEXT,                              -- firing | resolved
              ends_at TEXT,                             -- set by the resolved notification (never re-diagnosed)
              cause TEXT,                               -- the leading finding's cause id; NULL: none or not diagnosed
              message TEXT,                             -- the message on-call got
              diagnosis TEXT,                           -- diagnose --json of the window; NULL when it could not
              error TEXT,                               -- "could not diagnose: …"
              link TEXT,                                -- the Live link
              received_at TEXT)
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine

from triage.errors import TriageError
from triage.store import database
from triage.store.schema import incidents

COLUMNS = tuple(c.name for c in incidents.columns)


@dataclass(frozen=True)
class Incident:
    """One stored row; JSON columns decoded."""

    id: int
    fingerprint: str
    starts_at: str
    alertname: str
    labels: dict[str, str]
    replica: dict[str, str]
    status: str
    ends_at: str | None
    cause: str | None
    message: str
    diagnosis: dict[str, Any] | None
    error: str | None
    link: str
    received_at: str


def iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class IncidentStore:
    """The store at ``url_or_path`` (a SQLite file path, ``sqlite:///`` or ``postgresql://`` URL); safe to share
    between threads and processes (each call its own transaction; PostgreSQL's engine pooled per process)."""

    def __init__(self, url_or_path: str | Path) -> None:
        text = str(url_or_path)
        self.path: Path | None = None
        self.engine: Engine
        if database.is_postgres(text):
            self.where = database.shown(text)
            self.engine = database.postgres_engine(database.postgres_url(text))
        else:
            self.path = database.sqlite_path(url_or_path)
            self.where = str(self.path)
            if self.path.exists() and not self.path.is_file():
                raise TriageError("is not a regular file, so not an incident store", where=self.where)
            with self._guard():
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if self.path.exists():
                    database.sqlite_quick_check(self.path)  # a damaged file is refused, never written into
            self.engine = database.sqlite_engine(self.path)
        with self._guard():
            database.upgrade(self.engine, self.where)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """A driver or file-system failure becomes one TriageError naming the store (never a URL's password)."""
        try:
            yield
        except (OSError, sqlite3.Error, sa.exc.SQLAlchemyError) as exc:
            orig = getattr(exc, "orig", None) or exc  # SQLAlchemy wraps the driver's error
            first = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
            raise TriageError(f"not a usable incident store ({first[:200]})", where=self.where) from None

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self._guard(), self.engine.connect().execution_options(**{database.WRITE: True}) as conn, \
                conn.begin():
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._guard(), self.engine.connect() as conn, conn.begin():
            yield conn

    def record(self, *, fingerprint: str, starts_at: datetime, alertname: str, labels: dict[str, str],
               replica: dict[str, str], cause: str | None, message: str, diagnosis: dict[str, Any] | None,
               error: str | None, link: str) -> int | None:
        """Add an incident; None when this alert (fingerprint + startsAt) is already stored."""
        values = {"fingerprint": fingerprint, "starts_at": iso(starts_at), "alertname": alertname,
                  "labels": json.dumps(labels, ensure_ascii=False), "replica": json.dumps(replica, ensure_ascii=False),
                  "status": "firing", "ends_at": None, "cause": cause, "message": message,
                  "diagnosis": json.dumps(diagnosis, ensure_ascii=False) if diagnosis is not None else None,
                  "error": error, "link": link, "received_at": iso(datetime.now(UTC))}
        insert = postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert
        # ON CONFLICT DO NOTHING: two receivers (or a retry) storing the same alert at once store it once, and
        # neither fails (PostgreSQL makes the second wait for the first's commit, then skip)
        statement = (insert(incidents).values(**values)
                     .on_conflict_do_nothing(index_elements=["fingerprint", "starts_at"])
                     .returning(incidents.c.id))
        with self._write() as conn:
            new_id = conn.execute(statement).scalar()
        return int(new_id) if new_id is not None else None

    def resolve(self, fingerprint: str, starts_at: datetime, ends_at: datetime | None) -> bool:
        """Mark the incident resolved; False when the store has no such alert."""
        end = iso(ends_at) if ends_at is not None and ends_at.year > 1 else iso(datetime.now(UTC))
        statement = (incidents.update()
                     .where(incidents.c.fingerprint == fingerprint, incidents.c.starts_at == iso(starts_at))
                     .values(status="resolved", ends_at=end))
        with self._write() as conn:
            return conn.execute(statement).rowcount > 0

    def recent(self, limit: int = 50) -> list[Incident]:
        """The newest incidents first."""
        statement = (sa.select(*incidents.columns)
                     .order_by(incidents.c.starts_at.desc(), incidents.c.id.desc()).limit(int(limit)))
        with self._read() as conn:
            rows = conn.execute(statement).all()
        return [_incident(tuple(r)) for r in rows]

    def count(self) -> int:
        with self._read() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(incidents)).scalar_one())


def _incident(row: tuple) -> Incident:
    data = dict(zip(COLUMNS, row, strict=True))
    for key in ("labels", "replica"):
        data[key] = json.loads(data[key])
    data["diagnosis"] = json.loads(data["diagnosis"]) if data["diagnosis"] else None
    return Incident(**data)
