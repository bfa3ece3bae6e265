"""`python -m triage webhook`: the Alertmanager receiver. End to end (a real Prometheus evaluating the triage
rules over the queueing scenario → a real Alertmanager → the receiver → a sink standing in for Slack), then load
and faults against the receiver with a real Prometheus behind it."""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests
import yaml

from tests.prom_harness import data_end, free_port
from tests.webhook_harness import (
    ALERTMANAGER,
    sink_server,
    start_alertmanager,
    start_prometheus_with_rules,
    start_receiver,
)
from triage.alerting.export import build
from triage.diagnosis.rules import resolve_slo
from triage.sources.metrics.simulator import write_openmetrics

pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(600)]
TOKEN = "tok-3f9a-never-shown"
DASHBOARD = "https://triage.example.internal"
FOR_S, EVAL_S, GROUP_WAIT_S = 5, 1, 1


def _rule_file(kb, folder: Path) -> Path:
    rules = build(kb, resolve_slo(kb), for_=f"{FOR_S}s", dashboard_url=DASHBOARD, profile="sim")
    doc = rules.rule_file()
    doc["groups"][0]["interval"] = f"{EVAL_S}s"
    path = folder / "triage-rules.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, width=10**6), encoding="utf-8")
    return path


def _config(prometheus: str, sink: str, db: Path) -> str:
    return f"""[prometheus.sim]
url = "{prometheus}"

[webhook]
prometheus = "sim"
listen = "127.0.0.1:{{PORT}}"
token = "{TOKEN}"
slack_url = "{sink}/slack"
json_url = "{sink}/json"
incident_db = "{db}"
dashboard_url = "{DASHBOARD}"
"""


def _until(done, timeout: float) -> bool:
    """Poll ``done()`` until true or ``timeout`` s pass (for a state only visible by asking, such as /metrics)."""
    stop_at = time.monotonic() + timeout
    while not done():
        if time.monotonic() > stop_at:
            return False
        time.sleep(0.05)  # poll interval, bounded by the deadline
    return True


@pytest.mark.skipif(not Path(ALERTMANAGER).exists(), reason="prometheus-alertmanager is not installed")
def test_alert_to_slack_message_end_to_end(kb, tmp_path):
    """Prometheus fires TriageTtftQueueing on the queueing replica, Alertmanager posts it (with the bearer token)
    to the receiver, and the sink gets a message naming the cause, its evidence and the Live link, within the
    alert's for: plus two evaluation intervals (plus Alertmanager's group_wait and the diagnosis)."""
    end = data_end()
    source = tmp_path / "sim.om"
    write_openmetrics(source, "queueing", minutes=30, step=15, end=end, seed=1)
    db = tmp_path / "incidents.sqlite3"
    procs = []
    with sink_server() as sink:
        try:
            # receiver → Alertmanager → Prometheus, each started knowing the next one's address (Prometheus' port
            # is chosen first, so the receiver's profile can name it)
            am_dir, prom_dir = tmp_path / "am", tmp_path / "prom"
            am_dir.mkdir()
            prom_dir.mkdir()
            prom_port = free_port()
            receiver = start_receiver(tmp_path, _config(f"http://127.0.0.1:{prom_port}", sink.url, db))
            procs.append(receiver)
            am = start_alertmanager(am_dir, receiver.url + "/", TOKEN)
            procs.append(am)
            prom = start_prometheus_with_rules(prom_dir, source.read_text(), _rule_file(kb, tmp_path), am.url,
                                               port=prom_port)
            procs.append(prom)
            got = sink.wait(lambda posts: any(p == "/slack" for _, p, _ in posts), timeout=120)
            assert got, f"no message; receiver log: {receiver.log.read_text()[-2000:]}"
            arrived, _, slack = next(post for post in sink.posts if post[1] == "/slack")
            text = slack["text"]
            assert "[ttft.queueing]" in text and "*Cause:*" in text, text
            assert "queue_share_of_ttft" in text or "waiting_mean" in text, text  # evidence with its values
            assert "*Try first:*" in text and "`--" in text, text  # the technique's exact flag
            link = text.split("*Live:* <", 1)[1].split("|", 1)[0]
            assert link.startswith(f"{DASHBOARD}/live?source=prometheus&profile=sim&window=15m&end="), link
            assert "match_model_name=" in link and link.endswith("&node=ttft.queueing"), link
            sink.wait(lambda posts: any(p == "/json" for _, p, _ in posts), timeout=30)
            body = sink.bodies("/json")[0]
            starts = datetime.fromisoformat(body["alert"]["startsAt"])
            assert body["alert"]["labels"]["alertname"] in text
            assert "ttft.queueing" in [f["cause"] for f in body["diagnosis"]["findings"]]
            # Prometheus sends startsAt = when the alert fired, i.e. for: after its condition first held; from then
            # to the message: for: + two evaluation intervals + Alertmanager's group_wait (diagnosis included)
            latency = arrived - (starts.timestamp() - FOR_S)
            assert latency <= FOR_S + 2 * EVAL_S + GROUP_WAIT_S, latency
            assert all(h.get("Authorization") is None for h in sink.headers)  # the token never leaves
            metrics = requests.get(receiver.url + "/metrics", timeout=5).text
            assert 'triage_webhook_delivered_total{receiver="slack"} 1.0' in metrics
            # the incident is stored after the message is sent (a slow store never delays the page): wait for
            # the receiver's own count of stored incidents, then read the row
            stored = 'triage_webhook_delivered_total{receiver="store"} 1.0'
            assert _until(lambda: stored in requests.get(receiver.url + "/metrics", timeout=5).text, 30), \
                receiver.log.read_text()[-2000:]
            with sqlite3.connect(db) as con:
                rows = con.execute("SELECT alertname, cause, link FROM incidents").fetchall()
            assert rows and rows[0][1] == "ttft.queueing" and rows[0][2] == link
            log = receiver.log.read_text()
            assert TOKEN not in log and sink.url not in log and "receiving Alertmanager webhooks" in log
        finally:
            for proc in reversed(procs):
                proc.stop()


# ---------------------------------------------------------------- load and faults, a real Prometheus behind


REPLICAS = {"r0": "queueing", "r1": "healthy"}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """A real Prometheus over two replicas (instance r0 queueing, r1 healthy), 30 min ending now."""
    from tests.prom_harness import start_prometheus
    from tests.rules_harness import merge_openmetrics

    folder = tmp_path_factory.mktemp("webhook-fleet")
    end = data_end()
    texts = {}
    for name, scenario in REPLICAS.items():
        path = folder / f"{name}.om"
        write_openmetrics(path, scenario, minutes=30, step=15, end=end, seed=1)
        texts[name] = path.read_text()
    server = start_prometheus(folder, merge_openmetrics(texts), end)
    yield server
    server.stop()


def _receiver(prometheus: str, sink_url: str, tmp_path: Path, **extra):
    from triage.alerting.receiver.config import ReceiverConfig
    from triage.service.webhook import Receiver
    from triage.service.webhook_http import serve_in_thread

    config = ReceiverConfig(prometheus=prometheus, slack_url=f"{sink_url}/slack", json_url=f"{sink_url}/json",
                            incident_db=str(tmp_path / "incidents.sqlite3"), dashboard_url=DASHBOARD,
                            labels=("instance",), token=TOKEN, **extra)
    receiver = Receiver(config)
    server = serve_in_thread(receiver)
    return receiver, server, f"http://127.0.0.1:{server.server_address[1]}/"


def _stop(receiver, server) -> None:
    server.shutdown()
    server.server_close()
    receiver.stop()


def _post(url: str, alerts: list[dict], token: str | None = TOKEN, session=None) -> requests.Response:
    from tests.webhook_harness import notification

    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return (session or requests).post(url, data=json.dumps(notification(alerts)), headers=headers, timeout=5)


def _storm(url: str, notifications: list[dict]) -> dict:
    """Post every notification from a client process of its own (as Alertmanager is one)."""
    import subprocess
    import sys

    from tests.webhook_harness import ROOT

    job = json.dumps({"url": url, "token": TOKEN, "notifications": notifications})
    done = subprocess.run([sys.executable, "-m", "tests.webhook_storm"], input=job, capture_output=True, text=True,
                          timeout=120, cwd=ROOT, check=True)
    return json.loads(done.stdout)


def _at(end: int) -> str:
    return datetime.fromtimestamp(end, UTC).isoformat().replace("+00:00", "Z")


def test_storm_is_accepted_fast_and_each_replica_diagnosed_once(fleet, tmp_path):
    """1,000 alerts in 10 s (distinct fingerprints, 20 replicas, several alert names): every request answered
    200 within 1 s, one diagnosis and one message per replica, and the receiver's memory structures bounded."""
    from tests.webhook_harness import firing, notification

    with sink_server() as sink:
        receiver, server, url = _receiver(fleet.url, sink.url, tmp_path, queue=64)
        try:
            names = ["TriageTtftQueueing", "TtftSloBurn", "KvCacheHigh", "TriageTailLatencySloSensitive"]
            alerts = [firing(names[i % 4], {"instance": f"r{i % 20}", "cause": "ttft.queueing", "n": str(i)},
                             _at(fleet.end), fingerprint=f"{i:016x}") for i in range(1000)]
            storm = _storm(url, [notification([a]) for a in alerts])
            took, timings = storm["took"], storm["answers"]
            assert took <= 10, took
            assert {code for code, _ in timings} == {200}
            assert max(seconds for _, seconds in timings) < 1.0, max(seconds for _, seconds in timings)
            assert sink.wait(lambda posts: sum(p == "/slack" for _, p, _ in posts) >= 20, timeout=180)
            slack = sink.bodies("/slack")
            assert len(slack) == 20  # one message per replica, not per alert
            for i in range(20):
                assert sum(f"instance=`r{i}`" in body["text"] for body in slack) == 1, i
            queueing = next(b["text"] for b in slack if "instance=`r0`" in b["text"])
            assert "[ttft.queueing]" in queueing
            metrics = requests.get(url + "metrics", timeout=5).text
            assert "triage_webhook_alerts_folded_total 980.0" in metrics
            assert sum(float(line.split()[-1]) for line in metrics.splitlines()
                       if line.startswith("triage_webhook_diagnoses_total")) == 20
            assert len(receiver._replicas) <= receiver.config.max_replicas
            assert len(receiver._seen) <= 4 * receiver.config.max_replicas
            # a repeat of the same notification (Alertmanager resends) is a duplicate, never a new diagnosis
            assert _post(url, alerts[:5]).json()["duplicates"] == 5
        finally:
            _stop(receiver, server)


def test_prometheus_stopped_mid_storm_says_could_not_diagnose(tmp_path):
    """Prometheus goes away between two bursts: the second burst's replicas get "could not diagnose: …"
    messages, and the receiver keeps answering."""
    from tests.prom_harness import simulated_prometheus
    from tests.webhook_harness import firing

    end = data_end()
    with sink_server() as sink, simulated_prometheus(tmp_path, "queueing", 30, 1, end) as prom:
        receiver, server, url = _receiver(prom.url, sink.url, tmp_path, timeout=2.0)
        try:
            first = [firing("TriageTtftQueueing", {"cause": "ttft.queueing"}, _at(end), "f1")]  # no replica label
            assert _post(url, first).status_code == 200
            assert sink.wait(lambda posts: len([p for _, p, _ in posts if p == "/slack"]) >= 1, timeout=60)
            prom.stop()
            second = [firing("TriageTtftQueueing", {"instance": f"b{i}"}, _at(end), f"s{i}") for i in range(5)]
            assert _post(url, second).status_code == 200
            assert sink.wait(lambda posts: len([p for _, p, _ in posts if p == "/slack"]) >= 6, timeout=60)
            late = [b["text"] for b in sink.bodies("/slack")[1:]]
            assert all("could not diagnose: " in text for text in late), late
            assert "[ttft.queueing]" in sink.bodies("/slack")[0]["text"]
            metrics = requests.get(url + "metrics", timeout=5).text
            assert 'triage_webhook_diagnoses_total{outcome="failed"} 5.0' in metrics
            assert 'triage_webhook_diagnoses_total{outcome="ok"} 1.0' in metrics
            assert requests.get(url + "-/healthy", timeout=2).status_code == 200
            assert _post(url, [firing("X", {"instance": "c"}, _at(end), "c1")]).status_code == 200
        finally:
            _stop(receiver, server)


def test_slow_prometheus_and_a_full_queue(tmp_path):
    """A Prometheus that does not answer: the diagnosis says so within its timeout, and while the one worker
    waits, a full queue refuses the notification with 503 (Alertmanager retries) instead of hanging."""
    import time

    from tests.prom_harness import FakeBehaviour, fake_prometheus
    from tests.webhook_harness import firing

    with sink_server() as sink, fake_prometheus(FakeBehaviour(query_delay=30, delay_everything=True)) as slow:
        receiver, server, url = _receiver(slow, sink.url, tmp_path, timeout=1.0, workers=1, queue=1)
        try:
            codes = []
            for i in range(3):
                t0 = time.monotonic()
                codes.append(_post(url, [firing("A", {"instance": f"q{i}"}, _at(data_end()), f"q{i}")]).status_code)
                assert time.monotonic() - t0 < 1.0
            assert codes[-1] == 503 and 200 in codes
            assert 'triage_webhook_requests_rejected_total{reason="queue_full"}' in requests.get(url + "metrics").text
            assert sink.wait(lambda posts: len([p for _, p, _ in posts if p == "/slack"]) >= 1, timeout=30)
            assert "could not diagnose: " in sink.bodies("/slack")[0]["text"]
        finally:
            _stop(receiver, server)


def test_a_request_without_the_token_is_refused(tmp_path):
    from tests.prom_harness import closed_port_url
    from tests.webhook_harness import firing

    with sink_server() as sink:
        receiver, server, url = _receiver(closed_port_url(), sink.url, tmp_path)
        try:
            alert = [firing("A", {"instance": "x"}, _at(data_end()), "t1")]
            assert _post(url, alert, token=None).status_code == 401
            assert _post(url, alert, token="wrong").status_code == 401
            assert _post(url, alert, token=TOKEN.upper()).status_code == 401
            assert requests.post(url, data=b"{}", timeout=5, headers={"Authorization": f"Bearer {TOKEN}"}
                                 ).status_code == 400
            metrics = requests.get(url + "metrics", timeout=5).text
            assert 'triage_webhook_requests_rejected_total{reason="unauthorized"} 3.0' in metrics
            assert "triage_webhook_alerts_received_total" not in metrics.replace("# HELP triage_webhook_alerts_"
                                                                                 "received_total", "").replace(
                "# TYPE triage_webhook_alerts_received_total", "")
            assert receiver.queue.qsize() == 0 and not sink.posts
        finally:
            _stop(receiver, server)


def test_labels_carrying_urls_or_markdown_change_nothing(fleet, tmp_path):
    """An alert whose labels and annotations carry URLs, Slack link syntax and Markdown: the message goes only to
    the configured sink, the Live link keeps the configured dashboard, and the values render as inert text."""
    from tests.webhook_harness import firing

    with sink_server() as sink, sink_server() as evil:
        receiver, server, url = _receiver(fleet.url, sink.url, tmp_path)
        try:
            labels = {"instance": "r0", "cause": "ttft.queueing", "slack_url": evil.url, "json_url": evil.url,
                      "dashboard_url": evil.url, "summary": f"<{evil.url}/x|click here> *bold* [a]({evil.url})",
                      "alertname": f"<{evil.url}|Urgent> `code` _it_"}
            alert = firing("ignored", {}, _at(fleet.end), "h1")
            alert["labels"] = labels
            alert["annotations"] = {"runbook_url": evil.url, "description": f"see <{evil.url}>"}
            alert["generatorURL"] = evil.url
            assert _post(url, [alert]).status_code == 200
            assert sink.wait(lambda posts: len(posts) >= 2, timeout=60)
            assert not evil.posts
            text = sink.bodies("/slack")[0]["text"]
            assert f"<{evil.url}" not in text and "`code`" not in text
            assert text.count("<") == 1 and f"<{DASHBOARD}/live?" in text  # the one link is ours
            assert f"`&lt;{evil.url}|Urgent&gt; 'code' _it_`" in text  # shown, escaped, inside a code span
            assert "[ttft.queueing]" in text
            assert sink.bodies("/json")[0]["link"].startswith(f"{DASHBOARD}/live?")
        finally:
            _stop(receiver, server)


def test_resolved_updates_the_incident_without_a_new_diagnosis(fleet, tmp_path):
    from tests.webhook_harness import firing
    from triage.alerting.receiver.store import IncidentStore

    with sink_server() as sink:
        receiver, server, url = _receiver(fleet.url, sink.url, tmp_path)
        try:
            alert = firing("TriageTtftQueueing", {"instance": "r0", "cause": "ttft.queueing"}, _at(fleet.end), "z1")
            assert _post(url, [alert]).status_code == 200
            assert sink.wait(lambda posts: len(posts) >= 2, timeout=60)
            resolved = dict(alert, status="resolved", endsAt=_at(fleet.end + 60))
            assert _post(url, [resolved]).json()["resolved"] == 1
            rows = IncidentStore(tmp_path / "incidents.sqlite3").recent()
            assert len(rows) == 1 and rows[0].status == "resolved" and rows[0].cause == "ttft.queueing"
            assert rows[0].ends_at and rows[0].ends_at.startswith(_at(fleet.end + 60)[:19])
            assert rows[0].diagnosis and rows[0].link.startswith(DASHBOARD)
            metrics = requests.get(url + "metrics", timeout=5).text
            assert 'triage_webhook_diagnoses_total{outcome="ok"} 1.0' in metrics and len(sink.posts) == 2
        finally:
            _stop(receiver, server)
