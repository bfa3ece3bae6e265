"""Shared fixtures: the repo root, the real knowledge base, a tiny valid knowledge base to break."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
# Unexpected exceptions surface in tests (AppTest's at.exception, a CLI traceback) instead of being turned into
# the one-line message visitors and users see; the tests of those boundaries unset it.
os.environ.setdefault("TRIAGE_DEBUG", "1")
# Records of checked trees (triage/knowledge/checked.py) go to a folder of this run, never the user's ~/.cache.
os.environ["TRIAGE_CACHE_DIR"] = tempfile.mkdtemp(prefix="triage-test-cache-")

from tests.browser_tools import app_url, close_shared_browser  # noqa: E402,F401  (app_url: the shared server)
from tests.fleet_history import fleet_history  # noqa: E402,F401  (session fixture: the simulated fleet)
from triage.knowledge.loader import DEFAULT_TREE_DIR, load_knowledge  # noqa: E402


@pytest.fixture(scope="session")
def kb():
    return load_knowledge()


@pytest.fixture
def tiny_tree(tmp_path: Path) -> Path:
    """A one-symptom, one-cause, one-technique knowledge base; every other file copied from the real tree."""
    real = yaml.safe_load((DEFAULT_TREE_DIR / "tree.yaml").read_text(encoding="utf-8"))
    symptom = real["symptoms"][0]
    cause = dict(symptom["causes"][0])
    cause["techniques"] = [cause["techniques"][0]]
    symptom = {**symptom, "causes": [cause]}
    (tmp_path / "techniques").mkdir()
    (tmp_path / "tree.yaml").write_text(yaml.safe_dump({"symptoms": [symptom]}, allow_unicode=True), encoding="utf-8")
    for item in DEFAULT_TREE_DIR.iterdir():  # every other part of the knowledge base, unchanged
        if item.name in ("tree.yaml", "techniques"):
            continue
        (shutil.copytree if item.is_dir() else shutil.copy)(item, tmp_path / item.name)
    tid = cause["techniques"][0]["id"]
    shutil.copy(DEFAULT_TREE_DIR / "techniques" / f"{tid}.yaml", tmp_path / "techniques" / f"{tid}.yaml")
    edit_yaml(tmp_path / "panels.yaml", lambda d: [g.update(symptoms=[s for s in g.get("symptoms", [])
                                                                       if s == symptom["id"]]) for g in d["groups"]])
    return tmp_path


def edit_yaml(path: Path, change) -> None:
    """Load a YAML file, let ``change`` mutate the data, write it back."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")


# Fixtures that start a real Prometheus or VictoriaMetrics (directly or through the simulated fleet): a test
# that uses one is a `prometheus` test whatever its own marks say, so the fast lane (-m "not browser and not
# prometheus", scripts/test.sh --fast) never waits for a server.
SERVER_FIXTURES = frozenset({"fleet_history", "fleet_blocks", "fleet_json", "recorded", "two_replicas", "prom",
                             "prom_auth", "victoria", "victoria_auth", "store", "store_auth",
                             "prometheus_per_scenario", "fleets_server", "stacks_server"})


# Fixtures that start a real PostgreSQL (tests/pg_harness.py): `postgres` tests, also out of the fast lane.
POSTGRES_FIXTURES = frozenset({"postgres_server", "postgres"})


# Session fixtures that simulate and backfill a whole fleet: their tests share one xdist worker, so the costly
# history is built once per run, not once per worker.
FLEET_FIXTURES = frozenset({"fleet_history", "fleet_blocks", "fleet_json", "recorded", "fleets_server",
                            "stacks_server"})


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks (--dist loadgroup)
def pytest_collection_modifyitems(config, items):
    for item in items:
        names = getattr(item, "fixturenames", ())
        if SERVER_FIXTURES.intersection(names):
            item.add_marker(pytest.mark.prometheus)
        if POSTGRES_FIXTURES.intersection(names):
            item.add_marker(pytest.mark.postgres)
        # Browser tests are in no group of their own: each worker shares one Chromium and one app server among the
        # browser tests it runs (tests/browser_tools.py), so both workers take them as they come. (A group goes to
        # one worker: two browser groups both went to the worker not building the fleet, one after the other.)
        if FLEET_FIXTURES.intersection(names):
            item.add_marker(pytest.mark.xdist_group("fleet"))


class LoadGroupIds:
    """The xdist group of each test in its node id, as ``--dist loadgroup`` needs it (``…::test[x]@browser``).

    pytest-xdist 3.8 sets ``item._nodeid``, but pytest 9.2 derives ``item.nodeid`` from a structured id: the
    suffix was lost and every test was scheduled on its own (pytest-xdist issue 1386), so each worker built the
    simulated fleet again. Runs after xdist's own hook and does nothing once xdist's suffix takes."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        if not getattr(config.option, "loadgroup", False):  # set on xdist workers under --dist loadgroup
            return
        try:
            from _pytest.nodeid import NodeId
        except ImportError:  # an older pytest: xdist's ``_nodeid`` is the node id
            return
        for item in items:
            names = {str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                     for m in item.iter_markers("xdist_group")}
            suffix = "@" + "_".join(sorted(names))
            if names and not item.nodeid.endswith(suffix):
                item._id = NodeId.parse(item.nodeid + suffix)


def pytest_configure(config):
    config.pluginmanager.register(LoadGroupIds(), "triage-loadgroup-ids")


def pytest_sessionfinish(session, exitstatus):
    """Close the Chromium that browser tests of this process shared (tests/browser_tools.py), if one ran."""
    close_shared_browser()


@pytest.fixture(scope="session")
def postgres_server():
    """One real PostgreSQL 15 for the session (tests/pg_harness.py); tests take a fresh database each."""
    from tests.pg_harness import postgres_server as start

    with start() as server:
        yield server


@pytest.fixture
def postgres(postgres_server) -> str:
    """The URL of a fresh, empty PostgreSQL database."""
    return postgres_server.new_database()
