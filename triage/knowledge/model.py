"""Typed model of the knowledge base: symptoms, causes, techniques, guidance."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")
Level = Literal["config", "model", "architecture"]
LEVEL_ORDER: dict[str, int] = {"config": 0, "model": 1, "architecture": 2}
# a serving engine's id, as tree/engines/<id>.yaml names it: the engines are data (KnowledgeBase.serving lists them,
# KnowledgeBase.knob_engines those every technique and first action must cover)
Engine = str
# tools whose flags a technique quotes: the serving engines' launchers and their routers (the ``launcher`` block of
# tree/engines/<id>.yaml; the loader checks that `verified` names only those)
Tool = str


class Strict(BaseModel):
    """Base for every knowledge object: unknown fields are refused, objects are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Text(Strict):
    """One sentence or paragraph in both languages; neither may be empty."""

    en: str = Field(min_length=1)
    zh: str = Field(min_length=1)

    def get(self, lang: str) -> str:
        return self.zh if lang == "zh" else self.en

    @field_validator("en", "zh")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("text is blank")
        return value


class CauseTechnique(Strict):
    """A technique as the seed lists it under one cause, with the gain the seed expects there."""

    id: str
    gain: Text


Op = Literal[">", ">=", "<", "<=", "=="]


class Condition(Strict):
    """One piece of evidence: ``signal op threshold``; the threshold is a number or an SLO × factor."""

    signal: str
    op: Op
    value: float | bool | None = None
    slo: str | None = None
    factor: float = 1.0
    only_if: str | None = None  # an SLO flag that must be true for the condition to count
    supports_only: bool = False  # raises confidence but cannot match a cause on its own
    context: bool = False  # a number shown with the finding (e.g. prefill speed); never counted for or against
    one_way: bool = False  # one sufficient pattern among others: counts when it holds, never against the cause
    requires: list[Condition] = Field(default_factory=list)  # all must hold too (unmeasurable ones do not block)
    meaning: Text

    @model_validator(mode="after")
    def _one_threshold(self) -> Condition:
        if (self.value is None) == (self.slo is None):
            raise ValueError("give exactly one of 'value' or 'slo'")
        return self


class Rule(Strict):
    """When a cause is matched: at least ``min_agree`` of its evidence conditions hold."""

    evidence: list[Condition] = Field(min_length=1)
    min_agree: int = Field(default=1, ge=1)
    explains: list[str] = Field(default_factory=list)


class EngineAction(Strict):
    """The first action in one engine: flags as typed on its command line (or ``NAME=VALUE`` for an environment
    variable), checked against the engine's parser dump; ``do`` overrides the cause's sentence for this engine."""

    command: str = Field(min_length=1)
    do: Text | None = None


class RelativeCap(Strict):
    """A batch-cap first action relative to the cap the data shows (triage/diagnosis/batch_cap.py): ``factor`` ×
    the measured cap while the KV cache peaked under ``kv_ceiling``; at or above it raising the cap only preempts,
    so the action is ``memory_cause``'s; unmeasured, the engine's plain command as a starting point. ``flags``
    hold a ``{target}`` per engine; the sentences take {cap}, {target}, {waiting}, {kv}, {how}, {factor}, {ceiling}."""

    factor: float = Field(gt=1)
    kv_ceiling: float = Field(gt=0, le=1)
    memory_cause: str
    flags: dict[str, str]
    measured: Text
    kv_unknown: Text
    kv_full: Text
    unmeasured: dict[str, Text]


class FirstAction(Strict):
    """The knob that acts first on a cause, per engine: never a technique the engine already runs by default
    (tests/test_first_action.py). ``client``: the knob belongs to whoever sends the load, not to the engine;
    ``cluster``: to the deployment or the router in front of the replicas (a fleet cause)."""

    do: Text
    client: bool = False
    cluster: bool = False
    engines: dict[Engine, EngineAction] = Field(min_length=1)  # in the YAML: one key per engine id, beside ``do``
    relative: RelativeCap | None = None

    @model_validator(mode="before")
    @classmethod
    def _engine_keys(cls, data: object) -> object:
        """Every key but do/client/cluster/relative names an engine (the loader checks it is one); ``vllm:
        "--max-num-seqs 512"`` is short for ``vllm: {command: "--max-num-seqs 512"}``."""
        if isinstance(data, dict) and "engines" not in data:
            own = {k: v for k, v in data.items() if k in ("do", "client", "cluster", "relative")}
            engines = {k: {"command": v} if isinstance(v, str) else v for k, v in data.items() if k not in own}
            return {**own, "engines": engines}
        return data

    def command(self, engine: str) -> str:
        return self.action(engine).command

    def sentence(self, engine: str) -> Text:
        return self.action(engine).do or self.do

    def action(self, engine: str) -> EngineAction:
        return self.engines[engine]


class Cause(Strict):
    """A measurable cause under a symptom: the question, the metric that answers it, the cures."""

    id: str
    short: Text
    title: Text
    detail: Text
    question: Text
    metric: Text
    techniques: list[CauseTechnique] = Field(min_length=1)
    rule: Rule | None = None
    first_action: FirstAction | None = None


class Symptom(Strict):
    """What the user feels (slow first token, OOM …), split into causes."""

    id: str
    short: Text
    title: Text
    summary: Text
    look_first: list[Text] = Field(min_length=1)
    free_first: Text
    key_point: Text
    trigger: list[Condition] = Field(default_factory=list)
    causes: list[Cause] = Field(min_length=1)
    # ``fleet``: judged once over every replica of a window (signals with a ``fleet`` recipe), never per replica
    scope: Literal["replica", "fleet"] = "replica"


Scalar = bool | int | float | str


class Flag(Strict):
    """One engine knob: the exact flag, its default and what it does.

    ``default`` is the value the engine's parser has, as data: null is unset; a ``--a / --b`` entry gives one per
    option (a list, or a text ``a / b``). Words about it are text in both languages: ``default_note``, drawn after
    it in parentheses ("unset (off)"), or ``default_rule``, the rule that picks the value when it is unset or
    overridden at start-up ("unset; chosen at start-up by GPU: ..."). tree/ui.yaml renders them (knob_*)."""

    flag: str
    env: bool = False  # an environment variable the engine reads, not a command-line option
    inside: str = ""  # the option whose JSON config holds ``flag`` as a field (``--kv-transfer-config``)
    default: Scalar | list[Scalar | None] | None
    default_note: Text | None = None
    default_rule: Text | None = None
    meaning: Text

    @model_validator(mode="after")
    def _one_kind_of_words(self) -> Flag:
        if self.default_note is not None and self.default_rule is not None:
            raise ValueError("a default has a note or a rule, not both")
        if self.env and self.inside:
            raise ValueError("a flag is an environment variable or a field inside an option's config, not both")
        for value in self.defaults():
            if isinstance(value, str) and (not value or " " in value or value == "unset"):
                raise ValueError(f"default {value!r} is a value as typed, null when unset: words about it go in "
                                 "default_note or default_rule (en and zh)")
        return self

    def defaults(self) -> list[Scalar | None]:
        """The default of each option the entry names, in order (a single default stands for every one)."""
        if isinstance(self.default, list):
            return list(self.default)
        if isinstance(self.default, str) and " / " in self.default:
            return [part.strip() for part in self.default.split(" / ")]
        return [self.default]


class EngineKnobs(Strict):
    """How one engine exposes a technique."""

    on_by_default: Text
    default_on: bool = False  # the engine runs it without being asked: never a first action, ranked last
    off_switch: str = ""  # how a deployment turns a default-on technique off, as typed (checked against the dump)
    flags: list[Flag] = Field(default_factory=list)
    example: str = ""

    @model_validator(mode="after")
    def _switch_only_when_on(self) -> EngineKnobs:
        if self.off_switch and not self.default_on:
            raise ValueError("off_switch is for a technique on by default (default_on: true)")
        return self


ARXIV_OR_DOI = r"^(arXiv:(\d{4}\.\d{4,5}|[a-z-]+(\.[A-Z]{2})?/\d{7})(v\d+)?|10\.\d{4,9}/[-._;()/:A-Za-z0-9]+)$"


class PublishedGain(Strict):
    """A published result: the paper(s) by arXiv id (``arXiv:2403.02310``, ``v3`` if the figure is version-specific)
    or DOI; a claim that is not from a paper (docs, a blog, a vendor) gives its ``url`` instead."""

    claim: Text
    source: str = Field(min_length=1)
    papers: list[Annotated[str, Field(pattern=ARXIV_OR_DOI)]] = Field(default_factory=list)
    url: str = ""

    @model_validator(mode="after")
    def _cited(self) -> PublishedGain:
        if not self.papers and not self.url.startswith("https://"):
            raise ValueError("give the paper's arXiv id or DOI in 'papers', or an https 'url' for a non-paper source")
        return self


class ExpectedGain(Strict):
    seed: Text
    published: list[PublishedGain] = Field(default_factory=list)


class ChecklistStep(Strict):
    """One step of the minimal-change-first ladder."""

    level: Level
    change: Text
    measure: Text


class Verify(Strict):
    benchmark: Text
    must_improve: Text
    must_not_regress: Text


class Source(Strict):
    title: str = Field(min_length=1)
    url: str = ""


class Technique(Strict):
    """One optimization technique: one YAML file under tree/techniques/."""

    id: str
    title: Text
    short: str = Field(min_length=1)
    level: Level
    seed_chapter: Text
    principle: Text
    bottleneck: Text
    expected_gain: ExpectedGain
    knobs: dict[Engine, EngineKnobs]
    checklist: list[ChecklistStep] = Field(min_length=1)
    verify: Verify
    side_effects: list[Text] = Field(min_length=1)
    when_not_to_use: list[Text] = Field(min_length=1)
    sources: list[Source] = Field(min_length=1)
    # the release each tool's flags, defaults and examples were checked against (tree/engines/flags/<tool>-<v>.json)
    verified: dict[Tool, Annotated[str, Field(pattern=r"^\d+(\.\d+)+$")]]

    @field_validator("checklist")
    @classmethod
    def _minimal_change_first(cls, value: list[ChecklistStep]) -> list[ChecklistStep]:
        ranks = [LEVEL_ORDER[s.level] for s in value]
        if ranks != sorted(ranks):
            raise ValueError("steps must go config → model → architecture")
        return value


class FlowStep(Strict):
    id: str
    title: Text
    detail: Text


class Guidance(Strict):
    """The seed's general guidance: usage flow, wrong usages, level order, summary."""

    root: Text
    principle: Text
    levels: dict[Level, Text]
    usage_flow: list[FlowStep] = Field(min_length=1)
    wrong_usages: list[Text] = Field(min_length=1)
    closing: Text
    summary: list[Text] = Field(min_length=1)
    self_check: list[Text] = Field(default_factory=list)


SourceKind = Literal["benchmark", "server", "model", "fleet"]


NeedKindName = Literal["rate", "quantile", "hist_mean", "gauge_mean", "gauge_max", "gauge_last"]


class NeedRef(Strict):
    """One reading of a metric window by canonical metric key (see triage/knowledge/needs.py Need)."""

    kind: NeedKindName
    key: str
    q: float | None = None
    engine: str = ""  # an add-on engine map (dcgm); "" = the serving engine
    # a rate's breakdown label: the value stays the total, and how it was measured lists the rate per value of this
    # label (vllm:admission_rejections_total by reason: which queue limit refused the requests)
    by: str = ""

    @model_validator(mode="after")
    def _by_a_rate(self) -> NeedRef:
        if self.by and self.kind != "rate":
            raise ValueError("'by' breaks down a rate only")
        return self


class FlagRef(Strict):
    """A boolean read from a label of an info-style metric: ``label`` == "True"."""

    key: str
    label: str


class How(Strict):
    """How a value was measured, as a message of tree/provenance.yaml: its id and its text parameters."""

    id: str
    params: dict[str, str] = Field(default_factory=dict)


class Recipe(Strict):
    """How a server signal is computed from window readings, as data: exactly one of the fields.

    need     one reading            signal   another signal's value
    div      a ÷ b (absent when b is absent or 0)
    first    the first alternative that has a value   flag   an info label as a boolean

    Two modifiers go with any of them: ``how``, the provenance message of this part's value (without it the message
    is built from the recipe), and ``later``, on an alternative of ``first``: its readings are asked in a second
    round, only when the alternatives before it gave nothing (a stand-in an older engine exports instead).
    """

    need: NeedRef | None = None
    signal: str | None = None
    div: list[Recipe] | None = Field(default=None, min_length=2, max_length=2)
    first: list[Recipe] | None = Field(default=None, min_length=2)
    flag: FlagRef | None = None
    how: How | None = None
    later: bool = False

    @model_validator(mode="after")
    def _exactly_one(self) -> Recipe:
        given = [f for f in ("need", "signal", "div", "first", "flag") if getattr(self, f) is not None]
        if len(given) != 1:
            raise ValueError(f"a recipe is exactly one of need, signal, div, first, flag (got {given or 'none'})")
        return self


class TrafficGuard(Strict):
    """Replicas whose ``signal`` is below ``min`` (or unmeasured) are left out of a peer comparison."""

    signal: str
    min: float = Field(gt=0)


class PeerRatio(Strict):
    """A replica's value ÷ the median of its peers' (the other replicas of the same model); the largest such ratio
    in the fleet, or (``at``) the ratio at the replica whose ``at`` signals stand furthest above their peers.
    ``guard``: only replicas with that much traffic are compared (a p99 over a handful of requests is noise)."""

    signal: str
    at: list[str] = Field(default_factory=list)
    guard: TrafficGuard | None = None


class FleetRecipe(Strict):
    """How a fleet signal is computed from the replicas' own signals of one window, as data: exactly one field.
    Every kind needs at least two replicas that measure its signals; with fewer it is not measurable.

    max              the largest replica value          spread   largest − smallest replica value
    max_over_median  the largest ÷ the fleet median     share    share of replicas where any condition holds
    peer_ratio       a replica ÷ its peers' median (PeerRatio)
    """

    max: str | None = None
    spread: str | None = None
    max_over_median: str | None = None
    share: list[Condition] | None = Field(default=None, min_length=1)
    peer_ratio: PeerRatio | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> FleetRecipe:
        given = [f for f in ("max", "spread", "max_over_median", "share", "peer_ratio") if getattr(self, f) is not None]
        if len(given) != 1:
            raise ValueError(f"a fleet recipe is exactly one of max, spread, max_over_median, share, peer_ratio "
                             f"(got {given or 'none'})")
        return self

    def reads(self) -> list[str]:
        """The replica signals this recipe reads."""
        if self.share is not None:
            return list(dict.fromkeys(c.signal for c in self.share))
        if self.peer_ratio is not None:
            guard = [self.peer_ratio.guard.signal] if self.peer_ratio.guard else []
            return list(dict.fromkeys([self.peer_ratio.signal, *self.peer_ratio.at, *guard]))
        one = self.max or self.spread or self.max_over_median
        assert one is not None
        return [one]


Worse = Literal["higher", "lower", "neither"]


class SignalDef(Strict):
    """One entry of the metric catalogue (tree/signals.yaml): a number rules may read, with its label, unit,
    which direction is worse, the SLO key it is judged against, its meaning and how each source computes it.

    Server signals carry a ``recipe`` (as data) that the Prometheus rule export compiles to PromQL.

    Units: ``s`` (shown in ms under a second), ``fraction`` (a 0…1 share, shown in %), ``ratio`` (a multiplier,
    shown as ×), ``r`` (a correlation), ``bool``, or a rate/count unit shown as written (``req/s``, ``tok/s``).
    """

    name: str
    label: Text
    unit: str
    worse: Worse
    slo: str | None = None  # the SLO preset key this value is held against (KPI rows show the distance)
    meaning: Text
    sources: dict[SourceKind, str] = Field(min_length=1)
    recipe: Recipe | None = None
    fleet: FleetRecipe | None = None  # a fleet signal: computed across the replicas of one window

    @property
    def higher_is_better(self) -> bool:
        return self.worse == "lower"


class CompareMetric(Strict):
    """A metric Verify and the gate compare, baseline against candidate (label, unit, direction: its signal)."""

    id: str
    signal: str
    column: str | None = None  # per-request column of a percentile metric
    q: float = Field(default=0.5, gt=0, lt=1)
    primary: bool = False  # a gain here can confirm the technique
    counts: bool = True  # a regression here makes the overall verdict a regression
    scale: Literal["%", "pp"] = "%"  # relative change, or percentage points (error rate)


class KpiRows(Strict):
    """Which signals the KPI rows show, in order."""

    benchmark: list[str] = Field(min_length=1)
    live: list[str] = Field(min_length=1)


class SloPreset(Strict):
    """Named SLO thresholds, each number with its citation, and a sentence saying where they come from."""

    title: Text
    values: dict[str, float | bool]
    cite: dict[str, str]
    source: Text

    @model_validator(mode="after")
    def _every_number_cited(self) -> SloPreset:
        numbers = {k for k, v in self.values.items() if not isinstance(v, bool)}
        if numbers != set(self.cite) or not all(c.strip() for c in self.cite.values()):
            raise ValueError(f"cite must give one non-blank citation per number: {sorted(numbers)}")
        return self


class RetroStep(Strict):
    """One step of the retro walk (tree/retro.yaml)."""

    id: str
    title: Text
    question: Text
    checklist: list[Text] = Field(min_length=1)


class GateRule(Strict):
    """One gated metric of tree/gate.yaml: the largest worsening tolerated, and why."""

    metric: str
    max_regression: str
    reason: Text


class GateSpec(Strict):
    metrics: list[GateRule] = Field(min_length=1)


class AlertingConfig(Strict):
    """tree/alerting.yaml: how `triage rules` turns the tree into Prometheus rules."""

    window: str = "15m"
    evaluation_interval: str = "1m"
    for_: str = Field(default="5m", alias="for")
    group: str = "inference-triage"
    dashboard_url: str = "http://localhost:8501"
    target_labels: list[str] = Field(default_factory=list)
    # the replicas whose recorded signals one fleet alert compares (the fleet symptom's causes)
    fleet_labels: list[str] = Field(default_factory=lambda: ["namespace", "job", "model_name"])
    severity: dict[str, str] = Field(default_factory=dict)
