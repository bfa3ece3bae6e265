"""The receiver's HTTP side: POST / (or /webhook) takes Alertmanager notifications, GET /metrics its own metrics,
GET /-/healthy for probes. Each request is answered from what is in memory: parse, check, queue, reply."""

from __future__ import annotations

import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from triage.alerting.receiver.payload import MAX_BODY_BYTES
from triage.service.webhook import Receiver

log = logging.getLogger("triage.webhook")
POST_PATHS = ("/", "/webhook", "/alerts")
READ_TIMEOUT_S = 5.0  # a client trickling its body is cut here (the socket's timeout)


class WebhookServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    receiver: Receiver


class Handler(BaseHTTPRequestHandler):
    server: WebhookServer
    timeout = READ_TIMEOUT_S
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # headers and body leave in two writes: without TCP_NODELAY the second waits on the client's delayed ACK
        # (40 ms a request on Linux)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:  # noqa: N802 (http.server API)
        receiver = self.server.receiver
        if self.path.split("?", 1)[0] not in POST_PATHS:
            self._reply(404, {"error": "not found"})
            return
        if not receiver.authorized(self.headers.get("Authorization")):
            receiver.metrics.rejected.labels("unauthorized").inc()
            self._reply(401, {"error": "missing or wrong bearer token"}, drain=True)
            return
        length = self.headers.get("Content-Length", "")
        if not length.isdigit():
            receiver.metrics.rejected.labels("bad_payload").inc()
            self._reply(411, {"error": "a Content-Length is required"}, close=True)
            return
        if int(length) > MAX_BODY_BYTES:
            receiver.metrics.rejected.labels("too_large").inc()
            self._reply(413, {"error": f"body larger than {MAX_BODY_BYTES} bytes"}, close=True)
            return
        try:
            body = self.rfile.read(int(length))
        except OSError:  # the client stopped sending (socket timeout) or went away
            self.close_connection = True
            return
        done = receiver.accept(body)
        answer: dict[str, object] = {"queued": done.queued, "folded": done.folded, "duplicates": done.duplicates,
                  "resolved": done.resolved}
        if done.reason:
            answer["error"] = done.reason
        self._reply(done.status, answer)

    def do_GET(self) -> None:  # noqa: N802 (http.server API)
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, generate_latest(self.server.receiver.metrics.registry), CONTENT_TYPE_LATEST)
        elif path in ("/-/healthy", "/-/ready"):
            self._send(200, b"ok\n", "text/plain; charset=utf-8")
        else:
            self._reply(404, {"error": "not found"})

    def _reply(self, status: int, payload: dict, drain: bool = False, close: bool = False) -> None:
        if drain:
            length = self.headers.get("Content-Length", "")
            if length.isdigit() and int(length) <= MAX_BODY_BYTES:
                self.rfile.read(int(length))  # keep the connection usable for the next request
            else:
                close = True
        if close:
            self.close_connection = True
        self._send(status, json.dumps(payload).encode(), "application/json")

    def _send(self, status: int, body: bytes, kind: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server API)
        log.debug("%s %s", self.address_string(), format % args)


def make_server(receiver: Receiver, host: str, port: int) -> WebhookServer:
    """Bound and ready (port 0: any free one); ``serve_forever`` it, ``shutdown`` and ``receiver.stop`` to end."""
    server = WebhookServer((host, port), Handler)
    server.receiver = receiver
    return server


def serve_in_thread(receiver: Receiver, host: str = "127.0.0.1", port: int = 0) -> WebhookServer:
    """Start the workers and serve from a daemon thread (tests, the bench)."""
    receiver.start()
    server = make_server(receiver, host, port)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True,
                     name="webhook-http").start()
    return server
