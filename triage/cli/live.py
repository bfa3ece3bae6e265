"""Live sources for the CLI: Prometheus, a /metrics endpoint scraped twice, or two saved snapshots."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from triage.cli import numbers
from triage.errors import TriageError
from triage.knowledge.units import plain

if TYPE_CHECKING:
    from triage.service.windows import WindowPair

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
        days = plain(MAX_WINDOW_S // 86400)
        raise TriageError(f"'{text[:40]}' is out of range: between 1s and {days}d", key="--window")
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
    """A FleetWindow grouped by the --by labels over the --prometheus window (the Fleet page's), and the label."""
    from triage.service.fleet import fleet_window as open_fleet
    from triage.sources.metrics.profiles import resolve_profile

    profile = resolve_profile(args.prometheus)
    end = parse_end(args.end)
    window = open_fleet(profile, end, window_seconds(args.window) / 60, tuple(args.by), parse_match(args.match),
                        args.timeout)
    return window, prometheus_label(profile, args, end)


def live_pair(args: argparse.Namespace) -> WindowPair:
    """The window the arguments name (no baseline), labelled for the report: opened by triage.service.windows,
    as the Live page opens its sources."""
    from triage.service import windows
    from triage.service.windows import WindowPair

    match = parse_match(args.match)
    if args.prometheus:
        from triage.sources.metrics.profiles import resolve_profile

        profile = resolve_profile(args.prometheus)
        end = parse_end(args.end)
        pair = windows.prometheus_pair(profile, end, window_seconds(args.window) / 60, match, None, args.timeout)
        return WindowPair(pair.current, None, prometheus_label(profile, args, end))
    if args.endpoint:
        return windows.endpoint_pair(args.endpoint, args.interval, args.timeout or DEFAULT_TIMEOUT_S, match)
    return _snapshot_files(args.scrape, args.interval, match)


def _snapshot_files(paths: list[Path], interval: float, match: dict[str, str]) -> WindowPair:
    from triage.bounded import MAX_METRICS_BYTES, read_bounded
    from triage.service.windows import WindowPair, snapshot_pair

    if interval <= 0:
        raise TriageError("the interval between the snapshots must be positive", key="--interval")
    before, after = (read_bounded(p, MAX_METRICS_BYTES) for p in paths)
    pair = snapshot_pair(before, after, (str(paths[0]), str(paths[1])), interval, match)
    return WindowPair(pair.current, None, f"{pair.label} ({plain(interval)} s apart)")


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
