"""Live sources for the CLI: Prometheus, a /metrics endpoint scraped twice, or two saved snapshots."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from triage.diagnosis.readings import MetricWindow
from triage.errors import TriageError

WINDOW_RE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MATCH_RE = re.compile(r'^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"([^"]*)"\s*$')


def window_seconds(text: str) -> float:
    m = WINDOW_RE.match(text.strip())
    if not m:
        raise TriageError(f"'{text}' is not a window like 5m, 15m, 1h", key="--window")
    return float(m.group(1)) * UNIT_S[m.group(2)]


def parse_end(text: str | None) -> datetime:
    if not text:
        return datetime.now(UTC)
    try:
        end = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise TriageError(f"'{text}' is not an ISO 8601 time", key="--end") from exc
    return end if end.tzinfo else end.replace(tzinfo=UTC)


def parse_match(items: list[str]) -> dict[str, str]:
    """``model_name="x"`` pairs; anything else is refused rather than passed into PromQL."""
    match: dict[str, str] = {}
    for item in items:
        for part in filter(None, (p.strip() for p in item.split(","))):
            m = MATCH_RE.match(part)
            if not m:
                raise TriageError(f"'{part}' is not a label matcher like model_name=\"x\"", key="--match")
            match[m.group(1)] = m.group(2)
    return match


def prometheus_label(args: argparse.Namespace, end: datetime) -> str:
    return f"prometheus {args.prometheus} {args.window} to {end:%Y-%m-%dT%H:%M:%SZ}"


def fleet_window(args: argparse.Namespace):
    """A FleetWindow grouped by the --by labels over the --prometheus window, and the report label."""
    from triage.sources.metrics.prometheus_fleet import FleetWindow

    end = parse_end(args.end)
    start = end - timedelta(seconds=window_seconds(args.window))
    window = FleetWindow(args.prometheus, start, end, by=args.by, match=parse_match(args.match), timeout=args.timeout)
    return window, prometheus_label(args, end)


def live_window(args: argparse.Namespace) -> tuple[MetricWindow, str]:
    """The window the arguments name, and a label for the report."""
    if args.prometheus:
        from triage.sources.metrics.prometheus_window import PrometheusWindow

        end = parse_end(args.end)
        start = end - timedelta(seconds=window_seconds(args.window))
        window = PrometheusWindow(args.prometheus, start, end, match=parse_match(args.match), timeout=args.timeout)
        return window, prometheus_label(args, end)
    if args.endpoint:
        from triage.sources.metrics.scrape import two_scrapes
        from triage.sources.metrics.snapshot_window import SnapshotWindow

        return SnapshotWindow(two_scrapes(args.endpoint, args.interval), match=parse_match(args.match)), args.endpoint
    return _snapshot_files(args.scrape, args.interval, parse_match(args.match))


def _snapshot_files(paths: list[Path], interval: float, match: dict[str, str]) -> tuple[MetricWindow, str]:
    from triage.sources.metrics.exposition import parse_metrics_text
    from triage.sources.metrics.snapshot_window import SnapshotWindow

    if interval <= 0:
        raise TriageError("the interval between the snapshots must be positive", key="--interval")
    snaps = []
    for i, path in enumerate(paths):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TriageError(f"cannot read as UTF-8 text: {exc}", where=str(path)) from exc
        snaps.append(parse_metrics_text(text, i * interval, str(path)))
    return SnapshotWindow(snaps, match=match), f"{paths[0]} → {paths[1]} ({interval:g} s apart)"


def add_live_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prometheus", metavar="URL", help="diagnose a Prometheus window")
    p.add_argument("--window", default="15m", help="window length for --prometheus (5m, 15m, 1h, 6h…)")
    p.add_argument("--end", default=None, help="end of the window, ISO 8601 (default now)")
    p.add_argument("--match", action="append", default=[], help='label matcher, e.g. model_name="x" (repeatable)')
    p.add_argument("--endpoint", metavar="URL", help="scrape this /metrics URL twice, --interval seconds apart")
    p.add_argument("--scrape", nargs=2, type=Path, metavar=("BEFORE", "AFTER"), help="two saved /metrics texts")
    p.add_argument("--interval", type=float, default=15.0, help="seconds between the two scrapes (default 15)")
    p.add_argument("--timeout", type=float, default=10.0, help="per-query timeout in seconds (default 10)")
