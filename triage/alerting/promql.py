"""Signal recipes (tree/signals.yaml) compiled to PromQL grouped by replica, for every engine map at once.

One expression per signal covers vLLM (current and older names, ``vllm:`` and ``vllm_``), SGLang and TGI: each
engine's candidate names are joined with ``or``, which keeps, per replica, the first that has series.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from triage.knowledge.engines import EngineSpec, MetricSpec, serving_engines
from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.model import NeedRef, PeerRatio, Recipe
from triage.knowledge.replicas import CARRIER_KEY, duration_seconds, record_name
from triage.sources.metrics.snapshot_window import (
    OVER_TIME,
    gauge_agg,
    gauge_over_window,
    selector,
)

# server signals computed from tree/models.yaml and tree/gpus.yaml (model_name / DCGM modelName labels looked up in
# tables): no PromQL can give them, so the rule export treats them as not measurable
MODEL_TABLE_SIGNALS = frozenset({"decode_gb_per_step", "tpot_over_roofline"})
PEER_RATIO_LEAST = 3  # replicas a fleet needs before PromQL's median (which counts the replica) stands for its peers'


@dataclass(frozen=True)
class Compiler:
    """Compiles recipes for a window and a grouping. ``ref`` names another signal's value: the recording rule by
    default, or (``inline=True``) its whole expression, for a dry run without the rules loaded."""

    kb: KnowledgeBase
    engines: Mapping[str, EngineSpec]
    window: str
    group: tuple[str, ...]
    match: Mapping[str, str] = field(default_factory=dict)
    inline: bool = False

    @property
    def range_s(self) -> int:
        return duration_seconds(self.window)

    @property
    def serving(self) -> list[EngineSpec]:
        return serving_engines(self.engines)

    def why_not(self, name: str) -> str:
        """Why a signal has no PromQL: benchmark/model-only, or read from an add-on without replica labels."""
        recipe = self.kb.signals[name].recipe
        if recipe is None:
            kinds = [k for k in self.kb.signals[name].sources if k != "server"]
            if name in MODEL_TABLE_SIGNALS:
                return f"{name} (the server diagnosis computes it from the model and GPU tables, not in PromQL)"
            if "server" in self.kb.signals[name].sources:
                return f"{name} (the server diagnosis does not compute it)"
            return f"{name} ({'/'.join(kinds)} only)"
        return f"{name} (from DCGM, whose series carry no replica labels to join on)"

    def by(self, *extra: str) -> str:
        return f"by ({', '.join([*self.group, *extra])})"

    def on(self) -> str:
        """Matching on the replica labels only, so labels a rule engine adds to the recorded series (vmalert's or a
        Thanos ruler's external labels) never split a replica."""
        return f"on ({', '.join(self.group)})"

    # ------------------------------------------------------------ signals

    def signal(self, name: str) -> str | None:
        """The PromQL of a signal, or None when no engine map can give it (not measurable from server metrics)."""
        recipe = self.kb.signals[name].recipe
        return None if recipe is None else self.recipe(recipe)

    def ref(self, name: str) -> str | None:
        if self.inline:
            body = self.signal(name)
            return None if body is None else f"({body})"
        return record_name(name, self.window) if self.signal(name) is not None else None

    def recipe(self, r: Recipe) -> str | None:
        if r.need is not None:
            return self.need(r.need)
        if r.signal is not None:
            return self.ref(r.signal)
        if r.div is not None:
            top, bottom = (self.recipe(x) for x in r.div)
            return None if top is None or bottom is None else f"({top}) / {self.on()} (({bottom}) != 0)"
        if r.first is not None:
            parts = [p for p in (self.recipe(x) for x in r.first) if p is not None]
            return " or ".join(f"({p})" for p in parts) if parts else None
        assert r.flag is not None
        return self.flag(r.flag.key, r.flag.label)

    # ------------------------------------------------------------ readings

    def need(self, need: NeedRef) -> str | None:
        """Every serving engine's answer to ``need`` joined with ``or``; add-on engines (DCGM) carry no replica
        labels to join on, so their needs are not measurable per replica."""
        if need.engine:
            return None
        parts = []
        for engine in self.serving:
            spec = engine.metric(need.key)
            if spec is not None and _fits(need, spec):
                parts += [self._need_one(need, spec, name) for name in engine.candidates(need.key)]
        return " or ".join(parts) if parts else None

    def _sel(self, name: str, spec: MetricSpec | None = None) -> str:
        """``name`` under the rules' match, and the label value the metric map selects (source="…")."""
        return selector(name, {**self.match, **spec.select} if spec is not None else self.match)

    def _need_one(self, need: NeedRef, spec: MetricSpec, name: str) -> str:
        w = f"[{self.range_s}s]"
        if need.kind == "rate":
            series = name + "_count" if spec.type == "histogram" else name
            return f"sum {self.by()} (rate({self._sel(series, spec)}{w}))"
        # a histogram observed in milliseconds answers in seconds, as the windows' readers do (MetricSpec.to_seconds)
        unit = "" if spec.to_seconds == 1.0 else f" * {spec.to_seconds!r}"
        if need.kind == "quantile":
            buckets = self._sel(name + "_bucket", spec)
            return f"histogram_quantile({need.q!r}, sum {self.by('le')} (rate({buckets}{w}))){unit}"
        if need.kind == "hist_mean":
            return (f"(sum {self.by()} (rate({self._sel(name + '_sum', spec)}{w}))"
                    f" / sum {self.by()} (rate({self._sel(name + '_count', spec)}{w}))){unit}")
        agg = gauge_agg(spec)
        if need.kind in OVER_TIME:
            return gauge_over_window(need.kind, f"{agg} {self.by()} ({self._sel(name, spec)})", self.range_s)
        return f"{agg} {self.by()} (last_over_time({self._sel(name, spec)}{w}))"  # gauge_last

    def flag(self, key: str, label: str) -> str | None:
        """1 when the info metric's ``label`` is "True", 0 when "False", per replica; joined onto the replica's
        running gauge on the labels the info metric carries (vllm:cache_config_info has no model_name)."""
        parts = []
        w = f"[{self.range_s}s]"
        for engine in self.serving:
            spec = engine.metric(key)
            if spec is None or spec.type != "info":
                continue
            carried = tuple(g for g in self.group if g not in spec.lacks_labels)
            own = {k: v for k, v in self.match.items() if k not in spec.lacks_labels}  # the carrier applies the rest
            for name in engine.candidates(key):
                on = selector(name, {**own, label: "True"})
                off = selector(name, {**own, label: "False"})
                value = (f"max by ({', '.join(carried)}) ((last_over_time({on}{w}) * 0 + 1)"
                         f" or (last_over_time({off}{w}) * 0))")
                if carried == self.group:
                    parts.append(value)
                    continue
                carrier = " or ".join(f"last_over_time({self._sel(n)}{w})" for n in engine.candidates(CARRIER_KEY))
                parts.append(f"group {self.by()} ({carrier}) * on ({', '.join(carried)}) group_left () ({value})")
        return " or ".join(f"({p})" for p in parts) if parts else None


def _fits(need: NeedRef, spec: MetricSpec) -> bool:
    allowed = {"rate": ("counter", "histogram"), "quantile": ("histogram",), "hist_mean": ("histogram",)}
    return spec.type in allowed.get(need.kind, ("gauge",))


@dataclass(frozen=True)
class FleetCompiler:
    """Compiles the fleet recipes (tree/signals.yaml ``fleet``) over the replicas' recording rules, aggregated by the
    fleet labels (alerting.yaml ``fleet_labels``): the same interface as Compiler, so the alert builder judges fleet
    causes as it judges replica ones. A fleet with fewer than two replicas measuring a signal has no value for it,
    as in triage/diagnosis/fleet_signals.py. A replica's ratio to its peers' median (a straggler) is its value over
    ``quantile(0.5, …)`` of its fleet: PromQL's median counts the replica itself, which with one straggler among three
    or more replicas is the median of its peers (with two it is their mean, never three times either), so a peer
    ratio needs at least three replicas here."""

    replicas: Compiler
    group: tuple[str, ...]

    @property
    def kb(self) -> KnowledgeBase:
        return self.replicas.kb

    @property
    def window(self) -> str:
        return self.replicas.window

    @property
    def inline(self) -> bool:
        return self.replicas.inline

    def by(self, *extra: str) -> str:
        return f"by ({', '.join([*self.group, *extra])})"

    def on(self) -> str:
        return f"on ({', '.join(self.group)})"

    def why_not(self, name: str) -> str:
        recipe = self.kb.signals[name].fleet
        if recipe is None:
            return f"{name} (not a fleet signal)"
        return f"{name} (reads a replica signal without PromQL)"

    def _replica(self, name: str) -> str | None:
        return self.replicas.ref(name)

    def _guard(self, expr: str, series: str, least: int = 2) -> str:
        """``expr`` kept only for fleets where at least ``least`` replicas have ``series``."""
        return f"({expr}) and {self.on()} (count {self.by()} ({series}) >= {least})"

    def _ratio(self, series: str) -> str:
        """Each replica's ``series`` ÷ the median of its fleet's (a positive median only)."""
        return f"({series} / {self.on()} group_left () (quantile {self.by()} (0.5, {series}) > 0))"

    def _peer_ratio(self, spec: PeerRatio) -> str | None:
        """The largest peer ratio of ``spec.signal``; with ``at``, the peer ratio of ``spec.signal`` at the replica
        furthest above its fleet on any of ``at`` (fleet_signals._straggler, in PromQL)."""
        series = self._replica(spec.signal)
        if series is None:
            return None
        if spec.guard is not None:  # only replicas with enough traffic are compared, as fleet_signals does
            traffic = self._replica(spec.guard.signal)
            if traffic is None:
                return None
            kept = f"{self.replicas.on()} ({traffic} >= {spec.guard.min!r})"
            series = f"({series} and {kept})"
        else:
            kept = ""
        if not spec.at:
            return self._guard(f"max {self.by()} ({self._ratio(series)})", series, PEER_RATIO_LEAST)
        refs = [r if not kept else f"({r} and {kept})" for r in (self._replica(a) for a in spec.at) if r is not None]
        if not refs:
            return None
        worst = self._ratio(refs[0])
        for ref in refs[1:]:  # a replica's largest ratio over ``at``, whichever of them it has
            other = self._ratio(ref)
            worst = f"(({worst} > {other}) or {other} or {worst})"
        at_worst = f"({worst} == {self.on()} group_left () max {self.by()} ({worst}))"
        return self._guard(f"max {self.by()} ({self._ratio(series)} and {self.replicas.on()} {at_worst})", series,
                           PEER_RATIO_LEAST)

    def signal(self, name: str) -> str | None:
        recipe = self.kb.signals[name].fleet
        if recipe is None:
            return None
        if recipe.peer_ratio is not None:
            return self._peer_ratio(recipe.peer_ratio)
        if recipe.share is not None:
            refs = [self._replica(c.signal) for c in recipe.share]
            if any(r is None for r in refs):
                return None
            on = self.replicas.on()
            measured = f" or {on} ".join(f"({r})" for r in refs)
            hit = f" or {on} ".join(f"({r} {c.op} {c.value!r})" for r, c in zip(refs, recipe.share))
            return (f"(count {self.by()} ({hit}) or {self.on()} (0 * count {self.by()} ({measured})))"
                    f" / {self.on()} (count {self.by()} ({measured}) >= 2)")
        one = recipe.max or recipe.spread or recipe.max_over_median
        assert one is not None
        series = self._replica(one)
        if series is None:
            return None
        if recipe.max is not None:
            return self._guard(f"max {self.by()} ({series})", series)
        if recipe.spread is not None:
            return self._guard(f"max {self.by()} ({series}) - {self.on()} min {self.by()} ({series})", series)
        return self._guard(f"max {self.by()} ({series}) / {self.on()} (quantile {self.by()} (0.5, {series}) > 0)",
                           series)

    def ref(self, name: str) -> str | None:
        body = self.signal(name)
        if body is None:
            return None
        return f"({body})" if self.inline else record_name(name, self.window)
