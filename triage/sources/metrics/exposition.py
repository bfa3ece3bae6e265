"""Parse Prometheus /metrics text into a timestamped Snapshot of samples keyed by exposed sample name."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

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


def parse_metrics_text(text: str, taken_at: float, where: str) -> Snapshot:
    """Parse Prometheus text exposition; any syntax problem becomes a TriageError naming ``where`` and the line."""
    if not text or not text.strip():
        raise TriageError("the metrics text is empty", where=where)
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise _syntax_error(text, where, exc) from None
    snap = Snapshot(taken_at=taken_at, where=where)
    for family in families:
        _add_family(snap, family)
    _drop_created(snap)
    return snap


def snapshot_from_families(families: Iterable, taken_at: float, where: str) -> Snapshot:
    """The Snapshot ``parse_metrics_text`` would give for these families rendered as text, without the
    text round trip (an in-process simulator's history is built from its families directly)."""
    snap = Snapshot(taken_at=taken_at, where=where)
    for family in families:
        _add_family(snap, family)
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


def _add_family(snap: Snapshot, family) -> None:
    kind = family.type
    for sample in family.samples:
        name = sample.name
        if name.endswith("_created") and kind in ("counter", "histogram", "summary", "gaugehistogram"):
            continue  # creation timestamps, not values
        snap.series.setdefault(name, []).append((dict(sample.labels), float(sample.value)))


def _drop_created(snap: Snapshot) -> None:
    """``X_created`` next to ``X_total`` or ``X_count`` is a creation timestamp (untyped when TYPE names X_total)."""
    for name in [n for n in snap.series if n.endswith("_created")]:
        base = name.removesuffix("_created")
        if base + "_total" in snap.series or base + "_count" in snap.series:
            del snap.series[name]


def _syntax_error(text: str, where: str, exc: Exception) -> TriageError:
    """Find the first line the parser rejects on its own, so the message can point at it."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            list(text_string_to_metric_families(line + "\n"))
        except (ValueError, TypeError, IndexError, KeyError):
            shown = line if len(line) <= MAX_LINE_SHOWN else line[:MAX_LINE_SHOWN] + "…"
            return TriageError(f"not Prometheus metrics text: cannot parse `{shown}` ({exc})", where=where,
                               key=f"line {number}")
    return TriageError(f"not Prometheus metrics text ({exc})", where=where)
