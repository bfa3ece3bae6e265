"""The receiver's incident store on SQLite: a file the hand-written store wrote is upgraded in place, and where the
store is when ``incident_db`` is unset."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import pytest

from triage.alerting.receiver.config import load_config
from triage.alerting.receiver.store import IncidentStore
from triage.errors import TriageError
from triage.verify.experiment_log import SCHEMA_VERSION, ExperimentLog

# the receiver's schema before the store moved onto triage/store (PRAGMA user_version 1), verbatim
LEGACY_SCHEMA = """CREATE TABLE IF NOT EXISTS incidents (
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
AT = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)


def _legacy_file(path, rows: int) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(LEGACY_SCHEMA)
        conn.execute("PRAGMA user_version = 1")
        for i in range(rows):
            conn.execute("INSERT INTO incidents (fingerprint, starts_at, alertname, labels, replica, status, ends_at, "
                         "cause, message, diagnosis, error, link, received_at) VALUES (?, ?, 'A', '{\"a\": \"1\"}', "
                         "'{\"instance\": \"x\"}', 'resolved', '2026-12-01T00:05:00.000000Z', 'ttft.queueing', ?, "
                         "'{\"findings\": []}', NULL, 'l', 'r')",
                         (f"old{i}", f"2026-12-01T00:0{i}:00.000000Z", f"message {i}"))
        conn.execute("DELETE FROM incidents WHERE fingerprint = 'old0'")  # an id AUTOINCREMENT must never reuse
    conn.close()


def test_an_incident_file_the_old_receiver_wrote_is_upgraded_in_place(tmp_path):
    path = tmp_path / "incidents.sqlite3"
    _legacy_file(path, rows=3)
    store = IncidentStore(path)
    rows = store.recent()
    assert [(r.id, r.fingerprint, r.message) for r in rows] == [(3, "old2", "message 2"), (2, "old1", "message 1")]
    assert rows[0].labels == {"a": "1"} and rows[0].diagnosis == {"findings": []} and rows[0].status == "resolved"
    args = dict(fingerprint="old1", starts_at=datetime(2026, 12, 1, 0, 1, tzinfo=UTC), alertname="A", labels={},
                replica={}, cause=None, message="m", diagnosis=None, error=None, link="l")
    assert store.record(**{**args, "fingerprint": "new"}) == 4  # ids go on after the old ones, never reused
    assert store.record(**args) is None  # the copied rows still de-duplicate
    conn = sqlite3.connect(path)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "incidents_v1" not in tables and {"incidents", "experiments", "alembic_version"} <= tables
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == f"{SCHEMA_VERSION:04d}"
        # the old receiver refused files whose user_version exceeds 1: it now refuses this one
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION > 1
    finally:
        conn.close()
    assert IncidentStore(path).count() == 3  # reopening changes nothing
    assert ExperimentLog(path).list() == []  # one chain of revisions: the experiment log opens the same file


def test_a_file_from_a_newer_receiver_or_with_a_foreign_table_is_refused_untouched(tmp_path):
    newer = tmp_path / "newer.sqlite3"
    _legacy_file(newer, rows=1)
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version = 2")
    with pytest.raises(TriageError, match="newer version of the receiver"):
        IncidentStore(newer)
    foreign = tmp_path / "foreign.sqlite3"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE incidents (id INTEGER PRIMARY KEY, title TEXT)")
    with pytest.raises(TriageError, match="not the receiver's"):
        IncidentStore(foreign)
    with sqlite3.connect(foreign) as conn:
        assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} == {"incidents"}


def test_sqlite_url_and_unsupported_schemes(tmp_path):
    store = IncidentStore(f"sqlite:///{tmp_path / 'u.sqlite3'}")
    assert store.record(fingerprint="f", starts_at=AT, alertname="A", labels={}, replica={}, cause=None,
                        message="m", diagnosis=None, error=None, link="l") == 1
    assert IncidentStore(tmp_path / "u.sqlite3").count() == 1
    with pytest.raises(TriageError, match="only sqlite:/// or postgresql://"):
        IncidentStore("mysql://db/incidents")


def test_incident_db_defaults_to_a_postgres_experiment_log_only(tmp_path):
    url = "postgresql://triage:hunter2-secret@db:5432/triage"
    base = {"TRIAGE_WEBHOOK_PROMETHEUS": "http://127.0.0.1:9090"}
    config = load_config(path=None, env={**base, "TRIAGE_LOG_DB": url})
    assert config.incident_db == url
    assert "hunter2-secret" not in repr(config) and "***" in repr(config)
    assert load_config(path=None, env={**base, "TRIAGE_LOG_DB": str(tmp_path / "log.sqlite3")}).incident_db == ""
    assert load_config(path=None, env=base).incident_db == ""
    explicit = load_config(path=None, env={**base, "TRIAGE_LOG_DB": url,
                                           "TRIAGE_WEBHOOK_INCIDENT_DB": str(tmp_path / "i.sqlite3")})
    assert explicit.incident_db == str(tmp_path / "i.sqlite3")  # an explicit store wins


def test_the_retro_page_follows_the_same_default(tmp_path, monkeypatch):
    from triage.service import incidents

    monkeypatch.chdir(tmp_path)  # no project .streamlit/secrets.toml in the way
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("TRIAGE_WEBHOOK_INCIDENT_DB", raising=False)
    monkeypatch.setattr(incidents, "DEFAULT_SECRETS", ())
    monkeypatch.setenv("TRIAGE_LOG_DB", "postgresql://triage:pw@db/triage")
    assert incidents.incident_db() == "postgresql://triage:pw@db/triage"
    monkeypatch.setenv("TRIAGE_LOG_DB", str(tmp_path / "log.sqlite3"))
    assert incidents.incident_db() is None and incidents.recent_incidents() == []
    monkeypatch.setenv("TRIAGE_WEBHOOK_INCIDENT_DB", str(tmp_path / "not-yet.sqlite3"))
    assert incidents.recent_incidents() == [] and not (tmp_path / "not-yet.sqlite3").exists()  # no file created
