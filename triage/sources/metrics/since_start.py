"""One /metrics scrape diagnosed "since the server started": counters and histograms are cumulative from zero,
gauges are the values at that instant; histograms that contradict themselves are reported, never read."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from triage.knowledge.needs import Need
from triage.sources.metrics.exposition import Labels, Snapshot
from triage.sources.metrics.snapshot_window import EngineMaps, SnapshotWindow
from triage.sources.readings import Readings

SINCE_START = "since the server started (one scrape: counters and histograms cumulative, gauges at that instant)"
CUMULATIVE = ("_total", "_bucket", "_count", "_sum")
START_NAMES = ("process_start_time_seconds",)
MAX_SPAN_S = 400 * 86400  # a process start more than ~a year before the scrape is not believed
ENGINE_PREFIX = re.compile(rb"^(?:# (?:TYPE|HELP) )?(?:vllm[:_]|sglang[:_]|tgi_)", re.MULTILINE)
SAMPLE = re.compile(rb"^[A-Za-z_:][\w:]*(?:\{[^\n]*\})? [-+\w.eE]+(?: \d+)?\s*$")
NO_START = ("not measurable from one scrape: a rate needs the time since the server started, and this scrape "
            "has no process_start_time_seconds")


def looks_like_metrics(head: bytes) -> bool:
    """Prometheus text exposition of a serving engine: most non-empty lines are comments or samples, and some
    name a vLLM, SGLang or TGI metric."""
    lines = [line for line in head.splitlines()[:400] if line.strip()]
    if len(lines) < 2 or not ENGINE_PREFIX.search(head):
        return False
    shaped = sum(line.startswith(b"#") or SAMPLE.match(line) is not None for line in lines[:-1])
    return shaped >= 0.9 * (len(lines) - 1)


@dataclass(frozen=True)
class Implausible:
    """A histogram whose own numbers contradict each other."""

    name: str
    reason: str

    def sentence(self) -> str:
        return f"implausible metrics: {self.name} {self.reason}; its numbers are not used"


def _group(samples: list[tuple[Labels, float]], drop: str = "") -> dict[frozenset, list[tuple[Labels, float]]]:
    out: dict[frozenset, list[tuple[Labels, float]]] = {}
    for labels, value in samples:
        key = frozenset((k, v) for k, v in labels.items() if k != drop)
        out.setdefault(key, []).append((labels, value))
    return out


def _check_series(name: str, buckets: list[tuple[float, float]], count: float | None,
                  total: float | None) -> str:
    buckets.sort()
    for (lo_le, lo), (hi_le, hi) in zip(buckets, buckets[1:]):
        if hi < lo:
            return f"has cumulative bucket counts that fall ({lo:g} at le={lo_le:g}, then {hi:g} at le={hi_le:g})"
    if not buckets:
        return ""
    observed = buckets[-1][1] if math.isinf(buckets[-1][0]) else count
    if count is not None and math.isinf(buckets[-1][0]) and abs(count - buckets[-1][1]) > 0.5:
        return f"has _count {count:g} but {buckets[-1][1]:g} observations in its +Inf bucket"
    if total is None or not observed:
        return ""
    if total < 0:
        return f"has a negative _sum ({total:g})"
    # Observations above a bound are at least that bound: every bucket gives a floor under the sum.
    floors = [((observed - n) * le, le, observed - n) for le, n in buckets if math.isfinite(le) and le > 0]
    if floors:
        floor, le, above = max(floors)
        if total < floor * (1 - 1e-9):
            return (f"has _sum {total:g} for {observed:g} observations, but {above:g} of them are above le={le:g}, "
                    f"so the sum is at least {floor:g}")
    finite = [(le, n) for le, n in buckets if math.isfinite(le)]
    if finite and finite[-1][1] >= observed and total > finite[-1][0] * observed * (1 + 1e-9):
        return (f"has a mean of {total / observed:g} although every observation is at most le={finite[-1][0]:g}")
    return ""


def implausible_histograms(snap: Snapshot) -> list[Implausible]:
    """Histograms whose buckets, count and sum cannot all be true (per series)."""
    found: list[Implausible] = []
    for name, samples in snap.series.items():
        if not name.endswith("_bucket"):
            continue
        base = name.removesuffix("_bucket")
        counts = {key: v for key, ((_, v), *_) in _group(snap.series.get(base + "_count", [])).items()}
        sums = {key: v for key, ((_, v), *_) in _group(snap.series.get(base + "_sum", [])).items()}
        for key, group in _group(samples, drop="le").items():
            pairs = [(float(labels["le"]), v) for labels, v in group if "le" in labels]
            reason = _check_series(base, pairs, counts.get(key), sums.get(key))
            if reason:
                found.append(Implausible(base, reason))
                break
    return found


def start_time(snap: Snapshot) -> float | None:
    for name in START_NAMES:
        values = [v for _, v in snap.series.get(name, []) if math.isfinite(v)]
        if values and 0 < snap.taken_at - min(values) <= MAX_SPAN_S:
            return min(values)
    return None


class SinceStartWindow(SnapshotWindow):
    """A SnapshotWindow over one scrape and a zero scrape at the process start: every cumulative series starts
    at 0, so a rate is the total ÷ uptime, a quantile or mean covers every observation since the start."""

    def __init__(self, snap: Snapshot, engines: EngineMaps = None, match: dict[str, str] | None = None) -> None:
        started = start_time(snap)
        zero_at = started if started is not None else snap.taken_at - 1.0
        zero = Snapshot(taken_at=zero_at, where="(server start)",
                        series={n: [(labels, 0.0) for labels, _ in s] for n, s in snap.series.items()
                                if n.endswith(CUMULATIVE)})
        super().__init__([zero, snap], engines=engines, match=match)
        self.scrape = snap
        self.started = started
        self.implausible = implausible_histograms(snap)
        self.label = SINCE_START

    def read(self, needs: list[Need]) -> Readings:
        out = super().read(needs)
        bad = {i.name: i for i in self.implausible}
        out.errors += [i.sentence() for i in self.implausible]
        for need in needs:
            resolved = self.resolve(need)
            name = resolved if isinstance(resolved, str) else resolved.name
            if name in bad and need.kind in ("quantile", "hist_mean", "rate"):
                out.values[need], out.missing[need] = None, bad[name].sentence()
            elif need.kind == "rate" and self.started is None and out.values.get(need) is not None:
                out.values[need], out.missing[need] = None, NO_START
        if self.started is None:
            out.window_seconds = 0.0
        return out


def since_start_snapshot(snap: Snapshot, taken_at: float) -> Snapshot:
    """The scrape placed at ``taken_at`` (a file's modification time, or now for a paste)."""
    return replace(snap, taken_at=taken_at)
