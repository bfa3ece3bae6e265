"""How fast the CLI starts: `python -m triage tree --json` against `python -c "import yaml, pydantic"`.

Run: .venv/bin/python -m bench.cli_start [--repeat K]
Both commands run K times (default 5), interleaved, in fresh interpreters; prints the medians and their ratio
(target ≤ 1.5×) and which heavy modules (pandas, pyarrow, streamlit, numpy) `tree --json` imported. The ratio is
for the usual start, when the tree passed a check before and nothing changed since (triage/knowledge/checked.py:
the record is keyed by the content hash of every YAML file, so the run still reads and hashes all of them);
the cold start (an empty cache: every YAML file parsed and validated) is printed beside it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = [sys.executable, "-m", "triage", "tree", "--json"]
BASE = [sys.executable, "-c", "import yaml, pydantic"]
HEAVY = ("pandas", "pyarrow", "streamlit", "numpy")
PROBE = ("import runpy, sys, io, contextlib\n"
         "sys.argv = ['triage', 'tree', '--json']\n"
         "with contextlib.redirect_stdout(io.StringIO()):\n"
         "    try:\n"
         "        runpy.run_module('triage', run_name='__main__')\n"
         "    except SystemExit:\n"
         "        pass\n"
         f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))\n")


def _time(cmd: list[str], cold: bool = False) -> float:
    with tempfile.TemporaryDirectory() as empty:
        env = {**os.environ, "TRIAGE_CACHE_DIR": empty} if cold else None
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, env=env)
        return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    _time(TREE), _time(BASE)  # warm the file cache and the bytecode
    tree, base, cold = [], [], []
    for _ in range(args.repeat):
        tree.append(_time(TREE))
        base.append(_time(BASE))
        cold.append(_time(TREE, cold=True))
    t, b, c = statistics.median(tree), statistics.median(base), statistics.median(cold)
    heavy = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.strip()
    print(f"python -m triage tree --json      median of {args.repeat}: {t * 1000:,.0f} ms")
    print(f"python -c 'import yaml, pydantic' median of {args.repeat}: {b * 1000:,.0f} ms")
    print(f"ratio: {t / b:.2f}× (target ≤ 1.5×)")
    print(f"cold start (no record of a passed check: every file parsed and validated): {c * 1000:,.0f} ms, "
          f"{c / b:.2f}×")
    print(f"heavy modules imported by tree --json: {heavy or 'none'}")


if __name__ == "__main__":
    main()
