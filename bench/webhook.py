"""Alert-to-message latency of the Alertmanager receiver: one alert at a time, then a storm over many replicas,
each against Alertmanager's own plain webhook delivery to the same sink in the same run.

A real Prometheus holds a simulated fleet (instance r0…rN, four scenarios, 10 min); alerts are posted to a real
Alertmanager's API, which routes each to the receiver (a child ``python -m triage webhook``) and to a plain
webhook; the sink stamps each arrival. Latency = arrival − the post to Alertmanager. Also prints the receiver's
peak RSS (VmHWM).

    .venv/bin/python -m bench.webhook [--replicas 200] [--singles 10]
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import requests

from tests.prom_harness import data_end, start_prometheus
from tests.rules_harness import merge_openmetrics
from tests.webhook_harness import sink_server, start_alertmanager, start_receiver
from triage.sources.metrics.simulator import write_openmetrics

ROOT = Path(__file__).resolve().parent.parent

SCENARIOS = ("queueing", "kv_pressure", "healthy", "prefill_bound")
TOKEN = "bench-token"
INSTANCE_RE = re.compile(r"instance=`(r\d+)`")


def _fleet(folder: Path, replicas: int, end: int) -> str:
    texts = {}
    for scenario in SCENARIOS:
        path = folder / f"{scenario}.om"
        write_openmetrics(path, scenario, minutes=10, step=15, end=end, seed=1)
        texts[scenario] = path.read_text()
    return merge_openmetrics({f"r{i}": texts[SCENARIOS[i % len(SCENARIOS)]] for i in range(replicas)})


def _post_alerts(am: str, names: list[str], alertname: str) -> float:
    now = datetime.now(UTC).isoformat()
    alerts = [{"labels": {"alertname": alertname, "instance": n, "cause": "ttft.queueing"}, "startsAt": now}
              for n in names]
    t0 = time.time()
    requests.post(f"{am}/api/v2/alerts", json=alerts, timeout=10).raise_for_status()
    return t0


def _arrivals(sink, alertname: str) -> tuple[dict[str, float], dict[str, float]]:
    """Per instance, the first arrival at the receiver's Slack stand-in and at the plain webhook."""
    triage: dict[str, float] = {}
    plain: dict[str, float] = {}
    with sink.changed:
        posts = list(sink.posts)
    for at, path, body in posts:
        if path == "/slack" and f"`{alertname}`" in body["text"]:
            m = INSTANCE_RE.search(body["text"])
            if m:
                triage.setdefault(m.group(1), at)
        elif path == "/plain":
            for alert in body.get("alerts", []):
                if alert["labels"].get("alertname") == alertname:
                    plain.setdefault(alert["labels"]["instance"], at)
    return triage, plain


def _wait(sink, alertname: str, names: list[str], timeout: float) -> tuple[dict[str, float], dict[str, float]]:
    def done(_posts) -> bool:
        triage, plain = _arrivals(sink, alertname)
        return all(n in triage and n in plain for n in names)

    sink.wait(done, timeout)
    return _arrivals(sink, alertname)


def _stats(values: list[float]) -> str:
    if not values:
        return "no message"
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return f"median {statistics.median(ordered) * 1000:7.0f} ms   p99 {p99 * 1000:7.0f} ms   (n={len(ordered)})"


def _hwm(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return f"{int(line.split()[1]) / 1024:.0f} MB"
    return "n/a"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=200, help="replicas in the storm (default 200)")
    parser.add_argument("--singles", type=int, default=10, help="single alerts, one after another (default 10)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-webhook-"))
    end = data_end()
    total = args.replicas + args.singles
    print(f"building {total} replicas × 10 min of simulated metrics …", flush=True)
    prom = start_prometheus(folder, _fleet(folder, total, end), end)
    procs = []
    with sink_server() as sink:
        try:
            receiver = start_receiver(folder, f"""[prometheus.bench]
url = "{prom.url}"
[webhook]
prometheus = "bench"
listen = "127.0.0.1:{{PORT}}"
token = "{TOKEN}"
slack_url = "{sink.url}/slack"
window = "5m"
labels = ["instance"]
queue = 1024
""")
            procs.append(receiver)
            am = start_alertmanager(folder, receiver.url + "/", TOKEN, group_wait="0s", plain_url=f"{sink.url}/plain")
            procs.append(am)
            single_triage, single_plain = [], []
            for i in range(args.singles):
                name = f"r{args.replicas + i}"
                t0 = _post_alerts(am.url, [name], "BenchSingle")
                triage, plain = _wait(sink, "BenchSingle", [name], 60)
                if name in triage:
                    single_triage.append(triage[name] - t0)
                if name in plain:
                    single_plain.append(plain[name] - t0)
            names = [f"r{i}" for i in range(args.replicas)]
            t0 = _post_alerts(am.url, names, "BenchStorm")
            triage, plain = _wait(sink, "BenchStorm", names, 600)
            failed = sum("could not diagnose" in b["text"] for b in sink.bodies("/slack"))
            print(f"\nalert → message (post to Alertmanager → arrival at the sink), {datetime.now(UTC):%Y-%m-%d}")
            print(f"{'one alert,':<21}receiver (diagnosis + message): {_stats(single_triage)}")
            print(f"{'one alert,':<21}plain webhook:{' ' * 18}{_stats(single_plain)}")
            storm = f"{args.replicas}-replica storm,"
            print(f"{storm:<21}receiver:{' ' * 23}{_stats([triage[n] - t0 for n in triage])}")
            print(f"{storm:<21}plain webhook:{' ' * 18}{_stats([plain[n] - t0 for n in plain])}")
            print(f"messages: {len(sink.bodies('/slack'))} ({failed} 'could not diagnose'); "
                  f"receiver peak RSS {_hwm(receiver.process.pid)}")
        finally:
            for proc in reversed(procs):
                proc.stop()
            prom.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
