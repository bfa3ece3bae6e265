"""Experiment log: round trip, filters, migration of an old file, CSV injection, killed and concurrent writers."""

from __future__ import annotations

import csv
import hashlib
import io
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_tools import run_triage
from tests.legacy_log import MIGRATIONS, legacy_sqlite_log
from triage.errors import TriageError
from triage.verify.experiment_log import (
    SCHEMA_VERSION,
    Entry,
    ExperimentLog,
    default_path,
    entry_from,
    resolve_path,
    schema_version,
)

ROOT = Path(__file__).resolve().parent.parent

WRITER = """
import sys
from tests.test_experiment_log import entry
from triage.verify.experiment_log import ExperimentLog

log = ExperimentLog(sys.argv[1])
for i in range(int(sys.argv[3])):
    print(log.save(entry(technique=sys.argv[2], note=str(i))), flush=True)
"""


def entry(technique: str | None = "chunked_prefill", overall: str = "gain confirmed", note: str = "",
          who: str | None = None, change: float = -42.0) -> Entry:
    return Entry(technique=technique, workload={"baseline": {"model": "llama", "prompt_tokens_median": 800.0,
                                                              "offered_rate": 10.0}},
                 baseline_name="base.json", baseline_sha256="a" * 64, candidate_name="cand.json",
                 candidate_sha256="b" * 64, overall=overall, note=note, who=who,
                 metrics=[{"metric": "ttft_p50", "delta": change, "verdict": "gain", "interval": [-47.0, -38.0]}])


def test_round_trip(tmp_path):
    log = ExperimentLog(tmp_path / "log.sqlite3")
    new_id = log.save(entry(who="ana", note="chunk 2048"))
    got = log.get(new_id)
    assert got.id == new_id and got.who == "ana" and got.note == "chunk 2048"
    assert got.metrics[0]["interval"] == [-47.0, -38.0] and got.workload["baseline"]["model"] == "llama"
    assert got.created_at.endswith("+00:00")  # UTC ISO
    assert ExperimentLog(f"sqlite:///{tmp_path / 'log.sqlite3'}").get(new_id) == got
    with pytest.raises(TriageError, match="no experiment with id 99"):
        log.get(99)


def test_filters(tmp_path):
    log = ExperimentLog(tmp_path / "log.sqlite3")
    log.save(entry("chunked_prefill", "gain confirmed"))
    log.save(entry("chunked_prefill", "regression"))
    log.save(entry("prefix_caching", "gain confirmed"))
    assert [e.id for e in log.list()] == [1, 2, 3]
    assert [e.id for e in log.list(technique="chunked_prefill")] == [1, 2]
    assert [e.id for e in log.list(verdict="gain confirmed")] == [1, 3]
    assert [e.id for e in log.list(technique="chunked_prefill", verdict="regression")] == [2]
    assert log.list(technique="nothing") == []


def check_pages(log: ExperimentLog) -> None:
    """23 entries (every third a regression of another technique): pages of 10, newest first, filtered in the
    query, with the count of every match; shared by the SQLite and the PostgreSQL tests."""
    ids = [log.save(entry(technique="other" if i % 3 == 0 else "chunked_prefill",
                          overall="regression" if i % 3 == 0 else "gain confirmed", note=f"n{i}")) for i in range(23)]
    first, total = log.page(10)
    assert total == 23 and [e.id for e in first] == ids[::-1][:10]
    second, _ = log.page(10, offset=10)
    assert [e.note for e in second] == [f"n{i}" for i in range(12, 2, -1)]
    last, _ = log.page(10, offset=20)
    assert [e.id for e in last] == ids[2::-1]
    assert log.page(10, offset=30) == ([], 23)  # past the end: empty, the count still told
    picked, count = log.page(5, offset=5, technique="other", verdict="regression")
    regressions = [i for n, i in enumerate(ids) if n % 3 == 0]
    assert count == 8 and [e.id for e in picked] == regressions[::-1][5:]
    assert log.page(5, technique="other", verdict="gain confirmed") == ([], 0)
    with pytest.raises(TriageError, match="positive size"):
        log.page(0)


def test_a_page_is_newest_first_filtered_and_counted_by_the_database(tmp_path):
    check_pages(ExperimentLog(tmp_path / "log.sqlite3"))


def test_default_path_follows_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_path() == tmp_path / "data" / "inference-triage" / "experiments.sqlite3"
    log = ExperimentLog()
    assert log.path.is_file() and log.version == SCHEMA_VERSION
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_path() == tmp_path / "home" / ".local" / "share" / "inference-triage" / "experiments.sqlite3"


def test_urls(tmp_path):
    assert resolve_path("sqlite:///rel.db") == Path("rel.db")
    assert resolve_path(f"sqlite:///{tmp_path}/x.db") == tmp_path / "x.db"  # sqlite:////abs
    for bad in ("postgresql://host/db", "sqlite:///:memory:"):
        with pytest.raises(TriageError):
            resolve_path(bad)


def test_migrates_a_v1_database(tmp_path):
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.execute("INSERT INTO schema_version VALUES (1)")
    conn.execute(MIGRATIONS[0][0])
    conn.execute("INSERT INTO experiments (created_at, technique, workload, baseline_name, baseline_sha256, "
                 "candidate_name, candidate_sha256, metrics, overall) VALUES "
                 "('2024-01-01T00:00:00+00:00', 'prefix_caching', '{}', 'a', 'x', 'b', 'y', '[]', 'no effect')")
    conn.commit()
    conn.close()
    log = ExperimentLog(path)
    assert log.version == SCHEMA_VERSION >= 4
    old = log.get(1)
    assert old.technique == "prefix_caching" and old.note == "" and old.who is None and old.created_by is None
    assert log.save(entry(who="bo")) == 2 and log.get(2).who == "bo" and log.get(2).created_by == "local"
    conn = sqlite3.connect(path)
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "experiments_technique_overall" in indexes
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert schema_version(conn) == SCHEMA_VERSION
    conn.close()


def test_upgrades_the_current_sqlite_log_with_rows_in_place(tmp_path):
    """A file the pre-Alembic code wrote (schema version 3, three rows) opens, upgrades and keeps every row."""
    path = tmp_path / "v3.sqlite3"
    legacy_sqlite_log(path, version=3, rows=3)
    before = sqlite3.connect(path).execute("SELECT * FROM experiments ORDER BY id").fetchall()
    log = ExperimentLog(path)
    got = log.list()
    assert [e.id for e in got] == [1, 2, 3] and [e.who for e in got] == ["person1", "person2", "person3"]
    assert [e.created_by for e in got] == [None, None, None]  # recorded before anyone could sign in
    assert got[1].metrics == [{"metric": "ttft_p99", "delta": -12.5, "verdict": "gain"}]
    conn = sqlite3.connect(path)
    assert [r[:12] for r in conn.execute("SELECT * FROM experiments ORDER BY id")] == before
    assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == f"{SCHEMA_VERSION:04d}"
    assert schema_version(conn) == SCHEMA_VERSION  # an old replica now refuses the file instead of re-creating it
    conn.close()
    new_id = log.save(entry(who="cy", technique="prefix_caching"))
    assert new_id == 4 and log.get(4).created_by == "local" and len(log.list(technique="prefix_caching")) == 3
    assert ExperimentLog(path).version == SCHEMA_VERSION  # reopening an upgraded file changes nothing


def test_an_unknown_revision_is_refused_untouched(tmp_path):
    path = tmp_path / "future.sqlite3"
    ExperimentLog(path).save(entry())
    conn = sqlite3.connect(path)
    conn.execute("UPDATE alembic_version SET version_num = '0042'")
    conn.commit()
    conn.close()
    with pytest.raises(TriageError, match="schema version 0042; this app knows up to"):
        ExperimentLog(path)


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "new.sqlite3"
    ExperimentLog(path)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version VALUES (99)")
    conn.commit()
    conn.close()
    with pytest.raises(TriageError, match="schema version 99"):
        ExperimentLog(path)


def test_csv_export_escapes_formulas_in_text_only(tmp_path):
    """Text cells are escaped; numbers are written as numbers, so a −42 % change stays a plain −42.0."""
    log = ExperimentLog(tmp_path / "log.sqlite3")
    log.save(entry(technique="-2", note='=HYPERLINK("http://evil","x")', who="+1", change=-42.0))
    log.save(entry(technique="@SUM(A1:A2)", note="\tcmd", who="\rx", change=3.5))
    log.save(entry(technique="chunked_prefill", note="plain - note", who="ana"))
    rows = list(csv.DictReader(io.StringIO(log.export_csv(), newline="")))
    assert rows[0]["note"] == "'=HYPERLINK(\"http://evil\",\"x\")"
    assert rows[0]["who"] == "'+1" and rows[0]["technique"] == "'-2"
    # leading whitespace and control characters are cleaned away first: what remains is plain text
    assert rows[1]["technique"] == "'@SUM(A1:A2)" and rows[1]["note"] == "cmd" and rows[1]["who"] == "x"
    assert rows[2]["note"] == "plain - note" and rows[2]["who"] == "ana"
    assert rows[0]["ttft_p50_change"] == "-42.0" and rows[1]["ttft_p50_change"] == "3.5"
    assert rows[0]["ttft_p50_verdict"] == "gain" and rows[0]["model"] == "llama"
    assert rows[0]["prompt_tokens_median"] == "800.0"


def test_entry_from_a_comparison():
    c = {"technique": "prefix_caching", "overall": "no effect", "workload": {"baseline": {}}, "metrics": []}
    e = entry_from(c, ("b.json", b"base"), ("c.json", b"cand"), who="x", note="n")
    assert e.baseline_sha256 == hashlib.sha256(b"base").hexdigest()
    assert e.baseline_sha256 != e.candidate_sha256 and e.overall == "no effect" and e.who == "x"


def _rows(path: Path) -> int:
    conn = sqlite3.connect(path, timeout=30)
    try:
        return conn.execute("SELECT COUNT(*) FROM experiments").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0
    finally:
        conn.close()


def test_killed_writer_loses_nothing_it_saved(tmp_path):
    path = tmp_path / "log.sqlite3"
    ExperimentLog(path)
    printed = tmp_path / "ids.txt"
    with printed.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), "killed", "1000000"], stdout=out,
                                cwd=ROOT)
        deadline = time.monotonic() + 60
        while _rows(path) < 40:
            assert time.monotonic() < deadline, "writer never reached 40 rows"
            assert proc.poll() is None, "writer exited early"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    saved = [int(x) for x in printed.read_text().split()]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    log = ExperimentLog(path)
    ids = [e.id for e in log.list()]
    assert len(saved) >= 40 and set(saved) <= set(ids)
    assert ids == list(range(1, len(ids) + 1))  # no gaps, nothing half-written
    assert all(e.metrics[0]["metric"] == "ttft_p50" for e in log.list())


def test_two_concurrent_writers_both_land(tmp_path):
    path = tmp_path / "fresh" / "log.sqlite3"  # neither process finds a schema: both race to migrate
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), tag, "50"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, cwd=ROOT) for tag in ("one", "two")]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    log = ExperimentLog(path)
    assert len(log.list()) == 100
    assert len(log.list(technique="one")) == 50 and len(log.list(technique="two")) == 50


def test_cli_show_names_who_recorded_it(tmp_path):
    path = tmp_path / "log.sqlite3"
    ExperimentLog(path).save(entry(who="ana"))
    out = run_triage("log", "--db", str(path), "show", "1")
    assert out.returncode == 0, out.stderr
    assert "recorded by local" in out.stdout and "by ana" in out.stdout
