"""The bounded fetch connects to the address it checked, by urllib3's public pool parameters (issue 25): one lookup
per request (nothing to rebind), the URL's name in the Host header, the TLS SNI and the certificate check; and
its errors are told apart by type, never by their text.

Names resolve through a replaced ``socket.getaddrinfo`` that answers 127.0.0.1 once and 127.0.0.2 (where nothing
listens) after that, so a second lookup shows as a failure; all traffic stays on the loopback."""

from __future__ import annotations

import http.server
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from urllib3.exceptions import NewConnectionError, ProtocolError, ReadTimeoutError

from tests.hostile_server import GOOD, hostile_server
from triage.errors import TriageError
from triage.sources.metrics.fetch import BoundedSession, ScrapePolicy, connection_reason, fetch, timed_out

NAME = "metrics.test"
OPEN = ScrapePolicy()


@pytest.fixture
def rebinding(monkeypatch) -> list[str]:
    """``NAME`` resolves to 127.0.0.1 the first time and to 127.0.0.2 every later time; the lookups made."""
    real = socket.getaddrinfo
    asked: list[str] = []

    def lookup(host, port, *args, **kwargs):
        if host != NAME:
            return real(host, port, *args, **kwargs)
        asked.append(host)
        address = "127.0.0.1" if len(asked) == 1 else "127.0.0.2"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    return asked


def test_the_fetch_connects_to_the_checked_address_and_names_the_host(rebinding):
    with hostile_server() as server:
        port = server.server_address[1]
        got = fetch(f"http://user:p%40ss@{NAME}:{port}/metrics", timeout=5.0, policy=OPEN)
    assert got.body == GOOD
    assert rebinding == [NAME]  # one lookup: the connection went to the address the policy saw
    head = server.heads[-1].lower()
    assert f"host: {NAME}:{port}" in head
    assert "authorization: basic dxnlcjpwqhnz" in head  # user:p@ss, as requests sent it


def test_the_api_session_looks_up_once_per_request(rebinding):
    with hostile_server() as server:
        port = server.server_address[1]
        with BoundedSession(5.0) as session:
            answer = session.get(f"http://{NAME}:{port}/metrics")
            assert answer.status_code == 200 and answer.content == GOOD
            assert rebinding == [NAME]
            with pytest.raises(requests.exceptions.ConnectionError) as err:  # the next lookup says 127.0.0.2
                session.get(f"http://{NAME}:{port}/metrics")
    assert connection_reason(err.value) == "connection refused"
    assert f"host: {NAME}:{port}" in server.heads[-1].lower()


class _Metrics(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(GOOD)))
        self.end_headers()
        self.wfile.write(GOOD)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory) -> Iterator[tuple[int, Path]]:
    """An HTTPS server on 127.0.0.1 with a self-signed certificate for ``NAME``; its port and the certificate."""
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "2", "-subj", f"/CN={NAME}", "-addext", f"subjectAltName=DNS:{NAME}",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=30)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], cert
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_tls_to_the_pinned_address_checks_the_certificate_for_the_name(rebinding, tls_server):
    port, cert = tls_server
    with BoundedSession(5.0) as session:  # verify as prometheus-api-client passes it (explicitly, per request)
        answer = session.get(f"https://{NAME}:{port}/metrics", verify=str(cert))
    assert answer.status_code == 200 and answer.content == GOOD
    assert rebinding == [NAME]


def test_tls_refuses_a_certificate_for_another_name(tls_server):
    port, cert = tls_server
    with BoundedSession(5.0) as session, pytest.raises(requests.exceptions.SSLError) as err:
        session.get(f"https://127.0.0.1:{port}/metrics", verify=str(cert))  # the certificate names metrics.test
    assert connection_reason(err.value) == "TLS certificate not accepted"


def test_the_scrape_refuses_a_certificate_no_known_authority_signed(rebinding, tls_server):
    port, _ = tls_server
    with pytest.raises(TriageError, match=r"unreachable \(TLS certificate not accepted\)"):
        fetch(f"https://{NAME}:{port}/metrics", timeout=5.0, policy=OPEN)


def test_reasons_follow_the_type_not_the_text():
    refused = NewConnectionError(None, "timed out, certificate, reset")  # type: ignore[arg-type]
    refused.__cause__ = ConnectionRefusedError("words do not matter")
    assert connection_reason(requests.exceptions.ConnectionError(refused)) == "connection refused"
    assert not timed_out(refused)  # urllib3 files NewConnectionError under ConnectTimeoutError
    assert connection_reason(ProtocolError("Connection aborted.", ConnectionResetError())) == "connection reset"
    assert connection_reason(RuntimeError("connection refused; certificate; timed out")) == "connection failed"
    read_timeout = ReadTimeoutError(None, "/", "anything")  # type: ignore[arg-type]
    assert timed_out(requests.exceptions.ConnectionError(read_timeout))
    assert connection_reason(read_timeout) == "connection timed out"
    assert not timed_out(requests.exceptions.ConnectionError("Read timed out."))  # the text alone is no timeout
