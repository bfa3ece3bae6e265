"""Fetch a /metrics endpoint into a Snapshot (through the one bounded fetch), with errors a person can act on."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

from triage.errors import TriageError
from triage.safe_text import redact_url
from triage.sources.metrics.exposition import Snapshot, parse_metrics_text
from triage.sources.metrics.fetch import ScrapePolicy, connection_reason, fetch

ACCEPT = "text/plain;version=0.0.4;q=1.0, */*;q=0.1"
NOT_TEXT = ("text/html", "application/json")
MAX_INTERVAL_S = 3600.0

__all__ = ["ACCEPT", "NOT_TEXT", "connection_reason", "scrape", "two_scrapes"]


def scrape(url: str, timeout: float = 5.0, headers: Mapping[str, str] | None = None,
           policy: ScrapePolicy | None = None) -> Snapshot:
    """GET ``url`` (a Prometheus text /metrics endpoint) and parse it, stamped with the time of the answer.

    The body is never quoted back: a parse error names the line number, the status, content type and size."""
    got = fetch(url, timeout=timeout, headers=headers, policy=policy, accept=ACCEPT, refuse_types=NOT_TEXT)
    try:
        text = got.body.decode("utf-8")
    except UnicodeDecodeError:
        raise TriageError(f"{got.describe()}: not UTF-8 text, so not Prometheus metrics", where=got.url) from None
    return parse_metrics_text(text, got.taken_at, got.url, quote_lines=False, answered=got.describe())


def two_scrapes(url: str, interval: float, timeout: float = 5.0, headers: Mapping[str, str] | None = None,
                policy: ScrapePolicy | None = None) -> list[Snapshot]:
    """Scrape, wait ``interval`` seconds, scrape again: the minimum for rates and histogram deltas."""
    if not (math.isfinite(interval) and 0 < interval <= MAX_INTERVAL_S):
        raise TriageError(f"the interval between scrapes must be between 0 and {MAX_INTERVAL_S:g} s, got {interval}",
                          key="interval", where=redact_url(url))
    first = scrape(url, timeout, headers, policy)
    time.sleep(interval)  # the measurement interval itself, not synchronization
    return [first, scrape(url, timeout, headers, policy)]
