"""``python -m triage diagnose FILE``: the same findings the Benchmark page shows."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from triage.diagnosis import diagnose_run, pick_run
from triage.errors import TriageError
from triage.knowledge import DEFAULT_TREE_DIR, load_knowledge
from triage.report_json import diagnosis_json
from triage.report_text import diagnosis_text
from triage.rules import resolve_slo
from triage.run import Benchmark


def read_benchmark(path: Path) -> Benchmark:
    from triage.sources.files import load_benchmark

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TriageError(f"cannot read: {exc.strerror or exc}", where=str(path)) from exc
    return load_benchmark(data, path.name)


def runs_json(bench: Benchmark, chosen: int) -> list[dict]:
    return [{"number": i, "label": r.label, "requests": len(r.requests) if r.has_requests else 0,
             "selected": i == chosen, "definitions": r.definitions, "meta": r.meta}
            for i, r in enumerate(bench.runs, start=1)]


def cmd_diagnose(args: argparse.Namespace) -> int:
    kb = load_knowledge(args.tree_dir)
    try:
        slo = resolve_slo(kb, args.slo, ttft_p99_s=args.ttft_slo, tpot_p99_s=args.tpot_slo)
    except KeyError as exc:
        raise TriageError(f"unknown SLO preset {exc}", key="--slo") from exc
    bench = read_benchmark(args.file)
    run = pick_run(bench, args.run)
    number = bench.runs.index(run) + 1
    diag = diagnose_run(kb, run, slo)
    if args.json:
        out = diagnosis_json(diag, source=bench.source, fmt=bench.format, runs=runs_json(bench, number))
        print(json.dumps(out, ensure_ascii=False, indent=2))
    else:
        header = [f"source: {bench.source} ({bench.format}), run {number} of {len(bench.runs)}: {run.label}"]
        print(diagnosis_text(kb, diag, header + bench.notes))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diagnose", help="diagnose a benchmark file")
    p.add_argument("file", type=Path, help="a load-test result (vLLM, SGLang, GuideLLM, genai-perf, AIPerf, "
                                           "LLMPerf, or a per-request CSV/Parquet)")
    p.add_argument("--slo", default=None, help="SLO preset: chat, code or batch (default chat)")
    p.add_argument("--ttft-slo", type=float, default=None, help="TTFT p99 SLO in seconds")
    p.add_argument("--tpot-slo", type=float, default=None, help="TPOT p99 SLO in seconds")
    p.add_argument("--run", type=int, default=None, help="run number in a multi-run file (1-based; default last)")
    p.add_argument("--json", action="store_true", help="print the JSON contract instead of text")
    p.add_argument("--tree-dir", type=Path, default=DEFAULT_TREE_DIR, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_diagnose)
