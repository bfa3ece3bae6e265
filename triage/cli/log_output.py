"""diagnose / report on a server log: the window's diagnosis, the log's own readings, text or JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from triage.errors import TriageError
from triage.knowledge.units import plain
from triage.report.json_contract import diagnosis_json
from triage.report.text import diagnosis_text
from triage.service.logs import BLIND, LogDiagnosis, diagnose_log
from triage.sources.logs.series import LogSeries


def source_name(path: Path) -> str:
    return "stdin" if str(path) == "-" else path.name


def log_diagnosis(kb, args: argparse.Namespace, log: LogSeries) -> LogDiagnosis:
    from triage.cli.diagnose import slo_from_args

    if args.run is not None:
        raise TriageError("--run picks a run of a benchmark file; a log has none", key="--run")
    found = diagnose_log(kb, log, slo_from_args(kb, args))
    if found.live.diagnosis.empty:
        raise TriageError(f"nothing to diagnose: {found.live.diagnosis.empty}", where=source_name(args.file))
    return found


def scrape_diagnosis(kb, args: argparse.Namespace, snap):
    """The one-scrape window ("since the server started") and its diagnosis; TriageError when nothing ran."""
    from triage.cli.diagnose import hardware, slo_from_args
    from triage.diagnosis.window import diagnose_window
    from triage.sources.metrics.since_start import SinceStartWindow

    if args.run is not None:
        raise TriageError("--run picks a run of a benchmark file; a /metrics scrape has none", key="--run")
    window = SinceStartWindow(snap, match=None)
    live = diagnose_window(kb, window, slo_from_args(kb, args), hardware(args))
    if live.diagnosis.empty:
        raise TriageError(f"nothing to diagnose: {live.diagnosis.empty}", where=source_name(args.file))
    return window, live


def uptime_text(window) -> str:
    if window.started is None:
        return "uptime unknown (no process_start_time_seconds): rates not measurable"
    hours = (window.scrape.taken_at - window.started) / 3600
    return f"uptime {plain(hours)} h to the scrape (its time: the file's modification time, or now for a paste)"


def print_scrape_diagnosis(kb, args: argparse.Namespace, window, live) -> int:
    from triage.sources.metrics.since_start import SINCE_START

    name = source_name(args.file)
    if args.json:
        out = diagnosis_json(live.diagnosis, source=name, fmt=f"metrics:{live.engine}", runs=[])
        out["window"] = SINCE_START
        out["uptime_s"] = window.scrape.taken_at - window.started if window.started is not None else None
        out["implausible"] = [i.sentence() for i in window.implausible]
        out["missing"] = {f"{n.kind}:{n.key}": why for n, why in live.readings.missing.items()}
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return 0
    header = [f"source: {name} (one /metrics scrape, engine {live.engine})",
              f"window: {SINCE_START}; {uptime_text(window)}", *live.readings.errors]
    print(diagnosis_text(kb, live.diagnosis, header, blind="one scrape", engine=live.engine))
    return 0


def print_log_diagnosis(kb, args: argparse.Namespace, found: LogDiagnosis) -> int:
    name = source_name(args.file)
    if args.json:
        out = diagnosis_json(found.live.diagnosis, source=name, fmt=found.log.fmt, runs=[])
        out["missing"] = {f"{n.kind}:{n.key}": why for n, why in found.live.readings.missing.items()}
        out["log"] = found.as_json()
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return 0
    header = [f"source: {name} ({found.log.summary()}), window: the log's span"]
    text = diagnosis_text(kb, found.live.diagnosis, header, blind=BLIND, engine=found.live.engine)
    lines = [text, "", "From the log's own numbers:"] + [f"  · {r.text}" for r in found.readings]
    if not found.readings:
        lines.append("  (nothing beyond the signals above)")
    print("\n".join(lines))
    return 0
