"""A storm client in its own process (as Alertmanager is): reads {"url", "token", "notifications"} as JSON on
stdin, posts every notification over ``connections`` keep-alive connections, prints [[status, seconds], …]."""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from urllib.parse import urlsplit


def _send(url: str, token: str, bodies: list[bytes], out: list[tuple[int, float]]) -> None:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    for body in bodies:
        t0 = time.monotonic()
        try:
            conn.request("POST", parts.path or "/", body=body,
                         headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
            answer = conn.getresponse()
            answer.read()
            status = answer.status
        except OSError:
            conn.close()
            status = 0
        out.append((status, time.monotonic() - t0))
    conn.close()


def main() -> None:
    job = json.load(sys.stdin)
    bodies = [json.dumps(n).encode() for n in job["notifications"]]
    connections = int(job.get("connections", 4))
    out: list[tuple[int, float]] = []
    threads = [threading.Thread(target=_send, args=(job["url"], job["token"], bodies[i::connections], out))
               for i in range(connections)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"took": time.monotonic() - started, "answers": out}))


if __name__ == "__main__":
    main()
