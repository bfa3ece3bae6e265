"""Prometheus rules from the tree: recording rules per signal, one alert per cause decidable from server metrics.

An alert fires for a replica when, as in triage/diagnosis/rules.py, its symptom is present (any trigger holds,
unless a measurable requirement fails) and its cause matches (a primary condition holds and at least
``min_agree`` conditions hold). Conditions on signals no engine exports are left out, as the Python diagnosis
finds them not measurable; a cause left with nothing to decide on is reported as skipped, with the reason.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from triage.alerting.promql import (
    Compiler,
    FleetCompiler,
    duration_seconds,
    duration_text,
    record_name,
    replica_labels,
)
from triage.diagnosis.rules import Slo
from triage.errors import TriageError
from triage.knowledge.engines import EngineSpec, load_engines
from triage.knowledge.loader import DEFAULT_TREE_DIR, KnowledgeBase, _parse, _read_yaml, active_tree_dir
from triage.knowledge.model import AlertingConfig, Condition
from triage.knowledge.recipes import recipe_signals

NEGATE = {">": "<=", ">=": "<", "<": ">=", "<=": ">", "==": "!="}
DASHBOARD_ENV = "TRIAGE_DASHBOARD_URL"
LIVE_PATH = "live"
EVIDENCE_LABEL = "triage_evidence"
PROFILE_RE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
MAX_URL_CHARS = 2000
# C0/C1 controls, DEL, whitespace of any kind and the bidi/zero-width characters that disguise a link
_URL_BAD_CHAR = re.compile(r"[\x00-\x20\x7f-\xa0\u1680\u180e\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\ufeff]")


def load_config(tree_dir: Path = DEFAULT_TREE_DIR) -> AlertingConfig:
    path = Path(tree_dir) / "alerting.yaml"
    return _parse(AlertingConfig, _read_yaml(path), path)


def target_labels() -> tuple[str, ...]:
    """The active tree's (the CLI's --tree-dir) alerting target labels (job, instance, …)."""
    return _target_labels(active_tree_dir())


@lru_cache(maxsize=8)
def _target_labels(tree_dir: Path) -> tuple[str, ...]:
    # read once per tree directory: the fleet and the info join ask for them on every refresh
    return tuple(load_config(tree_dir).target_labels)


def default_dashboard_url(config: AlertingConfig) -> str:
    return os.environ.get(DASHBOARD_ENV) or config.dashboard_url


def checked_dashboard_url(url: str, key: str = "--dashboard-url") -> str:
    """The dashboard's base URL for runbook links, or a TriageError: http(s) with a host, no control character or
    whitespace (a newline would start a new YAML key or annotation line), no credentials (everyone who sees an
    alert reads its annotations), no fragment (the link's own query follows the base). ``javascript:``,
    ``data:`` and ``file:`` links are refused. Braces are percent-encoded, so the base cannot hold a Prometheus
    template (``{{ … }}``) that the rule file would evaluate."""
    if not isinstance(url, str) or not url.strip():
        raise TriageError("give the dashboard's base URL, http:// or https://", key=key)
    if len(url) > MAX_URL_CHARS:
        raise TriageError(f"is longer than {MAX_URL_CHARS} characters; give the dashboard's base URL", key=key)
    if _URL_BAD_CHAR.search(url):
        raise TriageError("holds a control character or whitespace; give a plain http(s) URL", key=key)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        raise TriageError("is not a valid URL; give the dashboard's base URL, http:// or https://", key=key) from None
    if parts.scheme.lower() not in ("http", "https"):
        raise TriageError("must start with http:// or https:// (a runbook link opens in the browser of whoever "
                          "reads the alert)", key=key)
    if not parts.hostname:
        raise TriageError("names no host; give e.g. https://triage.example.internal", key=key)
    if "@" in parts.netloc:
        raise TriageError("must not carry credentials (user:password@): every reader of an alert sees its links",
                          key=key)
    if parts.fragment or url.endswith("#"):
        raise TriageError("must not end in a #fragment: the runbook link adds its own query after the base", key=key)
    return url.replace("{", "%7B").replace("}", "%7D")


def checked_profile(profile: str | None, key: str = "--profile") -> str | None:
    """A profile name for runbook links: letters, digits, ``_ . -`` only, so it is safe in a URL, a YAML string
    and a Prometheus template alike."""
    if profile is None:
        return None
    if not PROFILE_RE.fullmatch(profile):
        raise TriageError("a profile name is 1 to 64 letters, digits, '_', '.' or '-'", key=key)
    return profile


def template_literal(text: str) -> str:
    """``text`` as literal output of a Prometheus (Go) template: each ``{{`` becomes an action printing ``{{``."""
    return text.replace("{{", '{{ "{{" }}')


@dataclass(frozen=True)
class Skipped:
    cause: str
    symptom: str
    reason: str


@dataclass(frozen=True)
class Alert:
    name: str
    cause: str
    symptom: str
    severity: str
    expr: str  # reads the recording rules
    signals: list[str]  # recording rules it reads
    rule: dict[str, Any]  # the alerting rule as written to the file


@dataclass
class RuleSet:
    window: str
    group_labels: tuple[str, ...]
    records: dict[str, str]  # signal → expression
    alerts: list[Alert]
    skipped: list[Skipped]
    config: AlertingConfig
    evaluation_interval: str = "1m"

    recording_only: bool = False  # only the recording rules (e.g. another window for the fleet view)

    def group(self) -> dict[str, Any]:
        rules: list[dict[str, Any]] = [{"record": record_name(s, self.window), "expr": e} for s, e in
                                       self.records.items()]
        if self.recording_only:
            return {"name": f"{self.config.group}-{self.window}", "interval": self.evaluation_interval,
                    "rules": rules}
        rules += [a.rule for a in self.alerts]
        return {"name": self.config.group, "interval": self.evaluation_interval, "rules": rules}

    def rule_file(self) -> dict[str, Any]:
        return {"groups": [self.group()]}

    def prometheus_rule(self, name: str, namespace: str | None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/part-of": "inference-triage"}}
        if namespace:
            meta["namespace"] = namespace
        return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule", "metadata": meta,
                "spec": self.rule_file()}


def alert_name(cause_id: str) -> str:
    return "Triage" + "".join(part.capitalize() for chunk in cause_id.split(".") for part in chunk.split("_"))


@dataclass
class _Builder:
    kb: KnowledgeBase
    slo: Slo
    compiler: Compiler | FleetCompiler
    window: str

    def threshold(self, cond: Condition) -> float:
        value = cond.value if cond.slo is None else float(self.slo.values[cond.slo]) * cond.factor
        assert value is not None  # the model requires a value or an SLO key
        return float(value)  # a bool compares as 1 / 0

    def measurable(self, signal: str) -> bool:
        return self.compiler.signal(signal) is not None

    def condition(self, cond: Condition) -> str | None:
        """``signal op threshold`` as a PromQL filter (None when not measurable); a measurable requirement that
        fails removes the replica (``unless``), an unmeasurable one does not block, as in rules.check."""
        if not self.measurable(cond.signal):
            return None
        expr = f"{self.compiler.ref(cond.signal)} {cond.op} {_num(self.threshold(cond))}"
        for req in cond.requires:
            if req.only_if is not None and not self.slo.values.get(req.only_if):
                continue
            if self.measurable(req.signal):
                block = f"{self.compiler.ref(req.signal)} {NEGATE[req.op]} {_num(self.threshold(req))}"
                expr = f"({expr}) unless {self.compiler.on()} ({block})"
        return expr

    def active(self, conds: list[Condition]) -> list[tuple[Condition, str | None]]:
        """Conditions the SLO switches on, each with its filter (None: not measurable from server metrics); context
        conditions (shown for their value, never counted for or against) are left out, as rules.py does."""
        return [(c, self.condition(c)) for c in conds
                if (c.only_if is None or self.slo.values.get(c.only_if)) and not c.context]


def _num(value: float) -> str:
    return repr(float(value)) if value != int(value) else str(int(value))


def _or(parts: list[str], on: str) -> str:
    return f" or {on} ".join(f"({p})" for p in parts) if len(parts) > 1 else parts[0]


def _signals_in(conds: list[tuple[Condition, str | None]], b: _Builder) -> list[str]:
    """The recorded signals the filters read: each condition's signal and its measurable requirements'."""
    out: list[str] = []
    for c, expr in conds:
        if expr is not None:
            out += [s for s in (c.signal, *(r.signal for r in c.requires)) if s not in out and b.measurable(s)]
    return out


def _unmeasured(conds: list[tuple[Condition, str | None]], compiler: Compiler | FleetCompiler) -> str:
    names = sorted({c.signal for c, e in conds if e is None})
    return ", ".join(compiler.why_not(n) for n in names) if names else "none"


def build(kb: KnowledgeBase, slo: Slo, *, window: str | None = None, for_: str | None = None,
          dashboard_url: str | None = None, profile: str | None = None,
          engines: Mapping[str, EngineSpec] | None = None, config: AlertingConfig | None = None,
          match: Mapping[str, str] | None = None, inline: bool = False, alert_time: bool = True) -> RuleSet:
    """The rule set for an SLO. ``match`` narrows every selector and ``inline`` writes each recording rule's
    expression into the alerts that read it (both for the dry run, which has no rules loaded). Without
    ``alert_time`` the runbook links leave the time out (vmalert -replay refuses the template that reads it)."""
    config = config or load_config(kb.source_dir)
    engines = dict(engines or load_engines())
    window = window or config.window
    try:
        window = duration_text(duration_seconds(window))
        for_ = duration_text(duration_seconds(for_ or config.for_))
    except ValueError as exc:
        raise TriageError(str(exc), key="--window/--for") from None
    group = replica_labels(config.target_labels, engines)
    compiler = Compiler(kb, engines, window, group, dict(match or {}), inline)
    b = _Builder(kb, slo, compiler, window)
    alerts: list[Alert] = []
    skipped: list[Skipped] = []
    if dashboard_url is not None:
        url = checked_dashboard_url(dashboard_url)
    elif os.environ.get(DASHBOARD_ENV):
        url = checked_dashboard_url(os.environ[DASHBOARD_ENV], key=DASHBOARD_ENV)
    else:
        url = checked_dashboard_url(config.dashboard_url, key="alerting.yaml: dashboard_url")
    profile = checked_profile(profile)
    fleet = _Builder(kb, slo, FleetCompiler(compiler, tuple(config.fleet_labels)), window)
    replica_builder, replica_group, replica_compiler = b, group, compiler
    for sym in kb.symptoms:
        # a fleet symptom's conditions compare the replicas' recorded signals across the fleet labels
        b, group = (fleet, tuple(config.fleet_labels)) if sym.scope == "fleet" else (replica_builder, replica_group)
        compiler = b.compiler  # type: ignore[assignment]
        triggers = b.active(sym.trigger)
        sym_parts = [e for _, e in triggers if e is not None]
        for cause in sym.causes:
            if cause.rule is None:
                skipped.append(Skipped(cause.id, sym.id, "the cause has no rule in tree.yaml"))
                continue
            if not sym_parts:
                why = (f"symptom '{sym.id}' has no trigger measurable from server metrics under SLO "
                       f"'{slo.name}' (not measurable: {_unmeasured(triggers, compiler)})")
                skipped.append(Skipped(cause.id, sym.id, why))
                continue
            evidence = b.active(cause.rule.evidence)
            primary = [e for c, e in evidence if e is not None and not c.supports_only]
            measured = [e for _, e in evidence if e is not None]
            if not primary or len(measured) < cause.rule.min_agree:
                why = f"its evidence needs signals not measurable on the server: {_unmeasured(evidence, compiler)}"
                if primary:
                    why += f" (needs {cause.rule.min_agree} to agree, {len(measured)} measurable)"
                skipped.append(Skipped(cause.id, sym.id, why))
                continue
            on = compiler.on()
            expr = f"({_or(primary, on)})"
            if cause.rule.min_agree > 1:
                tagged = [f'label_replace({e}, "{EVIDENCE_LABEL}", "{i}", "", "")' for i, e in enumerate(measured)]
                expr += f" and {on} (count {compiler.by()} ({' or '.join(tagged)}) >= {cause.rule.min_agree})"
            expr += f" and {on} ({_or(sym_parts, on)})"
            signals = list(dict.fromkeys(_signals_in(triggers, b) + _signals_in(evidence, b)))
            severity = config.severity.get(sym.id, "warning")
            link = runbook_url(url, cause.id, group, window, profile, alert_time) if sym.scope == "replica" \
                else node_url(url, cause.id)
            rule = _alert_rule(kb, sym.id, cause.id, expr, for_, severity, evidence, triggers, link, group, window, b)
            alerts.append(Alert(alert_name(cause.id), cause.id, sym.id, severity, expr, signals, rule))
    replica_alerts = [a for a in alerts if kb.symptom(a.symptom).scope == "replica"]
    records = _records(kb, replica_compiler, replica_alerts)
    records.update(_fleet_records(kb, fleet.compiler))  # they read the replica records: after them
    return RuleSet(window, replica_group, records, alerts, skipped, config, config.evaluation_interval)


def _fleet_records(kb: KnowledgeBase, compiler: Compiler | FleetCompiler) -> dict[str, str]:
    """A recording rule for every fleet signal with PromQL (what the fleet alerts read), in signals.yaml order."""
    found = ((name, compiler.signal(name)) for name, sig in kb.signals.items() if sig.fleet is not None)
    return {name: expr for name, expr in found if expr is not None}


def node_url(base: str, cause: str) -> str:
    """The Diagnose page on the cause's branch (a fleet alert names no replica to open a Live view on)."""
    parts = urlsplit(base)
    first = f"{parts.query}&" if parts.query else ""
    return urlunsplit((parts.scheme, parts.netloc, f"{parts.path.rstrip('/')}/", "", "")) + f"?{first}node={cause}"


def recorded_signals(kb: KnowledgeBase, compiler: Compiler) -> list[str]:
    """Every server signal with PromQL (a recipe every serving engine map can answer per replica): what the alerts
    read, and the rest of what a server diagnosis computes, so a fleet diagnosis can read them all recorded."""
    return [name for name, sig in kb.signals.items() if sig.recipe is not None and compiler.signal(name) is not None]


def _records(kb: KnowledgeBase, compiler: Compiler, alerts: list[Alert]) -> dict[str, str]:
    """Recording rules for every signal an alert reads and every other server signal with PromQL (the fleet
    diagnosis reads them), dependencies first, in signals.yaml order."""
    wanted: list[str] = []

    def need(name: str) -> None:
        for dep in recipe_signals(kb, name):
            need(dep)
        if name not in wanted:
            wanted.append(name)

    for alert in alerts:
        for s in alert.signals:
            need(s)
    for s in recorded_signals(kb, compiler):
        need(s)
    order = list(kb.signals)
    wanted.sort(key=lambda s: (len(recipe_signals(kb, s)) > 0, order.index(s)))
    out: dict[str, str] = {}
    for s in wanted:
        expr = compiler.signal(s)
        assert expr is not None
        out[s] = expr
    return out


def _describe(kb: KnowledgeBase, conds: list[tuple[Condition, str | None]], b: _Builder) -> str:
    return "; ".join(f"{c.signal} {c.op} {_num(b.threshold(c))} ({c.meaning.en})" for c, e in conds if e is not None)


ALERT_TIME = '&end={{ with query "time()" }}{{ . | first | value | printf "%.0f" }}{{ end }}'


def runbook_url(base: str, cause: str, group: tuple[str, ...], window: str, profile: str | None,
                alert_time: bool = True) -> str:
    """The Live view of this replica (its labels as match_<label>), at the alert's evaluation time, node=cause.
    The time comes from the template function ``query "time()"`` (neither Prometheus nor vmalert offers the time
    otherwise); vmalert -replay refuses ``query``, so a file for replay leaves it out (``alert_time`` False) and the
    link opens the Live view at the time it is clicked."""
    labels = "".join(f"{{{{ if $labels.{g} }}}}&match_{g}={{{{ $labels.{g} | urlquery }}}}{{{{ end }}}}"
                      for g in group)
    prof = f"&profile={profile}" if profile else ""
    # a base with a query (a proxy's ?tenant=a) keeps it: the Live path goes on its path, its query first
    parts = urlsplit(base)
    page = urlunsplit((parts.scheme, parts.netloc, f"{parts.path.rstrip('/')}/{LIVE_PATH}", "", ""))
    first = f"{parts.query}&" if parts.query else ""
    return f"{page}?{first}source=prometheus{prof}&window={window}{ALERT_TIME if alert_time else ''}{labels}" \
           f"&node={cause}"


def _alert_rule(kb: KnowledgeBase, symptom: str, cause: str, expr: str, for_: str, severity: str,
                evidence: list[tuple[Condition, str | None]], triggers: list[tuple[Condition, str | None]],
                link: str, group: tuple[str, ...], window: str, b: _Builder) -> dict[str, Any]:
    c = kb.causes[cause]
    sym = next(s for s in kb.symptoms if s.id == symptom)
    who = "".join(f"{{{{ with $labels.{g} }}}}{g}={{{{ . }}}} {{{{ end }}}}" for g in group)
    min_agree = c.rule.min_agree if c.rule else 1
    agree = f"at least {min_agree} of: " if min_agree > 1 else "any of: "
    lit = template_literal  # tree text and names are data, never template actions
    description = (f"{lit(sym.title.en)}, because: {lit(c.title.en)}. Evidence over the last {window}, {agree}"
                   f"{lit(_describe(kb, evidence, b))}. The first of these that holds reads "
                   f"{{{{ $value | humanize }}}}. Symptom: {lit(_describe(kb, triggers, b))}. "
                   f"SLO preset '{lit(b.slo.name)}'.")
    return {
        "alert": alert_name(cause),
        "expr": expr,
        "for": for_,
        "labels": {"cause": cause, "symptom": symptom, "severity": severity},
        "annotations": {
            "summary": f"{lit(c.title.en)} ({lit(sym.short.en)}) on {who}: {{{{ $value | humanize }}}}",
            "description": description,
            "runbook_url": link,
        },
    }


def dump_yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10**6)
