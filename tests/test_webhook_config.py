"""The receiver's configuration, payload parsing, message rendering and delivery, without a Prometheus."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from triage.alerting.receiver.config import load_config
from triage.alerting.receiver.deliver import post_json
from triage.alerting.receiver.message import Outcome, inert, slack_text
from triage.alerting.receiver.payload import parse_message
from triage.cli import main
from triage.errors import TriageError

SECRET = "hooks-secret-T000/B000/XXXX"


def _write(tmp_path, text: str):
    path = tmp_path / "secrets.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_config_from_file_then_environment(tmp_path):
    path = _write(tmp_path, f"""[prometheus.prod]
url = "http://127.0.0.1:9"
[webhook]
prometheus = "prod"
token = "t0ken-value"
slack_url = "https://hooks.example/{SECRET}"
workers = 3
labels = ["instance", "pod"]
""")
    config = load_config(path, env={"TRIAGE_WEBHOOK_WORKERS": "4", "TRIAGE_WEBHOOK_LISTEN": "127.0.0.1:0"})
    assert config.workers == 4 and config.labels == ("instance", "pod") and config.host_port == ("127.0.0.1", 0)
    assert config.secrets_path == str(path)
    shown = repr(config) + str(config)
    assert SECRET not in shown and "t0ken-value" not in shown and "token=set" in shown


@pytest.mark.parametrize(("table", "env", "says"), [
    ("", {}, "no Prometheus to read"),
    ('prometheus = "p"\nslack = "x"', {}, "unknown key(s) slack"),
    ('prometheus = "p"\nworkers = 0', {}, "webhook.workers"),
    ('prometheus = "p"\nslack_url = "ftp://x"', {}, "webhook.slack_url"),
    ('prometheus = "p"', {"TRIAGE_WEBHOOK_LISTEN": "nohost"}, "is not HOST:PORT"),
    ('prometheus = "p"\ntoken = 5', {}, "must be a string"),
])
def test_bad_configuration_is_one_line(tmp_path, table, env, says):
    path = _write(tmp_path, "[webhook]\n" + table + "\n")
    with pytest.raises(TriageError) as err:
        load_config(path, env=env)
    assert says in err.value.line() and "\n" not in err.value.line()


def test_cli_refuses_a_bad_configuration_with_exit_2(tmp_path, capsys):
    path = _write(tmp_path, f'[webhook]\nprometheus = "nope"\nslack_url = "https://h/{SECRET}"\n')
    assert main(["webhook", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "no Prometheus profile 'nope'" in err and SECRET not in err


@pytest.mark.parametrize(("body", "says"), [
    (b"not json", "not an Alertmanager webhook"),
    (json.dumps({"version": "3", "status": "firing", "alerts": []}).encode(), "version"),
    (json.dumps({"version": "4", "status": "firing", "alerts": [{"status": "firing"}]}).encode(), "startsAt"),
])
def test_payloads_that_are_not_version_4_are_refused(body, says):
    with pytest.raises(TriageError) as err:
        parse_message(body)
    assert says in err.value.line()


def test_label_values_render_inertly(kb):
    assert inert("<https://x|y> *b* `c`") == "`&lt;https://x|y&gt; *b* 'c'`"
    alert = parse_message(json.dumps({"version": "4", "status": "firing", "alerts": [{
        "status": "firing", "labels": {"alertname": "<!channel> [x](https://e.example)"},
        "startsAt": "2026-12-02T00:00:00Z"}]}).encode()).alerts[0]
    out = Outcome(alert=alert, replica={"instance": "@here"}, lead=None, link="https://d/live?x=1", source="s",
                  error="could not diagnose: Prometheus unreachable")
    text = slack_text(kb, out)
    assert "<!channel>" not in text and "`&lt;!channel&gt; [x](https://e.example)`" in text
    assert "instance=`@here`" in text and "*could not diagnose: Prometheus unreachable*" in text
    assert text.count("<") == 1  # only our link


class _Redirect(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_POST(self) -> None:  # noqa: N802
        _Redirect.hits.append(self.path)
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(302 if self.path == "/hook" else 200)
        self.send_header("Location", "/elsewhere")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_outgoing_posts_follow_no_redirect_and_name_no_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        why = post_json(url, {"text": "x"}, timeout=2)
        assert why == "answered 302 (a redirect, not followed)" and _Redirect.hits == ["/hook"]
    finally:
        server.shutdown()
        server.server_close()
    assert post_json(url, {"text": "x"}, timeout=1).startswith("not reachable")


def test_store_round_trip_and_resolve(tmp_path):
    from triage.alerting.receiver.store import IncidentStore

    store = IncidentStore(tmp_path / "i.sqlite3")
    at = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
    args = dict(fingerprint="f", starts_at=at, alertname="A", labels={"a": "1"}, replica={"instance": "x"},
                cause=None, message="m", diagnosis=None, error="could not diagnose: down", link="l")
    assert store.record(**args) is not None and store.record(**args) is None  # fingerprint + startsAt once
    assert store.resolve("f", at, datetime(2026, 12, 2, 1, 5, tzinfo=UTC))
    row = store.recent()[0]
    assert row.status == "resolved" and row.ends_at.startswith("2026-12-02T01:05:00") and row.error
    (tmp_path / "bad.sqlite3").write_bytes(b"not a database" * 100)
    with pytest.raises(TriageError, match="not a usable incident store"):
        IncidentStore(tmp_path / "bad.sqlite3")


def test_what_the_receiver_remembers_is_bounded(tmp_path):
    """De-duplication state has a fixed ceiling whatever the number of replicas and alerts."""
    from tests.prom_harness import closed_port_url
    from triage.alerting.receiver.config import ReceiverConfig
    from triage.service.webhook import Receiver

    receiver = Receiver(ReceiverConfig(prometheus=closed_port_url(), labels=("instance",), max_replicas=5,
                                       queue=1000, timeout=1.0))
    alerts = [{"status": "firing", "labels": {"alertname": "A", "instance": f"r{i}"}, "fingerprint": f"{i:x}",
               "startsAt": "2026-12-02T00:00:00Z"} for i in range(200)]
    done = receiver.accept(json.dumps({"version": "4", "status": "firing", "alerts": alerts}).encode())
    assert done.status == 200 and done.queued == 200
    assert len(receiver._replicas) == 5 and len(receiver._seen) == 20


def test_resolved_before_the_diagnosis_is_stored_still_closes_the_incident(tmp_path):
    """Alertmanager may send the resolution while the diagnosis still waits on a slow Prometheus: the incident is
    stored resolved, and the resolution starts no diagnosis of its own."""
    import threading as th

    from tests.prom_harness import FakeBehaviour, fake_prometheus
    from triage.alerting.receiver.config import ReceiverConfig
    from triage.alerting.receiver.store import IncidentStore
    from triage.service.webhook import Receiver

    firing = {"status": "firing", "labels": {"alertname": "A", "instance": "x"}, "fingerprint": "aa",
              "startsAt": "2026-12-02T00:00:00Z"}
    resolved = dict(firing, status="resolved", endsAt="2026-12-02T00:03:00Z")
    with fake_prometheus(FakeBehaviour(query_delay=30, delay_everything=True)) as slow:
        receiver = Receiver(ReceiverConfig(prometheus=slow, labels=("instance",), timeout=1.0,
                                           incident_db=str(tmp_path / "i.sqlite3")))
        stored = th.Event()
        receiver.sent = lambda out: stored.set()
        receiver.start()
        try:
            for alert in (firing, resolved):
                assert receiver.accept(json.dumps({"version": "4", "status": alert["status"],
                                                   "alerts": [alert]}).encode()).status == 200
            assert stored.wait(30)
        finally:
            receiver.stop()
    row = IncidentStore(tmp_path / "i.sqlite3").recent()[0]
    assert row.status == "resolved" and row.ends_at.startswith("2026-12-02T00:03:00") and row.error
    assert row.error.startswith("could not diagnose: ")


@pytest.mark.parametrize("behaviour", ["erroring", "down"])
def test_a_failing_prometheus_gives_could_not_diagnose(behaviour):
    from tests.prom_harness import FakeBehaviour, closed_port_url, fake_prometheus
    from triage.alerting.receiver.config import ReceiverConfig
    from triage.alerting.receiver.payload import AlertmanagerAlert
    from triage.service.webhook import Receiver

    alert = AlertmanagerAlert(status="firing", labels={"alertname": "A", "instance": "x", "cause": "ttft.queueing"},
                              startsAt=datetime(2026, 12, 2, tzinfo=UTC))
    with fake_prometheus(FakeBehaviour(status=500)) as failing:
        url = failing if behaviour == "erroring" else closed_port_url()
        receiver = Receiver(ReceiverConfig(prometheus=url, labels=("instance",), timeout=2.0))
        out = receiver.diagnose(alert, receiver.replica_of(alert))
    assert out.error.startswith("could not diagnose: ") and "\n" not in out.error
    assert out.link.endswith("match_instance=x&node=ttft.queueing")  # the link still opens the replica
