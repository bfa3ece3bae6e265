"""Deep links into the dashboard: the Live view of one replica at a time, with a tree node lit.

The scheme is shared by the alert runbook URLs (triage rules), the Fleet page and the Live page that reads it:
``live?source=prometheus&profile=P&window=15m&end=<unix s>&match_<label>=<value>…&node=<cause id>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlencode

LIVE_PATH = "live"
MATCH_PREFIX = "match_"
WINDOW_RE = re.compile(r"^\d+[smhd]$")
LABEL_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
MAX_VALUE = 256  # a label value, profile name or node id longer than this is not from us: dropped
MAX_LABELS = 16


@dataclass(frozen=True)
class LiveLink:
    profile: str | None = None
    window: str | None = None
    end: datetime | None = None
    match: dict[str, str] = field(default_factory=dict)
    node: str | None = None


def live_query(link: LiveLink) -> str:
    """The query string (without '?') of a Live-view link."""
    params: list[tuple[str, str]] = [("source", "prometheus")]
    if link.profile:
        params.append(("profile", link.profile))
    if link.window:
        params.append(("window", link.window))
    if link.end is not None:
        params.append(("end", str(int(link.end.timestamp()))))
    params += [(MATCH_PREFIX + k, v) for k, v in link.match.items()]
    if link.node:
        params.append(("node", link.node))
    return urlencode(params)


def live_url(link: LiveLink, base: str = "") -> str:
    prefix = f"{base.rstrip('/')}/" if base else ""
    return f"{prefix}{LIVE_PATH}?{live_query(link)}"


def parse_live_link(params: Mapping[str, str]) -> LiveLink | None:
    """A Live-view link from query parameters, or None when they do not name a Prometheus source. Values that do
    not parse are dropped (a hand-edited link opens the page with what is valid)."""
    if params.get("source") != "prometheus":
        return None
    params = {k: v for k, v in params.items() if isinstance(v, str) and len(v) <= MAX_VALUE}
    end = None
    raw = params.get("end", "")
    if raw:
        try:
            end = datetime.fromtimestamp(float(raw), UTC) if raw.replace(".", "", 1).isdigit() else \
                datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except (ValueError, OverflowError, OSError):
            end = None
        if end is not None and end.tzinfo is None:
            end = end.replace(tzinfo=UTC)
    window = params.get("window") if WINDOW_RE.match(params.get("window", "")) else None
    match = dict(list({k[len(MATCH_PREFIX):]: v for k, v in params.items()
                       if k.startswith(MATCH_PREFIX) and LABEL_RE.match(k[len(MATCH_PREFIX):])}.items())[:MAX_LABELS])
    return LiveLink(profile=params.get("profile") or None, window=window, end=end, match=match,
                    node=params.get("node") or None)
