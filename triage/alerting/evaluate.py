"""Dry run: every alert expression (recording rules inlined) evaluated once against a Prometheus."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect

from triage.alerting.export import RuleSet
from triage.errors import TriageError
from triage.sources.metrics.fetch import BoundedRefusal
from triage.sources.metrics.profiles import Profile, profile_for_url, redact_url
from triage.sources.metrics.prometheus_window import api_error_line, prometheus_client, well_formed_answer
from triage.sources.metrics.scrape import connection_reason

MAX_WORKERS = 4


@dataclass(frozen=True)
class Firing:
    alert: str
    cause: str
    symptom: str
    labels: dict[str, str]
    value: float

    def as_json(self) -> dict[str, Any]:
        return {"alert": self.alert, "cause": self.cause, "symptom": self.symptom, "labels": self.labels,
                "value": self.value}


def _client(profile: Profile, timeout: float) -> PrometheusConnect:
    return prometheus_client(profile, timeout)  # every answer bounded in time and size


def _query(client: PrometheusConnect, expr: str, at: float, timeout: float, shown: str) -> list[dict]:
    try:
        answer = client.custom_query(expr, params={"time": at, "timeout": str(timeout)})
    except requests.exceptions.Timeout:
        raise TriageError(f"Prometheus at {shown}: query timed out after {timeout:.1f} s") from None
    except requests.exceptions.ConnectionError as exc:
        raise TriageError(f"Prometheus at {shown} is unreachable ({connection_reason(exc)})") from None
    except PrometheusApiClientException as exc:
        raise TriageError(f"Prometheus at {shown} refused the query: {api_error_line(str(exc))}") from None
    except (ValueError, KeyError, TypeError, IndexError, RecursionError):  # RecursionError: JSON nested too deep
        raise TriageError(f"{shown} did not answer with Prometheus JSON (is it the Prometheus base URL?)") from None
    except BoundedRefusal as exc:  # past the size cap, or a redirect (never followed): one line of ours
        raise TriageError(f"Prometheus at {shown}: {exc}") from None
    except requests.exceptions.RequestException as exc:
        raise TriageError(f"request to {shown} failed ({type(exc).__name__})") from None
    except Exception as exc:  # noqa: BLE001 - whatever the server sends, the dry run ends in one line, not "a bug"
        raise TriageError(f"request to {shown} failed ({type(exc).__name__})") from None
    if not well_formed_answer(answer):
        raise TriageError(f"{shown} did not answer with Prometheus JSON (is it the Prometheus base URL?)")
    return answer


def evaluate(rules: RuleSet, target: Profile | str, at: datetime, timeout: float = 10.0) -> list[Firing]:
    """The alerts whose expression has a sample at ``at`` (built with ``inline=True``), one per replica."""
    profile = target if isinstance(target, Profile) else profile_for_url(target)
    shown = redact_url(profile.url)
    client = _client(profile, timeout)
    moment = at.timestamp()
    with ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="dry-run") as pool:
        results = list(pool.map(lambda a: _query(client, a.expr, moment, timeout, shown), rules.alerts))
    firing: list[Firing] = []
    for alert, vector in zip(rules.alerts, results):
        for sample in vector:
            labels = {k: v for k, v in sample["metric"].items() if k != "__name__"}
            firing.append(Firing(alert.name, alert.cause, alert.symptom, labels, float(sample["value"][1])))
    return firing
