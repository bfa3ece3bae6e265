"""Benchmark the generic per-request CSV path: 1,000,000 requests, bare pyarrow read vs load_benchmark.

Run: .venv/bin/python -m bench.parse [--rows N] [--repeat K]
Prints the times, the ratio load_benchmark / pyarrow.csv.read_csv and the peak extra memory of each
(measured in a fresh child process with ru_maxrss, so earlier steps do not hide the peak).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

ROOT = Path(__file__).resolve().parent.parent
CHILD = r"""
import json, resource, sys, time
import pyarrow as pa, pyarrow.csv as pacsv
from triage.service.uploads import open_benchmark as load_benchmark  # what the UI and CLI call

def rss_kb(field):
    try:
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

path, mode = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
load_benchmark(b"ttft_s,e2e_s,output_tokens\n0.1,1,10\n", "warm.csv")  # imports and lazy init outside the window
try:
    open("/proc/self/clear_refs", "w").write("5")  # reset the peak (VmHWM) to the current RSS
except OSError:
    pass
base = rss_kb("VmRSS")
t = time.perf_counter()
result = pacsv.read_csv(path) if mode == "arrow" else load_benchmark(data, "bench.csv")
elapsed = time.perf_counter() - t
print(json.dumps({{"seconds": elapsed, "peak_extra_kb": rss_kb("VmHWM") - base,
                   "arrow_pool_peak_kb": pa.default_memory_pool().max_memory() // 1024}}))
"""


def make_csv(path: Path, rows: int, seed: int = 7) -> None:
    """A realistic per-request CSV: epoch starts, lognormal prompts, ms latencies, a sparse error column."""
    rng = np.random.default_rng(seed)
    start = 1_735_812_000.0 + np.cumsum(rng.exponential(0.01, rows))
    prompt = np.maximum(1, rng.lognormal(np.log(800), 0.7, rows)).astype(np.int64)
    output = rng.integers(150, 400, rows)
    queue = rng.exponential(50.0, rows)
    ttft = queue + 20 + prompt * 0.05 + rng.gamma(2.0, 5.0, rows)
    tpot = rng.normal(35.0, 3.0, rows).clip(20, 60)
    e2e = ttft + tpot * (output - 1)
    ok = rng.random(rows) > 0.005
    error = np.where(ok, None, "ReadTimeout: upstream timed out")
    table = pa.table({
        "request_id": np.arange(rows), "start_time": start, "prompt_tokens": prompt, "output_tokens": output,
        "ttft_ms": ttft, "e2e_latency_ms": e2e, "itl_ms": tpot * rng.uniform(0.9, 1.1, rows), "queue_ms": queue,
        "ok": ok, "error": pa.array(error, type=pa.string()),
    })
    pacsv.write_csv(table, path)


def timed(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def timed_pair(first: Callable[[], object], second: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Medians of ``repeat`` runs of each, alternated (first, second, first, …): on a shared machine a burst of
    load then lands on both instead of on whichever ran during it."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for fn, into in ((first, times[0]), (second, times[1])):
            t = time.perf_counter()
            fn()
            into.append(time.perf_counter() - t)
    return statistics.median(times[0]), statistics.median(times[1])


def child(path: Path, mode: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT)), str(path), mode],
                         check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from triage.service.uploads import open_benchmark as load_benchmark  # what the UI and CLI call

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.csv"
        t = time.perf_counter()
        make_csv(path, args.rows)
        size = path.stat().st_size
        print(f"generated {args.rows:,} requests, {size / 1e6:.1f} MB in {time.perf_counter() - t:.1f} s "
              f"({os.cpu_count()} CPUs, pyarrow {pa.__version__})")
        data = path.read_bytes()
        bench = load_benchmark(data, "bench.csv")  # warm-up (imports, caches)
        arrow_s, load_s = timed_pair(lambda: pacsv.read_csv(path), lambda: load_benchmark(data, "bench.csv"),
                                     args.repeat)
        print(f"(a) pyarrow.csv.read_csv        {arrow_s:7.3f} s  (warm process, median of {args.repeat}, "
              f"alternated with (b); load average {os.getloadavg()[0]:.1f})")
        print(f"(b) load_benchmark(bytes, name) {load_s:7.3f} s  → ratio (b)/(a) = {load_s / arrow_s:.2f}")
        run = bench.runs[0]
        print(f"    {len(run.requests):,} rows, columns {list(run.requests.columns)}, "
              f"ttft p90 {run.summary['ttft_p90_s']:.3f} s, tpot p50 {run.summary['tpot_p50_s'] * 1000:.1f} ms")
        cold = {mode: [child(path, mode) for _ in range(3)] for mode in ("arrow", "load")}
        cold_s = {mode: statistics.median(m["seconds"] for m in runs) for mode, runs in cold.items()}
        print(f"    cold, fresh process each (median of 3): (a) {cold_s['arrow']:.3f} s, (b) {cold_s['load']:.3f} s "
              f"→ ratio {cold_s['load'] / cold_s['arrow']:.2f}")
        for mode, runs in cold.items():
            extra = max(m["peak_extra_kb"] for m in runs) * 1024
            print(f"    peak extra memory ({'a' if mode == 'arrow' else 'b'}): {extra / 1e6:7.1f} MB = "
                  f"{extra / size:.2f}× file size (VmHWM − VmRSS before the call, file bytes already loaded)")
        print("    targets: ratio ≤ 1.5, memory of (b) ≤ 3× file size")
        took = diagnose(bench, args.repeat)
        if took is not None:
            total = load_s + took
            print(f"(b)+(c) parse + signals + diagnosis {total:.3f} s → ratio to (a) = {total / arrow_s:.2f} "
                  f"(target ≤ 1.5: {'ok' if total / arrow_s <= 1.5 else 'OVER'})")


def diagnose(bench: object, repeat: int) -> float | None:
    """Time signals + diagnosis (median of ``repeat``, as (a) and (b) are) when triage.diagnosis exists."""
    try:
        from triage.diagnosis.benchmark import diagnose_benchmark
        from triage.knowledge.loader import load_knowledge
    except ImportError:
        print("(c) signals + diagnosis: skipped (triage.diagnosis.diagnose_benchmark not available)")
        return None
    try:
        t = time.perf_counter()
        kb = load_knowledge()
        kb_s = time.perf_counter() - t
        diagnosis = diagnose_benchmark(kb, bench)
        took = timed(lambda: diagnose_benchmark(kb, bench), repeat)
    except Exception as exc:  # noqa: BLE001 - report, do not crash the benchmark
        print(f"(c) signals + diagnosis: failed with {type(exc).__name__}: {exc}")
        return None
    findings = getattr(diagnosis, "findings", None)
    shown = f", {len(findings)} findings" if isinstance(findings, (list, tuple)) else ""
    print(f"(c) signals + diagnosis          {took:7.3f} s  (median of {repeat}; knowledge base load {kb_s:.3f} s"
          f"{shown}; goal ≤ 0.1 s)")
    return took


if __name__ == "__main__":
    main()
