"""The one error type the core raises for input a person can fix."""

from __future__ import annotations

from triage.safe_text import redact_text


class TriageError(Exception):
    """A problem with user-supplied input, phrased so a person can act on it.

    ``where`` names the file (or URL) and ``key`` the place inside it, so the CLI can print
    one line ``where: key: reason`` and the UI can show the same sentence. URLs in any part are redacted
    (credentials, token-like query values), so no message can carry a secret.
    """

    def __init__(self, reason: str, *, where: str = "", key: str = "") -> None:
        self.reason = redact_text(str(reason))
        self.where = redact_text(str(where))
        self.key = redact_text(str(key))
        super().__init__(self.line())

    def line(self) -> str:
        parts = [p for p in (self.where, self.key, self.reason) if p]
        return ": ".join(parts)

    def line_for(self, name: str) -> str:
        """``line()`` for a reader already told ``name`` ("Could not read {name}: …"): without ``where`` when it is
        that name, so the file is not named twice."""
        parts = [p for p in (self.where if self.where != name else "", self.key, self.reason) if p]
        return ": ".join(parts)


class UnknownFormat(TriageError):
    """Input read whole that matches none of the formats tried: a caller with more formats to try (server logs,
    a scrape) catches this type and tries them, any other TriageError stands."""
