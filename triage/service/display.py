"""How the UI writes values and quoted text: numbers in their units, deltas against a reference, Markdown
escaping of text from files and URLs, and redaction of secrets in URLs and logs."""

from __future__ import annotations

from triage.report.units import fmt_against, fmt_delta, fmt_value, number
from triage.safe_text import install_log_redaction, md_escape, redact_url

__all__ = ["fmt_against", "fmt_delta", "fmt_value", "install_log_redaction", "md_escape", "number", "redact_url"]
