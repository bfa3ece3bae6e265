"""Peak memory under hostile input: an endless /metrics stream, a gzip bomb, and 10 large uploads.

Run: .venv/bin/python -m bench.hostile_rss [--uploads 10] [--rows 1000000] [--skip-fetch] [--skip-uploads]
     [--skip-verify]   (TRIAGE_PARSE_CACHE_MB in the environment reaches the server)

* fetch: ``python -m triage diagnose --endpoint URL`` in a fresh child against tests/hostile_server.py on
  127.0.0.1 (/metrics good, /endless never ends, /bomb is 4 MB of gzip inflating to 4.2 GB); the child writes
  its own VmHWM as it exits, so nothing of this process is counted (ru_maxrss would start from this process's
  peak).
* uploads: a real ``streamlit run app.py``; Debian Chromium (Playwright) uploads N distinct per-request CSVs
  (bench/parse.py's generator, 1M rows = 108 MB) on the Benchmark page one by one, then two on Verify; the
  server's RSS after each parse, the largest RSS seen while each uploads, and the run's peak (VmHWM) are read
  from /proc/<pid>/status.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tests.hostile_server import hostile_server

ROOT = Path(__file__).resolve().parent.parent

SERVER_ARGS = ["--server.headless", "true", "--server.address", "127.0.0.1"]
MB = 1024 * 1024


def _status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) / 1024
    return float("nan")


PEAK_ENV = "HOSTILE_RSS_PEAK_FILE"
# ``python -m triage ARGV`` that writes its own VmHWM at exit. Not ru_maxrss from wait4: on Linux a child's
# ru_maxrss starts from its parent's peak (exec records the high-water mark of the vforked parent's memory), so a
# test process of 400 MB made every child "peak" at 400 MB whatever it did.
CHILD = f"""
import atexit, os, runpy, sys

def _peak():
    with open("/proc/self/status") as status, open(os.environ[{PEAK_ENV!r}], "w") as out:
        out.write(next(line for line in status if line.startswith("VmHWM:")).split()[1])

atexit.register(_peak)
sys.argv = ["triage", *sys.argv[1:]]
runpy.run_module("triage", run_name="__main__", alter_sys=True)
"""


def peak_rss_mb(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str, float]:
    """(peak RSS in MB, exit code, stderr (one line when all is well), seconds) of ``python -m triage ARGV`` in a
    fresh child; the peak is the child's own VmHWM, read by the child as it exits."""
    began = time.monotonic()
    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile(suffix=".peak") as peak:
        proc = subprocess.run([sys.executable, "-c", CHILD, *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=err, env={**os.environ, **(env or {}), PEAK_ENV: peak.name})
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace").strip()
        text = Path(peak.name).read_text().strip()
    mb = int(text) / 1024 if text else float("nan")  # nan: the child died before its exit handlers ran
    return mb, proc.returncode, stderr, time.monotonic() - began


def fetch_figures(timeout: float = 30.0) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    with hostile_server() as server:
        for path in ("/metrics", "/endless", "/bomb"):
            mb, code, line, secs = peak_rss_mb(["diagnose", "--endpoint", server.url + path, "--interval", "1",
                                                "--timeout", str(timeout)])
            out[path] = {"peak_rss_mb": round(mb, 1), "exit": code, "seconds": round(secs, 2), "message": line}
    return out


class RssSampler:
    """The largest VmRSS of ``pid`` seen since the last ``take()`` (read every 0.2 s in a thread): the peak
    of each upload, where VmHWM only gives the peak of the whole run."""

    def __init__(self, pid: int) -> None:
        self.pid, self.high = pid, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.high = max(self.high, _status_mb(self.pid, "VmRSS:"))
            except OSError:
                return

    def take(self) -> float:
        high, self.high = self.high, 0.0
        return high

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _say(text: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def upload_figures(n: int, rows: int, env: dict[str, str] | None = None, verify: bool = True) -> dict[str, Any]:
    """A real ``streamlit run app.py``; Chromium uploads N distinct CSVs on the Benchmark page one by one (and,
    with ``verify``, two more on the Verify page); the server's RSS after each parse, the peak during each
    upload, and the whole run's peak (VmHWM) come from /proc."""
    from playwright.sync_api import expect

    from bench.parse import make_csv
    from tests.browser_tools import _wait_healthy, chromium_page
    from tests.prom_harness import free_port, stop_process

    timeout_ms = 900_000  # a 100 MB parse on a loaded 2-core machine
    with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryFile() as log:
        paths = []
        for i in range(n + (2 if verify else 0)):
            path = Path(folder) / f"run{i:02d}.csv"
            make_csv(path, rows, seed=100 + i)  # distinct content: nothing deduplicates by hash
            paths.append(path)
        _say(f"{len(paths)} CSVs of {paths[0].stat().st_size / MB:.0f} MB written")
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", *SERVER_ARGS, "--server.port",
                                 str(port)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, "TRIAGE_DEBUG": "", **(env or {})})
        out: dict[str, Any] = {"file_mb": [round(p.stat().st_size / MB, 1) for p in paths], "after": [], "during": []}
        sampler = None
        try:
            _wait_healthy(url, proc)
            with chromium_page() as page:
                page.goto(url + "/benchmark")
                picker = page.locator(".st-key-bench_upload input[type=file]")
                picker.wait_for(state="attached", timeout=120000)
                expect(page.get_by_text("Showing the bundled sample")).to_be_visible(timeout=120000)
                out["start_mb"] = _status_mb(proc.pid, "VmRSS:")
                sampler = RssSampler(proc.pid)
                for i, path in enumerate(paths[:n], start=1):
                    picker.set_input_files(str(path), timeout=timeout_ms)
                    # the file viewed becomes the one just parsed: the picker shows its name
                    expect(page.locator(".st-key-bench_choice").get_by_role("combobox")).to_have_value(
                        path.name, timeout=timeout_ms)
                    expect(page.get_by_text("Detected format").first).to_be_visible(timeout=timeout_ms)
                    out["after"].append(_status_mb(proc.pid, "VmRSS:"))
                    out["during"].append(sampler.take())
                    _say(f"benchmark upload {i}/{n}: RSS {out['after'][-1]:.0f} MB (peak while uploading "
                         f"{out['during'][-1]:.0f} MB)")
                out["errors"] = page.locator('[data-testid="stException"]').count()
                if verify:
                    page.goto(url + "/verify")
                    for side, path in zip(("base", "cand"), paths[n:]):
                        page.locator(f".st-key-verify_{side} input[type=file]").set_input_files(
                            str(path), timeout=timeout_ms)
                    expect(page.get_by_text("Overall:").first).to_be_visible(timeout=timeout_ms)
                    out["verify_after"] = _status_mb(proc.pid, "VmRSS:")
                    out["verify_during"] = sampler.take()
                    _say(f"verify pair: RSS {out['verify_after']:.0f} MB")
                    out["errors"] += page.locator('[data-testid="stException"]').count()
            out["end_mb"] = _status_mb(proc.pid, "VmRSS:")
            out["peak_mb"] = _status_mb(proc.pid, "VmHWM:")
        finally:
            if sampler is not None:
                sampler.stop()
            stop_process(proc, grace=20)
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--uploads", type=int, default=10)
    parser.add_argument("--rows", type=int, default=1_000_000, help="requests per uploaded CSV")
    parser.add_argument("--skip-uploads", action="store_true")
    parser.add_argument("--skip-fetch", action="store_true")
    parser.add_argument("--skip-verify", action="store_true", help="no Verify pair after the benchmark uploads")
    args = parser.parse_args()
    for path, row in ({} if args.skip_fetch else fetch_figures()).items():
        print(f"fetch {path:9} peak RSS {row['peak_rss_mb']:7.1f} MB  exit {row['exit']}  {row['seconds']:5.1f} s  "
              f"{row['message'][:110]}")
    if not args.skip_uploads:
        up = upload_figures(args.uploads, args.rows, verify=not args.skip_verify)
        print(f"uploads: {args.uploads} benchmark files of {up['file_mb'][0]:.0f} MB on /benchmark"
              + (", then 2 on /verify" if not args.skip_verify else "")
              + f"; server RSS at start {up['start_mb']:.0f} MB")
        print(f"  RSS after each upload: {', '.join(f'{x:.0f}' for x in up['after'])} MB")
        print(f"  peak while each uploaded: {', '.join(f'{x:.0f}' for x in up['during'])} MB")
        if "verify_after" in up:
            print(f"  after the Verify pair: {up['verify_after']:.0f} MB (peak {up['verify_during']:.0f} MB)")
        print(f"  final RSS {up['end_mb']:.0f} MB; peak (VmHWM) {up['peak_mb']:.0f} MB; "
              f"exception boxes: {up['errors']}")


if __name__ == "__main__":
    main()
