"""Diagnose every replica of a fleet from one grouped read: each group as a single-window diagnosis of it would.

Two ways to read: the raw read (every need's PromQL grouped by the fleet's labels, one request per need), or,
when the Prometheus evaluates `python -m triage rules` for the window, the recorded signals ``triage:<signal>:<window>``
of the rules' last evaluation (one probe, one read of a few series per replica), with the raw read kept for the needs
of any signal the rules do not record (model-table and DCGM signals, info labels)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from triage.diagnosis.batch_cap import RUNNING, SERIES_POINTS, WAITING, put_plateau, queued
from triage.diagnosis.fleet_signals import Replica, fleet_signals
from triage.diagnosis.roofline import Hardware
from triage.diagnosis.rules import Diagnosis, Slo, diagnose
from triage.diagnosis.server_signals import (
    RecordedSignals,
    first_needs,
    info_needs,
    later_needs,
    more_needs,
    server_signals,
)
from triage.diagnosis.signals import SignalSet
from triage.diagnosis.window import LiveDiagnosis, empty_reason
from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.messages import Msg
from triage.knowledge.needs import Need
from triage.knowledge.recipes import recipe_needs, recipe_signals
from triage.knowledge.replicas import duration_text, record_name, replica_labels, target_labels
from triage.sources.metrics.prometheus_fleet import FleetWindow, GroupKey, Recorded
from triage.sources.readings import Readings
from triage.sources.running_plateau import queued_plateau


@dataclass
class FleetRow:
    labels: dict[str, str]
    live: LiveDiagnosis

    @property
    def diagnosis(self) -> Diagnosis:
        return self.live.diagnosis

    @property
    def symptoms(self) -> list[str]:
        return [c.symptom for c in self.diagnosis.symptoms if c.present]

    @property
    def top_cause(self) -> str | None:
        return self.diagnosis.findings[0].cause if self.diagnosis.findings else None


@dataclass
class FleetRead:
    """How the fleet was read: ``recorded`` (the rules' series, ``signals``, evaluated at ``end``) or ``raw``
    (every need grouped server-side), with the reason the recorded series were not used."""

    path: str  # "recorded" | "raw"
    end: datetime
    rules: str = ""  # triage:*:<window>
    reason: str = ""  # why raw
    signals: list[str] = field(default_factory=list)  # read from the recording rules
    raw_needs: list[str] = field(default_factory=list)  # read raw alongside ("kind:key")

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {"path": self.path, "end": self.end.isoformat(), "rules": self.rules}
        if self.path == "recorded":
            out.update(signals=self.signals, raw_needs=self.raw_needs)
        else:
            out["reason"] = self.reason
        return out

    def sentence(self) -> str:
        if self.path == "recorded":
            raw = f"; read raw: {', '.join(self.raw_needs)}" if self.raw_needs else ""
            return (f"read from the recording rules {self.rules} ({len(self.signals)} signals, evaluated at "
                    f"{self.end:%Y-%m-%d %H:%M:%S} UTC){raw}")
        return f"read raw, every need grouped server-side ({self.reason})"


@dataclass
class FleetDiagnosis:
    rows: list[FleetRow]
    read: FleetRead
    fleet: Diagnosis | None = None  # the fleet symptoms over every row's signals (straggler, skew, capacity)


def fleet_diagnosis(kb: KnowledgeBase, rows: list[FleetRow], slo: Slo) -> Diagnosis:
    """The fleet symptoms and causes judged once over the fleet signals of every row with something to judge
    (a row with no traffic is left out: it has no latency to compare, and its idle queue is not a peer's room)."""
    replicas = [Replica(row.labels, row.diagnosis.signals) for row in rows if not row.diagnosis.empty]
    diag = diagnose(kb, fleet_signals(kb, replicas), slo)
    if len(replicas) < 2:
        diag.empty = f"{len(replicas)} replica(s) with traffic in the window: a fleet needs at least 2 to compare"
    return diag


def diagnose_fleet(kb: KnowledgeBase, window: FleetWindow, slo: Slo,
                   hardware: Hardware | None = None, recorded: bool = True) -> FleetDiagnosis:
    """One row per group of the window's labels, in label order: from the recording rules' series when the
    Prometheus evaluates them for this window and each group is one replica of the rules (``recorded`` False:
    never), else from the raw read."""
    rules = record_name("*", duration_text(window.window_seconds))
    reason = "recorded signals not asked for (--raw)"
    if recorded:
        found = window.read_recorded(duration_text(window.window_seconds), rule_labels(window),
                                     base_signals(kb), info_needs(kb))
        if isinstance(found, Recorded):
            result = _from_recorded(kb, window, slo, hardware, found, rules)
            result.fleet = fleet_diagnosis(kb, result.rows, slo)
            return result
        reason = found
    rows = _from_raw(kb, window, slo, hardware)
    return FleetDiagnosis(rows, FleetRead("raw", window.end, rules, reason), fleet_diagnosis(kb, rows, slo))


def base_signals(kb: KnowledgeBase) -> list[str]:
    """The recorded signals the fleet reads: those computed from readings alone, none of them from an add-on
    engine (DCGM), whose series carry no replica labels for a rule to group. The ratios of other signals (tail
    ratios, spreads) are not read again: server_signals divides the recorded values, as it does on a raw read."""
    return [name for name, sig in kb.signals.items() if sig.recipe is not None and not recipe_signals(kb, name)
            and not any(n.engine for n in recipe_needs(kb, name))]


def rule_labels(window: FleetWindow) -> tuple[str, ...]:
    """The labels `python -m triage rules` groups every recording rule by (tree/alerting.yaml + engine maps)."""
    return replica_labels(target_labels(), window.engines)


def _rows(kb: KnowledgeBase, window: FleetWindow, slo: Slo, hardware: Hardware | None,
          groups: dict[GroupKey, Readings], outs: dict[GroupKey, SignalSet] | None = None) -> list[FleetRow]:
    by_key = {}
    for key, readings in groups.items():
        signals = by_key[key] = server_signals(kb, readings, hardware, outs[key] if outs else None)
        if isinstance(signals, RecordedSignals):
            signals.complete(kb)
    _put_running_caps(kb, window, by_key)
    rows = []
    for key, signals in by_key.items():
        diag = diagnose(kb, signals, slo)
        diag.empty = empty_reason(signals)
        rows.append(FleetRow(dict(key), LiveDiagnosis(diag, groups[key], window.engine.id)))
    return rows


def _put_running_caps(kb: KnowledgeBase, window: FleetWindow, signals: dict[GroupKey, SignalSet]) -> None:
    """Each replica's ``running_cap`` as a single window of it reads it (diagnosis/batch_cap.py), for the replicas
    where requests waited: their running series at the times requests waited, one range query for all of them
    (Prometheus pairs the running and waiting series and sends only those points)."""
    keys = [key for key, out in signals.items() if queued(out)]
    if not keys:
        return
    running = window.both_above_zero(RUNNING, WAITING, SERIES_POINTS, keys)
    for key in keys:
        put_plateau(kb, signals[key], queued_plateau(running[key]))


def _from_raw(kb: KnowledgeBase, window: FleetWindow, slo: Slo, hardware: Hardware | None) -> list[FleetRow]:
    groups = window.read_groups(first_needs(kb))
    _read_later(kb, window, groups, list(groups))
    return _rows(kb, window, slo, hardware, groups)


def _read_later(kb: KnowledgeBase, window: FleetWindow, groups: dict[GroupKey, Readings], keys: list[GroupKey],
                among: list[Need] | None = None) -> None:
    """The second round (the recipes' ``later`` readings, ``among`` those only), one grouped read per set of
    needs, asked only of the groups that need them."""
    by_needs: dict[tuple[Need, ...], list[GroupKey]] = {}
    for key in keys:
        wanted = tuple(n for n in more_needs(kb, groups[key]) if among is None or n in among)
        by_needs.setdefault(wanted, []).append(key)
    for needs, some in by_needs.items():
        _read_more(window, list(needs), groups, some)


def _read_more(window: FleetWindow, needs: list[Need], groups: dict[GroupKey, Readings],
               keys: list[GroupKey]) -> None:
    """Read ``needs`` for the groups ``keys`` in one grouped round and merge them into their readings."""
    if needs and keys:
        more = window.read_groups(needs, groups=keys)
        for key in keys:
            groups[key].merge(more[key])


def unrecorded_needs(kb: KnowledgeBase, recorded: set[str]) -> list[Need]:
    """The needs of every server signal the rules did not record (a recorded signal a recipe refers to is not
    read again), plus the info needs, in the order a window reads them."""
    wanted: set[Need] = set(info_needs(kb))
    for name, sig in kb.signals.items():
        if sig.recipe is not None and name not in recorded:
            wanted.update(Need(n.kind, n.key, n.q, n.engine) for n in recipe_needs(kb, name, stop=recorded))
    return [n for n in first_needs(kb) + later_needs(kb) if n in wanted]


def _from_recorded(kb: KnowledgeBase, window: FleetWindow, slo: Slo, hardware: Hardware | None,
                   found: Recorded, rules: str) -> FleetDiagnosis:
    """Every group's recorded signals; the needs of the signals not recorded read raw over the same window (ending
    at the rules' evaluation), for the same groups (the info needs were read alongside the recorded series)."""
    at_eval = window.ending(found.at)
    needs = unrecorded_needs(kb, set(found.signals))
    groups = found.readings
    keys = list(found.groups)
    later, info = set(later_needs(kb)), set(info_needs(kb))
    _read_more(at_eval, [n for n in needs if n not in later and n not in info], groups, keys)
    _read_later(kb, at_eval, groups, keys, [n for n in needs if n in later])
    at = f"{found.at:%H:%M:%S}"  # one (frozen) message per signal, shared by every row: 200 rows put ~5,000
    sources = {signal: Msg("server.recorded", series=record_name(signal, found.window), at=at)
               for signal in found.signals}
    outs: dict[GroupKey, SignalSet] = {key: RecordedSignals(found.groups[key], sources.__getitem__) for key in keys}
    rows = _rows(kb, at_eval, slo, hardware, {key: groups[key] for key in keys}, outs)
    read = FleetRead("recorded", found.at, rules, signals=found.signals,
                     raw_needs=[f"{n.kind}:{n.key}" + (f":{n.q:g}" if n.q is not None else "") for n in needs])
    return FleetDiagnosis(rows, read)
