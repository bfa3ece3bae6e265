"""diagnose / report on a server log: the window's diagnosis, the log's own readings, text or JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from triage.errors import TriageError
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


def print_log_diagnosis(kb, args: argparse.Namespace, found: LogDiagnosis) -> int:
    name = source_name(args.file)
    if args.json:
        out = diagnosis_json(found.live.diagnosis, source=name, fmt=found.log.fmt, runs=[])
        out["missing"] = {f"{n.kind}:{n.key}": why for n, why in found.live.readings.missing.items()}
        out["log"] = found.as_json()
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return 0
    header = [f"source: {name} ({found.log.summary()}), window: the log's span"]
    text = diagnosis_text(kb, found.live.diagnosis, header, blind=BLIND)
    lines = [text, "", "From the log's own numbers:"] + [f"  · {r.text}" for r in found.readings]
    if not found.readings:
        lines.append("  (nothing beyond the signals above)")
    print("\n".join(lines))
    return 0
