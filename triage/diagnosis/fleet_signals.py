"""Fleet signals: one value for every replica of a window, from the replicas' own signals by the fleet recipes of
tree/signals.yaml (a straggler against its peers, load spread across replicas, the share that is saturated).

Fewer than two replicas measuring what a recipe reads leaves the signal absent (not measurable): one replica is no
fleet, and a spread or a share over it would read as an even, healthy one."""

from __future__ import annotations

import math
import operator
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from triage.diagnosis.signals import SignalSet
from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.messages import Msg
from triage.knowledge.model import Condition, FleetRecipe, PeerRatio
from triage.knowledge.units import plain

OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq}
PEER_LABEL = "model_name"  # peers are the replicas serving the same model, when the groups carry the label
MAX_NAMED = 5  # replicas named in a share's provenance


@dataclass(frozen=True)
class Replica:
    """One group of a fleet window: its labels and the signals its own diagnosis computed."""

    labels: dict[str, str]
    signals: SignalSet


def _label_text(labels: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in labels.items())


def who(labels: dict[str, str]) -> str | Msg:
    return _label_text(labels) or Msg("fleet.whole_window")


def _num(value: float) -> str:
    return plain(value)


def _value(r: Replica, name: str) -> float | None:
    sig = r.signals.get(name)
    if sig is None or isinstance(sig.value, bool):
        return None
    return float(sig.value)


def _measured(replicas: Sequence[Replica], name: str) -> list[tuple[Replica, float]]:
    return [(r, v) for r in replicas if (v := _value(r, name)) is not None]


def _peers(replicas: Sequence[Replica], r: Replica, name: str) -> list[float]:
    """The other replicas' values of ``name``: those of the same model when the groups carry model_name."""
    model = r.labels.get(PEER_LABEL)
    return [v for other, v in _measured(replicas, name)
            if other is not r and (model is None or other.labels.get(PEER_LABEL) == model)]


def _peer_ratio(replicas: Sequence[Replica], r: Replica, name: str) -> tuple[float, float] | None:
    """(this replica's ``name`` ÷ its peers' median, that median), None without a peer or a positive median."""
    own, peers = _value(r, name), _peers(replicas, r, name)
    if own is None or not peers or median(peers) <= 0:
        return None
    return own / median(peers), median(peers)


def _largest(replicas: Sequence[Replica], name: str) -> tuple[float, Msg | None]:
    vals = _measured(replicas, name)
    if len(vals) < 2:
        return float("nan"), None
    r, v = max(vals, key=lambda rv: rv[1])
    return v, Msg("fleet.largest", s=name, who=who(r.labels), n=len(vals))


def _spread(replicas: Sequence[Replica], name: str) -> tuple[float, Msg | None]:
    vals = _measured(replicas, name)
    if len(vals) < 2:
        return float("nan"), None
    (hi, top), (lo, bottom) = max(vals, key=lambda rv: rv[1]), min(vals, key=lambda rv: rv[1])
    if top == bottom:
        return 0.0, Msg("fleet.spread_even", s=name, v=_num(top), n=len(vals))
    return top - bottom, Msg("fleet.spread", s=name, who=who(hi.labels), v=_num(top), who2=who(lo.labels),
                             v2=_num(bottom), n=len(vals))


def _max_over_median(replicas: Sequence[Replica], name: str) -> tuple[float, Msg | None]:
    vals = _measured(replicas, name)
    if len(vals) < 2 or median(v for _, v in vals) <= 0:
        return float("nan"), None
    r, top = max(vals, key=lambda rv: rv[1])
    mid = median(v for _, v in vals)
    # how the busiest replica measured it: a router's requests per worker are routed (vLLM / SGLang router) or
    # finished (production-stack) requests, and the evidence says which
    sig = r.signals.get(name)
    how: Msg | str = sig.source if sig is not None else ""
    return top / mid, Msg("fleet.max_over_median", s=name, who=who(r.labels), v=_num(top), how=how, n=len(vals),
                          m=_num(mid))


def holds_any(conds: Sequence[Condition], r: Replica) -> bool | None:
    """Whether any condition holds on the replica; None when it measures none of their signals."""
    results = [OPS[c.op](v, float(c.value or 0)) for c in conds if (v := _value(r, c.signal)) is not None]
    return any(results) if results else None


def _share(replicas: Sequence[Replica], conds: Sequence[Condition]) -> tuple[float, Msg | None]:
    judged = [(r, h) for r in replicas if (h := holds_any(conds, r)) is not None]
    if len(judged) < 2:
        return float("nan"), None
    hit = [r.labels for r, h in judged if h]
    # a replica without labels ("the whole window") cannot be one of two judged: the names are label texts
    named: str | Msg = "; ".join(_label_text(labels) for labels in hit[:MAX_NAMED])
    if len(hit) > MAX_NAMED:
        named = Msg("fleet.more", names=named, n=len(hit) - MAX_NAMED)
    rules = [f"{c.signal} {c.op} {_num(float(c.value or 0))}" for c in conds]
    rule: str | Msg = rules[0]
    for more in rules[1:]:
        rule = Msg("fleet.either", a=rule, b=more)
    if not hit:
        return 0.0, Msg("fleet.share", k=0, n=len(judged), rule=rule)
    return len(hit) / len(judged), Msg("fleet.share_named", k=len(hit), n=len(judged), rule=rule, names=named)


def _with_traffic(replicas: Sequence[Replica], spec: PeerRatio) -> list[Replica]:
    """The replicas a peer comparison counts: all of them, or those whose guard signal reaches its minimum."""
    guard = spec.guard
    if guard is None:
        return list(replicas)
    return [r for r in replicas if (v := _value(r, guard.signal)) is not None and v >= guard.min]


def _median_without(pool: list[float], i: int) -> float | None:
    """``statistics.median`` of the sorted ``pool`` without its ``i``-th value (None when nothing is left)."""
    n = len(pool) - 1
    if n < 1:
        return None
    half = n // 2
    def at(j: int) -> float:
        return pool[j if j < i else j + 1]
    return at(half) if n % 2 else (at(half - 1) + at(half)) / 2


def _peer_ratios(replicas: Sequence[Replica], name: str) -> dict[int, tuple[float, float, int]]:
    """``_peer_ratio`` of every replica measuring ``name`` (by id), with its peers' count, from one sorted pool of
    values per model instead of a scan of the fleet per replica (200 replicas: 160,000 signal look-ups)."""
    measured = _measured(replicas, name)
    if not all(math.isfinite(v) for _, v in measured):  # (put refuses them) an order-free pool needs numbers
        return {id(r): (*pr, len(_peers(replicas, r, name))) for r, _ in measured
                if (pr := _peer_ratio(replicas, r, name)) is not None}
    pools: dict[str | None, list[float]] = {None: [v for _, v in measured]}
    for r, v in measured:
        if (model := r.labels.get(PEER_LABEL)) is not None:
            pools.setdefault(model, []).append(v)
    for pool in pools.values():
        pool.sort()
    out = {}
    for r, v in measured:
        pool = pools[r.labels.get(PEER_LABEL)]
        mid = _median_without(pool, bisect_left(pool, v))
        if mid is not None and mid > 0:
            out[id(r)] = (v / mid, mid, len(pool) - 1)
    return out


def _straggler(replicas: Sequence[Replica], spec: PeerRatio) -> tuple[float, Msg | None]:
    """The peer ratio of ``spec.signal``: the largest over replicas, or at the replica furthest above its peers on
    any of ``spec.at``; with a guard, over the replicas with enough traffic only."""
    replicas = _with_traffic(replicas, spec)
    ratios = {name: _peer_ratios(replicas, name) for name in (spec.signal, *spec.at)}
    if not spec.at:
        found = [(r, pr) for r in replicas if (pr := ratios[spec.signal].get(id(r))) is not None]
        if not found:
            return float("nan"), None
        r, (ratio, mid, peers) = max(found, key=lambda x: x[1][0])
        return ratio, Msg("fleet.straggler", s=spec.signal, who=who(r.labels), v=_num(ratio * mid), n=peers,
                          m=_num(mid))
    worst: tuple[float, Replica, str] | None = None
    for r in replicas:
        for name in spec.at:
            pr = ratios[name].get(id(r))
            if pr is not None and (worst is None or pr[0] > worst[0]):
                worst = (pr[0], r, name)
    if worst is None:
        return float("nan"), None
    _, r, name = worst
    found_pr = ratios[spec.signal].get(id(r))
    if found_pr is None:
        return float("nan"), None
    ratio, mid, peers = found_pr
    return ratio, Msg("fleet.straggler_at", s=spec.signal, who=who(r.labels), v=_num(ratio * mid), at=name,
                      n=peers, m=_num(mid))


def compute(recipe: FleetRecipe, replicas: Sequence[Replica]) -> tuple[float, Msg | None]:
    """(value, how it was measured) of one fleet recipe; NaN when fewer than two replicas measure it."""
    if recipe.max is not None:
        return _largest(replicas, recipe.max)
    if recipe.spread is not None:
        return _spread(replicas, recipe.spread)
    if recipe.max_over_median is not None:
        return _max_over_median(replicas, recipe.max_over_median)
    if recipe.share is not None:
        return _share(replicas, recipe.share)
    assert recipe.peer_ratio is not None
    return _straggler(replicas, recipe.peer_ratio)


def fleet_signals(kb: KnowledgeBase, replicas: Sequence[Replica]) -> SignalSet:
    """Every fleet signal the replicas measure (kind ``fleet``: judged under the fleet symptoms only)."""
    out = SignalSet("fleet")
    for name, sig in kb.signals.items():
        if sig.fleet is not None:
            value, source = compute(sig.fleet, replicas)
            if source is not None:
                out.put(kb, name, value, source)
    return out
