"""Peak memory under hostile input: an endless /metrics stream, a gzip bomb, and 10 large uploads.

Run: .venv/bin/python bench/hostile_rss.py [--uploads 10] [--rows 1000000] [--skip-uploads]

* fetch: ``python -m triage diagnose --endpoint URL`` in a fresh child against tests/hostile_server.py on
  127.0.0.1 (/metrics good, /endless never ends, /bomb is 4 MB of gzip inflating to 4.2 GB); the child's
  peak RSS comes from wait4 (ru_maxrss), so nothing of this process is counted.
* uploads: a fresh child drives the Benchmark page with AppTest and uploads N distinct per-request CSVs
  (bench/parse.py's generator); RSS after each upload and the peak (VmHWM) are read from /proc.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.hostile_server import hostile_server  # noqa: E402

UPLOAD_CHILD = r"""
import json, sys, time
sys.path.insert(0, {root!r})
from tests.apptest_tools import new_app

def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) / 1024
at = new_app().run()
at.switch_page("pages/benchmark.py")
at.run()
out = {{"start_mb": rss("VmRSS:"), "after": []}}
for path in {paths!r}:
    data = open(path, "rb").read()
    at.file_uploader(key="bench_upload").upload(path.rsplit("/", 1)[-1], data, "text/csv")
    del data
    at.run(timeout=600)
    assert not at.exception, at.exception
    out["after"].append(rss("VmRSS:"))
from components.bench_source import parse_cache
out["peak_mb"] = rss("VmHWM:")
out["cache_mb"] = parse_cache().total / 1024 / 1024
out["cache_entries"] = len(parse_cache())
out["errors"] = [e.value[:160] for e in at.error]
print(json.dumps(out))
"""


def peak_rss_mb(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str, float]:
    """(peak RSS in MB, exit code, last stderr line, seconds) of ``python -m triage ARGV`` in a fresh child."""
    began = time.monotonic()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "triage", *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=err, env={**os.environ, **(env or {})})
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        lines = err.read().decode("utf-8", "replace").strip().splitlines()
    return usage.ru_maxrss / 1024, proc.returncode, lines[-1] if lines else "", time.monotonic() - began


def fetch_figures(timeout: float = 30.0) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    with hostile_server() as server:
        for path in ("/metrics", "/endless", "/bomb"):
            mb, code, line, secs = peak_rss_mb(["diagnose", "--endpoint", server.url + path, "--interval", "1",
                                                "--timeout", str(timeout)])
            out[path] = {"peak_rss_mb": round(mb, 1), "exit": code, "seconds": round(secs, 2), "message": line}
    return out


def upload_figures(n: int, rows: int, env: dict[str, str] | None = None) -> dict[str, object]:
    sys.path.insert(0, str(ROOT / "bench"))
    from parse import make_csv  # bench/parse.py

    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for i in range(n):
            path = Path(folder) / f"run{i:02d}.csv"
            make_csv(path, rows, seed=100 + i)  # distinct content: nothing deduplicates by hash
            paths.append(str(path))
        sizes = [round(os.path.getsize(p) / 1024 / 1024, 1) for p in paths]
        code = UPLOAD_CHILD.format(root=str(ROOT), paths=paths)
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, **(env or {})}, timeout=3600)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-3000:])
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        result["file_mb"] = sizes
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--uploads", type=int, default=10)
    parser.add_argument("--rows", type=int, default=1_000_000, help="requests per uploaded CSV")
    parser.add_argument("--skip-uploads", action="store_true")
    args = parser.parse_args()
    for path, row in fetch_figures().items():
        print(f"fetch {path:9} peak RSS {row['peak_rss_mb']:7.1f} MB  exit {row['exit']}  {row['seconds']:5.1f} s  "
              f"{row['message'][:110]}")
    if not args.skip_uploads:
        up = upload_figures(args.uploads, args.rows)
        print(f"uploads: {len(up['file_mb'])} files of {up['file_mb'][0]} MB; RSS at start {up['start_mb']:.0f} MB, "
              f"after each: {', '.join(f'{x:.0f}' for x in up['after'])} MB; peak {up['peak_mb']:.0f} MB; "
              f"parse cache {up['cache_mb']:.0f} MB in {up['cache_entries']} entries; errors: {up['errors']}")


if __name__ == "__main__":
    main()
