"""Live sources in the session: this session's demo simulators and scrape buffers (triage.service.windows)."""

from __future__ import annotations

from components import session
from triage.service.windows import LiveFeeds


def feeds() -> LiveFeeds:
    """The session's live feeds, created on first use."""
    return session.LIVE_FEEDS.setdefault(LiveFeeds)
