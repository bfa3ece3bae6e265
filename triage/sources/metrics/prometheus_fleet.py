"""A fleet of metric windows from one Prometheus: every PromQL grouped by the given labels server-side, so one request
per need answers every replica (a per-group answer equals what a PrometheusWindow matching that group reads)."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from triage.errors import TriageError
from triage.knowledge.needs import Need, SeriesPoint
from triage.sources.metrics.profiles import Profile
from triage.sources.metrics.prometheus_window import (
    PrometheusWindow,
    Query,
    QueryFailed,
    bucket_pairs,
    buckets_promql,
    promql,
)
from triage.sources.metrics.snapshot_window import (
    LABEL_RE,
    EngineMaps,
    _escape,
)
from triage.sources.readings import Readings

GroupKey = tuple[tuple[str, str], ...]  # sorted (label, value) pairs
RECORD_PREFIX = "triage:"  # recording rules triage:<signal>:<window> (python -m triage rules)
SIGNAL_RE = "[a-zA-Z0-9_]+"
RECORDED_PARTS = 2  # concurrent requests the recorded read is split into
PROBE_SIGNAL = "running_mean"  # recorded for every replica of every engine: its newest sample dates the evaluation


@dataclass
class Recorded:
    """The recorded signals of one rule evaluation, per group: what ``triage:<signal>:<window>`` held at ``at``."""

    at: datetime
    window: str
    signals: list[str]  # every signal with a series at that evaluation, in name order
    groups: dict[GroupKey, dict[str, float]]
    readings: dict[GroupKey, Readings]  # the needs asked alongside, read raw over the window ending at ``at``


@dataclass
class _Plan:
    """A grouped read's requests: one call per PromQL text, and what each group's readings start from."""

    skeleton: Readings
    queries: list[Query]
    texts: list[list[Query]]
    calls: list[Callable[[], Any]]


def group_key(labels: dict[str, str]) -> GroupKey:
    return tuple(sorted(labels.items()))


class FleetWindow(PrometheusWindow):
    """[start, end] of a Prometheus read for every group of ``by`` labels at once."""

    def __init__(self, profile_or_url: Profile | str, start: datetime, end: datetime, by: Iterable[str],
                 match: dict[str, str] | None = None, timeout: float | None = None,
                 engines: EngineMaps = None, engine: str | None = None) -> None:
        self.by = tuple(dict.fromkeys(by))
        if not self.by:
            raise TriageError("give at least one label to group by", key="--by")
        for label in self.by:
            if not LABEL_RE.match(label) or label.startswith("__"):
                raise TriageError(f"'{label}' is not a label name to group by", key="--by")
        super().__init__(profile_or_url, start, end, match=match, timeout=timeout, engines=engines, engine=engine)
        clash = [label for label in self.by if label in self.match]
        if clash:
            raise TriageError(f"'{clash[0]}' is both matched and grouped by", key="--by")

    # ------------------------------------------------------------ PromQL by group

    def _labels_for(self, q: Query) -> tuple[str, ...]:
        """The grouping labels this need is split by: all of them for the serving engine; for an add-on (DCGM)
        those its map lists, as a single window's match only passes those to it."""
        if q.resolved.engine.id == self.engine.id:
            return self.by
        return tuple(label for label in self.by if label in q.resolved.engine.labels)

    def grouped_promql(self, q: Query) -> str:
        """The need's PromQL grouped by this fleet's labels; a quantile need gets its histogram's bucket query."""
        labels = self._labels_for(q)
        if q.need.kind == "quantile":
            return buckets_promql(q.resolved, self.window_seconds, labels)
        return promql(q.need, q.resolved, self.window_seconds, labels)

    # ------------------------------------------------------------ reading

    def read_groups(self, needs: list[Need], groups: list[GroupKey] | None = None) -> dict[GroupKey, Readings]:
        """Readings per group: one query per need (one per histogram for its quantiles) for the whole fleet. The
        groups are those the serving engine's series form (or ``groups``, e.g. those a first round found); each
        gets what a window matching it would read."""
        plan = self._grouped(needs)
        results = self._run(plan.calls)
        self._raise_if_all_fatal(results)
        return self._per_group(plan, results, groups)

    def _grouped(self, needs: list[Need]) -> _Plan:
        skeleton = Readings(window_seconds=float(self.window_seconds))
        queries = self._plan(needs, skeleton)
        texts: dict[str, list[Query]] = {}  # one request per PromQL text (a histogram's quantiles share one) ...
        for q in sorted(queries, key=lambda q: q.need.kind == "quantile"):  # ... in PrometheusWindow.read's order
            texts.setdefault(self.grouped_promql(q), []).append(q)
        at = self.end.timestamp()
        # each answer is split by group in its worker thread, while slower queries are still evaluated
        calls: list[Callable[[], Any]] = [partial(self._indexed, qs[0], text, at) for text, qs in texts.items()]
        return _Plan(skeleton, queries, list(texts.values()), calls)

    def _per_group(self, plan: _Plan, results: list[Any], groups: list[GroupKey] | None) -> dict[GroupKey, Readings]:
        answers = list(zip(plan.texts, results))
        if groups is None:
            groups = self._groups(answers)
        failed = any(isinstance(r, QueryFailed) for r in results)
        skeleton, queries = plan.skeleton, plan.queries
        out: dict[GroupKey, Readings] = {}
        for key in groups:
            readings = Readings(window_seconds=skeleton.window_seconds, values=dict(skeleton.values),
                                missing=dict(skeleton.missing), errors=list(skeleton.errors))
            group = dict(key)
            for qs, result in answers:
                self._store_group(readings, qs, result, group)
            if queries and not failed and all(readings.values[q.need] is None for q in queries):
                readings.errors.append(f"no samples between {self._span_text()}")
            out[key] = readings
        return out

    def read(self, needs: list[Need]) -> Readings:
        raise TriageError("a fleet window is read per group (read_groups)")

    def ending(self, at: datetime) -> FleetWindow:
        """The same window (length, labels, engine) ending at ``at`` instead."""
        shifted = copy.copy(self)
        shifted.end = at.astimezone(UTC)
        shifted.start = shifted.end - timedelta(seconds=self.window_seconds)
        return shifted

    # ------------------------------------------------------------ recorded signals

    def _recorded_selector(self, window: str, signals: list[str]) -> str:
        """The recorded series of ``signals`` for ``window``, narrowed by the window's match."""
        names = [f"{RECORD_PREFIX}{signal}:{window}" for signal in signals]
        inner = [f'__name__="{names[0]}"' if len(names) == 1 else
                 f'__name__=~"{"|".join(re.escape(n) for n in names)}"']
        inner += [f'{k}="{_escape(v)}"' for k, v in sorted(self.match.items())]
        return "{" + ",".join(inner) + "}"

    def _recorded_part(self, text: str, at: float, window: str) -> dict[GroupKey, dict[str, float]]:
        """One part of the recorded read, split by group in its worker thread: group → signal → value."""
        cut = slice(len(RECORD_PREFIX), -len(window) - 1)
        groups: dict[GroupKey, dict[str, float]] = {}
        for item in self._instant(text, at):
            metric = item["metric"]
            groups.setdefault(self._key(metric, self.by), {})[metric.get("__name__", "")[cut]] = \
                float(item["value"][1])
        return groups

    def read_recorded(self, window: str, rule_labels: tuple[str, ...], signals: list[str],
                      needs: list[Need]) -> Recorded | str:
        """The recorded ``signals`` (``triage:<signal>:<window>``) of the rules' newest evaluation at or before
        ``end`` (within Prometheus' 5 min lookback), per group of ``by``, with ``needs`` read raw (grouped) over the
        window ending at that evaluation; or why the recorded signals cannot stand in for the raw reads.

        One probe dates the newest evaluation (the newest sample of PROBE_SIGNAL) and finds any group holding two
        replicas of the rules; then, concurrently, that evaluation's samples only (a ``[1ms]`` range at its time, so
        every value covers [at − window, at]; in RECORDED_PARTS requests, which Prometheus evaluates on as many
        cores) and the raw ``needs``. They stand in only when each group is one
        replica of the rules: every ``by`` and ``match`` label is one the rules group by (``rule_labels``), and no
        group holds two series of PROBE_SIGNAL (else a group would mix replicas the raw read sums)."""
        outside = [label for label in (*self.by, *self.match) if label not in rule_labels]
        if outside:
            return (f"the recording rules group by {', '.join(rule_labels)}, and '{outside[0]}' is not one of "
                    "those labels")
        if self.empty:
            return "the window holds no samples of the engine's metrics"
        carrier = self._recorded_selector(window, [PROBE_SIGNAL])
        by = ", ".join(self.by)
        probe_text = (f'label_replace(max(timestamp({carrier})), "probe", "at", "", "")'
                      f' or label_replace(count by ({by}) ({carrier}) > 1, "probe", "split", "", "")')
        try:  # (timestamp() drops the name: one signal, so that no two of its answers share a label set)
            probe = self._instant(probe_text, self.end.timestamp())
        except QueryFailed as failure:
            return f"the probe for recorded signals failed ({failure.sentence})"
        split = [s["metric"] for s in probe if s["metric"].get("probe") == "split"]
        if split:
            who = ", ".join(f"{k}={v}" for k, v in self._key(split[0], self.by)) or "(no label)"
            return (f"the rules group by {', '.join(rule_labels)}: the group {who} holds several recorded replicas, "
                    "which the raw read of the group sums")
        dated = [s for s in probe if s["metric"].get("probe") == "at"]
        if not dated:
            return (f"no recorded {RECORD_PREFIX}{PROBE_SIGNAL}:{window} series in the 5 min before the end (load "
                    f"`python -m triage rules --window {window}`, or its `--recording-only` rules, into Prometheus)")
        at = float(dated[0]["value"][1])
        moment = datetime.fromtimestamp(at, UTC)
        shifted = self.ending(moment)
        plan = shifted._grouped(needs)
        parts = [signals[i::RECORDED_PARTS] for i in range(RECORDED_PARTS) if signals[i::RECORDED_PARTS]]
        texts = [f"max by (__name__, {by}) (last_over_time({self._recorded_selector(window, part)}[1ms]))"
                 for part in parts]
        results = self._run([*(partial(self._recorded_part, text, at, window) for text in texts), *plan.calls])
        groups: dict[GroupKey, dict[str, float]] = {}
        for part in results[:len(texts)]:
            if isinstance(part, QueryFailed):
                return f"reading the recorded signals failed ({part.sentence})"
            for key, values in part.items():
                groups.setdefault(key, {}).update(values)
        if not groups:
            return f"no recorded {RECORD_PREFIX}*:{window} series at the rules' evaluation at {moment:%H:%M:%S} UTC"
        keys = sorted(groups)
        names = sorted({s for values_of in groups.values() for s in values_of})
        return Recorded(moment, window, names, {key: groups[key] for key in keys},
                        shifted._per_group(plan, results[len(texts):], keys))

    def series(self, needs: list[Need], points: int = 60) -> dict[Need, list[SeriesPoint]]:
        raise TriageError("a fleet window has no time series of its own (both_above_zero reads some per group)")

    def both_above_zero(self, value: Need, other: Need, points: int,
                        groups: list[GroupKey]) -> dict[GroupKey, list[float]]:
        """For each of ``groups``: ``value``'s points, as ``series`` of a window matching the group draws them, at the
        times both its and ``other``'s points are above 0 (e.g. the running count while requests waited). One range
        query for those groups only (their label values narrow every selector), the two series compared by
        Prometheus, so only the points kept are sent. Gauge and rate needs of the serving engine; else, or when the
        query fails, every group gets no point."""
        out: dict[GroupKey, list[float]] = {key: [] for key in groups}
        first, end, step, lookback = self._series_span(points)
        queries = [] if self.empty or not groups else [
            q for q in self._plan([value, other], Readings(), lookback)
            if q.need.kind not in ("info", "quantile") and self._labels_for(q) == self.by]
        if len(queries) < 2:
            return out
        among = {label: [dict(key)[label] for key in groups] for label in self.by}
        kept, cond = (promql(q.need, q.resolved, lookback, self.by, among) for q in queries)
        result = self._run([partial(self._range, f"({kept}) > 0 and ({cond}) > 0", first, end, step)])
        self._raise_if_all_fatal(result)
        if isinstance(result[0], QueryFailed):
            return out
        for item in result[0]:
            key = self._key(item["metric"], self.by)
            if key in out:
                out[key] = [float(v) for _, v in item["values"]]
        return out

    def _groups(self, answers: list[tuple[list[Query], Any]]) -> list[GroupKey]:
        """Every group the serving engine's numeric answers show (info series alone do not make a replica)."""
        seen: dict[GroupKey, None] = {}
        for qs, by_key in answers:
            if not isinstance(by_key, QueryFailed) and qs[0].need.kind != "info" and self._labels_for(qs[0]) == self.by:
                seen.update(dict.fromkeys(by_key))
        return sorted(seen)

    def _indexed(self, q: Query, text: str, at: float) -> dict[GroupKey, Any]:
        return self._index(q, self._instant(text, at))

    def _index(self, q: Query, result: list[dict]) -> dict[GroupKey, Any]:
        """A query's samples by the group key of its labels; a histogram's buckets as (le, increase) pairs."""
        labels = sorted(self._labels_for(q))
        by_key: dict[GroupKey, list[dict]] = {}
        for sample in result:
            metric = sample["metric"]
            by_key.setdefault(tuple((label, metric.get(label, "")) for label in labels), []).append(sample)
        if q.need.kind == "quantile":
            return {key: bucket_pairs(samples, lambda s: s["value"][1]) for key, samples in by_key.items()}
        return by_key

    @staticmethod
    def _key(metric: dict[str, str], labels: tuple[str, ...]) -> GroupKey:
        return tuple((label, metric.get(label, "")) for label in sorted(labels))

    def _store_group(self, out: Readings, qs: list[Query], result: Any, group: dict[str, str]) -> None:
        """What PrometheusWindow._store / _store_quantile record for a window matching ``group``, for each need
        answered by one query."""
        labels = self._labels_for(qs[0])
        answer = result if isinstance(result, QueryFailed) else result.get(self._key(group, labels), [])
        for q in qs:
            self._record(out, q, answer, {**q.resolved.match, **{k: v for k, v in group.items() if k in labels}})
