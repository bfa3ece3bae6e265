"""Load and validate the knowledge base in tree/ into one typed, cross-checked object."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from triage.errors import TriageError
from triage.knowledge.model import Cause, Condition, Guidance, SignalDef, SloPreset, Symptom, Technique

DEFAULT_TREE_DIR = Path(__file__).resolve().parents[2] / "tree"
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
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TriageError(f"cannot read: {exc}", where=str(path)) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        key = f"line {mark.line + 1}" if mark else ""
        raise TriageError(f"invalid YAML: {getattr(exc, 'problem', exc)}", where=str(path), key=key) from exc


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
        if cause.id in techniques:
            raise TriageError(f"duplicate id '{cause.id}'", where=str(tree_path), key=cause.id)
    for tid in techniques:
        if tid not in reached:
            raise TriageError("technique is not reached by any cause", where=str(tech_dir / f"{tid}.yaml"), key="id")


def _load_signals(path: Path) -> dict[str, SignalDef]:
    data = _read_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("signals"), list):
        raise TriageError("expected a mapping with a 'signals' list", where=str(path), key="signals")
    signals: dict[str, SignalDef] = {}
    for i, raw in enumerate(data["signals"]):
        sig = _parse(SignalDef, raw, path, f"signals[{i}]")
        if sig.name in signals:
            raise TriageError(f"duplicate signal '{sig.name}'", where=str(path), key=f"signals[{i}].name")
        signals[sig.name] = sig
    return signals


def _load_slo(path: Path) -> tuple[dict[str, SloPreset], str]:
    data = _read_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("presets"), dict):
        raise TriageError("expected a mapping with 'presets'", where=str(path), key="presets")
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
    for cause in causes.values():
        for target in cause.rule.explains if cause.rule else []:
            if target not in causes:
                raise TriageError(f"explains unknown cause '{target}'", where=str(tree_path), key=f"{cause.id}.rule")


def load_knowledge(tree_dir: Path | str = DEFAULT_TREE_DIR) -> KnowledgeBase:
    """Read tree, guidance, techniques, signals and SLO presets; raise TriageError on the first problem."""
    root = Path(tree_dir)
    if not root.is_dir():
        raise TriageError("not a directory", where=str(root))
    tree_path, tech_dir = root / "tree.yaml", root / "techniques"
    symptoms = _load_symptoms(tree_path)
    guidance = _parse(Guidance, _read_yaml(root / "guidance.yaml"), root / "guidance.yaml")
    techniques = _load_techniques(tech_dir)
    causes, parent = _index_causes(symptoms, tree_path)
    _cross_check(causes, techniques, tree_path, tech_dir)
    signals = _load_signals(root / "signals.yaml")
    presets, default_slo = _load_slo(root / "slo.yaml")
    _check_rules(symptoms, causes, signals, presets, tree_path)
    return KnowledgeBase(symptoms=symptoms, techniques=techniques, guidance=guidance, source_dir=root,
                         signals=signals, slo_presets=presets, default_slo=default_slo,
                         causes=causes, parent=parent)
