"""Alertmanager's webhook payload (version 4), parsed at the edge: notify/webhook/webhook.go ``Message`` embeds
template/template.go ``Data`` (receiver, status, alerts, groupLabels, commonLabels, commonAnnotations, externalURL)
and adds version, groupKey and truncatedAlerts; each alert is template ``Alert`` (status, labels, annotations,
startsAt, endsAt, generatorURL, fingerprint)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from triage.errors import TriageError

MAX_BODY_BYTES = 4 * 1024 * 1024  # a group of a few thousand alerts; Alertmanager's max_alerts can cap it lower
MAX_ALERTS = 5000
MAX_LABELS = 64
MAX_VALUE = 1024  # a label or annotation value longer than this is cut (labels are shown, never trusted)

Labels = dict[str, str]


def _bounded(value: dict[str, str]) -> dict[str, str]:
    if len(value) > MAX_LABELS:
        raise ValueError(f"more than {MAX_LABELS} labels")
    return {str(k)[:128]: str(v)[:MAX_VALUE] for k, v in value.items()}


class AlertmanagerAlert(BaseModel):
    """One alert of a notification."""

    model_config = ConfigDict(extra="ignore")

    status: Literal["firing", "resolved"]
    labels: Labels = Field(default_factory=dict)
    annotations: Labels = Field(default_factory=dict)
    startsAt: datetime  # noqa: N815 (Alertmanager's field names)
    endsAt: datetime | None = None  # noqa: N815
    generatorURL: str = ""  # noqa: N815
    fingerprint: str = Field(default="", max_length=64)

    _labels = field_validator("labels", "annotations")(_bounded)

    def key(self) -> str:
        """Alertmanager's fingerprint, or (a sender that leaves it out) a hash of the sorted labels."""
        if self.fingerprint:
            return self.fingerprint
        return hashlib.sha256(json.dumps(sorted(self.labels.items())).encode()).hexdigest()[:16]


class AlertmanagerMessage(BaseModel):
    """One webhook notification: a group of alerts."""

    model_config = ConfigDict(extra="ignore")

    version: Literal["4"]
    groupKey: str = ""  # noqa: N815
    truncatedAlerts: int = 0  # noqa: N815
    status: Literal["firing", "resolved"]
    receiver: str = ""
    groupLabels: Labels = Field(default_factory=dict)  # noqa: N815
    commonLabels: Labels = Field(default_factory=dict)  # noqa: N815
    commonAnnotations: Labels = Field(default_factory=dict)  # noqa: N815
    externalURL: str = ""  # noqa: N815
    alerts: list[AlertmanagerAlert] = Field(max_length=MAX_ALERTS)


def parse_message(body: bytes) -> AlertmanagerMessage:
    """The notification in ``body``; TriageError with one line naming the first problem."""
    if len(body) > MAX_BODY_BYTES:
        raise TriageError(f"body larger than {MAX_BODY_BYTES // (1024 * 1024)} MB", where="webhook")
    try:
        return AlertmanagerMessage.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "body"
        raise TriageError(f"not an Alertmanager webhook (version 4) payload: {where}: {first.get('msg', '')}"[:200],
                          where="webhook") from None
