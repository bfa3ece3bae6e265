"""Live sources in the session: the built-in demo, a polled /metrics, two uploaded snapshots, Prometheus."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import streamlit as st

from triage.diagnosis.readings import MetricWindow
from triage.errors import TriageError
from triage.safe_text import redact_url
from triage.sources.metrics.demo_feed import shared_feed
from triage.sources.metrics.exposition import parse_metrics_text
from triage.sources.metrics.scrape import scrape
from triage.sources.metrics.snapshot_window import ScrapeBuffer, SnapshotWindow

BUFFER_CAPACITY = 240          # scrapes kept per source: 1 h at 15 s


@dataclass(frozen=True)
class WindowPair:
    """The incident window and, where the source has one, a baseline to compare with."""

    current: MetricWindow
    baseline: MetricWindow | None
    label: str


def demo_windows(scenario: str, minutes: float) -> WindowPair:
    """The process's simulated engine for the scenario, advanced to wall-clock time (shared by every
    session, like a real server); a healthy engine of its own is the baseline."""
    feed = shared_feed(scenario, 1)
    base = shared_feed("healthy", 2)
    feed.catch_up()
    return WindowPair(feed.window(minutes * 60), base.window(minutes * 60), f"demo · {scenario}")


def scrape_windows(url: str, minutes: float, timeout: float) -> WindowPair:
    """Poll ``url`` once per refresh into a bounded ring buffer kept for this session."""
    key = f"scrape:{url}"
    buf: ScrapeBuffer = st.session_state.setdefault(key, ScrapeBuffer(BUFFER_CAPACITY))
    buf.add(scrape(url, timeout=timeout))  # bounded, no redirects, metadata refused, TRIAGE_SCRAPE_ALLOW honoured
    return WindowPair(buf.window(minutes * 60), None, redact_url(url))


def snapshot_windows(before: bytes, after: bytes, names: tuple[str, str], interval: float) -> WindowPair:
    """Two /metrics texts taken ``interval`` seconds apart: the offline form of a scrape."""
    if interval <= 0:
        raise TriageError("the interval between the snapshots must be positive", key="interval")
    texts = []
    for data, name in zip((before, after), names):
        try:
            texts.append(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise TriageError(f"not UTF-8 text (byte {exc.start})", where=name) from exc
    t1 = time.time()
    snaps = [parse_metrics_text(texts[0], t1 - interval, names[0]), parse_metrics_text(texts[1], t1, names[1])]
    return WindowPair(SnapshotWindow(snaps), None, f"{names[0]} → {names[1]}")


def prometheus_windows(profile, end: datetime | None, minutes: float, match: dict[str, str],
                       baseline_offset_h: float | None, timeout: float) -> WindowPair:
    from triage.sources.metrics.prometheus_window import PrometheusWindow

    end = end or datetime.now(UTC)
    start = end - timedelta(minutes=minutes)
    current = PrometheusWindow(profile, start, end, match=match, timeout=timeout)
    baseline = None
    if baseline_offset_h:
        shift = timedelta(hours=baseline_offset_h)
        baseline = PrometheusWindow(profile, start - shift, end - shift, match=match, timeout=timeout)
    return WindowPair(current, baseline, f"{getattr(profile, 'name', profile)} · {minutes} min")
