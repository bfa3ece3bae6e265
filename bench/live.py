"""Time one live refresh (all queries + signals + diagnosis) against a real Prometheus vs its slowest single query.

Run: .venv/bin/python -m bench.live [--hours 24] [--engines 8] [--repeat 5] [--keep DIR | --reuse DIR]
The refresh timed is the Live page's own (triage.service.live.refresh over triage.service.windows.prometheus_pair).
Generating and backfilling 24 h x 8 engines takes long on a small machine: ``--keep DIR`` saves the TSDB after the
backfill and ``--reuse DIR`` measures on a saved one (its end time is read from the blocks' meta.json).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.prom_harness import PROMETHEUS, PROMTOOL, PromServer, data_end, free_port, wait_ready
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.server_signals import window_needs
from triage.knowledge.loader import load_knowledge
from triage.service.live import SERIES_POINTS, panel_needs, refresh
from triage.service.windows import prometheus_pair
from triage.sources.metrics import simulator
from triage.sources.metrics.prometheus_window import MIN_RANGE, PrometheusWindow, promql

ROOT = Path(__file__).resolve().parent.parent

STEP = 15.0            # seconds between stored samples
SIM_TICK_S = 1.0       # the simulator's internal tick (0.2 s by default): 5x fewer ticks, same 15 s samples
WINDOW_S = 3600        # the refresh reads a 1 h window ending at the data end
WORKERS = 2            # simulator processes (the machine has 2 cores)
BACKFILL_TIMEOUT = 1800
TARGET = 2.0


# ---------------------------------------------------------------- data


def _simulate(job: tuple[str, str, float, float, int]) -> int:
    """One engine: ``hours`` of a scenario at 15 s into ``path`` (runs in a worker process)."""
    path, scenario, hours, end, seed = job
    simulator.TICK_S = SIM_TICK_S
    return simulator.write_openmetrics(path, scenario, hours * 60, STEP, end=end, seed=seed)


def generate(folder: Path, hours: float, engines: int, end: int) -> tuple[list[Path], int]:
    """One OpenMetrics file per engine: the scenarios in turn, each engine its own seed."""
    scenarios = itertools.islice(itertools.cycle(simulator.SCENARIOS), engines)
    jobs = [(str(folder / f"engine{i}.om"), sc, hours, float(end), i) for i, sc in enumerate(scenarios)]
    with ProcessPoolExecutor(max_workers=WORKERS) as pool:
        samples = sum(pool.map(_simulate, jobs))
    return [Path(j[0]) for j in jobs], samples


def _family_spans(data: bytes) -> dict[bytes, tuple[bytes, int, int]]:
    """Family name → (its HELP/TYPE header, start and end offsets of its samples) in one engine's file."""
    starts = [0] if data.startswith(b"# HELP ") else []
    pos = data.find(b"\n# HELP ")
    while pos >= 0:
        starts.append(pos + 1)
        pos = data.find(b"\n# HELP ", pos + 1)
    ends = [*starts[1:], data.rindex(b"# EOF")]
    spans = {}
    for start, end in zip(starts, ends):
        body = data.index(b"\n", data.index(b"\n", start) + 1) + 1  # after the HELP and TYPE lines
        spans[data[start + 7:data.index(b" ", start + 7)]] = (data[start:body], body, end)
    return spans


def merge(files: list[Path], out: Path) -> None:
    """One OpenMetrics file: each family once, the samples of engine i (label engine="i") one after another."""
    indexes = [_family_spans(f.read_bytes()) for f in files]
    names = list(dict.fromkeys(name for index in indexes for name in index))
    with out.open("wb") as sink:
        for name in names:
            sink.write(next(index[name][0] for index in indexes if name in index))
            for i, (path, index) in enumerate(zip(files, indexes)):
                if name in index:
                    sink.write(_engine_samples(path, index[name], i))
        sink.write(b"# EOF\n")


def _engine_samples(path: Path, span: tuple[bytes, int, int], engine: int) -> bytes:
    with path.open("rb") as source:
        source.seek(span[1])
        chunk = source.read(span[2] - span[1])
    return chunk.replace(b'engine="0"', b'engine="%d"' % engine)


def backfill(source: Path, data: Path) -> None:
    data.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "-q", str(source), str(data)],
                          capture_output=True, text=True, timeout=BACKFILL_TIMEOUT)
    if done.returncode:
        raise RuntimeError(f"promtool backfill failed: {done.stderr[-2000:]}")


def start(folder: Path, data: Path, end: int) -> PromServer:
    """The harness's flags, plus max block duration 2h so no background compaction runs during the timing."""
    config = folder / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 15s\nscrape_configs: []\n", encoding="utf-8")
    port = free_port()
    flags = [f"--config.file={config}", f"--storage.tsdb.path={data}", f"--web.listen-address=127.0.0.1:{port}",
             "--storage.tsdb.retention.time=30d", "--storage.tsdb.max-block-duration=2h", "--log.level=warn"]
    log = folder / "prometheus.log"
    with log.open("w") as sink:
        process = subprocess.Popen([PROMETHEUS, *flags], stdout=sink, stderr=subprocess.STDOUT, cwd=folder)
    server = PromServer(url=f"http://127.0.0.1:{port}", process=process, folder=folder, end=end, log=log)
    wait_ready(server, deadline=120)
    return server


def saved_end(tsdb: Path) -> int:
    """The time of the last sample in a saved TSDB (the blocks' maxTime is exclusive, in ms)."""
    ends = [json.loads(meta.read_text(encoding="utf-8"))["maxTime"] for meta in tsdb.glob("*/meta.json")]
    if not ends:
        raise SystemExit(f"{tsdb}: no TSDB blocks (meta.json) to reuse")
    return int((max(ends) - 1) // 1000 // STEP * STEP)


def reuse_data(folder: Path, saved: Path) -> PromServer:
    data = folder / "data"
    shutil.copytree(saved, data)
    print(f"reusing the TSDB in {saved} ({_size_mb(data):.0f} MB)")
    return start(folder, data, saved_end(data))


def _size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def load_data(folder: Path, hours: float, engines: int, keep: Path | None = None) -> PromServer:
    end = data_end()
    t0 = time.perf_counter()
    files, samples = generate(folder, hours, engines, end)
    t1 = time.perf_counter()
    merged = folder / "input.om"
    merge(files, merged)
    for f in files:
        f.unlink()
    t2 = time.perf_counter()
    backfill(merged, folder / "data")
    t3 = time.perf_counter()
    print(f"generate {hours:g} h x {engines} engines at {STEP:g} s: {samples:,} samples in {t1 - t0:.1f} s; "
          f"merge {t2 - t1:.1f} s ({merged.stat().st_size / 1e6:.0f} MB); promtool backfill {t3 - t2:.1f} s; "
          f"TSDB {_size_mb(folder / 'data'):.0f} MB")
    merged.unlink()
    if keep is not None:
        shutil.copytree(folder / "data", keep, dirs_exist_ok=True)
    return start(folder, folder / "data", end)


# ---------------------------------------------------------------- timing


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def single_queries(w: PrometheusWindow) -> list[tuple[str, Callable[[], object]]]:
    """Every query one refresh sends, each alone: detection, the diagnosis' instant queries, the panel ranges."""
    params = {"match[]": '{__name__=~"vllm[:_].+|sglang[:_].+|tgi_.+|DCGM_FI_.+"}',
              "start": w.start.timestamp(), "end": w.end.timestamp()}
    out: list[tuple[str, Callable[[], object]]] = [
        ("label values __name__ (engine detection)", lambda: w.client.get_label_values("__name__", params=params))]
    at = w.end.timestamp()
    for need in window_needs(load_knowledge()):
        r = w.resolve(need)
        if not isinstance(r, str):
            q = promql(need, r, w.window_seconds)
            out.append((f"read {q}", lambda q=q: w._instant(q, at)))
    out.extend(_range_queries(w))
    return out


def _range_queries(w: PrometheusWindow) -> list[tuple[str, Callable[[], object]]]:
    step = max(1, round(w.window_seconds / SERIES_POINTS))
    count = min(SERIES_POINTS, w.window_seconds // step) or 1
    end = round(w.end.timestamp())
    first, lookback = end - (count - 1) * step, max(step, MIN_RANGE)
    out = []
    for need in panel_needs():
        r = w.resolve(need)
        if not isinstance(r, str) and need.kind != "info":
            q = promql(need, r, lookback)
            out.append((f"series {q}", lambda q=q: w._range(q, first, end, step)))
    return out


def full_refresh(url: str, end_at: datetime, kb, slo) -> None:
    """The Live page's own refresh (triage.service.live.refresh) of a Prometheus source without a baseline."""
    refresh(kb, prometheus_pair(url, end_at, WINDOW_S / 60, {}, None, None), slo)


def _short(text: str, width: int = 100) -> str:
    text = text.replace('model_name="meta-llama/Llama-3.1-8B-Instruct"', "…")
    return text if len(text) <= width else text[:width - 1] + "…"


def measure(server: PromServer, repeat: int) -> None:
    end_at = datetime.fromtimestamp(server.end, tz=UTC)
    start_at = end_at - timedelta(seconds=WINDOW_S)
    kb = load_knowledge()
    slo = resolve_slo(kb, "chat")
    window = PrometheusWindow(server.url, start_at, end_at)
    rows = [(label, median_ms(fn, repeat)) for label, fn in single_queries(window)]
    print(f"\n{'query (1 h window, median of ' + str(repeat) + ')':<100}  {'ms':>8}")
    for label, ms in rows:
        print(f"{_short(label):<100}  {ms:8.1f}")
    refreshed = median_ms(lambda: full_refresh(server.url, end_at, kb, slo), repeat)
    slowest = max(rows, key=lambda r: r[1])
    ratio = refreshed / slowest[1]
    print(f"\n{len(rows)} queries; sum of the single medians {sum(ms for _, ms in rows):.1f} ms")
    print(f"full refresh (window + diagnosis + series), median: {refreshed:.1f} ms")
    print(f"slowest single query, median: {slowest[1]:.1f} ms  ({_short(slowest[0], 80)})")
    print(f"ratio: {ratio:.2f}  target ≤ {TARGET:g}: {'ok' if ratio <= TARGET else 'OVER'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hours", type=float, default=24)
    ap.add_argument("--engines", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", type=Path, default=None, help="save the backfilled TSDB here for --reuse")
    ap.add_argument("--reuse", type=Path, default=None, help="measure on a TSDB saved with --keep")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-live-"))
    server = None
    try:
        if args.reuse is not None:
            server = reuse_data(folder, args.reuse)
        else:
            server = load_data(folder, args.hours, args.engines, args.keep)
        measure(server, args.repeat)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
