"""Live sources for the CLI: Prometheus, a /metrics endpoint scraped twice, or two saved snapshots."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from triage.cli import numbers
from triage.diagnosis.readings import MetricWindow
from triage.errors import TriageError
from triage.safe_text import redact_url

WINDOW_RE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
DEFAULT_TIMEOUT_S = 10.0
MAX_WINDOW_S = 90 * 86400
UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MATCH_RE = re.compile(r'^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"([^"]*)"\s*$')


def window_seconds(text: str) -> float:
    m = WINDOW_RE.match(text.strip())
    if not m:
        raise TriageError(f"'{text[:40]}' is not a window like 5m, 15m, 1h", key="--window")
    seconds = float(m.group(1)) * UNIT_S[m.group(2)]
    if not 1 <= seconds <= MAX_WINDOW_S:
        raise TriageError(f"'{text[:40]}' is out of range: between 1s and {MAX_WINDOW_S // 86400:g}d", key="--window")
    return seconds


def parse_end(text: str | None) -> datetime:
    if not text:
        return datetime.now(UTC)
    try:
        end = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise TriageError(f"'{text[:40]}' is not an ISO 8601 time", key="--end") from exc
    end = end if end.tzinfo else end.replace(tzinfo=UTC)
    if not 1970 <= end.year <= 9000:
        raise TriageError(f"'{text[:40]}' is out of range (years 1970 to 9000)", key="--end")
    return end


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


def prometheus_label(profile, args: argparse.Namespace, end: datetime) -> str:
    return f"prometheus {profile.label()} {args.window} to {end:%Y-%m-%dT%H:%M:%SZ}"


def fleet_window(args: argparse.Namespace):
    """A FleetWindow grouped by the --by labels over the --prometheus window, and the report label."""
    from triage.sources.metrics.profiles import resolve_profile
    from triage.sources.metrics.prometheus_fleet import FleetWindow

    profile = resolve_profile(args.prometheus)
    end = parse_end(args.end)
    start = end - timedelta(seconds=window_seconds(args.window))
    window = FleetWindow(profile, start, end, by=args.by, match=parse_match(args.match), timeout=args.timeout)
    return window, prometheus_label(profile, args, end)


def live_window(args: argparse.Namespace) -> tuple[MetricWindow, str]:
    """The window the arguments name, and a label for the report."""
    if args.prometheus:
        from triage.sources.metrics.profiles import resolve_profile
        from triage.sources.metrics.prometheus_window import PrometheusWindow

        profile = resolve_profile(args.prometheus)
        end = parse_end(args.end)
        start = end - timedelta(seconds=window_seconds(args.window))
        window = PrometheusWindow(profile, start, end, match=parse_match(args.match), timeout=args.timeout)
        return window, prometheus_label(profile, args, end)
    if args.endpoint:
        from triage.sources.metrics.scrape import two_scrapes
        from triage.sources.metrics.snapshot_window import SnapshotWindow

        snaps = two_scrapes(args.endpoint, args.interval, timeout=args.timeout or DEFAULT_TIMEOUT_S)
        return SnapshotWindow(snaps, match=parse_match(args.match)), redact_url(args.endpoint)
    return _snapshot_files(args.scrape, args.interval, parse_match(args.match))


def _snapshot_files(paths: list[Path], interval: float, match: dict[str, str]) -> tuple[MetricWindow, str]:
    from triage.sources.bounded import MAX_METRICS_BYTES, read_text_bounded
    from triage.sources.metrics.exposition import parse_metrics_text
    from triage.sources.metrics.snapshot_window import SnapshotWindow

    if interval <= 0:
        raise TriageError("the interval between the snapshots must be positive", key="--interval")
    snaps = []
    for i, path in enumerate(paths):
        text = read_text_bounded(path, MAX_METRICS_BYTES)
        snaps.append(parse_metrics_text(text, i * interval, str(path)))
    return SnapshotWindow(snaps, match=match), f"{paths[0]} → {paths[1]} ({interval:g} s apart)"


def add_live_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prometheus", metavar="URL|PROFILE",
                   help="diagnose a Prometheus window: a URL, or a profile name from .streamlit/secrets.toml "
                        "([prometheus.NAME]) or TRIAGE_PROMETHEUS_<NAME>_URL/_TOKEN/_USERNAME/_PASSWORD")
    p.add_argument("--window", default="15m", help="window length for --prometheus (5m, 15m, 1h, 6h…)")
    p.add_argument("--end", default=None, help="end of the window, ISO 8601 (default now)")
    p.add_argument("--match", action="append", default=[], help='label matcher, e.g. model_name="x" (repeatable)')
    p.add_argument("--endpoint", metavar="URL", help="scrape this /metrics URL twice, --interval seconds apart")
    p.add_argument("--scrape", nargs=2, type=Path, metavar=("BEFORE", "AFTER"), help="two saved /metrics texts")
    p.add_argument("--interval", type=numbers.INTERVAL, default=15.0,
                   help="seconds between the two scrapes (default 15)")
    p.add_argument("--timeout", type=numbers.TIMEOUT, default=None,
                   help="time limit in seconds for each Prometheus query or /metrics fetch (default: the "
                        "profile's, else 10)")
