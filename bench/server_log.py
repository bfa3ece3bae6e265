"""Benchmark reading a server log: a 1,000,000-line vLLM V1 log read and diagnosed vs `grep -c` of the same file.

Run: .venv/bin/python -m bench.server_log [--lines N] [--stats-every K] [--repeat R] [--threads auto|0|1|2]
The log is written to a temporary file: one stats line every K lines (default 5, i.e. 200,000 stats lines), the
rest the uvicorn access lines a busy server prints between them. Prints the best time of R runs of
`grep -c 'Avg prompt throughput'` and of read + diagnose (what `python -m triage diagnose FILE` does, in a fresh
child process), their ratio (goal ≤ 3×), and the child's peak RSS beside the file's size (memory bounded: the
log is streamed, never held whole), and the whole `python -m triage diagnose FILE` command's time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from triage.cli.text_input import read_source
from triage.diagnosis.rules import resolve_slo
from triage.knowledge.loader import load_knowledge
from triage.service.logs import diagnose_log
from triage.sources.logs import v1scan, vllm

if {threads!r} != "auto":  # --threads: worker threads forced on (2) or off (0) instead of chosen by the load
    vllm._threads = lambda: int({threads!r})
kb = load_knowledge()
slo = resolve_slo(kb)
started, cpu = time.perf_counter(), time.process_time()
log = read_source(Path({path!r}))
found = diagnose_log(kb, log, slo)
elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"seconds": elapsed, "cpu": cpu, "peak_mb": peak_kb / 1024, "stats": log.stats_lines,
                  "lines": log.lines, "findings": [f.cause for f in found.live.diagnosis.findings],
                  "scanner": v1scan.available(), "threads": vllm._threads()}}))
"""
BASELINE = r"""
import resource, sys
from triage.knowledge.loader import load_knowledge
from triage.cli.text_input import read_source  # the same imports as the measured child: only the data differs
from triage.service.logs import diagnose_log
load_knowledge()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""
STATS = ("(APIServer pid=1) INFO 09-{d:02d} {h:02d}:{m:02d}:{s:02d} [loggers.py:123] Engine 000: "
         "Avg prompt throughput: {p:.1f} tokens/s, Avg generation throughput: {g:.1f} tokens/s, "
         "Running: {r} reqs, Waiting: {w} reqs, "
         "GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: 12.5%\n")
ACCESS = '(APIServer pid=1) INFO:     10.0.0.{n}:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'


def write_log(path: Path, lines: int, every: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        t = 0
        for i in range(lines):
            if i % every == 0:
                t += 10
                d, rest = divmod(t, 86400)
                h, rest = divmod(rest, 3600)
                out.write(STATS.format(d=1 + d, h=h, m=rest // 60, s=rest % 60, p=(i % 7) * 800.0, g=900.0 + i % 50,
                                       r=64, w=(i // every) % 30, kv=60.0 + (i % 40)))
            else:
                out.write(ACCESS.format(n=i % 250, port=40000 + i % 20000))


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def best(times: list[float]) -> float:
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--stats-every", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", choices=["auto", "0", "1", "2"], default="auto",
                        help="worker threads reading blocks: auto (as the CLI: only with an idle core) or forced")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vllm.log"
        write_log(path, args.lines, args.stats_every)
        size_mb = path.stat().st_size / 1024 / 1024
        grep_times, triage_times, grep_cpu, triage_cpu, result = [], [], [], [], {}
        for _ in range(args.repeat):
            started, before = time.perf_counter(), _children_cpu()
            count = subprocess.run(["grep", "-c", "Avg prompt throughput", str(path)], capture_output=True,
                                   text=True, check=True).stdout.strip()
            grep_times.append(time.perf_counter() - started)
            grep_cpu.append(_children_cpu() - before)
            code = CHILD.format(root=str(ROOT), path=str(path), threads=args.threads)
            child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                   env={**os.environ}, cwd=ROOT)
            result = json.loads(child.stdout)
            triage_times.append(result["seconds"])
            triage_cpu.append(result["cpu"])
        whole = []
        for _ in range(args.repeat):  # what a user waits for: the whole command, interpreter and imports included
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "triage", "diagnose", str(path)], stdout=subprocess.DEVNULL,
                           check=True, cwd=ROOT)
            whole.append(time.perf_counter() - started)
        base_mb = float(subprocess.run([sys.executable, "-c", BASELINE.format(root=str(ROOT))], capture_output=True,
                                       text=True, check=True, cwd=ROOT).stdout)
    ratio = best(triage_times) / best(grep_times)
    print(f"log: {args.lines:,} lines ({size_mb:,.0f} MB), {int(count):,} stats lines (grep -c)")
    print(f"grep -c:            {best(grep_times):.3f} s (best of {args.repeat})")
    print(f"read + diagnose:    {best(triage_times):.3f} s (best of {args.repeat}; {result['stats']:,} stats lines, "
          f"findings {', '.join(result['findings']) or 'none'})")
    print(f"ratio:              {ratio:.1f}x (goal <= 3x)")
    print("reader:             " + ("the C line scanner (triage/sources/logs/_linescan.c)" if result["scanner"] else
                                    "numpy alone (the C line scanner is not built: no C compiler at install)") +
          f", {result['threads']} worker threads (--threads {args.threads}; load average {os.getloadavg()[0]:.1f})")
    print(f"CPU time:           {best(triage_cpu):.3f} s (every thread) against grep's {best(grep_cpu):.3f} s, "
          f"{best(triage_cpu) / best(grep_cpu):.1f}x (less sensitive to other load than wall time)")
    print(f"whole command:      {best(whole):.3f} s (`python -m triage diagnose FILE`, best of {args.repeat}: "
          f"interpreter start, imports and the knowledge base included)")
    print(f"peak RSS:           {result['peak_mb']:.0f} MB, of which {result['peak_mb'] - base_mb:.0f} MB above the "
          f"same imports and knowledge base with no log read ({base_mb:.0f} MB); the file is {size_mb:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
