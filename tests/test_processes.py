"""Tests own their processes: no kill-by-name anywhere; the Prometheus harness leaves other Prometheus alone."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import requests

from tests.prom_harness import (
    PROMETHEUS,
    PROMTOOL,
    PromServer,
    data_end,
    free_port,
    generate_openmetrics,
    start_prometheus,
    wait_ready,
)

ROOT = Path(__file__).resolve().parent.parent
KILL_BY_NAME = re.compile(r"\b(p" r"kill|kill" r"all)\b")  # split so this file does not match itself


def test_no_kill_by_name_in_the_repo() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    offenders = []
    for name in tracked.split():
        path = ROOT / name
        if not path.is_file() or path.suffix in {".parquet", ".png", ".jpg"}:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        offenders += [f"{name}:{i}" for i, line in enumerate(text.splitlines(), 1) if KILL_BY_NAME.search(line)]
    assert not offenders, f"kill by process name (stop only what you started, by PID): {offenders}"


def _unrelated_prometheus(folder: Path) -> PromServer:
    """A Prometheus the tests did not start through the harness: an empty TSDB on its own free port."""
    folder.mkdir()
    config = folder / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 15s\nscrape_configs: []\n", encoding="utf-8")
    port = free_port()
    log = folder / "prometheus.log"
    with log.open("w") as sink:
        process = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
                                    f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                                   stdout=sink, stderr=subprocess.STDOUT, cwd=folder)
    server = PromServer(url=f"http://127.0.0.1:{port}", process=process, folder=folder, end=0, log=log)
    wait_ready(server)
    return server


@pytest.mark.prometheus
def test_harness_leaves_another_prometheus_running(tmp_path: Path) -> None:
    if not (Path(PROMETHEUS).exists() and Path(PROMTOOL).exists()):
        pytest.skip("prometheus / promtool are not installed")
    other = _unrelated_prometheus(tmp_path / "other")
    try:
        end = data_end()
        (tmp_path / "ours").mkdir()
        ours = start_prometheus(tmp_path / "ours", generate_openmetrics(end, span=300), end)
        assert ours.process.pid != other.process.pid and ours.url != other.url
        ours.stop()
        assert ours.process.poll() is not None, "the harness did not stop the Prometheus it started"
        assert other.process.poll() is None, "the harness stopped a Prometheus it did not start"
        assert requests.get(other.url + "/-/ready", timeout=5).status_code == 200
    finally:
        other.stop()
