"""The receiver's incident store on a real PostgreSQL 15: a receiver's round trip, two processes storing at once,
and revision 0005 added to a database that already holds experiments."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import UTC, datetime

import psycopg
import sqlalchemy as sa
from alembic import command

from tests.pg_harness import PASSWORD
from tests.test_experiment_log import ROOT, entry
from triage.alerting.receiver.store import IncidentStore
from triage.store import database
from triage.verify.experiment_log import SCHEMA_VERSION, ExperimentLog

AT = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)

# One receiver process: `threads` threads storing `rows` incidents each under their own fingerprints, and every
# thread also storing the same `shared` fingerprints the other process stores; prints "id fingerprint" per row
# it stored (a duplicate it was refused prints nothing).
WRITER = """
import sys, threading
from datetime import UTC, datetime
from triage.alerting.receiver.store import IncidentStore

url, tag, threads, rows, shared = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
store = IncidentStore(url)
at = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
out = []
def write(t):
    names = [f"{tag}-{t}-{i}" for i in range(rows)] + [f"shared-{i}" for i in range(shared)]
    for name in names:
        new = store.record(fingerprint=name, starts_at=at, alertname="A", labels={"instance": name},
                           replica={"instance": name}, cause=None, message=name, diagnosis=None, error=None,
                           link="l")
        if new is not None:
            out.append(f"{new} {name}")
workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
for w in workers: w.start()
for w in workers: w.join()
print("\\n".join(out), flush=True)
"""


def test_a_receiver_stores_folds_and_resolves_on_postgres(postgres):
    """Two alerts on one replica in one notification: one diagnosis, both stored (the second folded in, same
    message and link); the resolution closes only its own incident; the same alert again is stored once."""
    from tests.prom_harness import closed_port_url
    from tests.webhook_harness import firing, notification
    from triage.alerting.receiver.config import ReceiverConfig
    from triage.service.webhook import Receiver

    first = firing("TriageTtftQueueing", {"instance": "gpu-7", "cause": "ttft.queueing"}, "2026-12-02T01:00:00Z",
                   "f1")
    second = firing("TriageKvPressure", {"instance": "gpu-7"}, "2026-12-02T01:00:30Z", "f2")
    receiver = Receiver(ReceiverConfig(prometheus=closed_port_url(), labels=("instance",), timeout=1.0,
                                       incident_db=postgres))
    assert PASSWORD not in repr(receiver.config) and "***" in repr(receiver.config)
    done = threading.Event()
    receiver.sent = lambda out: done.set()
    # accepted before any worker runs, so the second alert is certainly folded into the first one's diagnosis
    accepted = receiver.accept(json.dumps(notification([first, second])).encode())
    assert (accepted.status, accepted.queued, accepted.folded) == (200, 1, 1)
    receiver.start()
    try:
        assert done.wait(60)
        resolved = dict(first, status="resolved", endsAt="2026-12-02T01:07:00Z")
        assert receiver.accept(json.dumps(notification([resolved], "resolved")).encode()).resolved == 1
    finally:
        receiver.stop()
    store = IncidentStore(postgres)
    rows = {r.fingerprint: r for r in store.recent()}
    assert set(rows) == {"f1", "f2"} and store.count() == 2
    assert rows["f1"].status == "resolved" and rows["f1"].ends_at == "2026-12-02T01:07:00.000000Z"
    assert rows["f2"].status == "firing" and rows["f2"].ends_at is None
    assert rows["f1"].message == rows["f2"].message and rows["f1"].link == rows["f2"].link
    assert rows["f1"].error and rows["f1"].error.startswith("could not diagnose: ")
    assert rows["f2"].replica == {"instance": "gpu-7"} and rows["f2"].labels["alertname"] == "TriageKvPressure"
    assert [r.fingerprint for r in store.recent()] == ["f2", "f1"]  # newest startsAt first
    again = dict(fingerprint="f1", starts_at=datetime(2026, 12, 2, 1, 0, tzinfo=UTC), alertname="A", labels={},
                 replica={}, cause=None, message="m", diagnosis=None, error=None, link="l")
    assert store.record(**again) is None and store.count() == 2  # fingerprint + startsAt stored once
    assert store.record(**{**again, "fingerprint": "f3"}) is not None and store.count() == 3
    assert not store.resolve("nope", AT, None)


def test_two_receivers_storing_at_once_lose_and_duplicate_nothing(postgres, tmp_path):
    """Two processes × 8 threads × 50 own fingerprints, plus 20 fingerprints every thread of both stores: 800 +
    20 rows, each id a process reported once, each shared alert stored by exactly one writer."""
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, postgres, tag, "8", "50", "20"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT) for tag in ("one", "two")]
    reported: list[tuple[int, str]] = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err.decode()[-2000:]
        reported += [(int(i), name) for i, name in (line.split() for line in out.decode().splitlines() if line)]
    rows = IncidentStore(postgres).recent(limit=10_000)
    assert len(rows) == 820 and len({r.id for r in rows}) == 820
    assert {(r.id, r.fingerprint) for r in rows} == set(reported) and len(reported) == 820
    own = {f"{tag}-{t}-{i}" for tag in ("one", "two") for t in range(8) for i in range(50)}
    assert {r.fingerprint for r in rows} == own | {f"shared-{i}" for i in range(20)}
    assert all(r.message == r.fingerprint for r in rows)  # every row whole


def test_revision_0005_keeps_the_experiments_already_there(postgres):
    """A database at revision 0004 with experiments: the receiver opening it adds the incidents table and
    leaves every experiment as it was; the experiment log then opens it unchanged."""
    engine = sa.create_engine(database.postgres_url(postgres))
    with engine.connect() as conn, conn.begin():
        command.upgrade(database._config(conn), "0004")
        for i in range(3):
            conn.exec_driver_sql(
                "INSERT INTO experiments (created_at, technique, workload, baseline_name, baseline_sha256, "
                "candidate_name, candidate_sha256, metrics, overall, who, note, created_by) VALUES "
                f"('2026-01-0{i + 1}T00:00:00+00:00', 'prefix_caching', '{{}}', 'a', 'x', 'b', 'y', '[]', "
                f"'no effect', 'w{i}', 'n{i}', 'ana')")
    engine.dispose()
    with psycopg.connect(postgres) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == "0004"
        before = conn.execute("SELECT * FROM experiments ORDER BY id").fetchall()
        assert not conn.execute("SELECT to_regclass('public.incidents')").fetchone()[0]
    store = IncidentStore(postgres)
    assert store.record(fingerprint="f", starts_at=AT, alertname="A", labels={}, replica={}, cause=None,
                        message="m", diagnosis=None, error=None, link="l") == 1
    with psycopg.connect(postgres) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == f"{SCHEMA_VERSION:04d}"
        assert conn.execute("SELECT * FROM experiments ORDER BY id").fetchall() == before
    log = ExperimentLog(postgres)
    assert [(e.id, e.who, e.note, e.created_by) for e in log.list()] == [(i + 1, f"w{i}", f"n{i}", "ana")
                                                                         for i in range(3)]
    assert log.save(entry(note="after")) == 4
