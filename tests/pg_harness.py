"""Test harness: a real Debian PostgreSQL 15 (initdb + pg_ctl in a temporary folder) on a free 127.0.0.1 port.

PostgreSQL refuses to run as root, and tests here run as root: then every server command runs as the
unprivileged ``postgres`` user (the Debian package's; else ``nobody``) through ``runuser``, in a folder chowned
to it. The server is stopped by the PID in its ``postmaster.pid`` (pg_ctl stop, then SIGKILL), never by name.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.prom_harness import free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")
USER = "triage"
PASSWORD = "s3cret-pg-password"  # a real password, so tests can check it never reaches a message
_names = itertools.count(1)


def _run_as() -> list[str]:
    if os.geteuid() != 0:
        return []
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return ["runuser", "-u", name, "--"]
    pytest.skip("running as root with neither a postgres nor a nobody user to run PostgreSQL as")


@dataclass
class PostgresServer:
    port: int
    folder: Path
    pid: int

    def url(self, database: str = "postgres", password: str = PASSWORD) -> str:
        return f"postgresql://{USER}:{password}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh empty database's URL (each test its own, so no test sees another's rows)."""
        name = f"t{os.getpid()}_{next(_names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@contextmanager
def postgres_server(durable: bool = False) -> Iterator[PostgresServer]:
    """Tests run with ``fsync = off`` (speed; a crash of the machine is not what they test); the benchmark asks
    for ``durable`` so its commit latency is a real one."""
    if not (PG_BIN / "initdb").exists():
        pytest.skip("Debian postgresql-15 is not installed (scripts/test.sh installs it)")
    prefix = _run_as()
    folder = Path(tempfile.mkdtemp(prefix="triage-pg-", dir="/tmp"))  # /tmp: reachable by the unprivileged user
    if prefix:
        shutil.chown(folder, prefix[2], None)
    data = folder / "data"
    pwfile = folder / "pw"
    pwfile.write_text(PASSWORD + "\n", encoding="utf-8")
    if prefix:
        shutil.chown(pwfile, prefix[2], None)
    subprocess.run([*prefix, str(PG_BIN / "initdb"), "-D", str(data), "-U", USER, f"--pwfile={pwfile}",
                    "--auth=scram-sha-256", "-E", "UTF8", "--no-locale", "--no-sync"],
                   check=True, capture_output=True, timeout=120)
    port = free_port()
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=100"
    if not durable:
        options += " -c fsync=off"
    started = subprocess.run([*prefix, str(PG_BIN / "pg_ctl"), "start", "-D", str(data), "-w", "-t", "60",
                              "-l", str(folder / "server.log"), "-o", options], capture_output=True, timeout=120)
    pid_file = data / "postmaster.pid"
    pid = int(pid_file.read_text().split()[0]) if pid_file.exists() else 0
    try:
        if started.returncode != 0:
            log = (folder / "server.log").read_text(errors="replace") if (folder / "server.log").exists() else ""
            raise RuntimeError(f"PostgreSQL did not start: {started.stderr.decode()[-500:]} {log[-1500:]}")
        yield PostgresServer(port=port, folder=folder, pid=pid)
    finally:
        if pid:
            subprocess.run([*prefix, str(PG_BIN / "pg_ctl"), "stop", "-D", str(data), "-m", "fast", "-w", "-t", "30"],
                           capture_output=True, timeout=60)
            deadline = time.monotonic() + 30
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)  # waiting for an exit we asked for, not synchronization of test logic
            if _pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)
