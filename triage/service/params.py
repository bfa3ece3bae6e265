"""What the pages read from their URL: a bounded whole number, a value quoted back safely, the Live share link."""

from __future__ import annotations

from triage.params import MAX_SCRAPE_INTERVAL_S, MAX_SLO_S, SQLITE_MAX_ID, int_param, shown_param
from triage.report.links import parse_live_link

__all__ = ["MAX_SCRAPE_INTERVAL_S", "MAX_SLO_S", "SQLITE_MAX_ID", "int_param", "parse_live_link", "shown_param"]
