"""The incidents the Alertmanager receiver stored, for the Retro page: where the store is and its newest rows."""

from __future__ import annotations

import os
import tomllib

from triage.alerting.receiver.config import DEFAULT_SECRETS, ENV_PREFIX, default_incident_db
from triage.alerting.receiver.store import Incident, IncidentStore
from triage.errors import TriageError
from triage.store import database


def incident_db() -> str | None:
    """The receiver's ``incident_db`` (TRIAGE_WEBHOOK_INCIDENT_DB, else [webhook] in secrets.toml, else
    TRIAGE_LOG_DB when that is ``postgresql://``, as the receiver does): a file path or URL; None: none."""
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
    path = path.strip() or default_incident_db()
    return path or None


def recent_incidents(limit: int = 20) -> list[Incident]:
    """The newest incidents; empty when no store is configured or its SQLite file does not exist yet.
    TriageError when the file or database is not a usable store."""
    target = incident_db()
    if target is None:
        return []
    if not database.is_postgres(target) and not database.sqlite_path(target).is_file():
        return []  # the receiver has stored nothing yet: the page creates no file
    return IncidentStore(target).recent(limit)


__all__ = ["Incident", "TriageError", "incident_db", "recent_incidents"]
