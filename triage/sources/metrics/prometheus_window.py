"""A MetricWindow over a Prometheus time range: one PromQL per need, sent concurrently, each with a timeout."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

from triage.errors import TriageError
from triage.knowledge.engines import EngineSpec, detect_match
from triage.knowledge.needs import Need, SeriesPoint
from triage.safe_text import one_line
from triage.sources.metrics.fetch import BoundedRefusal, BoundedSession, timed_out
from triage.sources.metrics.profiles import Profile, profile_for_url, redact_url
from triage.sources.metrics.scrape import connection_reason
from triage.sources.metrics.snapshot_window import (
    NO_OBSERVATIONS,
    OVER_TIME,
    EngineMaps,
    Resolved,
    bucket_quantile,
    check_match,
    engine_maps,
    gauge_agg,
    gauge_over_window,
    in_seconds,
    need_label,
    pick_engines,
    prepare_buckets,
    prepared_quantile,
    resolve_need,
    selector,
    serving_titles,
)
from triage.sources.readings import Readings

MAX_WORKERS = 8  # below requests' default pool of 10 connections per host
GRACE = 0.5  # seconds past the timeout before a stuck query is abandoned
DEFAULT_TIMEOUT = 10.0
MIN_RANGE = 60  # a series point looks back at least this far (four 15 s scrapes), as Grafana's $__rate_interval
HTTP_STATUS_RE = re.compile(r"HTTP Status Code (\d+) \((.*)\)\s*$", re.S)
DETAIL_CHARS = 200  # a server's error sentence, shown: one line at most this long


class QueryFailed(Exception):
    """One query's failure as a sentence; ``fatal`` when the whole server is out of reach (refused, 401, timeout)."""

    def __init__(self, sentence: str, fatal: bool) -> None:
        super().__init__(sentence)
        self.sentence = sentence
        self.fatal = fatal


@dataclass(frozen=True)
class Query:
    need: Need
    resolved: Resolved
    promql: str


def _by(labels: tuple[str, ...]) -> str:
    return f" by ({', '.join(labels)})" if labels else ""


def buckets_promql(r: Resolved, range_s: int, by: tuple[str, ...] = ()) -> str:
    """Every bucket's increase over the window, summed by ``le`` (and ``by``): one query serves all quantiles of a
    histogram."""
    return f"sum{_by(('le', *by))} (increase({selector(r.name + '_bucket', r.match)}[{range_s}s]))"


def bucket_pairs(vector: list[dict], pick: Callable[[dict], str]) -> list[tuple[float, float]]:
    return [(float(s["metric"]["le"]), float(pick(s))) for s in vector if "le" in s["metric"]]


def quantile_value(q: float, pairs: list[tuple[float, float]]) -> tuple[float | None, str]:
    value = bucket_quantile(q, pairs)
    return (None, NO_OBSERVATIONS) if math.isnan(value) else (value, "")


def promql(need: Need, r: Resolved, range_s: int, by: tuple[str, ...] = (),
           among: Mapping[str, Iterable[str]] | None = None) -> str:
    """The PromQL answering ``need`` over the ``range_s`` seconds before the evaluation time: one answer for the
    whole selection, or one per group of the ``by`` labels (a fleet's replicas); ``among`` (label → values) keeps the
    series whose labels take those values only (gauge, rate and mean needs). Info needs answer every series."""
    w, agg_by = f"[{range_s}s]", _by(by)
    sel = selector(r.name, r.match, among)
    if need.kind == "rate":
        name = r.name + "_count" if r.spec.type == "histogram" else r.name
        agg_by = _by((need.by, *by)) if need.by else agg_by
        return f"sum{agg_by} (increase({selector(name, r.match, among)}{w})) / {range_s}"
    if need.kind == "quantile":
        return f"histogram_quantile({need.q!r}, {buckets_promql(r, range_s, by)})"
    if need.kind == "hist_mean":
        return (f"sum{agg_by} (increase({selector(r.name + '_sum', r.match, among)}{w}))"
                f" / sum{agg_by} (increase({selector(r.name + '_count', r.match, among)}{w}))")
    agg = gauge_agg(r.spec)
    if need.kind in OVER_TIME:
        return gauge_over_window(need.kind, f"{agg}{agg_by} ({sel})", range_s)
    if need.kind == "gauge_last":
        return f"{agg}{agg_by} (last_over_time({sel}{w}))"
    return info_promql(r, range_s, by)


def info_promql(r: Resolved, range_s: int, by: tuple[str, ...] = ()) -> str:
    """Every series of an info metric in the window (a fleet's group takes its first). When the match or the
    grouping names a label the info metric does not carry (vllm:cache_config_info has `engine` but no
    `model_name`), its series are joined onto the engine's running gauge on the replica labels both carry, which
    copies the missing labels over; selecting on them directly would find nothing."""
    # the rules join the same way; imported here because triage.alerting imports this layer
    from triage.knowledge.replicas import CARRIER_KEY, replica_labels, target_labels

    w = f"[{range_s}s]"
    lacked = [label for label in r.spec.lacks_labels if label in r.match or label in by]
    if not lacked:
        return f"last_over_time({selector(r.name, r.match)}{w})"
    own = {k: v for k, v in r.match.items() if k not in r.spec.lacks_labels}
    replicas = replica_labels(target_labels(), {r.engine.id: r.engine})
    carried = [label for label in replicas if label not in r.spec.lacks_labels]
    carrier = " or ".join(f"last_over_time({selector(n, r.match)}{w})" for n in r.engine.candidates(CARRIER_KEY))
    return (f"last_over_time({selector(r.name, own)}{w}) * on ({', '.join(carried)}) group_left ({', '.join(lacked)})"
            f" group by ({', '.join([*carried, *lacked])}) ({carrier})")


def prometheus_client(profile: Profile, timeout: float) -> PrometheusConnect:
    """A client for ``profile``: no retries (a refused connection, a timeout or a 500 is reported at once, as
    itself), and every answer read within ``timeout`` seconds in total and MAX_API_BYTES after decompression
    (a BoundedSession: a trickling or endless answer, or a gzip bomb, ends in a clear error)."""
    session = BoundedSession(timeout)
    session.verify = profile.verify_tls
    return PrometheusConnect(url=profile.url.rstrip("/"), headers=profile.request_headers() or None,
                             auth=profile.auth(), session=session,
                             retry=Retry(total=0, read=False, raise_on_status=False), timeout=timeout)


class PrometheusWindow:
    """MetricWindow over [start, end] of a Prometheus; values are instant queries evaluated at ``end``."""

    def __init__(self, profile_or_url: Profile | str, start: datetime, end: datetime,
                 match: dict[str, str] | None = None, timeout: float | None = None,
                 engines: EngineMaps = None, engine: str | None = None) -> None:
        self.profile = profile_or_url if isinstance(profile_or_url, Profile) else profile_for_url(profile_or_url)
        self.start, self.end = _utc(start), _utc(end)
        self.window_seconds = round((self.end - self.start).total_seconds())
        if self.window_seconds < 1:
            raise TriageError(f"the window must end after it starts ({self.start:%F %T} → {self.end:%F %T} UTC)",
                              key="window")
        self.timeout = float(timeout or self.profile.timeout or DEFAULT_TIMEOUT)
        self.match = check_match(match)
        self.engines = engine_maps(engines)
        self.url = self.profile.url.rstrip("/")
        self.shown_url = redact_url(self.profile.url)
        self.client = self._connect()
        self.present, chosen, self.empty = self._detect()
        self.engine, self.addons = pick_engines(chosen, self.engines, engine)

    # ------------------------------------------------------------ connection and errors

    def _connect(self) -> PrometheusConnect:
        return prometheus_client(self.profile, self.timeout)

    def _call(self, fn: Callable[[], Any]) -> Any:
        """Run one client call, turning every failure (an answer of the wrong shape included) into a QueryFailed
        sentence."""
        result = self._answer(fn)
        if not well_formed_answer(result):
            raise self._not_json()
        return result

    def _not_json(self) -> QueryFailed:
        return QueryFailed(f"{self.shown_url} did not answer with Prometheus JSON (is it the Prometheus base URL?)",
                           True)

    def _answer(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except requests.exceptions.Timeout:
            raise self._timed_out() from None
        except requests.exceptions.ConnectionError as exc:
            if timed_out(exc):
                raise self._timed_out() from None
            raise QueryFailed(f"Prometheus at {self.shown_url} is unreachable ({connection_reason(exc)})",
                              True) from None
        except PrometheusApiClientException as exc:
            raise self._http_failure(str(exc)) from None
        except (ValueError, KeyError, TypeError, IndexError, RecursionError):  # RecursionError: JSON nested too deep
            raise self._not_json() from None
        except BoundedRefusal as exc:  # past the size cap, or a redirect (never followed): one line of ours
            raise QueryFailed(f"Prometheus at {self.shown_url}: {exc}", True) from None
        except requests.exceptions.RequestException as exc:
            raise QueryFailed(f"request to {self.shown_url} failed ({type(exc).__name__})", True) from None

    def _timed_out(self) -> QueryFailed:
        return QueryFailed(f"Prometheus at {self.shown_url}: query timed out after {self.timeout:.1f} s", True)

    def _http_failure(self, text: str) -> QueryFailed:
        found = HTTP_STATUS_RE.search(text)
        status = int(found.group(1)) if found else 0
        detail = _error_detail(found.group(2)) if found else one_line(text, DETAIL_CHARS)
        if status in (401, 403):
            return QueryFailed(f"Prometheus answered HTTP {status}: check the token / basic auth of "
                               f"{self.profile.label()}", True)
        if status == 404:
            return QueryFailed(f"{self.shown_url} answered HTTP 404: is it the Prometheus base URL (without "
                               "/api/v1 or /graph)?", True)
        if status in (400, 422):
            return QueryFailed(f"Prometheus rejected the query (HTTP {status}): {detail}", False)
        return QueryFailed(f"Prometheus at {self.shown_url} answered HTTP {status}: {detail}", False)

    def _fail(self, failure: QueryFailed) -> TriageError:
        return TriageError(failure.sentence, key=self.profile.name and f"profile {self.profile.name}")

    # ------------------------------------------------------------ engine detection

    def _names(self, in_window: bool, match: dict[str, str]) -> set[str]:
        labels = selector("", match)[1:-1]  # the user's filter narrows the serving engines' names
        params: dict[str, Any] = {"match[]": detect_match(self.engines, labels)}  # every engine map's names
        if in_window:
            params.update(start=self.start.timestamp(), end=self.end.timestamp())
        try:
            names = self._call(lambda: self.client.get_label_values("__name__", params=params))
        except QueryFailed as failure:
            raise self._fail(failure) from None
        return _with_bases(names or [])

    def _detect(self) -> tuple[set[str], set[str], bool]:
        """(metric names in the window, histograms also by base; the names among the series the filter selects,
        which the engine is picked from; ``empty``): if the window has none, the names of all time and ``empty`` =
        True. The engine is never picked from series the filter leaves out, and a filter that selects no serving
        series at all is said so."""
        for in_window in (True, False):
            present = self._names(in_window, {})
            chosen = self._names(in_window, self.match) if self.match else present
            if _serving_found(chosen, self.engines):
                return present, chosen, not in_window
        if self.match and _serving_found(present, self.engines):
            raise TriageError(f"no {serving_titles(self.engines)} series carry the labels "
                              f"{selector('', self.match)} in Prometheus at {self.shown_url} (it has such series "
                              "with other labels: check the filter)", key="match")
        raise TriageError(f"no {serving_titles(self.engines)} metrics in this window (Prometheus at "
                          f"{self.shown_url} has none at all)")

    # ------------------------------------------------------------ reading

    def resolve(self, need: Need) -> Resolved | str:
        return resolve_need(need, self.engine, self.addons, self.engines, self.present, self.match)

    def read(self, needs: list[Need]) -> Readings:
        """One instant query per need at ``end``, concurrently; failures land in ``errors``, not exceptions,
        unless every query failed because the server is out of reach (then TriageError)."""
        out = Readings(window_seconds=float(self.window_seconds))
        queries = self._plan(needs, out)
        if not queries:
            return out
        at = self.end.timestamp()
        plain = [q for q in queries if q.need.kind != "quantile"]
        hists = _by_histogram([q for q in queries if q.need.kind == "quantile"], self.window_seconds)
        calls: list[Callable[[], Any]] = [partial(self._instant, q.promql, at) for q in plain]
        calls += [partial(self._instant, b, at) for b in hists]
        results = self._run(calls)
        self._raise_if_all_fatal(results)
        for query, result in zip(plain, results):
            self._store(out, query, result)
        for group, result in zip(hists.values(), results[len(plain):]):
            for query in group:
                self._store_quantile(out, query, result)
        if not any(isinstance(x, QueryFailed) for x in results) and all(out.values[q.need] is None for q in queries):
            out.errors.append(f"no samples between {self._span_text()}")
        return out

    def series(self, needs: list[Need], points: int = 60) -> dict[Need, list[SeriesPoint]]:
        """Range queries: ``points`` values ending at ``end``, step = window / points; each point covers the
        max(step, 60 s) before it. Needs that cannot be answered (or failed) get an empty list."""
        first, end, step, lookback = self._series_span(points)
        out: dict[Need, list[SeriesPoint]] = {n: [] for n in needs}
        queries = [] if self.empty else [q for q in self._plan(needs, Readings(), lookback) if q.need.kind != "info"]
        plain = [q for q in queries if q.need.kind != "quantile"]
        hists = _by_histogram([q for q in queries if q.need.kind == "quantile"], lookback)
        calls: list[Callable[[], Any]] = [partial(self._range, q.promql, first, end, step) for q in plain]
        calls += [partial(self._range, b, first, end, step) for b in hists]
        results = self._run(calls)
        self._raise_if_all_fatal(results)
        for query, result in zip(plain, results):
            if not isinstance(result, QueryFailed):
                out[query.need] = _scaled(query, _points(result))
        for group, result in zip(hists.values(), results[len(plain):]):
            if not isinstance(result, QueryFailed):
                quantiles = _quantile_series([query.need.quantile for query in group], result)
                for query, drawn in zip(group, quantiles):
                    out[query.need] = _scaled(query, drawn)
        return out

    def _series_span(self, points: int) -> tuple[int, int, int, int]:
        """(first, last, step, lookback) of ``points`` range points ending at ``end``, as ``series`` draws them."""
        step = max(1, round(self.window_seconds / max(points, 1)))
        count = min(points, self.window_seconds // step) or 1
        end = round(self.end.timestamp())
        return end - (count - 1) * step, end, step, max(step, MIN_RANGE)

    def _plan(self, needs: list[Need], out: Readings, range_s: int | None = None) -> list[Query]:
        """Queries for the needs that resolve; the others get None and their reason right away."""
        queries = []
        for need in needs:
            r = self.resolve(need)
            if isinstance(r, str) or self.empty:
                out.values[need] = None
                out.missing[need] = r if isinstance(r, str) else f"no data in this window ({self._span_text()})"
                continue
            if need.kind == "quantile" and need.q is None:
                out.values[need], out.missing[need] = None, "a quantile need has no q"
                continue
            queries.append(Query(need, r, promql(need, r, range_s or self.window_seconds)))
        if self.empty and needs:
            out.errors.append(f"no samples between {self._span_text()}: Prometheus has {self.engine.title} metrics, "
                              "but none in this time range")
        return queries

    def _instant(self, query: str, at: float) -> list[dict]:
        return self._call(lambda: self.client.custom_query(query, params={"time": at,
                                                                          "timeout": str(self.timeout)}))

    def _range(self, query: str, start: int, end: int, step: int) -> list[dict]:
        first, last = (datetime.fromtimestamp(t, tz=UTC) for t in (start, end))
        return self._call(lambda: self.client.custom_query_range(query, first, last, f"{step}s",
                                                                 params={"timeout": str(self.timeout)}))

    def _run(self, calls: list[Callable[[], Any]]) -> list[Any]:
        """Run calls concurrently; a call still running GRACE seconds past the timeout counts as timed out."""
        if not calls:
            return []
        pool = ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(calls)), thread_name_prefix="promql")
        try:
            futures = [pool.submit(c) for c in calls]
            wait(futures, timeout=self.timeout * math.ceil(len(calls) / MAX_WORKERS) + GRACE)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        return [_outcome(f) if f.done() and not f.cancelled() else self._timed_out() for f in futures]

    def _raise_if_all_fatal(self, results: list[Any]) -> None:
        failures = [r for r in results if isinstance(r, QueryFailed)]
        if results and len(failures) == len(results) and all(f.fatal for f in failures):
            raise self._fail(failures[0])

    def _store(self, out: Readings, query: Query, result: Any) -> None:
        self._record(out, query, result, query.resolved.match)

    def _store_quantile(self, out: Readings, query: Query, result: Any) -> None:
        """A quantile from the histogram's shared bucket query, computed as PromQL's histogram_quantile does."""
        answer = result if isinstance(result, QueryFailed) else bucket_pairs(result, lambda s: s["value"][1])
        self._record(out, query, answer, query.resolved.match)

    def _record(self, out: Readings, query: Query, answer: Any, match: dict[str, str]) -> None:
        """What one need records from its answer (a failure, the samples, or for a quantile the (le, increase)
        pairs), ``match`` naming the series it read when there was none."""
        need = query.need
        value: float | dict[str, str] | None = None
        why = ""
        if isinstance(answer, QueryFailed):
            why = answer.sentence
            out.errors.append(f"{need_label(need)} ({query.resolved.name}): {answer.sentence}")
        elif not answer:
            why = f"no samples of {selector(query.resolved.name, match)} between {self._span_text()}"
        elif need.kind == "quantile":
            value, why = quantile_value(need.quantile, answer)
        elif need.kind == "info":
            value = {k: v for k, v in answer[0]["metric"].items() if k != "__name__"}
        elif need.by:  # a breakdown: the rate per value of the label, as text
            value = {s["metric"].get(need.by, ""): str(s["value"][1]) for s in answer}
        else:
            value, why = sample_number(answer[0]["value"][1])
        value, why = in_seconds(need, query.resolved, value, why)
        out.values[need] = value
        if value is None:
            out.missing[need] = why

    def _span_text(self) -> str:
        return f"{self.start:%Y-%m-%d %H:%M:%S} and {self.end:%Y-%m-%d %H:%M:%S} UTC"


def _scaled(query: Query, points: list[SeriesPoint]) -> list[SeriesPoint]:
    """A histogram's quantile or mean points in seconds (see snapshot_window.in_seconds)."""
    factor = query.resolved.spec.to_seconds
    if factor == 1.0 or query.need.kind not in ("quantile", "hist_mean"):
        return points
    return [SeriesPoint(p.t, p.value * factor) for p in points]


def _by_histogram(queries: list[Query], range_s: int) -> dict[str, list[Query]]:
    """Quantile queries grouped by the bucket query that answers them all (insertion-ordered)."""
    groups: dict[str, list[Query]] = {}
    for q in queries:
        groups.setdefault(buckets_promql(q.resolved, range_s), []).append(q)
    return groups


def _quantile_series(qs: list[float], matrix: list[dict]) -> list[list[SeriesPoint]]:
    """For each quantile of ``qs``, per timestamp, the quantile of that step's bucket increases: the answer is
    parsed and each step's buckets prepared once, whatever the number of quantiles drawn from them."""
    by_time: dict[float, list[tuple[float, float]]] = {}
    bounds = sorted((float(series["metric"].get("le", "nan")), i) for i, series in enumerate(matrix))
    for le, i in bounds:  # in bound order, so each step's pairs come sorted (the sort then costs one pass)
        for t, v in matrix[i]["values"]:
            by_time.setdefault(float(t), []).append((le, float(v)))
    steps = [(t, prepare_buckets(pairs)) for t, pairs in sorted(by_time.items())]
    out = []
    for q in qs:
        points = [(t, prepared_quantile(q, merged)) for t, merged in steps]
        out.append([SeriesPoint(t=t, value=v) for t, v in points if not math.isnan(v)])
    return out


def _outcome(future) -> Any:
    error = future.exception()
    if error is None:
        return future.result()
    if isinstance(error, QueryFailed):
        return error
    return QueryFailed(f"query failed ({type(error).__name__}: {one_line(str(error), DETAIL_CHARS)})", False)


def sample_number(text: str) -> tuple[float | None, str]:
    value = float(text)
    if math.isnan(value):
        return None, NO_OBSERVATIONS
    return value, ""


def _points(result: list[dict]) -> list[SeriesPoint]:
    if not result:
        return []
    return [SeriesPoint(t=float(t), value=float(v)) for t, v in result[0]["values"] if not math.isnan(float(v))]


def well_formed_answer(result: Any) -> bool:
    """True for what the client returns from a Prometheus that answered: label values (strings), or samples whose
    labels are strings, whose ``value`` / ``values`` are [time, number] pairs and whose ``le`` is a number. Checked
    once where the answer arrives, so a server's odd JSON ends in one line instead of a failure deep in the
    reading (a ``null`` metric, ``"le": "x"``, a value that is not a pair)."""
    if not isinstance(result, list):
        return False
    try:
        for item in result:
            if isinstance(item, str):
                continue
            metric = item.get("metric") if isinstance(item, dict) else None
            if not isinstance(metric, dict) or not all(isinstance(v, str) for v in metric.values()):
                return False
            if "le" in metric:
                float(metric["le"])
            pairs = [item["value"]] if "value" in item else item.get("values")
            if not isinstance(pairs, list):
                return False
            for pair in pairs:
                if not isinstance(pair, list) or len(pair) != 2:
                    return False
                float(pair[0])
                float(pair[1])
    except (ValueError, TypeError, OverflowError):
        return False
    return True


def _error_detail(body_repr: str) -> str:
    """Prometheus' own error sentence from the client's ``b'…'`` repr of the response body, as one sanitised line
    of at most DETAIL_CHARS: the body is the server's (a 300 KB ``error`` became a 300,000-character alert)."""
    text = _unrepr_bytes(body_repr)
    try:
        data = json.loads(text)
        detail = f"{data.get('errorType', 'error')}: {data.get('error', '')}"
    except (ValueError, AttributeError, RecursionError):
        detail = text
    return one_line(detail, DETAIL_CHARS) or "(empty answer)"


def api_error_line(text: str) -> str:
    """A PrometheusApiClientException's text (``HTTP Status Code N (b'…')``) as one bounded line: the status and
    Prometheus' own sentence, never the whole body."""
    found = HTTP_STATUS_RE.search(text)
    if found is None:
        return one_line(text, DETAIL_CHARS)
    return f"HTTP {found.group(1)}: {_error_detail(found.group(2))}"


def _unrepr_bytes(body_repr: str) -> str:
    """The text behind a ``repr(bytes)``, decoded as escapes only: the body is the server's, so it is never
    evaluated (not even by ``ast.literal_eval``). Anything else comes back as given."""
    quote = body_repr[1:2]
    if len(body_repr) < 3 or body_repr[0] != "b" or quote not in ("'", '"') or body_repr[-1] != quote:
        return body_repr
    try:
        raw = body_repr[2:-1].encode("ascii").decode("unicode_escape").encode("latin-1")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return body_repr
    return raw.decode("utf-8", "replace")


def _with_bases(names: Iterable[str]) -> set[str]:
    """Names as engines.py resolves them: as stored, plus histogram bases for ``X_bucket``."""
    found = set(names)
    return found | {n.removesuffix("_bucket") for n in found if n.endswith("_bucket")}


def _serving_found(present: set[str], engines: dict[str, EngineSpec]) -> bool:
    try:
        pick_engines(present, engines)
    except TriageError:
        return False
    return True


def _utc(moment: datetime) -> datetime:
    """Aware UTC; a naive datetime is taken as local time (as datetime.timestamp() does)."""
    return moment.astimezone(UTC)
