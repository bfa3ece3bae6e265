"""The one tree loader: every YAML file under tree/ read once, validated, cross-checked and cached.

``load_knowledge(tree_dir)`` reads the decision tree, techniques, guidance, signals, SLO presets, engines,
panels, gate, retro steps, model and GPU presets, interface strings and simulator scenarios, and raises one
``TriageError`` naming the file (and key) on the first problem. The result is cached per directory until a
file in it changes. ``use_tree_dir`` makes another directory the default for the whole process (the CLI's
``--tree-dir``), so every reader of knowledge follows it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from triage import safe_load
from triage.errors import TriageError
from triage.knowledge import DEFAULT_TREE_DIR, parsed
from triage.knowledge.checked import content_key, yaml_files
from triage.knowledge.engines import EngineSpec, serving_engines
from triage.knowledge.hardware import GpuEntry, ModelEntry
from triage.knowledge.model import (
    LANGS,
    AlertingConfig,
    Cause,
    CompareMetric,
    Condition,
    GateRule,
    GateSpec,
    Guidance,
    KpiRows,
    Recipe,
    RelativeCap,
    RetroStep,
    SignalDef,
    SloPreset,
    Symptom,
    Technique,
    Text,
)
from triage.knowledge.panels import Panel, PanelGroup
from triage.knowledge.scenarios import Scenario

PLACEHOLDER = re.compile(r"\{(\w+)\}")  # a {name} in a message template (both languages must name the same)
ROOT_ID = "root"


@dataclass(frozen=True)
class KnowledgeBase:
    """The whole tree, indexed: every id resolves, every technique is reached by a cause."""

    symptoms: tuple[Symptom, ...]
    techniques: dict[str, Technique]
    guidance: Guidance
    source_dir: Path
    signals: dict[str, SignalDef] = field(default_factory=dict)
    slo_presets: dict[str, SloPreset] = field(default_factory=dict)
    default_slo: str = "chat"
    causes: dict[str, Cause] = field(default_factory=dict)
    parent: dict[str, str] = field(default_factory=dict)
    engines: dict[str, EngineSpec] = field(default_factory=dict)
    panels: tuple[Panel, ...] = ()
    panel_groups: tuple[PanelGroup, ...] = ()
    gate: tuple[GateRule, ...] = ()
    retro: tuple[RetroStep, ...] = ()
    models: dict[str, ModelEntry] = field(default_factory=dict)
    gpus: dict[str, GpuEntry] = field(default_factory=dict)
    strings: dict[str, Text] = field(default_factory=dict)
    messages: dict[str, Text] = field(default_factory=dict)  # message id → template (provenance.yaml)
    scenarios: dict[str, Scenario] = field(default_factory=dict)
    kpis: KpiRows | None = None
    compare: dict[str, CompareMetric] = field(default_factory=dict)

    @property
    def serving(self) -> tuple[str, ...]:
        """The serving engines' ids (tree/engines/*.yaml, role serving), vLLM first."""
        return tuple(e.id for e in serving_engines(self.engines))

    @property
    def knob_engines(self) -> tuple[str, ...]:
        """The serving engines every technique and first action covers (``knobs_required``)."""
        return tuple(e for e in self.serving if self.engines[e].knobs_required)

    def metric(self, name: str) -> SignalDef:
        """The catalogue entry of a signal (label, unit, which way is worse)."""
        return self.signals[name]

    def kind(self, node_id: str) -> str:
        """``root``, ``symptom``, ``cause`` or ``technique`` (KeyError for an unknown id)."""
        if node_id == ROOT_ID:
            return "root"
        if node_id in self.causes:
            return "cause"
        if node_id in self.techniques:
            return "technique"
        if any(s.id == node_id for s in self.symptoms):
            return "symptom"
        raise KeyError(node_id)

    def has(self, node_id: str) -> bool:
        try:
            self.kind(node_id)
        except KeyError:
            return False
        return True

    def symptom(self, symptom_id: str) -> Symptom:
        return next(s for s in self.symptoms if s.id == symptom_id)

    def symptom_of(self, cause_id: str) -> Symptom:
        return self.symptom(self.parent[cause_id])

    def causes_reaching(self, technique_id: str) -> list[Cause]:
        """Causes that list the technique, in tree order."""
        return [c for c in self.causes.values() if any(t.id == technique_id for t in c.techniques)]

    def path_to(self, node_id: str) -> list[str]:
        """Ids from the root down to ``node_id`` (a technique's path goes through its first cause)."""
        if node_id == ROOT_ID:
            return [ROOT_ID]
        if node_id in self.techniques:
            first = self.causes_reaching(node_id)[0]
            return [*self.path_to(first.id), node_id]
        chain = [node_id]
        while chain[-1] in self.parent:
            chain.append(self.parent[chain[-1]])
        return [ROOT_ID, *reversed(chain)]


def _read_yaml(path: Path) -> Any:
    """A tree or gate YAML file (``--tree-dir``, ``gate --gate FILE``): read within bounds, then the safe loader
    (depth checked before libyaml builds anything, no aliases)."""
    from triage.bounded import MAX_CONFIG_BYTES, read_text_bounded

    text = read_text_bounded(path, MAX_CONFIG_BYTES)
    # aliases stay allowed here (yaml.safe_dump writes them for repeated values) but counted: no billion laughs
    try:
        return parsed.load(text, lambda text: safe_load.load_yaml(text, where=str(path), max_chars=MAX_CONFIG_BYTES,
                                                                  aliases=True))
    except TriageError as exc:
        raise safe_load.with_line_key(exc) from None


def _parse(model: type[BaseModel], data: Any, path: Path, prefix: str = "") -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        key = ".".join(p for p in (prefix, loc) if p)
        reason = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        if err["type"] == "missing" and loc.split(".")[-1] in ("en", "zh"):
            reason = f"missing language '{loc.split('.')[-1]}'"
        raise TriageError(reason, where=str(path), key=key) from exc


def _load_symptoms(path: Path) -> tuple[Symptom, ...]:
    data = _read_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("symptoms"), list):
        raise TriageError("expected a mapping with a 'symptoms' list", where=str(path), key="symptoms")
    extra = set(data) - {"symptoms"}
    if extra:
        raise TriageError("unknown field", where=str(path), key=sorted(extra)[0])
    return tuple(_parse(Symptom, s, path, f"symptoms[{i}]") for i, s in enumerate(data["symptoms"]))


def _load_techniques(folder: Path) -> dict[str, Technique]:
    files = sorted(folder.glob("*.yaml"))
    if not files:
        raise TriageError("no technique files (*.yaml)", where=str(folder))
    techniques: dict[str, Technique] = {}
    for path in files:
        tech = _parse(Technique, _read_yaml(path), path)
        if tech.id in techniques:
            raise TriageError(f"duplicate id '{tech.id}'", where=str(path), key="id")
        if tech.id != path.stem:
            raise TriageError(f"id '{tech.id}' must match the file name '{path.stem}'", where=str(path), key="id")
        techniques[tech.id] = tech
    return techniques


def _index_causes(symptoms: tuple[Symptom, ...], path: Path) -> tuple[dict[str, Cause], dict[str, str]]:
    seen: set[str] = set()
    causes: dict[str, Cause] = {}
    parent: dict[str, str] = {}
    for i, sym in enumerate(symptoms):
        if sym.id in seen or sym.id == ROOT_ID:
            raise TriageError(f"duplicate id '{sym.id}'", where=str(path), key=f"symptoms[{i}].id")
        seen.add(sym.id)
        for j, cause in enumerate(sym.causes):
            key = f"symptoms[{i}].causes[{j}].id"
            if cause.id in seen:
                raise TriageError(f"duplicate id '{cause.id}'", where=str(path), key=key)
            if not cause.id.startswith(f"{sym.id}."):
                raise TriageError(f"cause id '{cause.id}' must start with '{sym.id}.'", where=str(path), key=key)
            seen.add(cause.id)
            causes[cause.id] = cause
            parent[cause.id] = sym.id
    return causes, parent


def _cross_check(causes: dict[str, Cause], techniques: dict[str, Technique], tree_path: Path, tech_dir: Path) -> None:
    reached: set[str] = set()
    for cause in causes.values():
        ids = [t.id for t in cause.techniques]
        for k, tid in enumerate(ids):
            if tid not in techniques:
                raise TriageError(f"unknown technique id '{tid}'", where=str(tree_path),
                                  key=f"{cause.id}.techniques[{k}]")
            if ids.index(tid) != k:
                raise TriageError(f"technique '{tid}' listed twice", where=str(tree_path),
                                  key=f"{cause.id}.techniques[{k}]")
        reached.update(ids)
        if cause.rule is not None and cause.first_action is None:
            raise TriageError("a cause with a rule needs a first_action (the knob that acts, per engine)",
                              where=str(tree_path), key=cause.id)
        if cause.id in techniques:
            raise TriageError(f"duplicate id '{cause.id}'", where=str(tree_path), key=cause.id)
        if cause.first_action is not None and cause.first_action.relative is not None:
            _check_relative(cause.first_action.relative, set(cause.first_action.engines), causes, tree_path,
                            f"{cause.id}.first_action.relative")
    for tid in techniques:
        if tid not in reached:
            raise TriageError("technique is not reached by any cause", where=str(tech_dir / f"{tid}.yaml"), key="id")


def _check_relative(rel: RelativeCap, engines: set[str], causes: dict[str, Cause], tree_path: Path, key: str) -> None:
    """A relative first action names a cause that exists, engines the first action has a command for, a {target} in
    each flag, the starting-point sentence of each of those engines, and the same {placeholders} in both
    languages."""
    if rel.memory_cause not in causes:
        raise TriageError(f"unknown cause '{rel.memory_cause}'", where=str(tree_path), key=f"{key}.memory_cause")
    for engine, flag in rel.flags.items():
        if engine not in engines or "{target}" not in flag:
            raise TriageError(f"'{engine}: {flag}' needs a known engine and a {{target}}", where=str(tree_path),
                              key=f"{key}.flags")
    if set(rel.unmeasured) != set(rel.flags):
        raise TriageError("unmeasured needs one sentence per engine in flags", where=str(tree_path),
                          key=f"{key}.unmeasured")
    texts = {"measured": rel.measured, "kv_unknown": rel.kv_unknown, "kv_full": rel.kv_full,
             **{f"unmeasured.{e}": text for e, text in rel.unmeasured.items()}}
    for name, text in texts.items():  # the verdict fills both languages with the same numbers
        if set(PLACEHOLDER.findall(text.en)) != set(PLACEHOLDER.findall(text.zh)):
            raise TriageError("the English and Chinese sentences name different {placeholders}",
                              where=str(tree_path), key=f"{key}.{name}")


def _load_signals(path: Path) -> tuple[dict[str, SignalDef], KpiRows, dict[str, CompareMetric]]:
    """The metric catalogue: signals, the KPI rows and the compared metrics, every name cross-checked."""
    data, items = _mapping_with_list(path, "signals", extra=("kpis", "compare"))
    signals: dict[str, SignalDef] = {}
    for i, raw in enumerate(items):
        sig = _parse(SignalDef, raw, path, f"signals[{i}]")
        if sig.name in signals:
            raise TriageError(f"duplicate signal '{sig.name}'", where=str(path), key=f"signals[{i}].name")
        signals[sig.name] = sig
    kpis: KpiRows = _parse(KpiRows, data.get("kpis"), path, "kpis")
    for row, names in (("benchmark", kpis.benchmark), ("live", kpis.live)):
        for i, name in enumerate(names):
            if name not in signals:
                raise TriageError(f"unknown signal '{name}'", where=str(path), key=f"kpis.{row}[{i}]")
    raw_compare = data.get("compare")
    if not isinstance(raw_compare, list) or not raw_compare:
        raise TriageError("expected a list of compared metrics", where=str(path), key="compare")
    compare: dict[str, CompareMetric] = {}
    for i, raw in enumerate(raw_compare):
        m = _parse(CompareMetric, raw, path, f"compare[{i}]")
        if m.id in compare:
            raise TriageError(f"duplicate metric '{m.id}'", where=str(path), key=f"compare[{i}].id")
        if m.signal not in signals:
            raise TriageError(f"unknown signal '{m.signal}'", where=str(path), key=f"compare[{i}].signal")
        if signals[m.signal].worse == "neither":
            raise TriageError(f"signal '{m.signal}' needs worse: higher or lower to be compared", where=str(path),
                              key=f"compare[{i}].signal")
        compare[m.id] = m
    return signals, kpis, compare


def _load_slo(path: Path) -> tuple[dict[str, SloPreset], str]:
    data = _read_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("presets"), dict):
        raise TriageError("expected a mapping with 'presets'", where=str(path), key="presets")
    unknown = set(data) - {"presets", "default"}
    if unknown:
        raise TriageError("unknown field", where=str(path), key=sorted(unknown)[0])
    presets = {name: _parse(SloPreset, raw, path, f"presets.{name}") for name, raw in data["presets"].items()}
    keys = [set(p.values) for p in presets.values()]
    for name, preset in presets.items():
        if set(preset.values) != keys[0]:
            raise TriageError("every preset needs the same keys", where=str(path), key=f"presets.{name}.values")
    default = data.get("default", next(iter(presets)))
    if default not in presets:
        raise TriageError(f"unknown default preset '{default}'", where=str(path), key="default")
    return presets, default


def _conditions(symptoms: tuple[Symptom, ...]) -> list[tuple[str, Condition]]:
    found: list[tuple[str, Condition]] = []
    for sym in symptoms:
        found += [(f"{sym.id}.trigger[{i}]", c) for i, c in enumerate(sym.trigger)]
        found += [(f"{sym.id}.trigger[{i}].requires[{j}]", r) for i, c in enumerate(sym.trigger)
                  for j, r in enumerate(c.requires)]
        for cause in sym.causes:
            if cause.rule:
                found += [(f"{cause.id}.rule.evidence[{i}]", c) for i, c in enumerate(cause.rule.evidence)]
    return found


def _check_rules(symptoms, causes, signals, presets, tree_path: Path) -> None:
    slo_keys = set(next(iter(presets.values())).values)
    for key, cond in _conditions(symptoms):
        if cond.signal not in signals:
            raise TriageError(f"unknown signal '{cond.signal}' (declare it in signals.yaml)", where=str(tree_path),
                              key=key)
        for slo in (cond.slo, cond.only_if):
            if slo is not None and slo not in slo_keys:
                raise TriageError(f"unknown SLO key '{slo}' (see slo.yaml)", where=str(tree_path), key=key)
    _check_fleet(symptoms, signals, tree_path)
    for cause in causes.values():
        for target in cause.rule.explains if cause.rule else []:
            if target not in causes:
                raise TriageError(f"explains unknown cause '{target}'", where=str(tree_path), key=f"{cause.id}.rule")


def _check_fleet(symptoms, signals: dict[str, SignalDef], tree_path: Path) -> None:
    """A fleet recipe reads replica signals only; a fleet symptom's conditions read fleet signals only, a replica
    symptom's never (each is judged over the signals its scope computes)."""
    for name, sig in signals.items():
        if sig.fleet is None:
            continue
        conds = sig.fleet.share or []
        for read in sig.fleet.reads():
            if read not in signals or signals[read].fleet is not None:
                raise TriageError(f"fleet recipe of '{name}' reads '{read}', which is not a replica signal",
                                  where=str(tree_path.parent / "signals.yaml"), key=name)
        if any(c.slo is not None or c.requires or c.only_if for c in conds):
            raise TriageError("a share condition is a plain 'signal op value'",
                              where=str(tree_path.parent / "signals.yaml"), key=name)
    for key, cond in _conditions(symptoms):
        scope = next(s.scope for s in symptoms if key.startswith(f"{s.id}."))
        conds = [cond, *cond.requires]
        if any((signals[c.signal].fleet is not None) != (scope == "fleet") for c in conds):
            want = "fleet signals (with a fleet recipe)" if scope == "fleet" else "replica signals, not fleet ones"
            raise TriageError(f"a {scope} symptom's conditions read {want}", where=str(tree_path), key=key)


def _mapping_with_list(path: Path, key: str, extra: tuple[str, ...] = ()) -> tuple[dict, list]:
    data = _read_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise TriageError(f"expected a mapping with a '{key}' list", where=str(path), key=key)
    unknown = set(data) - {key, *extra}
    if unknown:
        raise TriageError("unknown field", where=str(path), key=sorted(unknown)[0])
    return data, data[key]


def _by_id(items: list[Any], path: Path, key: str, what: str = "id") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        if item.id in out:
            raise TriageError(f"duplicate {what} '{item.id}'", where=str(path), key=f"{key}[{i}].id")
        out[item.id] = item
    return out


def _load_engines(folder: Path) -> dict[str, EngineSpec]:
    engines: dict[str, EngineSpec] = {}
    for path in sorted(folder.glob("*.yaml")):
        spec = _parse(EngineSpec, _read_yaml(path), path)
        if spec.id != path.stem:
            raise TriageError(f"engine id '{spec.id}' must match the file name '{path.stem}'", where=str(path),
                              key="id")
        keys = [m.key for m in spec.metrics]
        dup = next((k for k in keys if keys.count(k) > 1), None)
        if dup:
            raise TriageError(f"duplicate metric key '{dup}'", where=str(path), key="metrics")
        engines[spec.id] = spec
    if not engines:
        raise TriageError("no engine files (*.yaml)", where=str(folder))
    return engines


def _load_list(path: Path, key: str, model: type[BaseModel]) -> list[Any]:
    _, items = _mapping_with_list(path, key)
    return [_parse(model, raw, path, f"{key}[{i}]") for i, raw in enumerate(items)]


def read_gate_file(path: Path) -> tuple[GateRule, ...]:
    spec: GateSpec = _parse(GateSpec, _read_yaml(path), path)
    seen: set[str] = set()
    for i, rule in enumerate(spec.metrics):
        if rule.metric in seen:
            raise TriageError(f"metric '{rule.metric}' is gated twice", where=str(path), key=f"metrics[{i}]")
        seen.add(rule.metric)
    return tuple(spec.metrics)


def load_alerting_config(tree_dir: Path = DEFAULT_TREE_DIR) -> AlertingConfig:
    """tree/alerting.yaml of ``tree_dir``: the rule export's window, target labels, fleet labels, severities."""
    path = Path(tree_dir) / "alerting.yaml"
    return _parse(AlertingConfig, _read_yaml(path), path)


def _load_messages(path: Path) -> dict[str, Text]:
    """The message templates of provenance.yaml by id, each with the same {placeholders} in both languages."""
    raw = _read_yaml(path)
    if not isinstance(raw, dict) or set(raw) != {"messages"} or not isinstance(raw["messages"], dict):
        raise TriageError("expected 'messages:' holding a mapping of id → {en, zh}", where=str(path))
    messages = _strings(raw["messages"], path)
    for key, text in messages.items():
        en, zh = (sorted(PLACEHOLDER.findall(x)) for x in (text.en, text.zh))
        if en != zh:
            raise TriageError(f"placeholders differ: en has {en}, zh has {zh}", where=str(path), key=key)
    return messages


def _check_engines(kb: KnowledgeBase, tree_path: Path, tech_dir: Path) -> None:
    """Knobs and first actions name serving engines (tree/engines/*.yaml), and cover every ``knobs_required`` one."""
    serving, required = set(kb.serving), kb.knob_engines

    def check(named: Iterable[str], where: Path, key: str, what: str) -> None:
        named = list(named)
        unknown = [e for e in named if e not in serving]
        if unknown:
            raise TriageError(f"unknown serving engine(s) {', '.join(unknown)}; choose among {', '.join(kb.serving)}",
                              where=str(where), key=key)
        missing = [e for e in required if e not in named]
        if missing:
            raise TriageError(f"{what} missing for engine(s): {', '.join(missing)}", where=str(where), key=key)

    launched = [e.id for e in kb.engines.values() if e.launcher] + [
        e.launcher.router.id for e in kb.engines.values() if e.launcher and e.launcher.router]
    tools = set(launched)
    twice = sorted({t for t in launched if launched.count(t) > 1})
    if twice:
        raise TriageError(f"tool(s) launched by two engine maps: {', '.join(twice)}", where=str(tech_dir.parent /
                          "engines"), key="launcher")
    for tid, tech in kb.techniques.items():
        check(tech.knobs, tech_dir / f"{tid}.yaml", "knobs", "knobs")
        strange = [t for t in tech.verified if t not in tools]
        if strange:
            raise TriageError(f"no launcher for: {', '.join(strange)}; choose among {', '.join(sorted(tools))}",
                              where=str(tech_dir / f"{tid}.yaml"), key="verified")
        missing = [e for e in required if e not in tech.verified]
        if missing:
            raise TriageError(f"no verified version for: {', '.join(missing)}", where=str(tech_dir / f"{tid}.yaml"),
                              key="verified")
    for cause in kb.causes.values():
        if cause.first_action is not None:
            check(cause.first_action.engines, tree_path, f"{cause.id}.first_action", "first action")


def _check_recipes(signals: dict[str, SignalDef], messages: dict[str, Text], path: Path) -> None:
    """A recipe reads declared signals, never itself through others, and names messages of provenance.yaml with
    exactly their parameters."""
    def reads(recipe: Recipe | None) -> Iterator[str]:
        for part in (recipe.div or []) + (recipe.first or []) if recipe is not None else []:
            yield from reads(part)
        if recipe is not None and recipe.signal is not None:
            yield recipe.signal

    def cycle(name: str, path: tuple[str, ...]) -> tuple[str, ...] | None:
        for ref in reads(signals[name].recipe) if name in signals else ():
            if ref in path:
                return (*path, ref)
            found = cycle(ref, (*path, ref))
            if found:
                return found
        return None

    for i, sig in enumerate(signals.values()):
        loop = cycle(sig.name, (sig.name,))
        if loop:
            raise TriageError(f"recipe reads itself: {' → '.join(loop)}", where=str(path), key=f"signals[{i}].recipe")
        todo = [sig.recipe] if sig.recipe is not None else []
        while todo:
            part = todo.pop()
            todo += (part.div or []) + (part.first or [])
            if part.signal is not None and part.signal not in signals:
                raise TriageError(f"recipe reads unknown signal '{part.signal}'", where=str(path),
                                  key=f"signals[{i}].recipe")
            if part.how is None:
                continue
            if part.how.id not in messages:
                raise TriageError(f"unknown message '{part.how.id}' (add it to provenance.yaml)", where=str(path),
                                  key=f"signals[{i}].recipe")
            wanted = set(PLACEHOLDER.findall(messages[part.how.id].en))
            if set(part.how.params) != wanted:
                raise TriageError(f"message '{part.how.id}' takes parameters {sorted(wanted)}, got "
                                  f"{sorted(part.how.params)}", where=str(path), key=f"signals[{i}].recipe")


def _load_strings(path: Path) -> dict[str, Text]:
    raw = _read_yaml(path)
    if not isinstance(raw, dict):
        raise TriageError("expected a mapping of key → {en, zh}", where=str(path))
    return _strings(raw, path)


def _strings(raw: dict, path: Path) -> dict[str, Text]:
    strings: dict[str, Text] = {}
    for key, value in raw.items():
        try:
            strings[key] = Text.model_validate(value)
        except ValidationError as exc:  # pydantic's message is long; one line is enough here
            raise TriageError(f"needs non-blank {' and '.join(LANGS)}", where=str(path), key=key) from exc
    return strings


def _load_panels(path: Path, symptom_ids: set[str]) -> tuple[list[Panel], tuple[PanelGroup, ...]]:
    """The Live panels and their groups (tabs): every panel in a declared group, every group holding a panel."""
    data, items = _mapping_with_list(path, "panels", extra=("groups",))
    raw_groups = data.get("groups")
    if not isinstance(raw_groups, list) or not raw_groups:
        raise TriageError("expected a non-empty 'groups' list", where=str(path), key="groups")
    groups = [_parse(PanelGroup, raw, path, f"groups[{i}]") for i, raw in enumerate(raw_groups)]
    by_id = _by_id(groups, path, "groups")
    for i, group in enumerate(groups):
        unknown = next((s for s in group.symptoms if s not in symptom_ids), None)
        if unknown:
            raise TriageError(f"unknown symptom '{unknown}'", where=str(path), key=f"groups[{i}].symptoms")
    panels = [_parse(Panel, raw, path, f"panels[{i}]") for i, raw in enumerate(items)]
    _by_id(panels, path, "panels")
    for i, panel in enumerate(panels):
        if panel.group not in by_id:
            raise TriageError(f"unknown group '{panel.group}'; choose one of {', '.join(by_id)}", where=str(path),
                              key=f"panels[{i}].group")
    empty = next((g.id for g in groups if not any(p.group == g.id for p in panels)), None)
    if empty:
        raise TriageError(f"group '{empty}' holds no panel", where=str(path), key="groups")
    return panels, tuple(groups)


def _load_scenarios(path: Path) -> dict[str, Scenario]:
    """Scenarios by id; each scenario's params are the file's ``defaults`` overridden by its own."""
    data, items = _mapping_with_list(path, "scenarios", extra=("defaults",))
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise TriageError("expected a mapping", where=str(path), key="defaults")
    out: dict[str, Scenario] = {}
    for i, raw in enumerate(items):
        merged = {**raw, "params": {**defaults, **(raw.get("params") or {})}} if isinstance(raw, dict) else raw
        sc = _parse(Scenario, merged, path, prefix=f"scenarios[{i}]")
        if sc.id in out:
            raise TriageError(f"duplicate scenario id '{sc.id}'", where=str(path), key=f"scenarios[{i}].id")
        out[sc.id] = sc
    return out


# Every file the loader knows, relative to the tree directory (a folder name covers its *.yaml files).
KNOWN_FILES = ("tree.yaml", "guidance.yaml", "techniques", "signals.yaml", "slo.yaml", "engines", "panels.yaml",
               "gate.yaml", "retro.yaml", "models.yaml", "gpus.yaml", "ui.yaml", "scenarios.yaml", "alerting.yaml",
               "provenance.yaml")


def unknown_yaml_files(root: Path) -> list[Path]:
    """YAML files no part of the loader reads (syntax-checked only); a test keeps this list empty."""
    known = {root / k for k in KNOWN_FILES}
    return [p for p in yaml_files(root) if p not in known and p.parent not in known]


def _read(root: Path) -> KnowledgeBase:
    tree_path, tech_dir = root / "tree.yaml", root / "techniques"
    symptoms = _load_symptoms(tree_path)
    guidance = _parse(Guidance, _read_yaml(root / "guidance.yaml"), root / "guidance.yaml")
    techniques = _load_techniques(tech_dir)
    causes, parent = _index_causes(symptoms, tree_path)
    _cross_check(causes, techniques, tree_path, tech_dir)
    signals, kpis, compare = _load_signals(root / "signals.yaml")
    presets, default_slo = _load_slo(root / "slo.yaml")
    _check_rules(symptoms, causes, signals, presets, tree_path)
    slo_keys = set(next(iter(presets.values())).values)
    for i, sig in enumerate(signals.values()):
        if sig.slo is not None and sig.slo not in slo_keys:
            raise TriageError(f"unknown SLO key '{sig.slo}' (see slo.yaml)", where=str(root / "signals.yaml"),
                              key=f"signals[{i}].slo")
    gate_path = root / "gate.yaml"
    gate = read_gate_file(gate_path)
    for i, rule in enumerate(gate):
        if rule.metric not in compare:
            raise TriageError(f"unknown metric '{rule.metric}'; choose one of {', '.join(compare)}",
                              where=str(gate_path), key=f"metrics[{i}].metric")
    panels = root / "panels.yaml"
    panels_list, groups = _load_panels(panels, {s.id for s in symptoms})
    models, gpus = root / "models.yaml", root / "gpus.yaml"
    retro = root / "retro.yaml"
    retro_steps = _load_list(retro, "steps", RetroStep)
    _by_id(retro_steps, retro, "steps")
    kb = KnowledgeBase(
        symptoms=symptoms, techniques=techniques, guidance=guidance, source_dir=root, signals=signals,
        slo_presets=presets, default_slo=default_slo, causes=causes, parent=parent,
        engines=_load_engines(root / "engines"), panels=tuple(panels_list), panel_groups=groups, gate=gate,
        kpis=kpis, compare=compare,
        retro=tuple(retro_steps), models=_by_id(_load_list(models, "models", ModelEntry), models, "models"),
        gpus=_by_id(_load_list(gpus, "gpus", GpuEntry), gpus, "gpus"), strings=_load_strings(root / "ui.yaml"),
        messages=_load_messages(root / "provenance.yaml"), scenarios=_load_scenarios(root / "scenarios.yaml"))
    _check_recipes(signals, kb.messages, root / "signals.yaml")
    _check_engines(kb, tree_path, tech_dir)
    for i, group in enumerate(groups):
        if group.title_key not in kb.strings:
            raise TriageError(f"no interface string '{group.title_key}' (the tab's title) in ui.yaml",
                              where=str(panels), key=f"groups[{i}].id")
    alerting = root / "alerting.yaml"
    if alerting.exists():  # read by `triage rules`; checked here so a broken file is refused with the rest
        _parse(AlertingConfig, _read_yaml(alerting), alerting)
    for path in unknown_yaml_files(root):
        _read_yaml(path)  # data another part adds: at least it must parse
    return kb


_active_dir: Path = DEFAULT_TREE_DIR
_active_kb: KnowledgeBase | None = None  # the active tree, once loaded: the hot path (every UI string) asks it
_cache: dict[Path, tuple[str, KnowledgeBase]] = {}


def use_tree_dir(tree_dir: Path | str | None) -> None:
    """Make ``tree_dir`` the default knowledge base of this process (None: the repository's tree/); it is
    checked again on its next use."""
    global _active_dir, _active_kb
    _active_dir = Path(tree_dir) if tree_dir is not None else DEFAULT_TREE_DIR
    _active_kb = None


def active_tree_dir() -> Path:
    return _active_dir


def load_knowledge(tree_dir: Path | str | None = None) -> KnowledgeBase:
    """The whole knowledge base of ``tree_dir``; TriageError on the first problem.

    With a directory, the cached result is used only while no file in it has changed. Without one, the active
    tree (``use_tree_dir``) is loaded once and then served as is, as cheaply as a constant.
    """
    global _active_kb
    if tree_dir is None:
        if _active_kb is None:
            _active_kb = _load_checked(_active_dir)
        return _active_kb
    return _load_checked(Path(tree_dir))


def _load_checked(root: Path) -> KnowledgeBase:
    if not root.is_dir():
        raise TriageError("not a directory", where=str(root))
    try:
        key = content_key(root)  # the cache is rebuilt when the content of any YAML file changes
    except OSError:
        key = ""  # an unreadable file: read now, so the loader names it
    hit = _cache.get(root)
    if key and hit is not None and hit[0] == key:
        return hit[1]
    kb = _read(root)
    if key and content_key(root) == key:  # no file changed while it was read
        _cache[root] = (key, kb)
    return kb
