"""An ordered registry of the formats users upload, by id: the one place a format is added, listed and found."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, Protocol, TypeVar


class Format(Protocol):
    """What every registered format has: an id (what a Benchmark records) and a title (what people read)."""

    @property
    def id(self) -> str: ...

    @property
    def title(self) -> str: ...


F = TypeVar("F", bound=Format)


class Registry(Generic[F]):
    """Formats in the order they were registered (the order listings show); ids are unique."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._formats: dict[str, F] = {}

    def register(self, fmt: F) -> F:
        """Add ``fmt``; a second format with a taken id is a programming error, not a silent replacement."""
        if fmt.id in self._formats:
            raise ValueError(f"{self.kind} {fmt.id!r} is registered already")
        self._formats[fmt.id] = fmt
        return fmt

    def all(self) -> list[F]:
        return list(self._formats.values())

    def get(self, fmt_id: str) -> F | None:
        return self._formats.get(fmt_id)

    def __contains__(self, fmt_id: object) -> bool:
        return fmt_id in self._formats

    def title(self, fmt_id: str) -> str:
        """The title of a format id; the id itself when no such format is registered."""
        fmt = self._formats.get(fmt_id)
        return fmt.title if fmt is not None else fmt_id

    def titles(self) -> str:
        """Every title, comma-separated, for a 'supported: …' message."""
        return ", ".join(f.title for f in self._formats.values())

    @contextmanager
    def restored(self) -> Iterator[None]:
        """Whatever is registered inside the block is gone after it (tests that add a format)."""
        saved = dict(self._formats)
        try:
            yield
        finally:
            self._formats = saved
