"""Fleet diagnosis cost: 200 engines (the simulator's scenarios mixed) backfilled into a real Prometheus, 1 h window.

The recording rules of ``python -m triage rules --window 1h`` are evaluated into the TSDB by
``promtool tsdb create-blocks-from rules`` (every minute of the last 4, pass by pass) and Prometheus compacts them
with the raw blocks, as it keeps its own rule output. Then, in the same run: one engine's diagnosis
(``--match instance=...``, raw), the fleet read raw (``--by instance --raw``: every PromQL grouped server-side, one
request per need) and the fleet read from the recorded ``triage:*:1h`` series (``--by instance``), and the client's
peak memory. Target: the fleet costs at most 3x one engine, and the client stays under 300 MB.

    .venv/bin/python -m bench.fleet [--engines 200] [--hours 1] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.live import _family_spans, _simulate, backfill, start
from tests.prom_harness import PROMETHEUS, PROMTOOL, PromServer, data_end
from tests.rules_harness import serve_with_recorded
from triage.knowledge.replicas import duration_text
from triage.sources.metrics import simulator

ROOT = Path(__file__).resolve().parent.parent

STEP = 15.0
WORKERS = 2  # the machine has 2 cores
TARGET_RATIO = 3.0
TARGET_MB = 300.0
RULE_SPAN = 240  # seconds of rule evaluations before the end (the fleet reads the newest)
COMPACT_DEADLINE = 300.0
KINDS = {"one": "one engine (raw)", "fleet-raw": "fleet, raw read", "fleet": "fleet, recorded"}


def simulate(folder: Path, hours: float, end: int) -> dict[str, Path]:
    """One OpenMetrics file per scenario (``hours`` at 15 s); the fleet clones them."""
    jobs = [(str(folder / f"{sc}.om"), sc, hours, float(end), 7) for sc in simulator.SCENARIOS]
    with ProcessPoolExecutor(max_workers=WORKERS) as pool:
        list(pool.map(_simulate, jobs))
    return {sc: Path(job[0]) for sc, job in zip(simulator.SCENARIOS, jobs)}


def fleet_file(files: dict[str, Path], engines: int, out: Path) -> dict[str, str]:
    """One OpenMetrics file: engine i is scenario i mod n, labelled instance="e<i>"; returns instance → scenario."""
    order = list(itertools.islice(itertools.cycle(files), engines))
    data = {sc: path.read_bytes() for sc, path in files.items()}
    spans = {sc: _family_spans(blob) for sc, blob in data.items()}
    names = list(dict.fromkeys(name for index in spans.values() for name in index))
    with out.open("wb") as sink:
        for name in names:
            sink.write(next(index[name][0] for index in spans.values() if name in index))
            for i, sc in enumerate(order):
                if name in spans[sc]:
                    _, lo, hi = spans[sc][name]
                    sink.write(data[sc][lo:hi].replace(b'engine="0"', b'engine="0",instance="e%03d"' % i))
        sink.write(b"# EOF\n")
    return {f"e{i:03d}": sc for i, sc in enumerate(order)}


def child(args: argparse.Namespace) -> None:
    """In a fresh process: read + diagnose (fleet or one engine), print seconds and this process's peak RSS."""
    from triage.diagnosis.rules import resolve_slo
    from triage.knowledge.loader import load_knowledge

    kb = load_knowledge()
    end = datetime.fromtimestamp(args.end, UTC)
    start_at = end - timedelta(hours=args.hours)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    if args.child.startswith("fleet"):
        from triage.diagnosis.fleet import diagnose_fleet
        from triage.sources.metrics.prometheus_fleet import FleetWindow

        result = diagnose_fleet(kb, FleetWindow(args.url, start_at, end, by=["instance"], timeout=60),
                                resolve_slo(kb), recorded=args.child == "fleet")
        rows = result.rows
        found = {"groups": len(rows), "read": result.read.sentence(), "end": result.read.end.timestamp(),
                 "causes": {r.labels["instance"]: [f.cause for f in r.diagnosis.findings] for r in rows}}
    else:
        from triage.diagnosis.window import diagnose_window
        from triage.sources.metrics.prometheus_window import PrometheusWindow

        live = diagnose_window(kb, PrometheusWindow(args.url, start_at, end, match={"instance": "e000"}, timeout=60),
                               resolve_slo(kb))
        found = {"causes": live.diagnosis.matched_ids}
    seconds = time.perf_counter() - t0
    client_cpu = time.process_time() - cpu0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "client_cpu": client_cpu, "peak_mb": peak_mb, **found}))


def cpu_seconds(pid: int) -> float:
    """User + system CPU a process has used so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_child(kind: str, url: str, end: float, hours: float, server_pid: int) -> dict:
    """One diagnosis in a fresh process; adds the CPU seconds Prometheus spent while it ran."""
    before = cpu_seconds(server_pid)
    # as a module from the root, as the bench itself runs: `python bench/fleet.py` would not find the bench package
    done = subprocess.run([sys.executable, "-m", "bench.fleet", "--child", kind, "--url", url, "--end", str(end),
                           "--hours", str(hours)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    if done.returncode:
        raise RuntimeError(f"{kind} diagnosis failed: {done.stderr[-2000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "server_cpu": cpu_seconds(server_pid) - before}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engines", type=int, default=200)
    p.add_argument("--hours", type=float, default=1.0)
    p.add_argument("--repeat", type=int, default=3, help="timings per kind (median reported)")
    p.add_argument("--keep", type=Path, default=None, help="keep the generated data here (reused when present)")
    p.add_argument("--child", choices=tuple(KINDS), help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--end", type=float, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return 0
    if not (Path(PROMETHEUS).exists() and Path(PROMTOOL).exists()):
        print("prometheus / promtool are not installed (apt-get install prometheus)", file=sys.stderr)
        return 2
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    folder.mkdir(parents=True, exist_ok=True)
    data, marker = folder / "data", folder / "end"
    if marker.exists() and data.exists():
        end = int(marker.read_text())
        print(f"reusing {folder} (data ending {datetime.fromtimestamp(end, UTC):%F %T} UTC)")
        server = start(folder, data, end)
    else:
        end = data_end() - 60
        t0 = time.perf_counter()
        files = simulate(folder, args.hours, end)
        merged = folder / "fleet.om"
        fleet_file(files, args.engines, merged)
        backfill(merged, data)
        merged.unlink()
        print(f"simulated {len(files)} scenarios × {args.hours:g} h, cloned to {args.engines} engines and "
              f"backfilled in {time.perf_counter() - t0:.0f} s")
        t0 = time.perf_counter()
        server = record(folder, data, end, args.hours)
        marker.write_text(str(end))
        print(f"recording rules evaluated into blocks and compacted in {time.perf_counter() - t0:.0f} s")
    pid = server.process.pid
    runs: dict[str, list[dict]] = {kind: [] for kind in KINDS}
    try:
        for kind in KINDS:  # warm Prometheus' caches for every kind alike
            run_child(kind, server.url, end, args.hours, pid)
        for _ in range(args.repeat):  # interleaved, so a change of load touches every kind alike
            for kind in KINDS:
                runs[kind].append(run_child(kind, server.url, end, args.hours, pid))
    finally:
        server.stop()
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    report(runs, args.repeat)
    return 0


def record(folder: Path, data: Path, end: int, hours: float) -> PromServer:
    """The recording rules for the window evaluated into the TSDB; then a Prometheus over it, once it has compacted
    the rules' blocks (one per rule and pass) with the raw ones, as it holds its own rule output in few blocks."""
    window = duration_text(round(hours * 3600))
    done = subprocess.run([sys.executable, "-m", "triage", "rules", "--window", window], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    rules = folder / "rules.yml"
    rules.write_text(done.stdout)
    server = serve_with_recorded(folder, data, rules, end - RULE_SPAN, end, serve=start)
    blocks = len(list(data.glob("*/meta.json")))
    deadline = time.monotonic() + COMPACT_DEADLINE
    while len(list(data.glob("*/meta.json"))) >= blocks and time.monotonic() < deadline:
        time.sleep(2)  # a benchmark's setup: Prometheus compacts on its own one-minute cycle
    print(f"Prometheus compacted {blocks} blocks into {len(list(data.glob('*/meta.json')))}")
    return server


def report(runs: dict[str, list[dict]], repeat: int) -> None:
    median = {kind: statistics.median(r["seconds"] for r in rs) for kind, rs in runs.items()}
    one_s = median["one"]
    for kind, label in KINDS.items():
        rs = runs[kind]
        each = ", ".join(f"{r['seconds']:.2f}" for r in rs)
        ratio = "" if kind == "one" else f" = {median[kind] / one_s:.2f}x one engine"
        print(f"{label:18}: {median[kind]:.3f} s (median of {repeat}: "
              f"{each}){ratio}; client CPU "
              f"{statistics.median(r['client_cpu'] for r in rs):.2f} s, Prometheus CPU "
              f"{statistics.median(r['server_cpu'] for r in rs):.2f} s, client peak "
              f"{max(r['peak_mb'] for r in rs):.0f} MB")
    fleet, raw = runs["fleet"][0], runs["fleet-raw"][0]
    print(f"fleet, recorded: {fleet['groups']} engines, {fleet['read']}")
    same = fleet["causes"] == raw["causes"]
    print(f"recorded and raw fleet reads find the same causes for every engine: {same}"
          + ("" if same or fleet["end"] == raw["end"] else " (the recorded read ends at the rules' last evaluation, "
                                                           f"{raw['end'] - fleet['end']:.0f} s before)"))
    ratio = median["fleet"] / one_s
    peak = max(r["peak_mb"] for r in runs["fleet"] + runs["fleet-raw"])
    print(f"ratio fleet (recorded) / one engine: {ratio:.2f}x (target <= {TARGET_RATIO:g}x) "
          f"{'OK' if ratio <= TARGET_RATIO else 'OVER'}; raw read {median['fleet-raw'] / one_s:.2f}x")
    print(f"client peak memory (fleet): {peak:.0f} MB (target < {TARGET_MB:g} MB) "
          f"{'OK' if peak < TARGET_MB else 'OVER'}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end (the machine is shared)")

if __name__ == "__main__":
    raise SystemExit(main())
