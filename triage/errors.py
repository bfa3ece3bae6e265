"""The one error type the core raises for input a person can fix."""

from __future__ import annotations


class TriageError(Exception):
    """A problem with user-supplied input, phrased so a person can act on it.

    ``where`` names the file (or URL) and ``key`` the place inside it, so the CLI can print
    one line ``where: key: reason`` and the UI can show the same sentence.
    """

    def __init__(self, reason: str, *, where: str = "", key: str = "") -> None:
        self.reason = reason
        self.where = where
        self.key = key
        super().__init__(self.line())

    def line(self) -> str:
        parts = [p for p in (self.where, self.key, self.reason) if p]
        return ": ".join(parts)
