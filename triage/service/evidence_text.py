"""Evidence in words as the reports write it: a signal's value ("n/a" when not measured) and a rule's threshold."""

from __future__ import annotations

from triage.report.text import fmt_threshold, fmt_value

__all__ = ["fmt_threshold", "fmt_value"]
