"""The incident store: one SQLite file, one row per alert (fingerprint + startsAt) the receiver handled, so a
retro starts from what on-call saw. The Retro page lists it.

Schema (version 1, ``PRAGMA user_version``)::

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
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from triage.errors import TriageError

SCHEMA = """CREATE TABLE IF NOT EXISTS incidents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    fingerprint TEXT NOT NULL,
    starts_at TEXT NOT NULL,
    alertname TEXT NOT NULL,
    labels TEXT NOT NULL,
    replica TEXT NOT NULL,
    status TEXT NOT NULL,
    ends_at TEXT,
    cause TEXT,
    message TEXT NOT NULL,
    diagnosis TEXT,
    error TEXT,
    link TEXT NOT NULL,
    received_at TEXT NOT NULL,
    UNIQUE (fingerprint, starts_at))"""
VERSION = 1
BUSY_TIMEOUT_S = 2.0
COLUMNS = ("id", "fingerprint", "starts_at", "alertname", "labels", "replica", "status", "ends_at", "cause",
           "message", "diagnosis", "error", "link", "received_at")


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
    """The SQLite file at ``path``; safe to share between threads (one connection per call)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as db:
                if db.execute("PRAGMA user_version").fetchone()[0] > VERSION:
                    raise TriageError("written by a newer version of the receiver", where=str(self.path))
                db.execute(SCHEMA)
                db.execute(f"PRAGMA user_version = {VERSION}")
        except sqlite3.DatabaseError as exc:
            raise TriageError(f"not a usable incident store ({exc})", where=str(self.path)) from None

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S)
        try:
            with db:
                yield db
        finally:
            db.close()

    def record(self, *, fingerprint: str, starts_at: datetime, alertname: str, labels: dict[str, str],
               replica: dict[str, str], cause: str | None, message: str, diagnosis: dict[str, Any] | None,
               error: str | None, link: str) -> int | None:
        """Add an incident; None when this alert (fingerprint + startsAt) is already stored."""
        row = (fingerprint, iso(starts_at), alertname, json.dumps(labels, ensure_ascii=False),
               json.dumps(replica, ensure_ascii=False), "firing", None, cause, message,
               json.dumps(diagnosis, ensure_ascii=False) if diagnosis is not None else None, error, link,
               iso(datetime.now(UTC)))
        with self._lock, self._connect() as db:
            cur = db.execute(f"INSERT OR IGNORE INTO incidents ({', '.join(COLUMNS[1:])}) "
                             f"VALUES ({', '.join('?' * (len(COLUMNS) - 1))})", row)
            return cur.lastrowid if cur.rowcount else None

    def resolve(self, fingerprint: str, starts_at: datetime, ends_at: datetime | None) -> bool:
        """Mark the incident resolved; False when the store has no such alert."""
        end = iso(ends_at) if ends_at is not None and ends_at.year > 1 else iso(datetime.now(UTC))
        with self._lock, self._connect() as db:
            cur = db.execute("UPDATE incidents SET status = 'resolved', ends_at = ? "
                             "WHERE fingerprint = ? AND starts_at = ?", (end, fingerprint, iso(starts_at)))
            return cur.rowcount > 0

    def recent(self, limit: int = 50) -> list[Incident]:
        """The newest incidents first."""
        with self._connect() as db:
            rows = db.execute(f"SELECT {', '.join(COLUMNS)} FROM incidents ORDER BY starts_at DESC, id DESC "
                              "LIMIT ?", (int(limit),)).fetchall()
        return [_incident(r) for r in rows]

    def count(self) -> int:
        with self._connect() as db:
            return int(db.execute("SELECT COUNT(*) FROM incidents").fetchone()[0])


def _incident(row: tuple) -> Incident:
    data = dict(zip(COLUMNS, row, strict=True))
    for key in ("labels", "replica"):
        data[key] = json.loads(data[key])
    data["diagnosis"] = json.loads(data["diagnosis"]) if data["diagnosis"] else None
    return Incident(**data)
