"""Benchmark-file formats as data: one ``BenchmarkFormat`` per tool output, registered by the tool's own module.

Detection (``detect.sniff``), loading, the 'supported: …' messages and every listing read this registry; adding a
format is one ``register(BenchmarkFormat(...))`` in a module that is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from triage.run import Run
from triage.sources.files.common import Ctx
from triage.sources.registry import Registry

# Where a format's signature is looked for: the raw bytes; the JSON value(s) of a JSON/JSONL file; the document
# of a YAML file; the first line of a table (CSV/TSV).
Reads = Literal["bytes", "json", "yaml", "header"]
# What its parser gets: the raw bytes, the decoded text, or the parsed document(s).
Payload = Literal["bytes", "text", "document"]


@dataclass(frozen=True)
class BenchmarkFormat:
    """One file format of a load-test tool: how it is recognised and how it is read into runs."""

    id: str                                # recorded as Benchmark.format; unique
    title: str                             # the tool and file kind, as listings and messages name it
    reads: Reads
    sniff: Callable[[Any], bool]           # True when what ``reads`` names is this format
    parse: Callable[[Any, Ctx], list[Run]]
    payload: Payload = "document"
    multi_value: bool = False              # JSON: also a file of several JSON values (JSONL, --append-result),
                                           # recognised by its first; the parser always gets the list of values
    rank: int = 100                        # detection order among formats that read the same thing (lower first)
    fallback: bool = False                 # a catch-all (generic per-request tables): tried after every tool's
                                           # signature and the formats refused by name

    def __post_init__(self) -> None:
        if self.reads in ("json", "yaml") and self.payload != "document":
            raise ValueError(f"{self.id}: a {self.reads} format's parser gets the parsed document")
        if self.multi_value and self.reads != "json":
            raise ValueError(f"{self.id}: only a JSON format can hold several values")


BENCHMARK_FORMATS: Registry[BenchmarkFormat] = Registry("benchmark format")


def register(fmt: BenchmarkFormat) -> BenchmarkFormat:
    """Add a benchmark-file format (its module calls this when imported)."""
    return BENCHMARK_FORMATS.register(fmt)


def candidates(reads: Reads, *, fallback: bool = False) -> list[BenchmarkFormat]:
    """The formats whose signature is in ``reads``, in detection order."""
    found = [f for f in BENCHMARK_FORMATS.all() if f.reads == reads and f.fallback == fallback]
    return sorted(found, key=lambda f: f.rank)  # stable: equal ranks keep registration order
