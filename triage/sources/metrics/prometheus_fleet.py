"""A fleet of metric windows from one Prometheus: every PromQL grouped by the given labels server-side, so one request
per need answers every replica (a per-group answer equals what a PrometheusWindow matching that group reads)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from functools import partial
from typing import Any

from triage.diagnosis.readings import Need, Readings, SeriesPoint
from triage.errors import TriageError
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
)

GroupKey = tuple[tuple[str, str], ...]  # sorted (label, value) pairs


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
        skeleton = Readings(window_seconds=float(self.window_seconds))
        queries = self._plan(needs, skeleton)
        texts: dict[str, list[Query]] = {}  # one request per PromQL text (a histogram's quantiles share one) ...
        for q in sorted(queries, key=lambda q: q.need.kind == "quantile"):  # ... in PrometheusWindow.read's order
            texts.setdefault(self.grouped_promql(q), []).append(q)
        at = self.end.timestamp()
        # each answer is split by group in its worker thread, while slower queries are still evaluated
        results = self._run([partial(self._indexed, qs[0], text, at) for text, qs in texts.items()])
        self._raise_if_all_fatal(results)
        answers = list(zip(texts.values(), results))
        if groups is None:
            groups = self._groups(answers)
        failed = any(isinstance(r, QueryFailed) for r in results)
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

    def series(self, needs: list[Need], points: int = 60) -> dict[Need, list[SeriesPoint]]:
        raise TriageError("a fleet window has no time series; open one replica's Live view")

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
