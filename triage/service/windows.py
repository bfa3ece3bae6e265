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
from triage.sources.metrics.exposition import parse_metrics_text
from triage.sources.metrics.profiles import Profile, list_profiles
from triage.sources.metrics.scrape import scrape
from triage.sources.metrics.simulator import SCENARIOS, Scenario, Simulator
from triage.sources.metrics.snapshot_window import ScrapeBuffer, SnapshotWindow
from triage.verify.windows import run_from_signals

__all__ = ["BUFFER_CAPACITY", "DemoFeed", "LiveFeeds", "Profile", "Scenario", "WindowPair", "demo_scenarios",
           "prometheus_pair", "prometheus_profiles", "prometheus_run", "snapshot_pair"]

BUFFER_CAPACITY = 240          # scrapes kept per source: 1 h at 15 s
DEMO_HISTORY_S = 15 * 60       # the demo starts with 15 minutes of history so panels have a shape
DEMO_STEP_S = 15.0
DEMO_SEED, BASELINE_SEED = 1, 2
BASELINE_SCENARIO = "healthy"  # one healthy run per session serves every scenario as baseline
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


class DemoFeed:
    """One simulated engine kept at the clock's time, its scrapes in a ring buffer (opened with some history)."""

    def __init__(self, scenario: str, seed: int, clock: Clock = time.time) -> None:
        self._clock = clock
        self.source = f"demo:{scenario}"
        self.sim = Simulator(scenario, seed=seed, start=clock() - DEMO_HISTORY_S)
        self.buffer = ScrapeBuffer(BUFFER_CAPACITY)
        while self.sim.now < clock():
            self.sim.advance(DEMO_STEP_S)
            self._scrape()

    def _scrape(self) -> None:
        self.buffer.add(parse_metrics_text(self.sim.render(), self.sim.now, self.source))

    def catch_up(self) -> None:
        """Simulate up to the clock's time and take one scrape there (nothing when less than 1 s passed)."""
        gap = self._clock() - self.sim.now
        if gap >= 1:
            self.sim.advance(gap)
            self._scrape()

    def window(self, seconds: float) -> SnapshotWindow:
        return self.buffer.window(seconds)


@dataclass
class LiveFeeds:
    """A session's live sources that keep state between refreshes: demo simulators and scrape ring buffers."""

    clock: Clock = time.time
    demos: dict[str, DemoFeed] = field(default_factory=dict)
    scrapes: dict[str, ScrapeBuffer] = field(default_factory=dict)

    def _demo_feed(self, scenario: str, seed: int) -> DemoFeed:
        if scenario not in self.demos:
            self.demos[scenario] = DemoFeed(scenario, seed, self.clock)
        return self.demos[scenario]

    def demo(self, scenario: str, minutes: float) -> WindowPair:
        """The in-process simulator advanced to the clock; a healthy run of its own is the baseline."""
        if scenario not in SCENARIOS:
            raise TriageError(f"unknown demo scenario '{scenario}'; choose one of {', '.join(SCENARIOS)}",
                              key="scenario")
        baseline = self.demos.get(f"{BASELINE_SCENARIO}:baseline")
        if baseline is None:
            baseline = self.demos[f"{BASELINE_SCENARIO}:baseline"] = DemoFeed(BASELINE_SCENARIO, BASELINE_SEED,
                                                                              self.clock)
        feed = self._demo_feed(scenario, DEMO_SEED)
        feed.catch_up()
        return WindowPair(feed.window(minutes * 60), baseline.window(minutes * 60), f"demo · {scenario}")

    def scrape(self, url: str, minutes: float, timeout: float) -> WindowPair:
        """Poll ``url`` once per refresh into a bounded ring buffer kept for this session."""
        buf = self.scrapes.setdefault(url, ScrapeBuffer(BUFFER_CAPACITY))
        buf.add(scrape(url, timeout=timeout))  # bounded, no redirects, metadata refused, TRIAGE_SCRAPE_ALLOW honoured
        return WindowPair(buf.window(minutes * 60), None, redact_url(url))


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
