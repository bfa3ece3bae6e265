"""Which names of a rule file or dashboard no longer exist: the engine maps' rename/removal history, and (with a
live Prometheus) the names it does not have, including colon names stored under Prometheus 3's underscore
escaping (``sglang:token_usage`` kept as ``sglang_token_usage``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import requests
from prometheus_api_client import PrometheusApiClientException

from triage.errors import TriageError
from triage.knowledge.engines import SERIES_SUFFIXES, EngineSpec
from triage.lint.documents import Document
from triage.sources.metrics.fetch import AnswerTooLarge
from triage.sources.metrics.profiles import Profile, redact_url

RENAMED, REMOVED, SUFFIX, ESCAPED, MISSING = "renamed", "removed", "counter suffix", "escaped", "missing"
# series Prometheus makes itself only while alerts are pending or firing: their absence says nothing
SYNTHETIC = frozenset({"ALERTS", "ALERTS_FOR_STATE"})


@dataclass(frozen=True)
class History:
    """What the engine maps say about one exposed name that no longer exists."""

    kind: str
    engine: str
    replacement: str  # the name to use instead ("" when there is none)
    version: str      # "deprecated 0.9.2, removed 0.12.0"
    why: str = ""
    also: str = ""    # another component that still exports the old name


@dataclass
class Finding:
    name: str
    kind: str
    replacement: str = ""
    version: str = ""
    engine: str = ""
    note: str = ""
    where: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "kind": self.kind, "replacement": self.replacement, "version": self.version,
                "engine": self.engine, "note": self.note, "where": self.where}


def _version(deprecated: str, removed: str) -> str:
    parts = ([f"deprecated {deprecated}"] if deprecated else []) + [f"removed in {removed}" if removed
                                                                    else "still emitted as an alias"]
    return ", ".join(parts)


def _variants(engine: EngineSpec, old: str, new: str) -> list[tuple[str, str]]:
    """``old``/``new`` under each of the engine's prefixes (``vllm:x`` is also ``vllm_x`` after a colon-translating
    pipeline); names that do not start with the first prefix are taken as written."""
    first = engine.prefixes[0]
    if not first or not old.startswith(first):
        return [(old, new)]
    out = []
    for p in engine.prefixes:
        swapped_new = p + new.removeprefix(first) if new.startswith(first) else new
        out.append((p + old.removeprefix(first), swapped_new))
    return out


def history_index(engines: Mapping[str, EngineSpec], lang: str = "en") -> dict[str, History]:
    index: dict[str, History] = {}
    for e in engines.values():
        for r in e.renamed:
            for old, new in _variants(e, r.old, r.new):
                index[old] = History(RENAMED, e.id, new, _version(r.deprecated_in, r.removed_in),
                                     also=r.also_exported_by)
        for gone in e.removed:
            for old, _ in _variants(e, gone.name, ""):
                index[old] = History(REMOVED, e.id, "", f"removed in {gone.removed_in}", gone.why.get(lang),
                                     gone.also_exported_by)
    return index


def _counters(engines: Mapping[str, EngineSpec]) -> set[str]:
    return {c for e in engines.values() for m in e.metrics if m.type == "counter" for c in e.candidates(m.key)}


def lookup(name: str, engines: Mapping[str, EngineSpec], index: Mapping[str, History]) -> Finding | None:
    """What the maps know against ``name`` (a series name as a query writes it, suffixes included)."""
    hit = index.get(name)
    suffix = ""
    if hit is None:
        suffix = next((s for s in SERIES_SUFFIXES if name.endswith(s) and name.removesuffix(s) in index), "")
        hit = index.get(name.removesuffix(suffix)) if suffix else None
    if hit is not None:
        new = hit.replacement + suffix if hit.replacement else ""
        note = "; ".join(x.rstrip(".") for x in (hit.why, hit.also and f"still exported by {hit.also}") if x)
        return Finding(name, hit.kind, new, hit.version, hit.engine, note)
    for e in engines.values():
        for pr in e.renamed_prefixes:
            if name.startswith(pr.old) and not name.startswith(pr.new):
                return Finding(name, RENAMED, pr.new + name.removeprefix(pr.old),
                               _version(pr.deprecated_in, pr.removed_in), e.id, f"prefix {pr.old} → {pr.new}")
    counters = _counters(engines)
    if not name.endswith("_total") and name + "_total" in counters and name not in counters:
        engine = next(e.id for e in engines.values() if any(name + "_total" in e.candidates(m.key) for m in e.metrics))
        return Finding(name, SUFFIX, name + "_total", "", engine,
                       "a counter is scraped with _total (prometheus_client adds it); no series has this name")
    return None


def check(doc: Document, engines: Mapping[str, EngineSpec], present: set[str] | None = None,
          lang: str = "en", defined: set[str] | None = None) -> list[Finding]:
    """Findings for ``doc``, one per name, each listing every place that uses it. ``defined``: series that the
    files checked together record themselves (never "missing")."""
    index = history_index(engines, lang)
    own = doc.defined | (defined or set()) | SYNTHETIC
    found: dict[str, Finding] = {}
    for use in doc.uses:
        if use.name in found:
            found[use.name].where.append(use.where)
            continue
        finding = lookup(use.name, engines, index)
        if present is not None and use.name not in present and use.name not in own:
            escaped = use.name.replace(":", "_")
            if ":" in use.name and escaped in present:
                note = (f"this Prometheus stores it as {escaped} (colons turned into underscores on the way in: "
                        f"underscore escaping or an OTel/OTLP translation): query {escaped}")
                finding = finding or Finding(use.name, ESCAPED, escaped)
                finding.note = "; ".join(x for x in (finding.note, note) if x)
            elif finding is None:
                finding = Finding(use.name, MISSING, note="this Prometheus has no series of this name")
            else:
                finding.note = "; ".join(x for x in (finding.note, "absent from this Prometheus") if x)
        if finding is not None:
            finding.where.append(use.where)
            found[use.name] = finding
    return list(found.values())


def prometheus_names(profile: Profile, timeout: float) -> set[str]:
    """Every metric name the Prometheus of ``profile`` holds (its __name__ label values)."""
    from triage.sources.metrics.prometheus_window import prometheus_client
    from triage.sources.metrics.scrape import connection_reason

    shown = redact_url(profile.url)
    try:
        names = prometheus_client(profile, timeout).get_label_values("__name__")
    except requests.exceptions.Timeout:
        raise TriageError(f"Prometheus at {shown}: no answer within {timeout:g} s") from None
    except requests.exceptions.ConnectionError as exc:
        raise TriageError(f"Prometheus at {shown} is unreachable ({connection_reason(exc)})") from None
    except PrometheusApiClientException as exc:
        raise TriageError(f"Prometheus at {shown} refused the names query ({str(exc)[:200]})") from None
    except AnswerTooLarge as exc:
        raise TriageError(f"Prometheus at {shown}: {exc}") from None
    except (ValueError, KeyError, TypeError, requests.exceptions.RequestException):
        raise TriageError(f"{shown} did not answer with Prometheus JSON (is it the Prometheus base URL?)") from None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TriageError(f"{shown} did not answer with a list of metric names")
    if not names:  # an empty Prometheus would call every name missing: say so instead
        raise TriageError(f"Prometheus at {shown} holds no metrics at all; nothing to compare against")
    return set(names)


def table(findings: Iterable[Finding]) -> str:
    rows = [("NAME", "KIND", "USE INSTEAD", "VERSION", "WHERE / NOTE")]
    for f in findings:
        places = ", ".join(f.where[:3]) + (f" (+{len(f.where) - 3} more)" if len(f.where) > 3 else "")
        rows.append((f.name, f.kind, f.replacement or "—", f.version or "—",
                     places + (f" — {f.note}" if f.note else "")))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join([*(r[i].ljust(widths[i]) for i in range(4)), r[4]]).rstrip() for r in rows)
