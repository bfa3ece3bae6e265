"""What on-call reads: a short Slack-compatible message (cause, 2-3 evidence lines with values and thresholds, the
first technique with its exact flag, the Live link) and the generic JSON body (``diagnose --json`` plus the alert).

Label values come from whoever can push an alert: they are shown inertly (Slack's ``& < >`` escaped, inside a
code span, backticks and control characters removed), so a label cannot add a link, a mention or formatting."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from triage.alerting.receiver.payload import AlertmanagerAlert
from triage.diagnosis.rules import Diagnosis, Finding
from triage.knowledge.loader import KnowledgeBase
from triage.report.text import fmt_threshold, fmt_value
from triage.safe_text import one_line, strip_control

MAX_EVIDENCE = 3
MAX_SHOWN = 120  # characters of one label value in a message
COULD_NOT = "could not diagnose"
OPS = {">=": "≥", "<=": "≤", ">": "&gt;", "<": "&lt;", "==": "="}


@dataclass
class Outcome:
    """One replica's diagnosis for one alert (or why there is none), ready to render."""

    alert: AlertmanagerAlert
    replica: dict[str, str]
    lead: str | None                     # the triage alert's ``cause`` label, when it has one
    link: str
    source: str                          # which Prometheus and window, as messages name it
    engine: str = ""
    diagnosis: Diagnosis | None = None
    contract: dict[str, Any] | None = None   # diagnose --json of the window
    error: str = ""                      # "could not diagnose: …" when there is no diagnosis
    others: list[AlertmanagerAlert] = field(default_factory=list)  # alerts of the same replica folded in

    @property
    def top(self) -> Finding | None:
        """The finding to lead with: the alert's own cause when the diagnosis confirms it, else the first."""
        if self.diagnosis is None or not self.diagnosis.findings:
            return None
        return next((f for f in self.diagnosis.findings if f.cause == self.lead), self.diagnosis.findings[0])


def inert(value: object) -> str:
    """A label value as Slack shows it literally: a code span, no backticks, ``& < >`` escaped, one line."""
    text = strip_control(one_line(str(value), MAX_SHOWN)).replace("`", "'")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f"`{text}`" if text else "``"


def plain(text: str) -> str:
    """Our own text (titles, meanings) with Slack's control characters escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _who(replica: dict[str, str]) -> str:
    return " ".join(f"{plain(k)}={inert(v)}" for k, v in replica.items()) or "all series (the alert names no replica)"


def _first_technique(kb: KnowledgeBase, finding: Finding, engine: str) -> str:
    for tid in finding.techniques:
        tech = kb.techniques.get(tid)
        if tech is None:
            continue
        knobs = tech.knobs.get(engine) or next(iter(tech.knobs.values()), None)
        flag = knobs.flags[0].flag if knobs is not None and knobs.flags else ""
        where = f" — `{flag}`" if flag else ""
        return f"{plain(tech.title.en)} ({tech.level}){where}"
    return "no technique listed"


def slack_text(kb: KnowledgeBase, out: Outcome) -> str:
    """The message body (Slack mrkdwn)."""
    name = inert(out.alert.labels.get("alertname", "alert"))
    lines = [f"*{name}* firing on {_who(out.replica)} since {_when(out.alert.startsAt)}"]
    if out.others:
        lines[0] += f" (+{len(out.others)} more alert(s) on this replica)"
    top = out.top
    if out.error:
        lines.append(f"*{plain(one_line(out.error, 300))}*")
    elif top is None:
        diag = out.diagnosis
        present = [c.symptom for c in diag.symptoms if c.present] if diag else []
        lines.append("*No cause found* in the window ending at the alert: "
                     + (f"symptom(s) {', '.join(present)} present, their causes not measurable here"
                        if present else "no symptom measurable over its threshold"))
    else:
        cause = kb.causes[top.cause]
        symptom = kb.symptom(top.symptom)
        confirmed = "" if out.lead in (None, top.cause) else f" (the alert said `{plain(out.lead or '')}`)"
        lines.append(f"*Cause:* {plain(cause.title.en)} [{top.cause}] — {plain(symptom.title.en)}, "
                     f"confidence {top.confidence}{confirmed}")
        shown = [e for e in top.evidence if e.holds and not e.context][:MAX_EVIDENCE]
        lines += [f"• {e.signal} = {fmt_value(e.value, e.unit)} (rule {OPS.get(e.op, plain(e.op))} "
                  f"{fmt_threshold(e)}): {plain(e.meaning.en)}" for e in shown]
        lines.append(f"*Try first:* {_first_technique(kb, top, out.engine)}")
    node = f", node {top.cause}" if top else (f", node {out.lead}" if out.lead else "")
    lines.append(f"*Live:* <{out.link}|open the Live view> ({plain(out.source)}, replica {_who(out.replica)}{node})")
    return "\n".join(lines)


def slack_body(kb: KnowledgeBase, out: Outcome) -> dict[str, Any]:
    return {"text": slack_text(kb, out)}


def alert_json(alert: AlertmanagerAlert) -> dict[str, Any]:
    return {"status": alert.status, "labels": alert.labels, "annotations": alert.annotations,
            "startsAt": alert.startsAt.isoformat(), "fingerprint": alert.key()}


def json_body(out: Outcome) -> dict[str, Any]:
    """The generic webhook: the alert, the replica matched, the link, and diagnose --json (or the error)."""
    top = out.top
    return {"alert": alert_json(out.alert), "others": [alert_json(a) for a in out.others], "replica": out.replica,
            "lead_cause": out.lead, "cause": top.cause if top else None, "link": out.link, "source": out.source,
            "diagnosis": out.contract, "error": out.error or None}
