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
from triage.sources.metrics.fetch import MAX_API_BYTES, AnswerTooLarge, BoundedSession, RedirectRefused, fetch
from triage.sources.metrics.profiles import Profile, profile_for_url
from triage.sources.metrics.prometheus_window import PrometheusWindow, api_error_line, well_formed_answer

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


# ------------------------------------------------------------ redirects (issue 23, case 2)

REDIRECT_LINE = "redirects are not followed"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", ["/redirect-endless/api/v1/query", "/redirect-bomb/api/v1/query", "/loop"])
def test_the_session_neither_follows_a_redirect_nor_reads_its_body(server, path):
    # requests reads a 3xx body whole and decompressed even with allow_redirects=False: the 302 with a gzip bomb
    # took 3.4 GB and ended in "unexpected RuntimeError"; now the answer's head is enough
    before = server.hits.count("/metrics")
    with pytest.raises(RedirectRefused, match=REDIRECT_LINE) as exc:
        BoundedSession(30.0).get(server.url + path, allow_redirects=True)
    assert "\n" not in str(exc.value) and len(str(exc.value)) < 300
    assert server.hits.count("/metrics") == before and server.hits.count(path) == 1  # the Location was not asked


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", ["/redirect-endless", "/redirect-bomb"])
def test_the_metrics_fetch_never_reads_a_redirect_body_either(server, path):
    with pytest.raises(TriageError, match=REDIRECT_LINE) as exc:
        fetch(server.url + path, timeout=30.0)
    assert "\n" not in exc.value.line()


@pytest.mark.timeout(60)
def test_a_cross_origin_redirect_never_carries_the_profile_headers():
    """A Prometheus whose API redirects to another origin: the target is never contacted, so the profile's
    custom header (and token) never reach it; the window ends in one line naming the redacted Location."""
    with hostile_server() as target, hostile_server(redirect_to=target.url + "/endless?token=s3cret") as first:
        profile = Profile(name="ops", url=first.url + "/elsewhere", token="tok-1",
                          headers={"X-Api-Key": "key-123"})
        with pytest.raises(TriageError) as exc:
            PrometheusWindow(profile, END - timedelta(minutes=5), END, timeout=30.0)
        line = exc.value.line()
        assert REDIRECT_LINE in line and "\n" not in line and "s3cret" not in line, line
        assert any("X-Api-Key: key-123" in head for head in first.heads)  # sent to the configured origin only
        assert target.hits == [] and target.heads == []


@pytest.mark.timeout(60)
def test_the_alert_dry_run_refuses_a_redirect_in_one_line():
    with hostile_server() as target, hostile_server(redirect_to=target.url + "/bomb") as first:
        profile = profile_for_url(first.url + "/elsewhere")
        with pytest.raises(TriageError, match=REDIRECT_LINE):
            _query(_client(profile, 30.0), "up", END.timestamp(), 30.0, "the server")
        assert target.hits == []


# ------------------------------------------------------------ error bodies (issue 23, case 4)

@pytest.mark.timeout(60)
def test_a_huge_error_body_becomes_one_short_clean_line(server):
    """A 300 KB JSON ``error`` full of newlines and an ANSI escape: one line of at most a few hundred characters,
    in the window's error and in the alert dry run."""
    with pytest.raises(TriageError) as exc:
        window(server.url + "/huge-error")
    line = exc.value.line()
    with pytest.raises(TriageError) as dry:
        _query(_client(profile_for_url(server.url + "/huge-error"), 30.0), "up", END.timestamp(), 30.0, "srv")
    for text in (line, str(dry.value)):
        assert "bad_data: parse error" in text, text
        assert len(text) < 400 and not any(ord(c) < 32 or 0x7f <= ord(c) < 0xa0 for c in text), text
        assert "[31m" not in text and "\\n" not in text and "\\u001b" not in text, text


def test_the_error_detail_is_bounded_and_sanitised():
    body = ('{"errorType":"bad_data","error":"' + "x\\u202e\\u0007y\\r\\n" * 50_000 + '"}').encode()
    line = api_error_line(f"HTTP Status Code 400 ({body!r})")
    assert line.startswith("HTTP 400: bad_data: xy xy") and len(line) <= 220, line[:300]
    assert "\u202e" not in line and "\x07" not in line
    plain = api_error_line("HTTP Status Code 502 (b'<html>\\n' + b'<body>bad gateway</body>' * 10000)")
    assert "\n" not in plain and len(plain) <= 220


@pytest.mark.parametrize("answer,ok", [
    (["vllm:num_requests_running"], True),
    ([{"metric": {"le": "+Inf"}, "value": [1.5, "NaN"]}], True),
    ([{"metric": {}, "values": [[1, "2"], [2, "3"]]}], True),
    ([], True),
    ({"result": []}, False),
    ([{"metric": None}], False),
    ([{"metric": {"le": "x"}, "value": [1, "2"]}], False),
    ([{"metric": {}, "value": "1"}], False),
    ([{"metric": {}, "value": [1, "a"]}], False),
    ([{"metric": {"a": 1}, "value": [1, "2"]}], False),
    ([{"metric": {}, "values": [[1]]}], False),
    ([7], False),
])
def test_an_answer_of_the_wrong_shape_is_refused_where_it_arrives(answer, ok):
    assert well_formed_answer(answer) is ok
