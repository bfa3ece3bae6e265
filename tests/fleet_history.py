"""A session fixture: every simulator scenario as one replica (``instance=<scenario>``) of a fleet, backfilled into
a real Prometheus, with the Python diagnosis of each replica over the last 15 minutes (what the rules, the dry
run, vmalert and the fleet view must agree with)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.prom_harness import PROMETHEUS, PROMTOOL, PromServer, start_prometheus
from tests.rules_harness import merge_openmetrics
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.window import diagnose_window
from triage.knowledge.loader import load_knowledge
from triage.sources.metrics.prometheus_window import PrometheusWindow
from triage.sources.metrics.simulator import SCENARIOS, write_openmetrics

STEP = 15
HISTORY_MIN = 20  # the rules read the last 15 min; `for: 5m` needs the 5 min before that
WINDOW_MIN = 15
SLO_OF = {"low_batch": "batch"}  # scenario → SLO preset (default chat)


def slo_of(scenario: str) -> str:
    return SLO_OF.get(scenario, "chat")


@dataclass
class FleetHistory:
    folder: Path
    server: PromServer
    end: int
    texts: dict[str, str]  # scenario → its own OpenMetrics (no instance label)
    causes: dict[str, list[str]] = field(default_factory=dict)  # scenario → sorted Python findings

    @property
    def stop(self) -> datetime:
        return datetime.fromtimestamp(self.end, UTC)


@pytest.fixture(scope="session")
def fleet_history(tmp_path_factory):
    if not (Path(PROMETHEUS).exists() and Path(PROMTOOL).exists()):
        pytest.fail("prometheus / promtool missing: scripts/test.sh installs the Debian package")
    folder = tmp_path_factory.mktemp("fleet")
    end = int(time.time() // 60 * 60) - 120
    texts = {}
    for scenario in SCENARIOS:
        path = folder / f"{scenario}.om"
        write_openmetrics(path, scenario, minutes=HISTORY_MIN, step=STEP, end=end, seed=5)
        texts[scenario] = path.read_text()
    server = start_prometheus(folder, merge_openmetrics(texts), end)
    history = FleetHistory(folder, server, end, texts)
    try:
        kb = load_knowledge()
        for scenario in SCENARIOS:
            window = PrometheusWindow(server.url, history.stop - timedelta(minutes=WINDOW_MIN), history.stop,
                                      match={"instance": scenario}, timeout=10)
            live = diagnose_window(kb, window, resolve_slo(kb, slo_of(scenario)))
            history.causes[scenario] = sorted(live.diagnosis.matched_ids)
        yield history
    finally:
        server.stop()
