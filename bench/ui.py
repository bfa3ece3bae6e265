"""Python run time of each page and of a node-click rerun (median of 20), measured through AppTest.

Usage: .venv/bin/python -m bench.ui   — prints one line per case; target ≤ 150 ms each.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from tests.apptest_tools import click_plotly, new_app

ROOT = Path(__file__).resolve().parent.parent

REPEAT = 20
TARGET_MS = 150


def _median_ms(step) -> float:
    times = []
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    home = new_app().run()  # warm: the knowledge base loads once per process (cached)
    cases = {"home (Diagnose)": home.run}

    tech = new_app().run()
    tech.switch_page("pages/technique.py")
    tech.query_params["id"] = "chunked_prefill"
    tech.run()
    cases["technique page (chunked_prefill)"] = tech.run

    for path in ("pages/benchmark.py", "pages/live.py", "pages/memory.py", "pages/retro.py", "pages/verify.py"):
        at = new_app().run()
        at.switch_page(path).run()
        cases[f"{path[6:-3]} page"] = at.run

    clicker = new_app().run()
    targets = iter(["ttft.queueing", "memory.kv_cache"] * REPEAT)
    cases["node click rerun"] = lambda: click_plotly(clicker, "tree", next(targets))

    for name, step in cases.items():
        ms = _median_ms(step)
        print(f"{name:36s} median {ms:7.1f} ms  (target ≤ {TARGET_MS} ms: {'ok' if ms <= TARGET_MS else 'OVER'})")


if __name__ == "__main__":
    main()
