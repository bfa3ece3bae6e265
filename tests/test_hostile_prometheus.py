"""Prometheus API answers are bounded like a scrape: a local server on 127.0.0.1 pretending to be the Prometheus
API trickles, streams without end or sends a gzip bomb; each query ends within its timeout or at the size cap
with one clear line (prometheus-api-client gets a BoundedSession)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from tests.hostile_server import hostile_server
from triage.alerting.evaluate import _client, _query
from triage.errors import TriageError
from triage.sources.metrics.fetch import MAX_API_BYTES, AnswerTooLarge, BoundedSession
from triage.sources.metrics.profiles import profile_for_url
from triage.sources.metrics.prometheus_window import PrometheusWindow

END = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
CAP = f"larger than {MAX_API_BYTES // (1024 * 1024)} MB"


@pytest.fixture(scope="module")
def server():
    with hostile_server() as s:
        yield s


def window(url: str, timeout: float = 30.0) -> PrometheusWindow:
    return PrometheusWindow(url, END - timedelta(minutes=5), END, timeout=timeout)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", ["/endless", "/bomb"])
def test_an_endless_or_inflating_answer_stops_at_the_cap(server, path):
    with pytest.raises(TriageError) as exc:
        window(server.url + path)
    assert CAP in str(exc.value) and "Prometheus at" in str(exc.value), exc.value
    assert any(hit.startswith(f"{path}/api/v1/label/__name__/values") for hit in server.hits)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", ["/trickle", "/trickle-headers"])
def test_a_trickling_answer_ends_at_the_timeout(server, path):
    # a 1 MB body (or 1 KB of headers) at one byte per 0.4 s would take days; the total timeout ends it
    with pytest.raises(TriageError, match=r"timed out after 2\.0 s"):
        window(server.url + path, timeout=2.0)


@pytest.mark.timeout(120)
def test_the_alert_dry_run_is_bounded_too(server):
    profile = profile_for_url(server.url + "/endless")
    with pytest.raises(TriageError, match=CAP):
        _query(_client(profile, 30.0), "up", END.timestamp(), 30.0, "the server")
    with pytest.raises(TriageError, match="timed out"):
        _query(_client(profile_for_url(server.url + "/trickle"), 1.0), "up", END.timestamp(), 1.0, "the server")


@pytest.mark.timeout(60)
def test_the_session_reads_a_good_answer_and_caps_a_small_one(server):
    session = BoundedSession(5.0)
    ok = session.get(server.url + "/metrics")
    assert ok.status_code == 200 and b"vllm:num_requests_running" in ok.content
    with pytest.raises(AnswerTooLarge, match="larger than"):
        BoundedSession(5.0, max_bytes=10).get(server.url + "/metrics")
    with pytest.raises(TriageError, match="positive"):
        BoundedSession(float("nan"))


class _KeepAliveThenTrickle(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive: the first answer is whole, every later one on the connection trickles."""

    protocol_version = "HTTP/1.1"
    BODY = b'{"status":"success","data":{"resultType":"vector","result":[]}}'

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        server = self.server
        server.ports.add(self.client_address[1])  # type: ignore[attr-defined]
        server.served += 1  # type: ignore[attr-defined]
        first = server.served == 1  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.BODY) if first else 100_000))
        self.end_headers()
        if first:
            self.wfile.write(self.BODY)
            return
        try:
            while not server.stopping.is_set():  # type: ignore[attr-defined]
                self.wfile.write(b" ")
                self.wfile.flush()
                server.stopping.wait(0.05)  # type: ignore[attr-defined]  # the trickle's pace
        except OSError:
            return


def test_a_kept_alive_connection_is_bounded_too():
    """The session keeps connections alive between queries; a reused socket is under the new query's deadline."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _KeepAliveThenTrickle)
    server.ports, server.served, server.stopping = set(), 0, threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        session = BoundedSession(1.0)
        url = f"http://127.0.0.1:{server.server_address[1]}/api/v1/query"
        assert session.get(url).json()["status"] == "success"
        with pytest.raises(requests.exceptions.ReadTimeout):  # a byte every 50 ms: only the deadline ends it
            session.get(url)
        assert server.served == 2 and len(server.ports) == 1  # type: ignore[attr-defined]  # one connection reused
    finally:
        server.stopping.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()
