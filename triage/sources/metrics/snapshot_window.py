"""A MetricWindow over /metrics scrapes held in memory: rates, PromQL-exact quantiles, gauges, a ring buffer."""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from triage.errors import TriageError
from triage.knowledge.engines import (
    ADDON_IDS,
    SERVING_ORDER,
    EngineSpec,
    MetricSpec,
    detect_engines,
    load_engines,
)
from triage.knowledge.needs import Need, SeriesPoint
from triage.sources.metrics.exposition import Labels, Snapshot, present_names
from triage.sources.readings import Readings

# Gauges in these units are fractions or percentages: across series (engines, ranks, GPUs) the window takes the
# MAX (the fullest KV cache, the busiest GPU) because a sum of ratios means nothing. Other gauges (requests,
# MiB) are SUMMED across series, e.g. the requests running on all data-parallel engines.
MAX_UNITS = frozenset({"ratio", "%"})
KIND_TYPES = {
    "rate": ("counter", "histogram"),
    "quantile": ("histogram",),
    "hist_mean": ("histogram",),
    "gauge_mean": ("gauge",),
    "gauge_max": ("gauge",),
    "gauge_last": ("gauge",),
    "info": ("info", "gauge"),
}
PAIR_KINDS = frozenset({"rate", "quantile", "hist_mean"})
LABEL_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ONE_SCRAPE = "only one scrape: rates need two"
NO_OBSERVATIONS = "no observations in this window"
EngineMaps = Mapping[str, EngineSpec] | Iterable[EngineSpec] | None


@dataclass(frozen=True)
class Resolved:
    """A need tied to the engine that answers it, the metric spec and the exposed name found."""

    engine: EngineSpec
    spec: MetricSpec
    name: str
    match: dict[str, str]


# ---------------------------------------------------------------- shared with prometheus_window


def engine_maps(engines: EngineMaps) -> dict[str, EngineSpec]:
    """The engine maps to detect among: a dict by id, any iterable of specs, or None for tree/engines/*.yaml."""
    if engines is None:
        return load_engines()
    if isinstance(engines, Mapping):
        return dict(engines)
    return {e.id: e for e in engines}


def check_match(match: Mapping[str, str] | None) -> dict[str, str]:
    """Validate a label filter such as {"model_name": "x"}."""
    match = dict(match or {})
    for name, value in match.items():
        if not LABEL_RE.match(str(name)):
            raise TriageError(f"'{name}' is not a valid label name", key="match")
        if not isinstance(value, str):
            raise TriageError(f"label {name} must be matched by a string, got {value!r}", key="match")
    return match


def pick_engines(present: set[str], engines: dict[str, EngineSpec],
                 engine: str | None = None) -> tuple[EngineSpec, list[EngineSpec]]:
    """The serving engine (forced by id, else the detected one exposing the most keys; a detected router when no
    engine is) and detected add-ons."""
    found = detect_engines(present, engines)
    addons = [e for e in found if e.id in ADDON_IDS or e.role == "addon"]
    if engine:
        if engine not in engines:
            raise TriageError(f"unknown engine '{engine}' (known: {', '.join(sorted(engines))})", key="engine")
        return engines[engine], [a for a in addons if a.id != engine]
    routers = [e for e in found if e.role == "router"]
    serving = [e for e in found
               if e.id not in ADDON_IDS and e.role == "serving" and not _only_router_names(e, routers, present)]
    if not serving:
        # a router's scrape alone (its per-worker series: `diagnose --by worker` compares the workers) is read by
        # the router's own map; beside an engine's series the engine is read
        serving = routers
    if not serving:
        raise TriageError(f"no {serving_titles(engines)} metrics in this window")
    serving.sort(key=lambda e: (-_coverage(e, present), _order(e.id)))
    return serving[0], addons


def _only_router_names(engine: EngineSpec, routers: list[EngineSpec], present: set[str]) -> bool:
    """Whether every detection name of ``engine`` present here is one a detected router's map also reads: the vLLM
    production-stack router re-exports vllm:num_requests_running / _waiting per backend (label server), so its
    scrape alone looks like a vLLM engine's."""
    claimed = {c for r in routers for m in r.metrics for c in r.candidates(m.key)}
    seen = [p + d for d in engine.detect for p in engine.prefixes if p + d in present]
    return bool(routers) and all(name in claimed for name in seen)


def serving_titles(engines: dict[str, EngineSpec]) -> str:
    """"vLLM, SGLang or TGI": the serving engines the maps know, for messages."""
    titles = [e.title for e in sorted(engines.values(), key=lambda e: _order(e.id))
              if e.id not in ADDON_IDS and e.role == "serving"]
    return ", ".join(titles[:-1]) + f" or {titles[-1]}" if len(titles) > 1 else "".join(titles) or "engine"


def _coverage(engine: EngineSpec, present: set[str]) -> int:
    return sum(engine.resolve(m.key, present) is not None for m in engine.metrics)


def _order(engine_id: str) -> int:
    return SERVING_ORDER.index(engine_id) if engine_id in SERVING_ORDER else len(SERVING_ORDER)


def resolve_need(need: Need, serving: EngineSpec, addons: list[EngineSpec], engines: dict[str, EngineSpec],
                 present: set[str], match: dict[str, str]) -> Resolved | str:
    """Resolve a need to an exposed name, or return the sentence saying why it cannot be answered."""
    engine_id = need.engine or serving.id
    if engine_id not in engines:
        return f"unknown engine '{engine_id}'"
    engine = engines[engine_id]
    spec = engine.metric(need.key)
    if spec is None:
        return f"{engine.title} has no metric for '{need.key}'"
    if spec.type not in KIND_TYPES[need.kind]:
        return f"'{need.key}' is a {spec.type} in the {engine.title} map; '{need.kind}' does not apply to it"
    detected = engine_id == serving.id or any(a.id == engine_id for a in addons)
    name = engine.resolve(need.key, present) if detected else None
    if name is None:
        return spec.missing.en
    return Resolved(engine, spec, name, {**match_for(engine, serving, match), **spec.select})


def match_for(engine: EngineSpec, serving: EngineSpec, match: dict[str, str]) -> dict[str, str]:
    """The serving engine gets the whole filter; an add-on (DCGM) only the labels its map lists."""
    if engine.id == serving.id:
        return match
    return {k: v for k, v in match.items() if k in engine.labels}


def gauge_agg(spec: MetricSpec) -> str:
    """``max`` for ratios and percentages, ``sum`` for counts and sizes (see MAX_UNITS)."""
    return "max" if spec.unit in MAX_UNITS else "sum"


SUBQUERY_POINTS = 1000  # gauge mean/max sample the aggregated gauge at window/1000 ...
MIN_SUBQUERY_STEP = 15  # ... but no finer than a typical scrape interval: finer steps only repeat samples
OVER_TIME = {"gauge_mean": "avg_over_time", "gauge_max": "max_over_time"}


def gauge_over_window(kind: str, aggregated: str, range_s: int) -> str:
    """PromQL for a gauge_mean or gauge_max need: ``aggregated`` (the gauge summed or maxed over its series)
    sampled by a subquery over the ``range_s`` window, so the window's diagnosis and the alert rules agree."""
    step = max(MIN_SUBQUERY_STEP, math.ceil(range_s / SUBQUERY_POINTS))
    return f"{OVER_TIME[kind]}(({aggregated})[{range_s}s:{step}s])"


def in_seconds(need: Need, r: Resolved, value: float | dict[str, str] | None, why: str) -> Answer:
    """A histogram's quantile or mean in seconds when its map observes in another time unit (engines.SECONDS_PER):
    ``histogram_quantile`` scales with its bounds, a mean with its sum."""
    factor = r.spec.to_seconds
    if factor != 1.0 and need.kind in ("quantile", "hist_mean") and isinstance(value, float | int):
        return float(value) * factor, why
    return value, why


def need_label(need: Need) -> str:
    q = f" q={need.q:g}" if need.q is not None else ""
    engine = f"{need.engine}:" if need.engine else ""
    by = f" by {need.by}" if need.by else ""
    return f"{need.kind} {engine}{need.key}{q}{by}"


def bucket_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float:
    """PromQL ``histogram_quantile`` on (upper bound, cumulative count) pairs, rule for rule (NaN = no answer)."""
    return prepared_quantile(q, prepare_buckets(buckets))


def prepare_buckets(buckets: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The pairs as ``histogram_quantile`` reads them: sorted by bound, equal bounds summed, counts made
    monotonic. Prepare once, then ask ``prepared_quantile`` for several quantiles."""
    return _monotonic(_coalesce(sorted(buckets)))


def prepared_quantile(q: float, merged: list[tuple[float, float]]) -> float:
    """``bucket_quantile`` of buckets already made by ``prepare_buckets``."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    if len(merged) < 2 or not math.isinf(merged[-1][0]):
        return math.nan
    observations = merged[-1][1]
    if observations == 0:
        return math.nan
    rank = q * observations
    b = next((i for i in range(len(merged) - 1) if merged[i][1] >= rank), len(merged) - 1)
    if b == len(merged) - 1:
        return merged[-2][0]  # the rank falls in the +Inf bucket: answer the highest finite bound
    if b == 0 and merged[0][0] <= 0:
        return merged[0][0]
    start, end, count = 0.0, merged[b][0], merged[b][1]
    if b > 0:
        start, count, rank = merged[b - 1][0], count - merged[b - 1][1], rank - merged[b - 1][1]
    return start + (end - start) * (rank / count)


def _coalesce(buckets: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for upper, count in buckets:
        if out and out[-1][0] == upper:
            out[-1] = (upper, out[-1][1] + count)
        else:
            out.append((upper, count))
    return out


def _monotonic(buckets: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out, top = [], -math.inf
    for upper, count in buckets:
        top = max(top, count)
        out.append((upper, top))
    return out


def selector(name: str, match: Mapping[str, str], among: Mapping[str, Iterable[str]] | None = None) -> str:
    """``name{k="v",…}`` with PromQL string escaping; ``among``: label → the values it may take (``k=~"a|b"``)."""
    inner = [f'{k}="{_escape(v)}"' for k, v in sorted(match.items())]
    inner += [f'{k}=~"{_escape("|".join(re.escape(v) for v in sorted(set(values))))}"'
              for k, values in sorted((among or {}).items())]
    return f"{name}{{{','.join(inner)}}}" if inner else name


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# ---------------------------------------------------------------- arithmetic over snapshots


def _matches(labels: Labels, match: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in match.items())


def _samples(snap: Snapshot, name: str, match: Mapping[str, str]) -> list[tuple[Labels, float]]:
    samples = snap.series.get(name, [])
    if not match:  # the common case (one engine per scrape): no per-sample label test
        return samples
    return [(labels, v) for labels, v in samples if _matches(labels, match)]


def _increases(snaps: list[Snapshot], name: str, match: Mapping[str, str],
               group: str | None = None) -> dict[str, float]:
    """Counter increase per value of label ``group`` (all series under "" when None), PromQL reset rule:
    a drop means the counter restarted, so the later value is the increase."""
    history: dict[frozenset, list[float]] = {}
    for snap in snaps:
        for key, (labels, value) in zip(snap.series_keys(name), snap.series.get(name, []), strict=True):
            if not match or _matches(labels, match):
                history.setdefault(key, []).append(value)
    totals: dict[str, float] = {}
    for key, values in history.items():
        if len(values) < 2:
            continue  # a series seen once adds nothing (as in PromQL)
        inc = sum(b - a if b >= a else b for a, b in zip(values, values[1:]))
        label = dict(key).get(group, "") if group else ""
        totals[label] = totals.get(label, 0.0) + inc
    return totals


def _span(snaps: list[Snapshot]) -> float:
    return snaps[-1].taken_at - snaps[0].taken_at


def _series_seen(snaps: list[Snapshot], name: str, match: Mapping[str, str]) -> bool:
    return any(_matches(labels, match) for s in snaps for labels, _ in s.series.get(name, []))


def _no_series(name: str, match: Mapping[str, str]) -> str:
    return f"no series {selector(name, match)} in these scrapes"


Answer = tuple[float | dict[str, str] | None, str]


def _pair_answer(need: Need, r: Resolved, snaps: list[Snapshot]) -> Answer:
    if len(snaps) < 2:
        return None, ONE_SCRAPE
    if _span(snaps) <= 0:
        return None, "the scrapes have the same timestamp: rates need time between them"
    if need.kind == "rate":
        name = r.name + "_count" if r.spec.type == "histogram" else r.name
        if not _series_seen(snaps, name, r.match):
            return None, _no_series(name, r.match)
        if need.by:  # per value of the label, as text (a breakdown the evidence lists)
            return {k: repr(v / _span(snaps)) for k, v in _increases(snaps, name, r.match, group=need.by).items()}, ""
        return sum(_increases(snaps, name, r.match).values()) / _span(snaps), ""
    if not _series_seen(snaps, r.name + "_bucket", r.match):
        return None, _no_series(r.name + "_bucket", r.match)
    if need.kind == "quantile":
        return _quantile(need, r, snaps)
    count = sum(_increases(snaps, r.name + "_count", r.match).values())
    if count <= 0:
        return None, NO_OBSERVATIONS
    return sum(_increases(snaps, r.name + "_sum", r.match).values()) / count, ""


def _quantile(need: Need, r: Resolved, snaps: list[Snapshot]) -> Answer:
    if need.q is None:
        return None, "a quantile need has no q"
    deltas = _increases(snaps, r.name + "_bucket", r.match, group="le")
    value = bucket_quantile(need.q, [(float(le), n) for le, n in deltas.items()])
    return (None, NO_OBSERVATIONS) if math.isnan(value) else (value, "")


def _gauge_values(r: Resolved, snaps: list[Snapshot]) -> list[float]:
    """One value per snapshot that has the gauge: sum or max across series (see MAX_UNITS)."""
    agg = max if gauge_agg(r.spec) == "max" else sum
    values = []
    for snap in snaps:
        vals = [v for _, v in _samples(snap, r.name, r.match) if not math.isnan(v)]
        if vals:
            values.append(float(agg(vals)))
    return values


def _gauge_answer(need: Need, r: Resolved, snaps: list[Snapshot]) -> Answer:
    values = _gauge_values(r, snaps)
    if not values:
        return None, _no_series(r.name, r.match)
    if need.kind == "gauge_mean":
        return float(np.mean(values)), ""
    if need.kind == "gauge_max":
        return max(values), ""
    return values[-1], ""


def _info_answer(r: Resolved, snaps: list[Snapshot]) -> Answer:
    for snap in reversed(snaps):
        samples = _samples(snap, r.name, r.match)
        if samples:
            return dict(samples[0][0]), ""
    return None, _no_series(r.name, r.match)


def answer(need: Need, r: Resolved, snaps: list[Snapshot]) -> Answer:
    """The value of one need over these snapshots, or None and why."""
    if need.kind in PAIR_KINDS:
        return in_seconds(need, r, *_pair_answer(need, r, snaps))
    if need.kind == "info":
        return _info_answer(r, snaps)
    return _gauge_answer(need, r, snaps)


# ---------------------------------------------------------------- the window


class SnapshotWindow:
    """MetricWindow over in-memory scrapes: counters and histograms from first to last (resets handled over
    every consecutive pair), gauges over every snapshot; no extrapolation, Δt is the exact scrape span."""

    def __init__(self, snapshots: list[Snapshot], engines: EngineMaps = None, match: dict[str, str] | None = None,
                 engine: str | None = None) -> None:
        if not snapshots:
            raise TriageError("no scrapes in this window")
        self.snapshots = sorted(snapshots, key=lambda s: s.taken_at)
        self.match = check_match(match)
        self.engines = engine_maps(engines)
        self.present: set[str] = set().union(*(present_names(s) for s in self.snapshots))
        self.engine, self.addons = pick_engines(self.present, self.engines, engine)
        self.window_seconds = _span(self.snapshots)

    def resolve(self, need: Need) -> Resolved | str:
        return resolve_need(need, self.engine, self.addons, self.engines, self.present, self.match)

    def read(self, needs: list[Need]) -> Readings:
        out = Readings(window_seconds=self.window_seconds)
        for need in needs:
            r = self.resolve(need)
            value, why = (None, r) if isinstance(r, str) else answer(need, r, self.snapshots)
            out.values[need] = value
            if value is None:
                out.missing[need] = why
        return out

    def series(self, needs: list[Need], points: int = 60) -> dict[Need, list[SeriesPoint]]:
        """Per need, one point per consecutive snapshot pair (rates, quantiles) or per snapshot (gauges),
        thinned to at most ``points`` evenly spaced snapshots; info needs get no points."""
        picks = _pick(len(self.snapshots), points)
        out: dict[Need, list[SeriesPoint]] = {}
        for need in needs:
            r = self.resolve(need)
            out[need] = [] if isinstance(r, str) or need.kind == "info" else self._points(need, r, picks)
        return out

    def _points(self, need: Need, r: Resolved, picks: list[int]) -> list[SeriesPoint]:
        if need.kind in PAIR_KINDS:
            spans = [(a, b) for a, b in zip(picks, picks[1:])]
        else:
            spans = [(b, b) for b in picks]
        points = []
        for a, b in spans:
            value, _ = answer(need, r, self.snapshots[a:b + 1])
            if isinstance(value, float | int):
                points.append(SeriesPoint(t=self.snapshots[b].taken_at, value=float(value)))
        return points


def _pick(n: int, points: int) -> list[int]:
    """At most points + 1 evenly spaced indices of n snapshots, always keeping the first and the last."""
    if n <= points + 1:
        return list(range(n))
    return sorted({int(round(i)) for i in np.linspace(0, n - 1, max(points, 1) + 1)})


class ScrapeBuffer:
    """The last ``capacity`` snapshots (a bounded ring); ``window(seconds)`` views the recent ones."""

    def __init__(self, capacity: int) -> None:
        if capacity < 2:
            raise TriageError(f"a scrape buffer needs room for at least 2 scrapes, got {capacity}", key="capacity")
        self._ring: deque[Snapshot] = deque(maxlen=capacity)

    def add(self, snapshot: Snapshot) -> None:
        self._ring.append(snapshot)

    def __len__(self) -> int:
        return len(self._ring)

    @property
    def capacity(self) -> int:
        return self._ring.maxlen or 0

    @property
    def snapshots(self) -> list[Snapshot]:
        return list(self._ring)

    def clear(self) -> None:
        self._ring.clear()

    def window(self, seconds: float, **kwargs) -> SnapshotWindow:
        """Snapshots taken within ``seconds`` of the newest one; kwargs go to SnapshotWindow (engines, match)."""
        if not self._ring:
            raise TriageError("no scrapes yet")
        newest = max(s.taken_at for s in self._ring)
        return SnapshotWindow([s for s in self._ring if s.taken_at >= newest - seconds], **kwargs)
