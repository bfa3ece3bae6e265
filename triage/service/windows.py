"""Open a live source as a window pair: the demo simulator, a polled /metrics, two snapshots, Prometheus."""

from __future__ import annotations

import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from triage.bounded import MAX_METRICS_BYTES, MB
from triage.diagnosis.window import window_signals
from triage.errors import TriageError
from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.units import plain
from triage.params import MAX_SCRAPE_INTERVAL_S
from triage.run import Run
from triage.safe_text import redact_url
from triage.sources.metrics.demo_feed import DemoFeed, shared_feed, warm
from triage.sources.metrics.exposition import Snapshot, parse_metrics_text
from triage.sources.metrics.profiles import Profile, list_profiles
from triage.sources.metrics.scrape import scrape, two_scrapes
from triage.sources.metrics.simulator import Scenario, load_scenarios
from triage.sources.metrics.snapshot_window import ScrapeBuffer, SnapshotWindow
from triage.sources.readings import MetricWindow
from triage.verify.windows import run_from_signals

__all__ = ["BUFFER_CAPACITY", "DemoFeed", "LiveFeeds", "Profile", "Scenario", "WindowPair", "demo_pair",
           "demo_scenarios", "endpoint_pair", "parse_snapshot", "parsed_snapshot_pair", "prometheus_pair",
           "prometheus_profiles", "prometheus_run", "snapshot_bytes", "snapshot_pair", "warm_demo"]

BUFFER_CAPACITY = 240          # scrapes kept per scraped URL: 1 h at 15 s
MAX_SCRAPED_URLS = 3           # URLs a session keeps buffers for (the least recently polled is dropped)
DEMO_SEED, BASELINE_SEED = 1, 2
BASELINE_SCENARIO = "healthy"  # one healthy engine serves every scenario as baseline
Clock = Callable[[], float]


@dataclass(frozen=True)
class WindowPair:
    """The incident window and, where the source has one, a baseline to compare with."""

    current: MetricWindow
    baseline: MetricWindow | None
    label: str


def demo_scenarios() -> dict[str, Scenario]:
    """The simulator's scenarios (the active tree's scenarios.yaml), by id."""
    return load_scenarios()


def prometheus_profiles() -> dict[str, Profile]:
    """The Prometheus connections configured in secrets.toml or the environment, by name."""
    return list_profiles()


FeedFor = Callable[[str, int], DemoFeed]


def demo_pair(scenario: str, minutes: float, feed_for: FeedFor = shared_feed) -> WindowPair:
    """The process's simulated engine for the scenario, advanced to the clock (shared by every session, like
    a real server); a healthy engine of its own is the baseline. Tests pass ``feed_for`` with their own clock."""
    scenarios = load_scenarios()
    if scenario not in scenarios:
        raise TriageError(f"unknown demo scenario '{scenario}'; choose one of {', '.join(scenarios)}",
                          key="scenario")
    feed = feed_for(scenario, DEMO_SEED)
    base = feed_for(BASELINE_SCENARIO, BASELINE_SEED)
    feed.catch_up()
    return WindowPair(feed.window(minutes * 60), base.window(minutes * 60), f"demo · {scenario}")


def warm_demo() -> None:
    """Build the default demo engines in a background thread (server start), so the first Live page is quick."""
    warm()


@dataclass
class LiveFeeds:
    """A session's live sources that keep state between refreshes: one scrape ring buffer per URL, for the
    ``MAX_SCRAPED_URLS`` URLs polled last (a visitor typing URL after URL would otherwise grow a buffer of up to
    an hour of snapshots for each)."""

    scrapes: OrderedDict[str, ScrapeBuffer] = field(default_factory=OrderedDict)

    def scrape(self, url: str, minutes: float, timeout: float) -> WindowPair:
        """Poll ``url`` once per refresh into a bounded ring buffer kept for this session."""
        buf = self.scrapes.pop(url, None) or ScrapeBuffer(BUFFER_CAPACITY)
        self.scrapes[url] = buf  # now the most recent
        while len(self.scrapes) > MAX_SCRAPED_URLS:
            self.scrapes.popitem(last=False)
        buf.add(scrape(url, timeout=timeout))  # bounded, no redirects, metadata refused, TRIAGE_SCRAPE_ALLOW honoured
        return WindowPair(buf.window(minutes * 60), None, redact_url(url))


def endpoint_pair(url: str, interval: float, timeout: float, match: dict[str, str] | None = None) -> WindowPair:
    """A /metrics URL scraped twice, ``interval`` seconds apart: the one-shot form of the Live page's poll."""
    snaps = two_scrapes(url, interval, timeout=timeout)  # the same bounded, redirect-free, metadata-refusing scrape
    return WindowPair(SnapshotWindow(snaps, match=match), None, redact_url(url))


def parse_snapshot(data: bytes, name: str) -> Snapshot:
    """One uploaded /metrics text, parsed once (its time is given when a pair is built): refused past
    MAX_METRICS_BYTES before a byte is decoded, and when it is not UTF-8 or not an exposition."""
    if len(data) > MAX_METRICS_BYTES:
        raise TriageError(f"larger than {MAX_METRICS_BYTES // MB} MB ({len(data) / MB:,.1f} MB); one /metrics "
                          "text is a few MB", where=name)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TriageError(f"not UTF-8 text (byte {exc.start})", where=name) from exc
    return parse_metrics_text(text, 0.0, name)


def snapshot_bytes(snap: Snapshot) -> int:
    """An estimate of the memory a parsed snapshot holds (its series, labels and values)."""
    total = 1024
    for name, samples in snap.series.items():
        total += sys.getsizeof(name) + sys.getsizeof(samples)
        for labels, _ in samples:
            total += 120 + sys.getsizeof(labels) + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in labels.items())
    return total


def snapshot_pair(before: bytes, after: bytes, names: tuple[str, str], interval: float,
                  match: dict[str, str] | None = None, clock: Clock = time.time) -> WindowPair:
    """Two /metrics texts taken ``interval`` seconds apart: the offline form of a scrape."""
    _check_interval(interval)
    return parsed_snapshot_pair(parse_snapshot(before, names[0]), parse_snapshot(after, names[1]), interval,
                                match, clock)


def parsed_snapshot_pair(before: Snapshot, after: Snapshot, interval: float, match: dict[str, str] | None = None,
                         clock: Clock = time.time) -> WindowPair:
    """Two parsed snapshots (``parse_snapshot``) taken ``interval`` seconds apart, the later one now; the parses
    are shared, not copied (a window only reads them)."""
    _check_interval(interval)
    t1 = clock()
    snaps = [replace(before, taken_at=t1 - interval), replace(after, taken_at=t1)]
    return WindowPair(SnapshotWindow(snaps, match=match), None, f"{before.where} → {after.where}")


def _check_interval(interval: float) -> None:
    """Positive and at most an hour (as the CLI's --interval): a larger one placed the first snapshot before
    any date a chart can draw (1e300 s ago) and the page failed."""
    if not 0 < interval <= MAX_SCRAPE_INTERVAL_S:
        raise TriageError(f"the interval between the snapshots must be more than 0 and at most "
                          f"{plain(MAX_SCRAPE_INTERVAL_S)} s (an hour)", key="interval")


def prometheus_pair(profile: Profile | str, end: datetime | None, minutes: float, match: dict[str, str],
                    baseline_offset_h: float | None, timeout: float | None) -> WindowPair:
    """A Prometheus window of ``minutes`` ending at ``end`` (None: now) and, with an offset, the same span earlier."""
    from triage.sources.metrics.prometheus_window import PrometheusWindow

    end = end or datetime.now(UTC)
    start = end - timedelta(minutes=minutes)
    current = PrometheusWindow(profile, start, end, match=match, timeout=timeout)
    baseline = None
    if baseline_offset_h:
        shift = timedelta(hours=baseline_offset_h)
        baseline = PrometheusWindow(profile, start - shift, end - shift, match=match, timeout=timeout)
    name = profile.name if isinstance(profile, Profile) else redact_url(profile)
    return WindowPair(current, baseline, f"{name} · {minutes:g} min")


def prometheus_run(kb: KnowledgeBase, profile: Profile | str, end: datetime, minutes: float, label: str) -> Run:
    """A Prometheus window as a summary-only run (its server signals; no per-request rows, no intervals)."""
    pair = prometheus_pair(profile, end, minutes, {}, None, None)
    return run_from_signals(window_signals(kb, pair.current)[0], label)
