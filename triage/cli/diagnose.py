"""``python -m triage diagnose FILE``: the same findings the Benchmark page shows."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from triage.cli import numbers
from triage.cli.live import add_live_arguments
from triage.cli.log_output import (
    log_diagnosis,
    print_log_diagnosis,
    print_scrape_diagnosis,
    scrape_diagnosis,
    source_name,
)
from triage.cli.text_input import read_source
from triage.diagnosis.roofline import Hardware
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.verdict import engine_id
from triage.errors import TriageError
from triage.knowledge.loader import DEFAULT_TREE_DIR, load_knowledge
from triage.knowledge.messages import message_text
from triage.report.json_contract import diagnosis_json
from triage.report.text import diagnosis_text, fmt_threshold, fmt_value
from triage.sources.logs.series import LogSeries
from triage.sources.metrics.exposition import Snapshot
from triage.sources.metrics.since_start import SINCE_START

if TYPE_CHECKING:  # pandas and pyarrow load only for a benchmark file: a log or a scrape starts ~0.3-0.6 s sooner
    from triage.run import Benchmark


def read_benchmark(path: Path) -> Benchmark:
    from triage.bounded import quotable, read_bounded
    from triage.service.uploads import open_benchmark

    data = read_bounded(path)
    return open_benchmark(data, path.name, quote=quotable(path, data))


def runs_json(bench: Benchmark, chosen: int) -> list[dict]:
    return [{"number": i, "label": r.label, "requests": len(r.requests) if r.requests is not None else 0,
             "selected": i == chosen, "definitions": r.definitions, "meta": r.meta}
            for i, r in enumerate(bench.runs, start=1)]


def slo_from_args(kb, args: argparse.Namespace):
    """The SLO of --slo / --ttft-slo / --tpot-slo."""
    try:
        return resolve_slo(kb, args.slo, ttft_p99_s=args.ttft_slo, tpot_p99_s=args.tpot_slo)
    except KeyError as exc:
        raise TriageError(f"unknown SLO preset {exc}; choose one of {', '.join(kb.slo_presets)}", key="--slo") from exc


def _diagnose_live(kb, args: argparse.Namespace) -> int:
    live, label = live_diagnosis(kb, args)
    if args.json:
        print(json.dumps(live_json(live, label), ensure_ascii=False, indent=2))
    else:
        header = [f"source: {label} (engine {live.engine}, window {fmt_value(live.readings.window_seconds, 's')})",
                  *live.readings.errors]
        print(diagnosis_text(kb, live.diagnosis, header, engine=live.engine))
    return 0


def hardware(args: argparse.Namespace) -> Hardware | None:
    """The serving hardware for the roofline comparison, when --model and --gpu are both given."""
    if bool(args.model) != bool(args.gpu):
        raise TriageError("give --model and --gpu together (the roofline needs both)", key="--model/--gpu")
    return Hardware(args.model, args.gpu, tp=args.tp) if args.model else None


def live_diagnosis(kb, args: argparse.Namespace):
    from triage.cli.live import live_pair
    from triage.service.live import refresh

    pair = live_pair(args)
    label = pair.label
    live = refresh(kb, pair, slo_from_args(kb, args), series_points=0, hardware=hardware(args)).live
    if live.diagnosis.empty:
        raise TriageError(f"nothing to diagnose: {live.diagnosis.empty}", where=label)
    return live, label


def check_one_source(args: argparse.Namespace) -> None:
    sources = [bool(args.file), bool(args.prometheus), bool(args.endpoint), bool(args.scrape)]
    if sum(sources) != 1:
        raise TriageError("give exactly one source: FILE, --prometheus URL, --endpoint URL or --scrape BEFORE AFTER")


def _file_diagnosis(kb, args: argparse.Namespace, bench: Benchmark | None = None):
    """(Benchmark, the chosen run, its Diagnosis) for the FILE argument; a bad --slo fails before the read."""
    from triage.diagnosis.benchmark import diagnose_run, pick_run

    slo = slo_from_args(kb, args)
    bench = bench if bench is not None else read_benchmark(args.file)
    run = pick_run(bench, args.run)
    diag = diagnose_run(kb, run, slo, hardware(args))
    if diag.empty:
        number = bench.runs.index(run) + 1
        raise TriageError(f"nothing to diagnose: {diag.empty}", where=bench.source,
                          key=f"run {number} of {len(bench.runs)} ({run.label})")
    return bench, run, diag


def any_diagnosis(kb, args: argparse.Namespace):
    """(Diagnosis, source label) for whichever source the arguments name."""
    check_one_source(args)
    if not args.file:
        live, label = live_diagnosis(kb, args)
        return live.diagnosis, f"{label} (engine {live.engine})"
    source = read_source(args.file)
    if isinstance(source, Snapshot):
        _, live = scrape_diagnosis(kb, args, source)
        return live.diagnosis, f"{source_name(args.file)} (one /metrics scrape: {SINCE_START})"
    if isinstance(source, LogSeries):
        found = log_diagnosis(kb, args, source)
        return found.live.diagnosis, f"{source_name(args.file)} ({found.log.summary()})"
    bench, run, diag = _file_diagnosis(kb, args, source)
    return diag, f"{bench.source} ({bench.format}) · {run.label}"


def live_json(live, label: str) -> dict:
    """The diagnose --json object of a metric window."""
    out = diagnosis_json(live.diagnosis, source=label, fmt=f"metrics:{live.engine}", runs=[])
    out["missing"] = {f"{n.kind}:{n.key}": why for n, why in live.readings.missing.items()}
    return out


def _diagnose_fleet(kb, args: argparse.Namespace) -> int:
    from triage.cli.live import fleet_window
    from triage.diagnosis.fleet import diagnose_fleet

    if not args.prometheus:
        raise TriageError("--by groups a Prometheus window: give --prometheus URL", key="--by")
    slo = slo_from_args(kb, args)
    window, label = fleet_window(args)
    result = diagnose_fleet(kb, window, slo, hardware(args), recorded=not args.raw)
    rows = result.rows
    if not rows:
        raise TriageError(f"no {window.engine.title} series in this window to group by {', '.join(window.by)}",
                          where=label)
    if args.json:
        groups = []
        for row in rows:
            item: dict[str, object] = {"labels": row.labels, "diagnosis": live_json(row.live, label)}
            if row.diagnosis.empty:
                item["empty"] = row.diagnosis.empty
            groups.append(item)
        out: dict[str, object] = {"source": label, "by": list(window.by), "engine": window.engine.id,
                                  "read": result.read.as_json(), "groups": groups}
        if result.fleet is not None:
            out["fleet"] = fleet_json(result.fleet, label)
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return 0
    print(f"source: {label} (engine {window.engine.id}, grouped by {', '.join(window.by)}), {len(rows)} group(s)")
    print(f"read: {result.read.sentence()}")
    for row in rows:
        who = ", ".join(f"{k}={v}" for k, v in row.labels.items())
        if row.diagnosis.empty:
            print(f"{who}: nothing to diagnose ({row.diagnosis.empty})")
            continue
        causes = ", ".join(f.cause for f in row.diagnosis.findings) or "no finding"
        print(f"{who}: symptoms {', '.join(row.symptoms) or 'none'}; causes {causes}")
    if result.fleet is not None:
        print(fleet_text(result.fleet))
    return 0


def fleet_json(diag, label: str) -> dict:
    """The fleet's own diagnosis (fleet signals, the fleet symptom, its findings) in the diagnose --json shape."""
    out = diagnosis_json(diag, source=label, fmt="fleet", runs=[])
    if diag.empty:
        out["empty"] = diag.empty
    return out


def fleet_text(diag) -> str:
    """One line for the fleet's own causes, then the evidence of each (value, rule, how it was measured)."""
    if diag.empty:
        return f"fleet: not measurable ({diag.empty})"
    present = [c.symptom for c in diag.symptoms if c.present]
    causes = ", ".join(f.cause for f in diag.findings) or "no finding"
    lines = [f"fleet: symptoms {', '.join(present) or 'none'}; causes {causes}"]
    for f in diag.findings:
        for e in f.evidence:
            if e.holds:
                how = message_text(e.source, "en")
                rule = f"{e.op} {fmt_threshold(e)}"
                lines.append(f"  {f.cause}: {e.signal} = {fmt_value(e.value, e.unit)} ({rule}): {how}")
    return "\n".join(lines)


def cmd_diagnose(args: argparse.Namespace) -> int:
    kb = load_knowledge(args.tree_dir)
    check_one_source(args)
    if getattr(args, "by", None):
        return _diagnose_fleet(kb, args)
    if not args.file:
        return _diagnose_live(kb, args)
    source = read_source(args.file)
    if isinstance(source, Snapshot):
        return print_scrape_diagnosis(kb, args, *scrape_diagnosis(kb, args, source))
    if isinstance(source, LogSeries):
        return print_log_diagnosis(kb, args, log_diagnosis(kb, args, source))
    bench, run, diag = _file_diagnosis(kb, args, source)
    number = bench.runs.index(run) + 1
    if args.json:
        out = diagnosis_json(diag, source=bench.source, fmt=bench.format, runs=runs_json(bench, number))
        print(json.dumps(out, ensure_ascii=False, indent=2))
    else:
        header = [f"source: {bench.source} ({bench.format}), run {number} of {len(bench.runs)}: {run.label}"]
        print(diagnosis_text(kb, diag, header + bench.notes, engine=engine_id(run.meta.get("backend"), kb)))
    return 0


def preset_names() -> str:
    """The SLO presets of the repository's tree, for help texts (a broken tree is reported when a command runs)."""
    try:
        return ", ".join(load_knowledge(DEFAULT_TREE_DIR).slo_presets)
    except TriageError:
        return "see tree/slo.yaml"


def add_source_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, nargs="?", help="a load-test result (vLLM, SGLang, GuideLLM, genai-perf, "
                                                      "AIPerf, LLMPerf, or a per-request CSV/Parquet) or a vLLM "
                                                      "server log; - reads standard input")
    p.add_argument("--slo", default=None, help=f"SLO preset: {preset_names()} (default chat)")
    p.add_argument("--ttft-slo", type=numbers.SECONDS, default=None, help="TTFT p99 SLO in seconds")
    p.add_argument("--tpot-slo", type=numbers.SECONDS, default=None, help="TPOT p99 SLO in seconds")
    p.add_argument("--run", type=numbers.RUN_NUMBER, default=None,
                   help="run number in a multi-run file (1-based; default last)")
    p.add_argument("--model", default=None, help="served model (tree/models.yaml id) for TPOT vs the decode roofline")
    p.add_argument("--gpu", default=None, help="GPU (tree/gpus.yaml id) for TPOT vs the decode roofline")
    p.add_argument("--tp", type=numbers.PARALLEL, default=1, help="tensor-parallel size for the roofline (default 1)")
    add_live_arguments(p)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diagnose", help="diagnose a benchmark file, a Prometheus window or a /metrics endpoint")
    add_source_arguments(p)
    p.add_argument("--json", action="store_true", help="print the JSON contract instead of text")
    p.add_argument("--by", action="append", default=[], metavar="LABEL",
                   help="with --prometheus: diagnose every group of this label (pod, instance, model_name…) in one "
                        "pass, each PromQL grouped server-side (repeatable); reads the recording rules "
                        "triage:<signal>:<window> instead when Prometheus evaluates them")
    p.add_argument("--raw", action="store_true",
                   help="with --by: read the raw series even when recording rules are evaluated")
    p.set_defaults(func=cmd_diagnose)

