"""Whether a visitor may type a /metrics URL on the Live page, and what a failed typed scrape may tell them.

A typed URL makes the server connect wherever the visitor says: without an allowlist, a page reachable from
the network is a proxy into the server's own network and, through its error texts, a port scanner. So a typed
URL is allowed only when the app listens on the loopback alone (the visitor is on this machine and could connect
anyway) or a scrape allowlist is set (``TRIAGE_SCRAPE_ALLOW`` / ``[scrape] allow``, enforced by the fetch);
otherwise only the configured Prometheus profiles are offered. ``TRIAGE_LIVE_TYPED_URLS=off`` turns typed URLs
off even on the loopback (an app behind a reverse proxy listens there too)."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from enum import Enum

from triage.sources.metrics.fetch import ScrapePolicy, ScrapeRefused, policy_from_config

__all__ = ["OFF_ENV", "ScrapeRefused", "TypedUrls", "live_typed_urls", "loopback_only", "typed_url_access"]

OFF_ENV = "TRIAGE_LIVE_TYPED_URLS"


class TypedUrls(Enum):
    """Why typed URLs are allowed (``ALLOWLIST``, ``LOOPBACK``), or that they are off."""

    ALLOWLIST = "allowlist"
    LOOPBACK = "loopback"
    OFF = "off"


def loopback_only(address: str | None) -> bool:
    """True when a server bound to ``address`` (Streamlit's ``server.address``) accepts loopback connections only.
    Unset or empty means every interface (Streamlit's default); a host name other than localhost is not trusted
    to stay local."""
    name = (address or "").strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def typed_url_access(address: str | None, policy: ScrapePolicy, env: Mapping[str, str] | None = None) -> TypedUrls:
    """Whether the Live page accepts a typed URL, given where the app listens and the scrape policy."""
    env = os.environ if env is None else env
    if env.get(OFF_ENV, "").strip().lower() in ("off", "0", "false", "no"):
        return TypedUrls.OFF
    if policy.restricted:
        return TypedUrls.ALLOWLIST
    return TypedUrls.LOOPBACK if loopback_only(address) else TypedUrls.OFF


def live_typed_urls(address: str | None) -> TypedUrls:
    """``typed_url_access`` with the configured allowlist (a malformed one raises TriageError)."""
    return typed_url_access(address, policy_from_config())
