"""Parse Prometheus /metrics text into a timestamped Snapshot of samples keyed by exposed sample name."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from triage.errors import TriageError

Labels = dict[str, str]
MAX_LINE_SHOWN = 120


@dataclass
class Snapshot:
    """One scrape: ``series`` maps a sample name (``_total``, ``_bucket``, ``_sum``, ``_count`` kept) to its
    (labels, value) pairs; ``where`` is the URL or file it came from."""

    taken_at: float
    series: dict[str, list[tuple[Labels, float]]] = field(default_factory=dict)
    where: str = ""
    _keys: dict[str, list[frozenset[tuple[str, str]]]] = field(default_factory=dict, init=False, repr=False,
                                                               compare=False)

    def series_keys(self, name: str) -> list[frozenset[tuple[str, str]]]:
        """Each sample's labels as a hashable key, in ``series[name]`` order.

        Built once per name: a scrape kept in a ring buffer is read by every refresh of every viewer, and
        hashing its labels again each time was most of a Live refresh's CPU."""
        keys = self._keys.get(name)
        if keys is None:
            keys = self._keys[name] = [frozenset(labels.items()) for labels, _ in self.series.get(name, [])]
        return keys


def parse_metrics_text(text: str, taken_at: float, where: str, quote_lines: bool = True,
                       answered: str = "") -> Snapshot:
    """Parse Prometheus text exposition; any syntax problem becomes a TriageError naming ``where`` and the line.

    Values are checked as Prometheus would: ``le``/``quantile`` labels must be numbers, counters, buckets and
    counts non-negative, and a series may appear only once. With ``quote_lines=False`` (an answer fetched from
    a URL) messages name line numbers and series counts, never the text itself; ``answered`` (status, content
    type, size) prefixes them."""
    prefix = f"{answered}: " if answered else ""
    if not text or not text.strip():
        raise TriageError(f"{prefix}the metrics text is empty", where=where)
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError, KeyError, AttributeError) as exc:
        raise _syntax_error(text, where, exc, quote_lines, prefix) from None
    snap = Snapshot(taken_at=taken_at, where=where)
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for family in families:
        _add_family(snap, family, seen, quote_lines, prefix)
    _drop_created(snap)
    return snap


def snapshot_from_families(families: Iterable, taken_at: float, where: str) -> Snapshot:
    """The Snapshot ``parse_metrics_text`` would give for these families rendered as text, without the
    text round trip (an in-process simulator's history is built from its families directly)."""
    snap = Snapshot(taken_at=taken_at, where=where)
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for family in families:
        _add_family(snap, family, seen, True, "")
    _drop_created(snap)
    return snap


def present_names(snapshot: Snapshot) -> set[str]:
    """Every sample name, plus the base name of each histogram (``X`` for ``X_bucket{le=…}``).

    Counters keep their exposed ``_total``; gauges and untyped samples are as exposed."""
    names = set(snapshot.series)
    for name, samples in snapshot.series.items():
        if name.endswith("_bucket") and any("le" in labels for labels, _ in samples):
            names.add(name.removesuffix("_bucket"))
    return names


def _add_family(snap: Snapshot, family: Any, seen: set, quote_lines: bool, prefix: str) -> None:
    kind = family.type
    for sample in family.samples:
        name = sample.name
        if name.endswith("_created") and kind in ("counter", "histogram", "summary", "gaugehistogram"):
            continue  # creation timestamps, not values
        labels = dict(sample.labels)
        value = float(sample.value)
        shown = _series_text(name, labels) if quote_lines else "a series"
        for numeric in ("le", "quantile"):
            applies = name.endswith("_bucket") if numeric == "le" else kind == "summary"
            if numeric in labels and applies and not _is_number(labels[numeric]):
                raise TriageError(f"{prefix}{shown}: the {numeric} label must be a number"
                                  + (f", got '{labels[numeric][:40]}'" if quote_lines else ""), where=snap.where)
        if _never_negative(name, kind) and not value >= 0:
            raise TriageError(f"{prefix}{shown}: a counter, bucket or count must be a non-negative number"
                              + (f", got {value:g}" if quote_lines else ""), where=snap.where)
        key = (name, tuple(sorted(labels.items())))
        if key in seen:
            raise TriageError(f"{prefix}{shown} appears twice in one exposition; Prometheus would reject this "
                              "scrape", where=snap.where)
        seen.add(key)
        snap.series.setdefault(name, []).append((labels, value))


def _is_number(text: str) -> bool:
    try:
        return not math.isnan(float(text))
    except ValueError:
        return False


def _never_negative(name: str, kind: str) -> bool:
    """Counters (typed, or untyped ``_total``), histogram/summary ``_bucket`` and ``_count``."""
    if kind == "counter":
        return True
    if kind in ("histogram", "gaugehistogram", "summary"):
        return name.endswith(("_bucket", "_count"))
    return kind in ("unknown", "untyped") and name.endswith("_total")


def _series_text(name: str, labels: Labels) -> str:
    inner = ",".join(f'{k}="{v[:40]}"' for k, v in sorted(labels.items()))
    text = f"{name}{{{inner}}}" if inner else name
    return f"`{text[:MAX_LINE_SHOWN]}`"


def _drop_created(snap: Snapshot) -> None:
    """``X_created`` next to ``X_total`` or ``X_count`` is a creation timestamp (untyped when TYPE names X_total)."""
    for name in [n for n in snap.series if n.endswith("_created")]:
        base = name.removesuffix("_created")
        if base + "_total" in snap.series or base + "_count" in snap.series:
            del snap.series[name]


def _syntax_error(text: str, where: str, exc: Exception, quote_lines: bool = True, prefix: str = "") -> TriageError:
    """Find the first line the parser rejects on its own, so the message can point at it."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            list(text_string_to_metric_families(line + "\n"))
        except (ValueError, TypeError, IndexError, KeyError, AttributeError):
            if not quote_lines:
                return TriageError(f"{prefix}not Prometheus metrics text (line {number} cannot be parsed)",
                                   where=where)
            shown = line if len(line) <= MAX_LINE_SHOWN else line[:MAX_LINE_SHOWN] + "…"
            return TriageError(f"not Prometheus metrics text: cannot parse `{shown}` ({exc})", where=where,
                               key=f"line {number}")
    if not quote_lines:
        return TriageError(f"{prefix}not Prometheus metrics text", where=where)
    return TriageError(f"not Prometheus metrics text ({exc})", where=where)
