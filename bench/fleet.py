"""Fleet diagnosis cost: 200 engines (the simulator's scenarios mixed) backfilled into a real Prometheus, 1 h window.

Times one fleet diagnosis (``diagnose --by instance``: every PromQL grouped server-side, one request per need) against
one engine's diagnosis (``--match instance=...``) in the same run, and the client's peak memory for the fleet.
Target: the fleet costs at most 3x one engine, and the client stays under 300 MB.

    .venv/bin/python bench/fleet.py [--engines 200] [--hours 1] [--repeat 3] [--keep DIR]
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.live import _family_spans, _simulate, backfill, start  # noqa: E402
from tests.prom_harness import PROMETHEUS, PROMTOOL, data_end  # noqa: E402
from triage.sources.metrics import simulator  # noqa: E402

STEP = 15.0
WORKERS = 2  # the machine has 2 cores
TARGET_RATIO = 3.0
TARGET_MB = 300.0


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
    if args.child == "fleet":
        from triage.diagnosis.fleet import diagnose_fleet
        from triage.sources.metrics.prometheus_fleet import FleetWindow

        rows = diagnose_fleet(kb, FleetWindow(args.url, start_at, end, by=["instance"], timeout=60), resolve_slo(kb))
        found = {"groups": len(rows), "causes": {r.labels["instance"]: [f.cause for f in r.diagnosis.findings]
                                                 for r in rows[:3]}}
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


def run_child(kind: str, url: str, end: int, hours: float, server_pid: int) -> dict:
    """One diagnosis in a fresh process; adds the CPU seconds Prometheus spent while it ran."""
    before = cpu_seconds(server_pid)
    done = subprocess.run([sys.executable, __file__, "--child", kind, "--url", url, "--end", str(end), "--hours",
                           str(hours)], capture_output=True, text=True, timeout=600)
    if done.returncode:
        raise RuntimeError(f"{kind} diagnosis failed: {done.stderr[-2000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "server_cpu": cpu_seconds(server_pid) - before}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engines", type=int, default=200)
    p.add_argument("--hours", type=float, default=1.0)
    p.add_argument("--repeat", type=int, default=3, help="timings per kind (median reported)")
    p.add_argument("--keep", type=Path, default=None, help="keep the generated data here (reused when present)")
    p.add_argument("--child", choices=("fleet", "one"), help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--end", type=int, help=argparse.SUPPRESS)
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
    else:
        end = data_end() - 60
        t0 = time.perf_counter()
        files = simulate(folder, args.hours, end)
        merged = folder / "fleet.om"
        fleet_file(files, args.engines, merged)
        backfill(merged, data)
        merged.unlink()
        marker.write_text(str(end))
        print(f"simulated {len(files)} scenarios × {args.hours:g} h, cloned to {args.engines} engines and "
              f"backfilled in {time.perf_counter() - t0:.0f} s")
    server = start(folder, data, end)
    pid = server.process.pid
    try:
        run_child("one", server.url, end, args.hours, pid)  # warm Prometheus' caches for both kinds alike
        run_child("fleet", server.url, end, args.hours, pid)
        one = [run_child("one", server.url, end, args.hours, pid) for _ in range(args.repeat)]
        fleet = [run_child("fleet", server.url, end, args.hours, pid) for _ in range(args.repeat)]
    finally:
        server.stop()
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    one_s = statistics.median(r["seconds"] for r in one)
    fleet_s = statistics.median(r["seconds"] for r in fleet)
    peak = max(r["peak_mb"] for r in fleet)
    ratio = fleet_s / one_s
    runs = lambda rs: ", ".join(f"{r['seconds']:.2f}" for r in rs)  # noqa: E731
    print(f"one engine   : {one_s:.3f} s (median of {args.repeat}: {runs(one)}); causes {one[0]['causes']}")
    print(f"fleet ({fleet[0]['groups']} engines): {fleet_s:.3f} s (median of {args.repeat}: {runs(fleet)})")
    print(f"ratio fleet / one engine: {ratio:.2f}x (target <= {TARGET_RATIO:g}x) "
          f"{'OK' if ratio <= TARGET_RATIO else 'OVER'}")
    print(f"client peak memory (fleet): {peak:.0f} MB (target < {TARGET_MB:g} MB) "
          f"{'OK' if peak < TARGET_MB else 'OVER'}")
    one_cpu, fleet_cpu = (statistics.median(r["server_cpu"] for r in rs) for rs in (one, fleet))
    one_client, fleet_client = (statistics.median(r["client_cpu"] for r in rs) for rs in (one, fleet))
    cores = os.cpu_count() or 1
    print(f"CPU per diagnosis (load-independent): one engine {one_client:.2f} s client + {one_cpu:.2f} s Prometheus, "
          f"fleet {fleet_client:.2f} s client + {fleet_cpu:.2f} s Prometheus "
          f"({(fleet_client + fleet_cpu) / max(one_client + one_cpu, 1e-9):.1f}x)")
    print(f"floor: the fleet's Prometheus work alone, spread on {cores} cores, takes >= {fleet_cpu / cores:.2f} s = "
          f"{fleet_cpu / cores / one_s:.1f}x one engine's wall time (load average {os.getloadavg()[0]:.1f} at the "
          "end: the machine is shared)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
