"""A misbehaving HTTP server on 127.0.0.1 (raw sockets, so it can break HTTP as attackers do).

Paths: /metrics (good), /trickle (body 1 byte per ``TRICKLE_S``), /trickle-headers, /endless (chunked, never
ends), /bomb (4 MB of gzip inflating to 4.2 GB), /loop (redirects to itself), /elsewhere (redirects to
``redirect_to``), /redirect-endless and /redirect-bomb (a 302 whose own body is endless, or a gzip bomb),
/huge-error (HTTP 400 with a 300 KB Prometheus JSON error full of newlines and control characters), /deep-json
(200 with JSON nested 200,000 deep), /wrong-shape (vLLM names, then query results of the wrong shape), /passwd (200
text/plain with a passwd-like line), /html, /badle, /negative, /dup, /auth.
Under each of PREFIXED + "/" every path misbehaves the same way (a Prometheus base URL whose API answers so).
``server.heads`` keeps each request's head (request line and headers), to see what a client sent.
Used by the hostile-input tests and bench/hostile_rss.py; it never listens beyond the loopback.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

TRICKLE_S = 0.4
GOOD = (b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 3\n"
        b"# TYPE vllm:request_success counter\nvllm:request_success_total{model_name=\"m\"} 10\n")
PASSWD = b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
BAD = {
    "/badle": b"# TYPE t histogram\nt_bucket{le=\"abc\"} 1\nt_bucket{le=\"+Inf\"} 1\nt_sum 1\nt_count 1\n",
    "/negative": b"# TYPE vllm:request_success counter\nvllm:request_success_total{model_name=\"m\"} -5\n",
    "/dup": b"# TYPE g gauge\ng{a=\"1\"} 1\ng{a=\"1\"} 2\n",
}
PREFIXED = ("/endless", "/bomb", "/trickle", "/trickle-headers", "/elsewhere", "/redirect-endless", "/redirect-bomb",
            "/huge-error", "/deep-json", "/wrong-shape")
# a Prometheus whose label values name vLLM metrics but whose query results have the wrong shape
SHAPE_NAMES = (b'{"status":"success","data":["vllm:num_requests_running","vllm:num_requests_waiting",'
               b'"vllm:time_to_first_token_seconds_bucket","vllm:request_success_total"]}')
SHAPE_RESULT = (b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"le":"x"},'
                b'"value":"nan-not-a-pair","values":7},{"metric":null}]}}')
HUGE_ERROR = ('{"status":"error","errorType":"bad_data","error":"parse error\\n\\u001b[31m'
              + "A\\r\\nline " * 30_000 + '"}').encode()
BOMB_BLOCK = 1024 * 1024
BOMB_BLOCKS = 4200  # 4.2 GB of zeros once inflated


@cache
def gzip_bomb() -> bytes:
    """A gzip stream of BOMB_BLOCKS MB of zeros, built from one flushed block repeated (about 4 MB)."""
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(BOMB_BLOCK)
    first = co.compress(zeros) + co.flush(zlib.Z_FULL_FLUSH)
    block = co.compress(zeros) + co.flush(zlib.Z_FULL_FLUSH)
    return first + block * (BOMB_BLOCKS - 1) + co.flush()


def _head(status: str, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers.items()), "Connection: close", "", ""]
    return "\r\n".join(lines).encode()


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(30)
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 65536:
            got = sock.recv(4096)
            if not got:
                return
            data += got
        path = data.split(b" ", 2)[1].decode("latin-1") if data.count(b" ") >= 2 else "/"
        self.server.hits.append(path)
        self.server.heads.append(data.split(b"\r\n\r\n")[0].decode("latin-1"))
        try:
            self.respond(sock, path.split("?")[0])
        except (BrokenPipeError, ConnectionResetError, TimeoutError, OSError):
            pass  # the client gave up, as it should

    def respond(self, sock: socket.socket, path: str) -> None:
        text = {"Content-Type": "text/plain; version=0.0.4"}
        full = path
        for base in PREFIXED:  # /endless/api/v1/query …: a base URL that misbehaves for every API call under it
            if path.startswith(base + "/"):
                path = base
        if path == "/metrics":
            sock.sendall(_head("200 OK", {**text, "Content-Length": str(len(GOOD))}) + GOOD)
        elif path in BAD:
            sock.sendall(_head("200 OK", {**text, "Content-Length": str(len(BAD[path]))}) + BAD[path])
        elif path == "/passwd":
            sock.sendall(_head("200 OK", {**text, "Content-Length": str(len(PASSWD))}) + PASSWD)
        elif path == "/html":
            sock.sendall(_head("200 OK", {"Content-Type": "text/html", "Content-Length": "13"}) + b"<html></html>")
        elif path == "/auth":
            sock.sendall(_head("401 Unauthorized", {"Content-Length": "0"}))
        elif path == "/trickle":
            sock.sendall(_head("200 OK", {**text, "Content-Length": "1000000"}))
            while not self.server.stopping.is_set():
                sock.sendall(b"#")
                self.server.stopping.wait(TRICKLE_S)  # the misbehaviour itself: a slow server
        elif path == "/trickle-headers":
            for byte in _head("200 OK", {**text, "X-Slow": "x" * 1000}):
                if self.server.stopping.is_set():
                    return
                sock.sendall(bytes([byte]))
                self.server.stopping.wait(TRICKLE_S)
        elif path in ("/endless", "/redirect-endless"):
            status = "200 OK" if path == "/endless" else "302 Found"
            sock.sendall(_head(status, {**text, "Transfer-Encoding": "chunked", "Location": "/metrics"}))
            line = b"vllm:num_requests_running{model_name=\"m\"} 3\n" * 1400
            chunk = f"{len(line):x}\r\n".encode() + line + b"\r\n"
            while not self.server.stopping.is_set():
                sock.sendall(chunk)
        elif path in ("/bomb", "/redirect-bomb"):
            body = gzip_bomb()
            status = "200 OK" if path == "/bomb" else "302 Found"
            sock.sendall(_head(status, {**text, "Location": "/metrics", "Content-Encoding": "gzip",
                                        "Content-Length": str(len(body))}))
            sock.sendall(body)
        elif path == "/loop":
            sock.sendall(_head("302 Found", {"Location": "/loop", "Content-Length": "0"}))
        elif path == "/elsewhere":
            sock.sendall(_head("302 Found", {"Location": self.server.redirect_to, "Content-Length": "0"}))
        elif path == "/wrong-shape":
            body = SHAPE_NAMES if "/label/" in full else SHAPE_RESULT
            sock.sendall(_head("200 OK", {"Content-Type": "application/json", "Content-Length": str(len(body))}) + body)
        elif path == "/deep-json":  # 200 with JSON nested 200,000 deep: the JSON decoder's recursion limit
            deep = b"[" * 200_000 + b"]" * 200_000
            sock.sendall(_head("200 OK", {"Content-Type": "application/json", "Content-Length": str(len(deep))}) + deep)
        elif path == "/huge-error":
            json_type = {"Content-Type": "application/json", "Content-Length": str(len(HUGE_ERROR))}
            sock.sendall(_head("400 Bad Request", json_type) + HUGE_ERROR)
        else:
            sock.sendall(_head("404 Not Found", {"Content-Length": "0"}))


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, redirect_to: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.redirect_to = redirect_to
        self.hits: list[str] = []
        self.heads: list[str] = []
        self.stopping = threading.Event()


@contextmanager
def hostile_server(redirect_to: str = "http://127.0.0.1:9/metrics") -> Iterator[_Server]:
    """The server, serving in a thread; ``server.url`` is its base URL and ``server.hits`` the paths asked."""
    server = _Server(redirect_to)
    server.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def serve_forever_main() -> None:
    """``python -m tests.hostile_server``: serve until killed and print the base URL (for bench scripts)."""
    server = _Server("http://127.0.0.1:9/metrics")
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    finally:
        server.stopping.set()
        server.server_close()


if __name__ == "__main__":
    serve_forever_main()
