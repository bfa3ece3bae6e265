"""Fetch a /metrics endpoint over HTTP into a Snapshot, with errors a person can act on."""

from __future__ import annotations

import time

import requests

from triage.errors import TriageError
from triage.sources.metrics.exposition import Snapshot, parse_metrics_text

ACCEPT = "text/plain;version=0.0.4;q=1.0, */*;q=0.1"
NOT_TEXT = ("text/html", "application/json")


def scrape(url: str, timeout: float = 5.0, headers: dict | None = None) -> Snapshot:
    """GET ``url`` (a Prometheus text /metrics endpoint) and parse it, stamped with the time of the answer."""
    if not url.startswith(("http://", "https://")):
        raise TriageError("the metrics URL must start with http:// or https://", where=url)
    try:
        response = requests.get(url, timeout=timeout, headers={"Accept": ACCEPT, **(headers or {})})
    except requests.exceptions.Timeout:
        raise TriageError(f"no answer within {timeout:.1f} s", where=url) from None
    except requests.exceptions.ConnectionError as exc:
        raise TriageError(f"{url} is unreachable ({connection_reason(exc)})", where=url) from None
    except requests.exceptions.RequestException as exc:
        raise TriageError(f"request failed ({type(exc).__name__})", where=url) from None
    taken_at = time.time()
    _check_response(response, url)
    return parse_metrics_text(response.text, taken_at, url)


def two_scrapes(url: str, interval: float, timeout: float = 5.0, headers: dict | None = None) -> list[Snapshot]:
    """Scrape, wait ``interval`` seconds, scrape again: the minimum for rates and histogram deltas."""
    if interval <= 0:
        raise TriageError(f"the interval between scrapes must be positive, got {interval}", key="interval")
    first = scrape(url, timeout, headers)
    time.sleep(interval)
    return [first, scrape(url, timeout, headers)]


def _check_response(response: requests.Response, url: str) -> None:
    status = response.status_code
    if status in (401, 403):
        raise TriageError(f"HTTP {status}: the endpoint wants credentials (check the headers / token)", where=url)
    if status == 404:
        raise TriageError("HTTP 404: no metrics here (is the path /metrics, and metrics enabled?)", where=url)
    if status != 200:
        raise TriageError(f"HTTP {status} {response.reason or ''}".rstrip(), where=url)
    kind = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if kind in NOT_TEXT:
        raise TriageError(f"answered {kind}, not Prometheus metrics text (is this the /metrics URL?)", where=url)


def connection_reason(exc: BaseException) -> str:
    """A short human reason for a requests ConnectionError: connection refused, unknown host, TLS …"""
    text = str(exc).lower()
    if isinstance(exc, requests.exceptions.SSLError) or "certificate" in text:
        return "TLS certificate not accepted"
    if "refused" in text:
        return "connection refused"
    if "name or service not known" in text or "nodename nor servname" in text or "nameresolution" in text:
        return "unknown host name"
    if "timed out" in text:
        return "connection timed out"
    if "reset" in text:
        return "connection reset"
    return "connection failed"
