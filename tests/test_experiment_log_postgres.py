"""The experiment log on a real PostgreSQL 15: migrations, replicas writing at once, a writer killed mid-write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psycopg
import pytest
import sqlalchemy as sa
from alembic import command

from tests.pg_harness import PASSWORD
from tests.test_experiment_log import ROOT, check_pages, entry
from triage.errors import TriageError
from triage.store import database
from triage.verify.experiment_log import SCHEMA_VERSION, ExperimentLog

# One app process: `threads` writers sharing the process's pooled engine, `rows` saves each; every saved id printed.
REPLICA = """
import sys, threading
from tests.test_experiment_log import entry
from triage.verify.experiment_log import ExperimentLog

url, tag, threads, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
log = ExperimentLog(url)
out = []
def write(t):
    for i in range(rows):
        out.append(log.save(entry(technique=tag, note=f"{tag}-{t}-{i}")))
workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
for w in workers: w.start()
for w in workers: w.join()
print("\\n".join(map(str, out)), flush=True)
"""

# A writer that inserts inside a transaction, says so, and waits with the transaction open until it is killed.
HELD = """
import sys
from tests.test_experiment_log import entry
from triage.store.schema import experiments
from triage.verify.experiment_log import ExperimentLog

log = ExperimentLog(sys.argv[1])
with log.engine.connect() as conn, conn.begin():
    conn.execute(experiments.insert().values(created_at="x", workload="{}", baseline_name="held",
                 baseline_sha256="a", candidate_name="held", candidate_sha256="b", metrics="[]", overall="held"))
    print("inside", flush=True)
    sys.stdin.read()
"""


def _tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}


def test_migrates_an_empty_database(postgres):
    log = ExperimentLog(postgres)
    assert log.version == SCHEMA_VERSION and log.path is None
    assert _tables(postgres) == {"experiments", "incidents", "alembic_version"}  # no SQLite guard table here
    new_id = log.save(entry(who="ana", note="chunk 2048"))
    got = ExperimentLog(postgres).get(new_id)
    assert got.who == "ana" and got.created_by == "local" and got.metrics[0]["interval"] == [-47.0, -38.0]
    assert [e.id for e in log.list(technique="chunked_prefill", verdict="gain confirmed")] == [new_id]
    with psycopg.connect(postgres) as conn:
        indexes = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'experiments'")}
    assert "experiments_technique_overall" in indexes


def test_a_page_is_newest_first_filtered_and_counted_on_postgres(postgres):
    check_pages(ExperimentLog(postgres))


def test_upgrades_the_previous_schema_in_place(postgres):
    """A database left at revision 0003 (before created_by) with rows: opening upgrades it and keeps them."""
    engine = sa.create_engine(database.postgres_url(postgres))
    with engine.connect() as conn, conn.begin():
        command.upgrade(database._config(conn), "0003")
        conn.exec_driver_sql(
            "INSERT INTO experiments (created_at, technique, workload, baseline_name, baseline_sha256, "
            "candidate_name, candidate_sha256, metrics, overall, who, note) VALUES "
            "('2025-01-01T00:00:00+00:00', 'prefix_caching', '{}', 'a', 'x', 'b', 'y', '[]', 'no effect', 'bo', 'n')")
    engine.dispose()
    log = ExperimentLog(postgres)
    old = log.get(1)
    assert (old.technique, old.who, old.note, old.created_by) == ("prefix_caching", "bo", "n", None)
    assert log.save(entry(who="cy")) == 2 and log.get(2).created_by == "local"
    with psycopg.connect(postgres) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == f"{SCHEMA_VERSION:04d}"


def test_a_newer_revision_is_refused(postgres):
    ExperimentLog(postgres)
    with psycopg.connect(postgres) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0099'")
    with pytest.raises(TriageError, match="schema version 0099"):
        ExperimentLog(postgres)


def test_unreachable_or_refused_database_is_one_line_without_the_password(postgres_server):
    wrong = postgres_server.url("postgres", password="wrong-" + PASSWORD)
    with pytest.raises(TriageError) as caught:
        ExperimentLog(wrong)
    assert "cannot reach the experiment log database" in caught.value.line()
    assert "password authentication failed" in caught.value.line()
    assert PASSWORD not in caught.value.line() and "\n" not in caught.value.line()
    with pytest.raises(TriageError, match="names no database"):
        ExperimentLog(f"postgresql://{postgres_server.port}@127.0.0.1")


def test_two_replicas_sixteen_writers_lose_and_duplicate_nothing(postgres, tmp_path):
    """Two app processes × 8 threads × 100 saves, all at once against one fresh database (both race to
    migrate it): 1,600 rows, every id a process printed is there once, every (writer, row) pair once."""
    procs = [subprocess.Popen([sys.executable, "-c", REPLICA, postgres, tag, "8", "100"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, cwd=ROOT) for tag in ("one", "two")]
    printed: list[int] = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err.decode()[-2000:]
        printed += [int(x) for x in out.split()]
    log = ExperimentLog(postgres)
    rows = log.list()
    ids = [e.id for e in rows]
    assert len(rows) == 1600 and len(set(ids)) == 1600
    assert sorted(printed) == sorted(ids)
    notes = {e.note for e in rows}
    assert notes == {f"{tag}-{t}-{i}" for tag in ("one", "two") for t in range(8) for i in range(100)}
    assert len(log.list(technique="one")) == 800 and len(log.list(technique="two")) == 800


def test_a_writer_killed_mid_transaction_loses_only_that_transaction(postgres, tmp_path):
    log = ExperimentLog(postgres)
    before = [log.save(entry(note=f"before {i}")) for i in range(5)]
    proc = subprocess.Popen([sys.executable, "-c", HELD, postgres], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"inside", proc.stderr.read().decode() if proc.stderr else ""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    after = log.save(entry(note="after"))  # not blocked by anything the killed writer held
    rows = log.list()
    assert [e.note for e in rows] == [f"before {i}" for i in range(5)] + ["after"]
    assert [e.id for e in rows][:5] == before and after > before[-1]
    assert all(e.overall != "held" for e in rows)
    assert all(e.metrics[0]["metric"] == "ttft_p50" for e in rows)  # every row whole


def test_a_replica_killed_while_saving_keeps_every_saved_row(postgres, tmp_path):
    """A writer saving in a loop is killed at an arbitrary point: every id it reported saved is there, whole."""
    ExperimentLog(postgres)
    loop = """
import sys
from tests.test_experiment_log import entry
from triage.verify.experiment_log import ExperimentLog
log = ExperimentLog(sys.argv[1])
for i in range(1_000_000):
    print(log.save(entry(note=str(i))), flush=True)
"""
    proc = subprocess.Popen([sys.executable, "-c", loop, postgres], stdout=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None
    saved = [int(proc.stdout.readline()) for _ in range(40)]
    os.kill(proc.pid, signal.SIGKILL)
    rest, _ = proc.communicate(timeout=30)
    saved += [int(x) for x in rest.split()]
    rows = ExperimentLog(postgres).list()
    ids = [e.id for e in rows]
    assert set(saved) <= set(ids) and len(ids) - len(saved) <= 1  # at most the one commit it could not report
    assert [e.note for e in rows] == [str(i) for i in range(len(rows))]  # in order, no gap, nothing half-written


def test_cli_lists_a_postgres_log_without_showing_the_password(postgres):
    ExperimentLog(postgres).save(entry(who="ana"))
    env = {**os.environ, "TRIAGE_LOG_DB": postgres}
    out = subprocess.run([sys.executable, "-m", "triage", "log", "list"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "chunked_prefill" in out.stdout and PASSWORD not in out.stdout + out.stderr


def test_a_sqlite_log_with_rows_moves_onto_postgres(postgres, tmp_path):
    """A log the pre-Alembic code wrote (3 rows) is upgraded in place, then copied with `log copy --to URL`:
    same rows and ids on PostgreSQL, the next save follows them, a second copy is refused, no password shown."""
    from tests.legacy_log import legacy_sqlite_log

    path = tmp_path / "old.sqlite3"
    legacy_sqlite_log(path, version=3, rows=3)
    ExperimentLog(path).save(entry(who="dee", note="after the upgrade"))
    cli = [sys.executable, "-m", "triage", "log", "--db", str(path), "copy", "--to", postgres]
    out = subprocess.run(cli, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "copied 4 experiments" in out.stdout and PASSWORD not in out.stdout
    source, target = ExperimentLog(path).list(), ExperimentLog(postgres).list()
    assert target == source and [e.id for e in target] == [1, 2, 3, 4]
    assert [e.created_by for e in target] == [None, None, None, "local"]
    assert ExperimentLog(postgres).save(entry()) == 5
    again = subprocess.run(cli, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and "already holds experiments" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1 and PASSWORD not in again.stderr
    assert len(ExperimentLog(postgres).list()) == 5
