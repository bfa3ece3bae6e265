"""The incidents the Alertmanager receiver stored, for the Retro page: where the store is and its newest rows."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from triage.alerting.receiver.config import DEFAULT_SECRETS, ENV_PREFIX
from triage.alerting.receiver.store import Incident, IncidentStore
from triage.errors import TriageError


def incident_db() -> Path | None:
    """The receiver's ``incident_db`` (TRIAGE_WEBHOOK_INCIDENT_DB, else [webhook] in secrets.toml); None: none."""
    path = os.environ.get(f"{ENV_PREFIX}INCIDENT_DB", "")
    for secrets in DEFAULT_SECRETS:
        if path or not secrets.is_file():
            continue
        try:
            table = tomllib.loads(secrets.read_text(encoding="utf-8")).get("webhook", {})
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError):
            continue
        value = table.get("incident_db", "") if isinstance(table, dict) else ""
        path = value if isinstance(value, str) else ""
    return Path(path) if path else None


def recent_incidents(limit: int = 20) -> list[Incident]:
    """The newest incidents; empty when no store is configured or it does not exist yet. TriageError when the
    file is not a store."""
    path = incident_db()
    if path is None or not path.is_file():
        return []
    return IncidentStore(path).recent(limit)


__all__ = ["Incident", "TriageError", "incident_db", "recent_incidents"]
