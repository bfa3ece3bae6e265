"""URL query parameters as typed, bounded values: a crafted link gives None (and a plain message), never an
exception (``?experiment=99999999999999999999999`` is not an OverflowError) and never raw text in Markdown."""

from __future__ import annotations

import re
from collections.abc import Container

MAX_PARAM_CHARS = 200
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,99}$")
SQLITE_MAX_ID = 2**63 - 1
MAX_SLO_S = 86_400.0  # an SLO in seconds: at most a day (CLI --ttft-slo / --tpot-slo, the sidebar's custom SLO)
MAX_SCRAPE_INTERVAL_S = 3_600.0  # seconds between two /metrics snapshots (CLI --interval, Live)


def int_param(raw: object, low: int, high: int) -> int | None:
    """A decimal integer in [low, high], or None (absent, not a number, out of range, absurdly long)."""
    if not isinstance(raw, str) or not 0 < len(raw.strip()) <= 20:
        return None
    text = raw.strip()
    if not text.isascii() or not text.lstrip("-").isdigit():
        return None
    value = int(text)
    return value if low <= value <= high else None


def id_param(raw: object, known: Container[str]) -> str | None:
    """An id the caller knows (a tree node, a technique), or None."""
    if not isinstance(raw, str) or not ID_RE.match(raw):
        return None
    return raw if raw in known else None


def shown_param(raw: object, limit: int = 60) -> str:
    """A refused parameter as a message may quote it: one line, printable, short (still to be escaped)."""
    from triage.safe_text import one_line

    return one_line(str(raw)[:MAX_PARAM_CHARS], limit)
