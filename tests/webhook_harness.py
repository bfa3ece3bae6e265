"""Test harness for the Alertmanager receiver: a local HTTP sink standing in for Slack / a JSON webhook, a real
Alertmanager (Debian's prometheus-alertmanager) and a real Prometheus loading the triage rules, all on free
loopback ports, stopped by PID."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests

from tests.prom_harness import PROMETHEUS, READY_DEADLINE, backfill, free_port, stop_process

ALERTMANAGER = shutil.which("prometheus-alertmanager") or "/usr/bin/prometheus-alertmanager"
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Sink:
    """Every JSON body posted to it, by path, with the time it arrived; ``wait`` blocks on a condition."""

    url: str = ""
    posts: list[tuple[float, str, dict]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)
    status: int = 200

    def wait(self, done, timeout: float) -> bool:
        """Until ``done(posts)`` is true or ``timeout`` s pass (a Condition wait, woken by every post)."""
        stop_at = time.monotonic() + timeout
        with self.changed:
            while not done(self.posts):
                left = stop_at - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(left)
        return True

    def bodies(self, path: str) -> list[dict]:
        with self.changed:
            return [body for _, p, body in self.posts if p == path]


@contextmanager
def sink_server() -> Iterator[Sink]:
    sink = Sink()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server API)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with sink.changed:
                sink.posts.append((time.time(), self.path, json.loads(body)))
                sink.headers.append(dict(self.headers))
                sink.changed.notify_all()
            self.send_response(sink.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    sink.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield sink
    finally:
        server.shutdown()
        server.server_close()


def wait_http(url: str, process: subprocess.Popen, log: Path, deadline: float = READY_DEADLINE) -> None:
    """Poll ``url`` until 200, the process dies, or the deadline passes."""
    stop_at = time.monotonic() + deadline
    while time.monotonic() < stop_at:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args[0]} exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            if requests.get(url, timeout=1).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)  # poll interval; bounded by the deadline
    stop_process(process)
    raise RuntimeError(f"{url} not ready after {deadline} s: {log.read_text(errors='replace')[-2000:]}")


@dataclass
class Proc:
    url: str
    process: subprocess.Popen
    log: Path

    def stop(self) -> None:
        stop_process(self.process)


def start_alertmanager(folder: Path, webhook_url: str, token: str, group_wait: str = "1s",
                       plain_url: str = "") -> Proc:
    """Alertmanager with one route to the receiver (bearer token), gossip off, state in ``folder``; with
    ``plain_url`` every alert also goes to a plain webhook there (the bench's reference path)."""
    port = free_port()
    config = folder / "alertmanager.yml"
    plain_route = "\n    - {receiver: plain}" if plain_url else ""
    plain_receiver = f"\n  - name: plain\n    webhook_configs: [{{url: {plain_url}}}]" if plain_url else ""
    config.write_text(f"""route:
  receiver: triage
  group_by: [alertname, instance, model_name, engine]
  group_wait: {group_wait}
  group_interval: 1s
  repeat_interval: 1h
  routes:
    - {{receiver: triage, continue: true}}{plain_route}
receivers:
  - name: triage
    webhook_configs:
      - url: {webhook_url}
        send_resolved: true
        http_config:
          authorization:
            credentials: {token}{plain_receiver}
""", encoding="utf-8")
    log = folder / "alertmanager.log"
    (folder / "am-data").mkdir(exist_ok=True)
    with log.open("w") as out:
        process = subprocess.Popen([ALERTMANAGER, f"--config.file={config}", f"--storage.path={folder / 'am-data'}",
                                    f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
                                    "--log.level=warn"], stdout=out, stderr=subprocess.STDOUT, cwd=folder)
    am = Proc(f"http://127.0.0.1:{port}", process, log)
    wait_http(am.url + "/-/ready", process, log)
    return am


def start_prometheus_with_rules(folder: Path, openmetrics: str, rule_file: Path, alertmanager: str,
                                evaluation_interval: str = "1s", port: int | None = None) -> Proc:
    """A real Prometheus over backfilled data, evaluating ``rule_file`` and sending alerts to ``alertmanager``."""
    data = backfill(openmetrics, folder)
    port = port or free_port()
    config = folder / "prometheus.yml"
    host = alertmanager.removeprefix("http://")
    config.write_text(f"""global:
  scrape_interval: 15s
  evaluation_interval: {evaluation_interval}
rule_files: [{rule_file}]
alerting:
  alertmanagers:
    - static_configs: [{{targets: ["{host}"]}}]
scrape_configs: []
""", encoding="utf-8")
    log = folder / "prometheus.log"
    with log.open("w") as out:
        process = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={data}",
                                    f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=30d",
                                    "--log.level=warn"], stdout=out, stderr=subprocess.STDOUT, cwd=folder)
    prom = Proc(f"http://127.0.0.1:{port}", process, log)
    wait_http(prom.url + "/-/ready", process, log)
    return prom


def start_receiver(folder: Path, config: str) -> Proc:
    """``python -m triage webhook --config FILE`` as a child process; its URL once /-/healthy answers."""
    port = free_port()
    path = folder / "webhook.toml"
    path.write_text(config.replace("{PORT}", str(port)), encoding="utf-8")
    log = folder / "webhook.log"
    with log.open("w") as out:
        process = subprocess.Popen([sys.executable, "-m", "triage", "webhook", "--config", str(path)], stdout=out,
                                   stderr=subprocess.STDOUT, cwd=ROOT)
    proc = Proc(f"http://127.0.0.1:{port}", process, log)
    wait_http(proc.url + "/-/healthy", process, log)
    return proc


def firing(alertname: str, labels: dict[str, str], starts_at: str, fingerprint: str = "",
           status: str = "firing") -> dict:
    return {"status": status, "labels": {"alertname": alertname, **labels}, "annotations": {},
            "startsAt": starts_at, "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "", "fingerprint": fingerprint}


def notification(alerts: list[dict], status: str = "firing") -> dict:
    return {"version": "4", "groupKey": "{}:{}", "truncatedAlerts": 0, "status": status, "receiver": "triage",
            "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {}, "externalURL": "http://am",
            "alerts": alerts}
