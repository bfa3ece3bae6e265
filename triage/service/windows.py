"""Open a live source as a window pair: the demo simulator, a polled /metrics, two snapshots, Prometheus."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from triage.diagnosis.readings import MetricWindow
from triage.diagnosis.window import window_signals
from triage.errors import TriageError
from triage.knowledge.loader import KnowledgeBase
from triage.run import Run
from triage.safe_text import redact_url
from triage.sources.metrics.demo_feed import DemoFeed, shared_feed, warm
from triage.sources.metrics.exposition import parse_metrics_text
from triage.sources.metrics.profiles import Profile, list_profiles
from triage.sources.metrics.scrape import scrape, two_scrapes
from triage.sources.metrics.simulator import SCENARIOS, Scenario
from triage.sources.metrics.snapshot_window import ScrapeBuffer, SnapshotWindow
from triage.verify.windows import run_from_signals

__all__ = ["BUFFER_CAPACITY", "DemoFeed", "LiveFeeds", "Profile", "Scenario", "WindowPair", "demo_pair",
           "demo_scenarios", "endpoint_pair", "prometheus_pair", "prometheus_profiles", "prometheus_run",
           "snapshot_pair", "warm_demo"]

BUFFER_CAPACITY = 240          # scrapes kept per scraped URL: 1 h at 15 s
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
    """The simulator's scenarios (tree/scenarios.yaml), by id."""
    return SCENARIOS


def prometheus_profiles() -> dict[str, Profile]:
    """The Prometheus connections configured in secrets.toml or the environment, by name."""
    return list_profiles()


FeedFor = Callable[[str, int], DemoFeed]


def demo_pair(scenario: str, minutes: float, feed_for: FeedFor = shared_feed) -> WindowPair:
    """The process's simulated engine for the scenario, advanced to the clock (shared by every session, like
    a real server); a healthy engine of its own is the baseline. Tests pass ``feed_for`` with their own clock."""
    if scenario not in SCENARIOS:
        raise TriageError(f"unknown demo scenario '{scenario}'; choose one of {', '.join(SCENARIOS)}",
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
    """A session's live sources that keep state between refreshes: one scrape ring buffer per URL."""

    scrapes: dict[str, ScrapeBuffer] = field(default_factory=dict)

    def scrape(self, url: str, minutes: float, timeout: float) -> WindowPair:
        """Poll ``url`` once per refresh into a bounded ring buffer kept for this session."""
        buf = self.scrapes.setdefault(url, ScrapeBuffer(BUFFER_CAPACITY))
        buf.add(scrape(url, timeout=timeout))  # bounded, no redirects, metadata refused, TRIAGE_SCRAPE_ALLOW honoured
        return WindowPair(buf.window(minutes * 60), None, redact_url(url))


def endpoint_pair(url: str, interval: float, timeout: float, match: dict[str, str] | None = None) -> WindowPair:
    """A /metrics URL scraped twice, ``interval`` seconds apart: the one-shot form of the Live page's poll."""
    snaps = two_scrapes(url, interval, timeout=timeout)  # the same bounded, redirect-free, metadata-refusing scrape
    return WindowPair(SnapshotWindow(snaps, match=match), None, redact_url(url))


def snapshot_pair(before: bytes, after: bytes, names: tuple[str, str], interval: float,
                  match: dict[str, str] | None = None, clock: Clock = time.time) -> WindowPair:
    """Two /metrics texts taken ``interval`` seconds apart: the offline form of a scrape."""
    if interval <= 0:
        raise TriageError("the interval between the snapshots must be positive", key="interval")
    texts = []
    for data, name in zip((before, after), names):
        try:
            texts.append(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise TriageError(f"not UTF-8 text (byte {exc.start})", where=name) from exc
    t1 = clock()
    snaps = [parse_metrics_text(texts[0], t1 - interval, names[0]), parse_metrics_text(texts[1], t1, names[1])]
    return WindowPair(SnapshotWindow(snaps, match=match), None, f"{names[0]} → {names[1]}")


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
