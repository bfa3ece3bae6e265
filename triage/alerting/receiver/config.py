"""The receiver's configuration: the ``[webhook]`` table of .streamlit/secrets.toml (or ``--config FILE``) and
TRIAGE_WEBHOOK_* variables, which win key by key. Where messages go and which Prometheus is read come only from
here, never from an alert; ``repr`` names which secrets are set, never their values."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from triage.errors import TriageError
from triage.safe_text import redact_url
from triage.store.database import is_postgres, shown

ENV_PREFIX = "TRIAGE_WEBHOOK_"
DEFAULT_SECRETS = (Path.home() / ".streamlit" / "secrets.toml", Path(".streamlit") / "secrets.toml")
SECRET_KEYS = ("token", "slack_url", "json_url")  # a Slack incoming-webhook URL is itself a credential
INT_KEYS = {"workers": (1, 64), "queue": (1, 100_000), "max_replicas": (1, 1_000_000)}
FLOAT_KEYS = {"timeout": (0.1, 600.0), "post_timeout": (0.1, 120.0)}


@dataclass(frozen=True)
class ReceiverConfig:
    """Everything ``python -m triage webhook`` reads at start."""

    prometheus: str                       # profile name in [prometheus.NAME] / TRIAGE_PROMETHEUS_<NAME>_*, or a URL
    listen: str = "127.0.0.1:9095"
    token: str = field(default="", repr=False)       # bearer token Alertmanager sends (http_config.authorization)
    slack_url: str = field(default="", repr=False)   # Slack-compatible incoming webhook
    json_url: str = field(default="", repr=False)    # generic JSON webhook: diagnose --json plus the alert
    incident_db: str = field(default="", repr=False)  # incidents (the Retro page lists them): a SQLite file path,
    # sqlite:/// or postgresql:// URL (its password is a secret); empty: TRIAGE_LOG_DB when that is postgresql://
    # (the experiment log's database, so a team's deployment sets one URL), else none
    dashboard_url: str = ""               # base of the Live links (default TRIAGE_DASHBOARD_URL / tree/alerting.yaml)
    profile_name: str = ""                # the dashboard's profile name put into the Live link (default: prometheus)
    window: str = "15m"                   # the diagnosis window ending at startsAt; also the de-duplication window
    slo: str = ""                         # SLO preset (default the tree's)
    labels: tuple[str, ...] = ()          # replica labels to match on (default: the rules' group-by labels)
    workers: int = 2
    queue: int = 256
    max_replicas: int = 10_000            # replicas remembered for de-duplication (oldest forgotten first)
    timeout: float = 10.0                 # each Prometheus query
    post_timeout: float = 5.0             # each outgoing post
    secrets_path: str = ""                # the file the [webhook] table came from (profiles are read from it too)

    def __repr__(self) -> str:
        sinks = [name for name in ("slack_url", "json_url") if getattr(self, name)]
        return (f"ReceiverConfig(prometheus={redact_url(self.prometheus)!r}, listen={self.listen!r}, "
                f"token={'set' if self.token else 'none'}, sinks={sinks}, incident_db={self.incident_shown!r}, "
                f"window={self.window!r}, workers={self.workers}, queue={self.queue})")

    __str__ = __repr__

    @property
    def incident_shown(self) -> str:
        """``incident_db`` as it may be shown: a URL's password masked."""
        return shown(self.incident_db) if is_postgres(self.incident_db) else self.incident_db

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.listen.rpartition(":")
        try:
            number = int(port)
        except ValueError:
            number = -1
        if not host or not 0 <= number <= 65_535:
            raise TriageError(f"'{self.listen[:60]}' is not HOST:PORT", key="webhook.listen")
        return host.strip("[]"), number


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None,
                overrides: Mapping[str, Any] | None = None) -> ReceiverConfig:
    """The ``[webhook]`` table of ``path`` (default: ~/.streamlit and ./.streamlit secrets.toml, the project one
    winning), then TRIAGE_WEBHOOK_<KEY> variables, then ``overrides`` (the command line's --listen)."""
    env = os.environ if env is None else env
    paths = [Path(path)] if path is not None else [p for p in DEFAULT_SECRETS if p.is_file()]
    table: dict[str, Any] = {}
    for p in paths:
        table.update(_webhook_table(p))
    for key, value in env.items():
        if key.startswith(ENV_PREFIX) and len(key) > len(ENV_PREFIX):
            table[key[len(ENV_PREFIX):].lower()] = value
    table.update({k: v for k, v in (overrides or {}).items() if v is not None})
    if not str(table.get("incident_db", "")).strip():
        table["incident_db"] = default_incident_db(env)
    where = str(paths[-1]) if paths else f"{ENV_PREFIX}*"
    if paths:
        table.setdefault("secrets_path", str(paths[-1]))
    return _build(table, where)


def default_incident_db(env: Mapping[str, str] | None = None) -> str:
    """Where incidents go when ``incident_db`` is unset: the experiment log's PostgreSQL (``TRIAGE_LOG_DB``) when it
    is one, so replicas and the receiver share one database; else none (a SQLite log stays the log's own file)."""
    url = (os.environ if env is None else env).get("TRIAGE_LOG_DB", "").strip()
    return url if url and is_postgres(url) else ""


def _webhook_table(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise TriageError("configuration file not found", where=str(path))
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TriageError(f"not valid TOML ({exc})", where=str(path)) from None
    table = data.get("webhook", {})
    if not isinstance(table, dict):
        raise TriageError("[webhook] must be a table", where=str(path), key="webhook")
    return dict(table)


def _build(table: dict[str, Any], where: str) -> ReceiverConfig:
    known = {f.name for f in fields(ReceiverConfig)}
    unknown = sorted(set(table) - known)
    if unknown:
        raise TriageError(f"unknown key(s) {', '.join(unknown)}; use {', '.join(sorted(known - {'secrets_path'}))}",
                          where=where, key="webhook")
    if not str(table.get("prometheus", "")).strip():
        raise TriageError("no Prometheus to read: set prometheus = \"PROFILE\" in [webhook] or "
                          f"{ENV_PREFIX}PROMETHEUS", where=where, key="webhook.prometheus")
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key in INT_KEYS:
            values[key] = _number(int, value, key, INT_KEYS[key], where)
        elif key in FLOAT_KEYS:
            values[key] = _number(float, value, key, FLOAT_KEYS[key], where)
        elif key == "labels":
            values[key] = _labels(value, where)
        elif not isinstance(value, str):
            raise TriageError("must be a string", where=where, key=f"webhook.{key}")  # the value is never echoed
        else:
            values[key] = value.strip()
    for key in ("slack_url", "json_url", "dashboard_url"):
        url = values.get(key, "")
        if url and not url.startswith(("http://", "https://")):
            raise TriageError("must start with http:// or https://", where=where, key=f"webhook.{key}")
    config = ReceiverConfig(**values)
    config.host_port  # noqa: B018 (checks listen now, not at bind time)
    return config


def _number(kind: type, value: Any, key: str, bounds: tuple[float, float], where: str) -> Any:
    try:
        number = kind(value)
    except (TypeError, ValueError):
        number = None
    if number is None or not bounds[0] <= number <= bounds[1]:
        raise TriageError(f"must be a number from {bounds[0]:g} to {bounds[1]:g}, got '{str(value)[:40]}'",
                          where=where, key=f"webhook.{key}")
    return number


def _labels(value: Any, where: str) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(v, str) for v in items):
        raise TriageError("must be a list of label names", where=where, key="webhook.labels")
    return tuple(v.strip() for v in items if v.strip())
