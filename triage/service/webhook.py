"""The Alertmanager receiver's flow: a notification → each firing alert's replica → the diagnosis of the window
ending at its startsAt (the same as ``diagnose --prometheus P --match … --end startsAt``) → Slack, JSON webhook and
incident store. Accepting never waits for a diagnosis: alerts go to a bounded queue served by a bounded pool; a
full queue refuses the notification (Alertmanager retries) instead of hanging it.

De-duplication: an alert (fingerprint + startsAt) is handled once; a replica is diagnosed once per window (the
diagnosis window), later alerts on it are folded into that diagnosis and stored beside it. A resolved alert
updates its incident and is never re-diagnosed. Nothing an alert carries decides where a message goes or which
Prometheus is read: both come from the configuration.
"""

from __future__ import annotations

import hmac
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge

from triage.alerting.export import default_dashboard_url
from triage.alerting.receiver.config import ReceiverConfig
from triage.alerting.receiver.deliver import post_json
from triage.alerting.receiver.message import COULD_NOT, Outcome, json_body, slack_body, slack_text
from triage.alerting.receiver.payload import AlertmanagerAlert, AlertmanagerMessage, parse_message
from triage.alerting.receiver.store import IncidentStore
from triage.diagnosis.rules import Diagnosis, Slo, resolve_slo
from triage.errors import TriageError
from triage.knowledge.engines import load_engines
from triage.knowledge.loader import KnowledgeBase, load_alerting_config, load_knowledge
from triage.knowledge.replicas import replica_labels
from triage.report.json_contract import diagnosis_json
from triage.report.links import LABEL_RE, MAX_VALUE, LiveLink, live_url
from triage.safe_text import one_line
from triage.service.live import refresh
from triage.service.windows import prometheus_pair
from triage.sources.metrics.profiles import Profile, resolve_profile

log = logging.getLogger("triage.webhook")
WINDOW_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
STOP = None  # the queue item that ends a worker
STORE_BACKLOG = 10_000


@dataclass
class Job:
    """One replica to diagnose, for the alert that asked first; alerts on it that arrive meanwhile fold in."""

    alert: AlertmanagerAlert
    replica: dict[str, str]
    others: list[AlertmanagerAlert] = field(default_factory=list)
    outcome: Outcome | None = None
    accepted: float = 0.0  # monotonic time it was queued


@dataclass
class Accepted:
    """What one notification did, for the HTTP answer."""

    status: int = 200
    queued: int = 0
    folded: int = 0
    duplicates: int = 0
    resolved: int = 0
    reason: str = ""


def window_seconds(text: str) -> float:
    unit = text[-1:] if text else ""
    try:
        value = float(text[:-1])
    except ValueError:
        value = -1
    if unit not in WINDOW_UNITS or not value > 0:
        raise TriageError(f"'{text[:20]}' is not a window like 15m", key="webhook.window")
    return value * WINDOW_UNITS[unit]


class Metrics:
    """The receiver's own metrics (/metrics), in a registry of its own."""

    def __init__(self, depth: Callable[[], int]) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.received = Counter("triage_webhook_alerts_received", "Alerts received, by status", ["status"],
                                registry=r)
        self.rejected = Counter("triage_webhook_requests_rejected", "Requests refused, by reason", ["reason"],
                                registry=r)
        self.duplicates = Counter("triage_webhook_alerts_duplicate", "Alerts already handled (fingerprint + "
                                  "startsAt)", registry=r)
        self.folded = Counter("triage_webhook_alerts_folded", "Alerts on a replica already diagnosed this window",
                              registry=r)
        self.diagnosed = Counter("triage_webhook_diagnoses", "Replica diagnoses run, by outcome (ok, failed)",
                                 ["outcome"], registry=r)
        self.delivered = Counter("triage_webhook_delivered", "Messages a receiver took, by receiver", ["receiver"],
                                 registry=r)
        self.failed = Counter("triage_webhook_delivery_failed", "Messages a receiver did not take, by receiver",
                              ["receiver"], registry=r)
        self.seconds = Gauge("triage_webhook_last_diagnosis_seconds", "Time from accepting an alert to its "
                             "message", registry=r)
        depth_gauge = Gauge("triage_webhook_queue_depth", "Replicas waiting for a worker", registry=r)
        depth_gauge.set_function(lambda: float(depth()))


class Receiver:
    """The flow, without HTTP: ``accept`` a notification's body, workers diagnose and deliver."""

    def __init__(self, config: ReceiverConfig, kb: KnowledgeBase | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.kb = kb or load_knowledge()
        self.clock = clock
        self.window_s = window_seconds(config.window)
        self.slo: Slo = self._slo()
        self.profile: Profile = resolve_profile(config.prometheus, config.secrets_path or None)
        self.labels = config.labels or replica_labels(load_alerting_config(self.kb.source_dir).target_labels,
                                                      load_engines())
        self.base = config.dashboard_url or default_dashboard_url(load_alerting_config(self.kb.source_dir))
        self.store = IncidentStore(config.incident_db) if config.incident_db else None
        self.queue: queue.Queue[Job | None] = queue.Queue(maxsize=config.queue)
        self.metrics = Metrics(self.queue.qsize)
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._replicas: OrderedDict[tuple[tuple[str, str], ...], Job] = OrderedDict()
        self._workers: list[threading.Thread] = []
        self._ended: OrderedDict[tuple[str, str], AlertmanagerAlert] = OrderedDict()  # resolved before stored
        # alerts folded into a replica already diagnosed are stored by a thread of their own: the HTTP thread never
        # waits on the disk (bounded: past it, the row is counted as a failed store, the page still answered)
        self._late: queue.Queue[tuple[AlertmanagerAlert, Outcome] | None] = queue.Queue(maxsize=STORE_BACKLOG)
        self.sent: Callable[[Outcome], None] | None = None  # a hook for tests and the bench: called per message

    def _slo(self) -> Slo:
        try:
            return resolve_slo(self.kb, self.config.slo or None)
        except KeyError:
            raise TriageError(f"unknown SLO preset '{self.config.slo}'; choose one of "
                              f"{', '.join(self.kb.slo_presets)}", key="webhook.slo") from None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self.store is not None:
            keeper = threading.Thread(target=self._keep_late, name="webhook-store", daemon=True)
            keeper.start()
            self._workers.append(keeper)
        for i in range(self.config.workers):
            worker = threading.Thread(target=self._work, name=f"webhook-worker-{i}", daemon=True)
            worker.start()
            self._workers.append(worker)

    def stop(self, timeout: float = 30.0) -> None:
        """Let the workers finish what is queued, then end them."""
        for worker in self._workers:
            if worker.name == "webhook-store":
                self._late.put(None)
            else:
                self.queue.put(STOP)
        for worker in self._workers:
            worker.join(timeout)
        self._workers.clear()

    # ------------------------------------------------------------------ accepting

    def authorized(self, header: str | None) -> bool:
        """The bearer token check (constant-time); open when no token is configured."""
        if not self.config.token:
            return True
        expected = f"Bearer {self.config.token}".encode()
        return hmac.compare_digest((header or "").encode(), expected)

    def accept(self, body: bytes) -> Accepted:
        """Parse a notification and queue its firing alerts; never waits on a diagnosis."""
        try:
            message = parse_message(body)
        except TriageError as exc:
            self.metrics.rejected.labels("bad_payload").inc()
            return Accepted(status=400, reason=exc.line())
        return self._accept(message)

    def _accept(self, message: AlertmanagerMessage) -> Accepted:
        done = Accepted()
        for alert in message.alerts:
            self.metrics.received.labels(alert.status).inc()
            if alert.status == "resolved":
                self._resolve(alert)
                done.resolved += 1
                continue
            verdict = self._admit(alert)
            if verdict == "full":
                self.metrics.rejected.labels("queue_full").inc()
                return Accepted(status=503, queued=done.queued, reason="the diagnosis queue is full; retry later")
            setattr(done, verdict, getattr(done, verdict) + 1)
        return done

    def _resolve(self, alert: AlertmanagerAlert) -> None:
        """Close the incident; one still being diagnosed is closed when it is stored."""
        if self.store is None:
            return
        if not self.store.resolve(alert.key(), alert.startsAt, alert.endsAt):
            with self._lock:
                self._ended[(alert.key(), alert.startsAt.isoformat())] = alert
                while len(self._ended) > self.config.max_replicas:
                    self._ended.popitem(last=False)

    def replica_of(self, alert: AlertmanagerAlert) -> dict[str, str]:
        """The labels of the alert that name its replica (the rules' group-by labels, or the configured ones)."""
        return {k: alert.labels[k] for k in self.labels
                if k in alert.labels and LABEL_RE.match(k) and len(alert.labels[k]) <= MAX_VALUE}

    def _admit(self, alert: AlertmanagerAlert) -> str:
        ident = (alert.key(), alert.startsAt.isoformat())
        replica = self.replica_of(alert)
        key = tuple(sorted(replica.items()))
        stored: Outcome | None = None
        with self._lock:
            if ident in self._seen:
                self.metrics.duplicates.inc()
                return "duplicates"
            job = self._replicas.get(key)
            if job is not None and self.clock() - job.accepted < self.window_s:
                self._remember(ident)
                self.metrics.folded.inc()
                if job.outcome is None:
                    job.others.append(alert)
                else:
                    stored = job.outcome
            else:
                job = Job(alert, replica, accepted=self.clock())
                try:
                    self.queue.put_nowait(job)
                except queue.Full:
                    return "full"
                self._remember(ident)
                self._replicas[key] = job
                self._replicas.move_to_end(key)
                while len(self._replicas) > self.config.max_replicas:
                    self._replicas.popitem(last=False)
                return "queued"
        if stored is not None and self.store is not None:
            try:
                self._late.put_nowait((alert, stored))
            except queue.Full:
                self.metrics.failed.labels("store").inc()
        return "folded"

    def _remember(self, ident: tuple[str, str]) -> None:
        self._seen[ident] = None
        while len(self._seen) > 4 * self.config.max_replicas:
            self._seen.popitem(last=False)

    # ------------------------------------------------------------------ working

    def _work(self) -> None:
        while True:
            job = self.queue.get()
            try:
                if job is STOP:
                    return
                self._handle(job)
            except Exception:  # a bug must not end the worker: say so, keep serving
                log.exception("webhook worker failed on one alert")
            finally:
                self.queue.task_done()

    def _keep_late(self) -> None:
        while True:
            item = self._late.get()
            try:
                if item is None:
                    return
                self._store([item[0]], item[1])
            finally:
                self._late.task_done()

    def _handle(self, job: Job) -> None:
        outcome = self.diagnose(job.alert, job.replica)
        with self._lock:
            outcome.others = list(job.others)
            job.outcome = outcome
        self._lead(outcome)
        self.metrics.diagnosed.labels("failed" if outcome.error else "ok").inc()
        self._deliver(outcome)
        self._store([outcome.alert, *outcome.others], outcome)
        self.metrics.seconds.set(self.clock() - job.accepted)
        if self.sent is not None:
            self.sent(outcome)

    def diagnose(self, alert: AlertmanagerAlert, replica: dict[str, str]) -> Outcome:
        """The diagnosis of the window ending at the alert's startsAt on its replica, or why there is none."""
        lead = alert.labels.get("cause") if alert.labels.get("cause") in self.kb.causes else None
        end = alert.startsAt
        source = (f"{self.profile.label()}, {self.config.window} window to {end:%Y-%m-%dT%H:%M:%SZ}")
        out = Outcome(alert=alert, replica=replica, lead=lead, link="", source=source)
        fleet = lead is not None and self.kb.symptom_of(lead).scope == "fleet"
        try:
            out.engine, diag, fmt = self._read_fleet(out) if fleet else self._read_replica(out)
            if diag is None or diag.empty:
                out.error = f"{COULD_NOT}: nothing to diagnose: {diag.empty if diag else 'no replica'}"
            else:
                out.diagnosis = diag
                out.contract = diagnosis_json(diag, source=source, fmt=fmt, runs=[])
        except TriageError as exc:
            out.error = f"{COULD_NOT}: {one_line(exc.line(), 240)}"
        except Exception as exc:  # the page must still say something
            log.exception("diagnosis failed")
            out.error = f"{COULD_NOT}: internal error ({type(exc).__name__})"
        out.link = self._link(out)
        return out

    def _read_replica(self, out: Outcome) -> tuple[str, Diagnosis | None, str]:
        """(engine, diagnosis, format) of the replica's window."""
        pair = prometheus_pair(self.profile, out.alert.startsAt, self.window_s / 60, out.replica, None,
                               self.config.timeout)
        live = refresh(self.kb, pair, self.slo, series_points=0).live
        return live.engine, live.diagnosis, f"metrics:{live.engine}"

    def _read_fleet(self, out: Outcome) -> tuple[str, Diagnosis | None, str]:
        """A fleet alert (straggler, routing skew, out of capacity) names a fleet, not a replica: every replica
        matching its labels, grouped by the target labels it does not carry, and the fleet's own diagnosis."""
        from triage.diagnosis.fleet import diagnose_fleet
        from triage.knowledge.replicas import target_labels
        from triage.service.fleet import fleet_window

        by = tuple(label for label in target_labels() if label not in out.replica) or ("instance",)
        window = fleet_window(self.profile, out.alert.startsAt, self.window_s / 60, by, dict(out.replica),
                              self.config.timeout)
        return window.engine.id, diagnose_fleet(self.kb, window, self.slo).fleet, "fleet"

    def _link(self, out: Outcome) -> str:
        """The Live view of the replica over the window diagnosed, the leading cause's node lit."""
        top = out.top
        node = top.cause if top is not None else out.lead
        profile_name = self.config.profile_name or self.profile.name or None
        return live_url(LiveLink(profile=profile_name, window=self.config.window, end=out.alert.startsAt,
                                 match=dict(out.replica), node=node), self.base)

    def _lead(self, out: Outcome) -> None:
        """With several triage alerts on one replica, lead with the cause the diagnosis ranks first (a root cause
        before what it explains), not whichever alert arrived first."""
        causes = {a.labels.get("cause") for a in (out.alert, *out.others)}
        if out.diagnosis is None or len(causes) < 2:
            return
        ranked = next((f.cause for f in out.diagnosis.findings if f.cause in causes), None)
        if ranked is not None and ranked != out.lead:
            out.lead = ranked
            out.link = self._link(out)

    def _deliver(self, out: Outcome) -> None:
        sinks = [("slack", self.config.slack_url, lambda: slack_body(self.kb, out)),
                 ("json", self.config.json_url, lambda: json_body(out))]
        for name, url, body in sinks:
            if not url:
                continue
            why = post_json(url, body(), self.config.post_timeout)
            if why:
                self.metrics.failed.labels(name).inc()
                log.warning("the %s receiver did not take the message: %s", name, why)
            else:
                self.metrics.delivered.labels(name).inc()

    def _store(self, alerts: list[AlertmanagerAlert], out: Outcome) -> None:
        if self.store is None:
            return
        text = slack_text(self.kb, out)
        top = out.top
        for alert in alerts:
            try:
                self.store.record(fingerprint=alert.key(), starts_at=alert.startsAt,
                                  alertname=alert.labels.get("alertname", ""), labels=alert.labels,
                                  replica=out.replica, cause=top.cause if top else None, message=text,
                                  diagnosis=out.contract, error=out.error or None, link=out.link)
                self.metrics.delivered.labels("store").inc()
                with self._lock:
                    ended = self._ended.pop((alert.key(), alert.startsAt.isoformat()), None)
                if ended is not None:
                    self.store.resolve(ended.key(), ended.startsAt, ended.endsAt)
            except Exception:  # a locked or full disk must not stop the pages
                self.metrics.failed.labels("store").inc()
                log.exception("the incident store did not take an incident")

