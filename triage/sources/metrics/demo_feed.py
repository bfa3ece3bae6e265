"""The demo's simulated engines, one per (scenario, seed) for the whole process, like a real server all
viewers share: its history is simulated once (not per browser session) and advanced under a lock.

``warm()`` builds the default ones in a background thread at server start, so the first Live page
finds its history ready, and then keeps every built feed at the clock's time, so a Live page after a quiet
night finds a minute to simulate instead of a 15-minute history to rebuild.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from triage.knowledge.loader import active_tree_dir
from triage.sources.metrics.exposition import snapshot_from_families
from triage.sources.metrics.simulator import Simulator
from triage.sources.metrics.snapshot_window import ScrapeBuffer, SnapshotWindow

BUFFER_CAPACITY = 240     # scrapes kept: 1 h at 15 s
HISTORY_S = 15 * 60       # a new feed starts with 15 minutes of history so panels have a shape
STEP_S = 15.0
KEEP_UP_S = 60.0          # the keeper's period: at most four steps to simulate when a page opens
DEFAULTS = (("queueing", 1), ("healthy", 2))  # the Live page's default scenario and the demo baseline
Clock = Callable[[], float]


class DemoFeed:
    """One simulated engine kept at the clock's time; its scrapes in a ring buffer."""

    def __init__(self, scenario: str, seed: int, clock: Clock = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.source = f"demo:{scenario}"
        self.sim = Simulator(scenario, seed=seed, start=clock() - HISTORY_S)
        self.buffer = ScrapeBuffer(BUFFER_CAPACITY)
        self.catch_up()  # the history: a scrape every STEP_S up to now

    def _scrape(self) -> None:
        # straight from the simulator's metric families: the same series as rendering and parsing the text
        self.buffer.add(snapshot_from_families(self.sim.families(), self.sim.now, self.source))

    def catch_up(self) -> None:
        """Simulate up to the clock's time, scraping every STEP_S as the history was (nothing under 1 s).

        A pause longer than the history is not simulated: nobody saw it, and simulating a night of idle
        serving took minutes of CPU before the first Live page of the morning could draw. The engine's clock
        jumps to HISTORY_S before now and the history restarts there, so that page costs what server start
        costs."""
        with self._lock:
            now = self._clock()
            if now - self.sim.now > HISTORY_S:
                self.sim.jump(now - HISTORY_S)
                self.buffer.clear()  # scrapes from before the pause would stretch rates across it
            while now - self.sim.now >= STEP_S:
                self.sim.advance(STEP_S)
                self._scrape()
            if now - self.sim.now >= 1:
                self.sim.advance(now - self.sim.now)
                self._scrape()

    def window(self, seconds: float) -> SnapshotWindow:
        with self._lock:
            return self.buffer.window(seconds)


_FEEDS: dict[tuple[Path, str, int], DemoFeed] = {}
_BUILDING = threading.Lock()


def shared_feed(scenario: str, seed: int) -> DemoFeed:
    """The process's feed for (scenario, seed) of the active tree, built on first use (a concurrent first use
    waits for it); a scenario of the same name in another tree directory is another feed."""
    key = (active_tree_dir(), scenario, seed)
    feed = _FEEDS.get(key)
    if feed is None:
        with _BUILDING:
            feed = _FEEDS.get(key)
            if feed is None:
                feed = _FEEDS[key] = DemoFeed(scenario, seed)
    return feed


def keep_up_once(feeds: Iterable[DemoFeed] | None = None) -> None:
    """Advance ``feeds`` (default: every feed the process built) to the clock's time."""
    for feed in list(_FEEDS.values()) if feeds is None else feeds:
        feed.catch_up()


def keep_up(stop: threading.Event, every: float = KEEP_UP_S) -> None:
    """Advance every built feed each ``every`` seconds until ``stop`` is set. Rebuilding a history after a
    pause costs about 1.5 s per feed, paid by whoever opens Live first; a minute's four steps cost ~0.1 s."""
    while not stop.wait(every):
        keep_up_once()


def warm(feeds: tuple[tuple[str, int], ...] = DEFAULTS, stop: threading.Event | None = None) -> threading.Thread:
    """Build ``feeds`` in a daemon thread (server start), so the first Live page does not wait for them, then
    keep every built feed current in the same thread until ``stop`` is set (never, in the server)."""
    def build() -> None:
        for scenario, seed in feeds:
            shared_feed(scenario, seed)
        keep_up(stop or threading.Event())

    thread = threading.Thread(target=build, name="demo-warm", daemon=True)
    thread.start()
    return thread
