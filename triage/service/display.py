"""How the UI writes values and quoted text: numbers in their units (the one formatter, knowledge/units.py),
deltas against a reference, Markdown escaping of text from files and URLs, and redaction of secrets in URLs and
logs."""

from __future__ import annotations

from triage.knowledge.units import (
    count,
    fmt_against,
    fmt_delta,
    fmt_interval,
    fmt_relative,
    fmt_value,
    gib,
    kib,
    ms,
    number,
    percent,
    plain,
    signed,
    signed_count,
    time_axis,
)
from triage.safe_text import install_log_redaction, md_escape, redact_url

__all__ = ["count", "fmt_against", "fmt_delta", "fmt_interval", "fmt_relative", "fmt_value", "gib",
           "install_log_redaction", "kib", "md_escape", "ms", "number", "percent", "plain", "redact_url", "signed",
           "signed_count", "time_axis"]
