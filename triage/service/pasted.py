"""Text pasted into a page: a server log, a /metrics scrape or a benchmark file's text, detected like a file."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Literal

import pandas as pd

from triage.diagnosis.benchmark import diagnose_run
from triage.diagnosis.roofline import Hardware
from triage.diagnosis.rules import Diagnosis, Slo
from triage.diagnosis.verdict import engine_id
from triage.errors import TriageError
from triage.knowledge.loader import KnowledgeBase
from triage.sources import logs
from triage.sources.logs.derived import LogReading
from triage.sources.logs.series import LogSeries, per_second

PASTED = "pasted text"
MAX_PASTE_BYTES = 64 * 1024 * 1024  # a text area holds what a browser sends; a bigger log belongs in the CLI


@dataclass
class Pasted:
    """What the text was recognised as, its diagnosis, and for a log its time series."""

    kind: Literal["log", "scrape", "benchmark"]
    title: str                     # e.g. "vLLM V1 server log"
    facts: dict[str, float | str]  # the numbers the page's sentence names (stats lines, minutes, skipped…)
    diagnosis: Diagnosis
    label: str
    series: pd.DataFrame | None = None
    readings: list[LogReading] | None = None
    engine: str | None = None      # the engine the text names (a log's, a scrape's metrics, a file's backend)


def log_frame(log: LogSeries) -> pd.DataFrame:
    """One row per stats time (engines summed, KV the fullest engine): time, running, waiting, KV usage,
    prompt and generation tokens/s."""
    rows = per_second(log, ("running", "waiting", "prompt_tps", "gen_tps", "kv"))
    frame = pd.DataFrame.from_dict(rows, orient="index").sort_index()
    frame.index = pd.to_datetime(frame.index, unit="s")
    frame.index.name = "time"
    return frame


def _log(kb: KnowledgeBase, data: bytes, fmt: logs.LogFormat, slo: Slo) -> Pasted:
    from triage.service.logs import diagnose_log

    log = logs.read_log([data], fmt, PASTED)
    found = diagnose_log(kb, log, slo)
    if found.live.diagnosis.empty:
        raise TriageError(f"nothing to diagnose: {found.live.diagnosis.empty}", where=PASTED)
    facts: dict[str, float | str] = {"stats": log.stats_lines, "minutes": log.span_s / 60, "skipped": log.skipped}
    return Pasted("log", log.title, facts, found.live.diagnosis, f"{PASTED} · {log.title}", log_frame(log),
                  found.readings, found.live.engine)


def _scrape(kb: KnowledgeBase, data: bytes, slo: Slo, hardware: Hardware | None) -> Pasted:
    from triage.diagnosis.window import diagnose_window
    from triage.service.windows import parse_snapshot
    from triage.sources.metrics.since_start import SinceStartWindow

    window = SinceStartWindow(replace(parse_snapshot(data, PASTED), taken_at=time.time()))
    live = diagnose_window(kb, window, slo, hardware)
    if live.diagnosis.empty:
        raise TriageError(f"nothing to diagnose: {live.diagnosis.empty}", where=PASTED)
    facts: dict[str, float | str] = {"engine": window.engine.title, "implausible": len(window.implausible)}
    return Pasted("scrape", "/metrics", facts, live.diagnosis, f"{PASTED} · /metrics", engine=live.engine)


def _benchmark(kb: KnowledgeBase, data: bytes, slo: Slo, hardware: Hardware | None) -> Pasted:
    from triage.service.uploads import format_title, open_text_benchmark

    bench = open_text_benchmark(data, PASTED)
    run = bench.runs[-1]
    diag = diagnose_run(kb, run, slo, hardware)
    if diag.empty:
        raise TriageError(f"nothing to diagnose: {diag.empty}", where=PASTED)
    facts: dict[str, float | str] = {"runs": len(bench.runs), "run": run.label}
    return Pasted("benchmark", format_title(bench.format), facts, diag, f"{PASTED} · {run.label}",
                  engine=engine_id(run.meta.get("backend"), kb))


def read_pasted(kb: KnowledgeBase, text: str, slo: Slo, hardware: Hardware | None = None) -> Pasted:
    """Detect what the text is (a log first, then a /metrics scrape, then any benchmark format) and diagnose it;
    TriageError with one sentence when it is empty, too large or none of them."""
    from triage.sources.metrics.since_start import looks_like_metrics

    data = text.encode("utf-8", "replace")
    if not data.strip():
        raise TriageError("the text area is empty", where=PASTED)
    if len(data) > MAX_PASTE_BYTES:
        raise TriageError(f"more than {MAX_PASTE_BYTES // (1024 * 1024)} MB pasted; give a log this large to "
                          "`python -m triage diagnose FILE` instead", where=PASTED)
    head = data[:logs.HEAD_BYTES]
    fmt = logs.detect_log(head)
    if fmt is not None:
        return _log(kb, data, fmt, slo)
    if looks_like_metrics(head):
        return _scrape(kb, data, slo, hardware)
    return _benchmark(kb, data, slo, hardware)
