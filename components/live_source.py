"""Live sources for the picker: each builds a window pair through triage.service.windows on every refresh;
a polled /metrics keeps its ring buffer in this session."""

from __future__ import annotations

from datetime import datetime

from components import session, upload_store
from components.shell import t
from triage.service import windows
from triage.service.display import redact_url
from triage.service.model import TriageError
from triage.service.typed_urls import ScrapeRefused
from triage.service.windows import LiveFeeds, Profile, WindowPair


def feeds() -> LiveFeeds:
    """The session's live feeds (scrape ring buffers), created on first use."""
    return session.LIVE_FEEDS.setdefault(LiveFeeds)


def demo_windows(scenario: str, minutes: float) -> WindowPair:
    """The process's simulated engine for the scenario; a healthy engine of its own is the baseline."""
    return windows.demo_pair(scenario, minutes)


def scrape_windows(url: str, minutes: float, timeout: float) -> WindowPair:
    """Poll ``url`` (typed by the visitor) once per refresh into a bounded ring buffer kept for this session.

    A failure says only that no metrics could be read there, whatever the reason: "connection refused", "HTTP
    404" or "not metrics text" would tell an open port from a closed one (the CLI keeps the detail). A refusal
    by the policy is decided before any connection, so it may say so (without the resolved address)."""
    try:
        return feeds().scrape(url, minutes, timeout)
    except ScrapeRefused:
        raise TriageError(t("live_url_refused"), where=redact_url(url)) from None
    except TriageError:
        raise TriageError(t("live_url_unreadable"), where=redact_url(url)) from None


def snapshot_windows(before: str, after: str, interval: float) -> WindowPair:
    """Two uploaded /metrics texts taken ``interval`` seconds apart, by digest in the server's snapshot cache
    (parsed once at upload; the bytes are gone): the offline form of a scrape."""
    cache = upload_store.snapshot_cache()
    snaps = [cache.get(before), cache.get(after)]
    if snaps[0] is None or snaps[1] is None:
        raise TriageError("a snapshot was dropped from server memory to make room for newer uploads; upload it "
                          "again")
    return windows.parsed_snapshot_pair(snaps[0], snaps[1], interval)


def prometheus_windows(profile: Profile, end: datetime | None, minutes: float, match: dict[str, str],
                       baseline_offset_h: float | None, timeout: float) -> WindowPair:
    """A Prometheus window and, with an offset, the same span earlier as the baseline."""
    return windows.prometheus_pair(profile, end, minutes, match, baseline_offset_h, timeout)
