"""Engine metric maps (tree/engines/*.yaml): canonical keys to exposed names, aliases and prefixes."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from triage.knowledge.model import Strict, Text

MetricType = Literal["counter", "gauge", "histogram", "info"]
METRIC_NAME_RE = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
LABEL_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# what a histogram or counter adds to its base name in the exposition; a renamed base renames all of these
SERIES_SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created")
ADDON_IDS = frozenset({"dcgm"})
# a histogram of durations observed in another unit than seconds (SGLang's sglang:kv_transfer_latency_ms): every
# reader gives its quantiles and means in seconds, so a recipe compares it with the other time histograms as they are
SECONDS_PER = {"s": 1.0, "ms": 1e-3}
SERVING_ORDER = ("vllm", "sglang", "tgi")


class MetricSpec(Strict):
    """One canonical metric as an engine exposes it; ``names`` are tried in order (newest first)."""

    key: str
    type: MetricType
    names: list[str] = Field(min_length=1)
    unit: str = ""
    missing: Text  # shown on a panel when the server does not export it, saying why
    since: str = ""  # the engine version that first exported it (older versions: not measurable, never healthy)
    # replica labels this series does not carry (vllm:cache_config_info has `engine` but no `model_name`):
    # the rule export joins it onto the replica on the labels it does carry
    lacks_labels: list[str] = Field(default_factory=list)
    # label values that pick this key's series out of a family other keys share (SGLang's prefill time is
    # sglang:per_stage_req_latency_seconds{stage="prefill_forward"}, vLLM's transferred prompt tokens are
    # vllm:prompt_tokens_by_source_total{source="external_kv_transfer"}); every reader adds them to its selector
    select: dict[str, str] = Field(default_factory=dict)

    @property
    def to_seconds(self) -> float:
        """The factor that turns this histogram's observations into seconds (1 for every other metric)."""
        return SECONDS_PER.get(self.unit, 1.0) if self.type == "histogram" else 1.0

    @field_validator("select")
    @classmethod
    def _label_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = next((k for k in value if not LABEL_NAME_RE.fullmatch(k) or k.startswith("__")), None)
        if bad is not None:
            raise ValueError(f"'{bad}' is not a label name a selector may match")
        return value


def _metric_name(value: str) -> str:
    if not METRIC_NAME_RE.fullmatch(value):
        raise ValueError(f"'{value}' is not a Prometheus metric name")
    return value


class Rename(Strict):
    """An exposed name the engine replaced: ``old`` still works until ``removed_in`` (empty: still emitted)."""

    old: str
    new: str
    deprecated_in: str = ""  # the version (or change) that deprecated the old name
    removed_in: str = ""     # the version that stopped emitting it; empty while it is still emitted
    source: str = ""         # where this was read (repo@commit:path, PR)
    also_exported_by: str = ""  # another component still exporting the old name (then it may be alive there)

    _names = field_validator("old", "new")(_metric_name)


class PrefixRename(Strict):
    """A whole family renamed by its prefix (``inference_extension_x`` → ``llm_d_epp_x``), after the explicit
    renames, which win."""

    old: str
    new: str
    deprecated_in: str = ""
    removed_in: str = ""
    source: str = ""


class Removal(Strict):
    """An exposed name that is gone without a successor."""

    name: str
    removed_in: str
    why: Text
    source: str = ""
    also_exported_by: str = ""

    _names = field_validator("name")(_metric_name)


class ToolLaunch(Strict):
    """How a tool with a dumped argument parser (tree/engines/flags/<id>-<version>.json) is launched: the command
    prefixes whose rest its parser reads, the environment variables it owns, its label in "flags as of"."""

    id: str = ""            # a router's tool id (an engine's launcher is the engine's own id)
    label: str
    order: int = 100        # place in the "flags as of" line (lower first; ties by id)
    commands: list[list[str]] = Field(min_length=1)  # e.g. [vllm, serve]; after NAME=VALUE assignments
    # NAME=VALUE in an example is checked against the dump's env when NAME starts with one of these ("" = any)
    env_prefixes: list[str] = Field(default_factory=list)


class Launcher(ToolLaunch):
    """A serving engine's launcher, and its router (``router --x`` in a flag entry) when it has one."""

    qualifier: str = ""     # "(vLLM engine)" after a flag entry names this engine's own option
    router: ToolLaunch | None = None

    @model_validator(mode="after")
    def _router_named(self) -> Launcher:
        if self.router is not None and not self.router.id:
            raise ValueError("a launcher's router needs its tool id")
        return self


class EngineSpec(Strict):
    id: str
    title: str
    # serving: an engine the tree diagnoses (picked by coverage); addon: read beside it (DCGM); router: a layer
    # in front of the engines (llm-d EPP, Dynamo frontend, the vLLM and SGLang routers), mapped for linting and
    # fleet views, picked as the window's map only where no engine's own series are (a scrape of the router alone)
    role: Literal["serving", "addon", "router"] = "serving"
    # a serving engine every technique gives knobs for and every first action a command for (the loader checks);
    # another serving engine's knobs are optional: a technique may name them, the views show them where given
    knobs_required: bool = False
    prefixes: list[str] = Field(min_length=1)
    detect: list[str] = Field(min_length=1)
    labels: list[str] = Field(default_factory=list)
    # the labels that tell one replica of this engine from another beside the target's own (job, instance,
    # pod, namespace): Prometheus rules and fleet views group by them; per-rank labels (tp_rank) are summed
    replica_labels: list[str] = Field(default_factory=list)
    metrics: list[MetricSpec] = Field(min_length=1)
    # names that no longer exist (full exposed names, written with the first prefix; the linter also matches
    # them under the engine's other prefixes): dashboards and rules still asking for them show "No data"
    renamed: list[Rename] = Field(default_factory=list)
    renamed_prefixes: list[PrefixRename] = Field(default_factory=list)
    removed: list[Removal] = Field(default_factory=list)
    # a sentence shown wherever the engine is named (e.g. upstream in maintenance), in both languages
    status: Text | None = None
    # a serving engine whose argument parser is dumped: how technique flags and examples are checked
    launcher: Launcher | None = None

    @model_validator(mode="after")
    def _history_consistent(self) -> EngineSpec:
        olds = [r.old for r in self.renamed] + [r.name for r in self.removed]
        dup = next((n for n in olds if olds.count(n) > 1), None)
        if dup:
            raise ValueError(f"'{dup}' is listed twice under renamed/removed")
        gone = {r.name for r in self.removed}
        bad = next((r.new for r in self.renamed if r.new in gone or r.new == r.old), None)
        if bad:
            raise ValueError(f"rename target '{bad}' is itself removed (or renamed to itself)")
        return self

    def metric(self, key: str) -> MetricSpec | None:
        return next((m for m in self.metrics if m.key == key), None)

    def candidates(self, key: str) -> list[str]:
        """Every exposed name that may carry ``key``, in preference order (new name, then prefixes)."""
        spec = self.metric(key)
        return [] if spec is None else [p + n for n in spec.names for p in self.prefixes]

    def resolve(self, key: str, present: set[str]) -> str | None:
        """The first candidate that is present (names without _total/_bucket suffixes)."""
        return next((c for c in self.candidates(key) if c in present), None)

    def detected_in(self, present: set[str]) -> bool:
        return any(p + d in present for d in self.detect for p in self.prefixes)


def load_engines(tree_dir: Path | None = None) -> dict[str, EngineSpec]:
    """The engine maps of tree/engines/*.yaml (validated with the rest of the tree)."""
    from triage.knowledge.loader import load_knowledge  # the loader imports this module's schema

    return load_knowledge(tree_dir).engines


def detect_match(engines: dict[str, EngineSpec], labels: str = "") -> list[str]:
    """Prometheus series selectors for every name an engine map may read: ``<prefix>.+`` per prefix, and the map's
    own names for an engine without a prefix (DCGM). Built from the maps, so a new engine file is found too.
    ``labels`` (``k="v",…``, already escaped) narrows the serving engines' names to the user's filter; an add-on's
    or a router's series carry other labels (a GPU, a pod) and are found without it."""
    serving: list[str] = []
    others: list[str] = []
    for engine in engines.values():
        into = serving if engine.role == "serving" and engine.id not in ADDON_IDS else others
        for prefix in engine.prefixes:
            if prefix:
                into.append(re.escape(prefix) + ".+")
            else:
                into += [re.escape(n) + "(_bucket|_sum|_count)?" for m in engine.metrics for n in m.names]
    # a router that re-exports an engine's prefix (production-stack's vllm:) is found under the filter, like the engine
    others = [n for n in others if n not in serving]
    return [_selector(names, filtered) for names, filtered in ((serving, labels), (others, "")) if names]


def _selector(alternatives: list[str], labels: str) -> str:
    unique = "|".join(dict.fromkeys(alternatives)).replace("\\", "\\\\")
    return '{__name__=~"' + unique + '"' + ("," + labels if labels else "") + "}"


def detect_engines(present: set[str], engines: dict[str, EngineSpec] | None = None) -> list[EngineSpec]:
    """Engines whose detection metrics are present; DCGM is an add-on, listed after the serving engine."""
    engines = engines or load_engines()
    return [e for e in engines.values() if e.detected_in(present)]


def serving_engines(engines: Mapping[str, EngineSpec]) -> list[EngineSpec]:
    """Serving engine maps, vLLM first (SERVING_ORDER), add-ons left out."""
    found = [e for e in engines.values() if e.id not in ADDON_IDS and e.role == "serving"]
    return sorted(found, key=lambda e: SERVING_ORDER.index(e.id) if e.id in SERVING_ORDER else len(SERVING_ORDER))
