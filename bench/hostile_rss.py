"""Peak memory under hostile input: an endless /metrics stream, a gzip bomb, and 10 large uploads.

Run: .venv/bin/python bench/hostile_rss.py [--uploads 10] [--rows 1000000] [--skip-uploads]

* fetch: ``python -m triage diagnose --endpoint URL`` in a fresh child against tests/hostile_server.py on
  127.0.0.1 (/metrics good, /endless never ends, /bomb is 4 MB of gzip inflating to 4.2 GB); the child's
  peak RSS comes from wait4 (ru_maxrss), so nothing of this process is counted.
* uploads: a real ``streamlit run app.py``; Debian Chromium (Playwright) uploads N distinct per-request CSVs
  (bench/parse.py's generator) on the Benchmark page, one by one; the server's RSS after each parse and its
  peak (VmHWM) are read from /proc/<pid>/status.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.hostile_server import hostile_server  # noqa: E402

SERVER_ARGS = ["--server.headless", "true", "--server.address", "127.0.0.1"]


def _status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) / 1024
    return float("nan")


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
    """A real ``streamlit run app.py``; Chromium uploads N distinct CSVs on the Benchmark page one by one;
    the server's RSS after each parse and its peak (VmHWM) come from /proc."""
    sys.path.insert(0, str(ROOT / "bench"))
    from parse import make_csv  # bench/parse.py

    from tests.browser_tools import _wait_healthy, chromium_page, free_port

    with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryFile() as log:
        paths = []
        for i in range(n):
            path = Path(folder) / f"run{i:02d}.csv"
            make_csv(path, rows, seed=100 + i)  # distinct content: nothing deduplicates by hash
            paths.append(path)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", *SERVER_ARGS, "--server.port",
                                 str(port)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, "TRIAGE_DEBUG": "", **(env or {})})
        out: dict[str, object] = {"file_mb": [round(p.stat().st_size / 1024 / 1024, 1) for p in paths], "after": []}
        try:
            _wait_healthy(url, proc)
            with chromium_page() as page:
                page.goto(url + "/benchmark")
                page.wait_for_selector(".st-key-bench_upload input[type=file]", state="attached", timeout=120000)
                out["start_mb"] = _status_mb(proc.pid, "VmRSS:")
                for path in paths:
                    page.locator(".st-key-bench_upload input[type=file]").set_input_files(str(path))
                    page.locator(".st-key-bench_choice").get_by_text(path.name).wait_for(timeout=600000)
                    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                                           timeout=600000)
                    out["after"].append(round(_status_mb(proc.pid, "VmRSS:")))  # type: ignore[union-attr]
                out["errors"] = page.locator('[data-testid="stException"]').count()
            out["peak_mb"] = _status_mb(proc.pid, "VmHWM:")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--uploads", type=int, default=10)
    parser.add_argument("--rows", type=int, default=1_000_000, help="requests per uploaded CSV")
    parser.add_argument("--skip-uploads", action="store_true")
    parser.add_argument("--skip-fetch", action="store_true")
    args = parser.parse_args()
    for path, row in ({} if args.skip_fetch else fetch_figures()).items():
        print(f"fetch {path:9} peak RSS {row['peak_rss_mb']:7.1f} MB  exit {row['exit']}  {row['seconds']:5.1f} s  "
              f"{row['message'][:110]}")
    if not args.skip_uploads:
        up = upload_figures(args.uploads, args.rows)
        print(f"uploads: {len(up['file_mb'])} files of {up['file_mb'][0]} MB; RSS at start {up['start_mb']:.0f} MB, "
              f"after each: {', '.join(f'{x:.0f}' for x in up['after'])} MB; peak {up['peak_mb']:.0f} MB; "
              f"exception boxes: {up['errors']}")


if __name__ == "__main__":
    main()
