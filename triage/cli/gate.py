"""CLI ``gate BASELINE CANDIDATE`` (exit 0 pass, 1 regression, 2 bad input or unsound) and ``log list|show|export``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from triage.cli import numbers
from triage.cli.diagnose import preset_names
from triage.diagnosis.rules import Slo, resolve_slo
from triage.errors import TriageError
from triage.knowledge.loader import load_knowledge
from triage.knowledge.units import count, fmt_interval, fmt_relative, fmt_value, plain
from triage.run import Benchmark, Run
from triage.verify.comparison import MIN_BOOT, Comparison, MetricDelta, compare, comparison_json, metric_specs
from triage.verify.experiment_log import Entry, ExperimentLog, entry_from, sha256
from triage.verify.gate import GateResult, apply_gate, load_gate, parse_tolerance

EXIT_PASS, EXIT_REGRESSION, EXIT_BAD_INPUT = 0, 1, 2
MAX_BOOT = 100_000


@dataclass
class Loaded:
    """One side of the gate: the file, its bytes, the parsed benchmark and the chosen run."""

    path: Path
    data: bytes
    bench: Benchmark
    run: Run
    number: int


@dataclass
class LoadedLog:
    """One side of the gate that is a server log: the file, its bytes and the parsed log."""

    path: Path
    data: bytes
    log: Any  # triage.service.verify_sides.LogSeries


def read_any(path: Path, run_number: int | None, key: str) -> Loaded | LoadedLog:
    """A benchmark file / console summary (one of its runs) or a server log."""
    from triage.bounded import quotable, read_bounded
    from triage.service.verify_sides import is_log, open_side

    data = read_bounded(path)
    side = open_side(data, path.name, quote=quotable(path, data))
    if is_log(side):
        if run_number is not None:
            raise TriageError("a server log has no runs to pick", where=str(path), key=key)
        return LoadedLog(path, data, side)
    return _pick_run(path, data, side, run_number, key)  # type: ignore[arg-type]


def read_side(path: Path, run_number: int | None, key: str) -> Loaded:
    from triage.bounded import quotable, read_bounded
    from triage.service.uploads import open_benchmark

    data = read_bounded(path)
    bench = open_benchmark(data, path.name, quote=quotable(path, data))
    return _pick_run(path, data, bench, run_number, key)


def _pick_run(path: Path, data: bytes, bench: Benchmark, run_number: int | None, key: str) -> Loaded:
    if run_number is None:
        number = len(bench.runs)
    elif 1 <= run_number <= len(bench.runs):
        number = run_number
    else:
        raise TriageError(f"run {run_number} does not exist; the file has {len(bench.runs)} run(s)",
                          where=str(path), key=key)
    return Loaded(path, data, bench, bench.runs[number - 1], number)


def tolerances(pairs: list[tuple[str, str]] | None, gate_file: Path | None, defaults: bool = True) -> dict[str, float]:
    """The gate's tolerances, overridden (or, without defaults, replaced) by ``--metric M --max-regression X``."""
    out = load_gate(gate_file) if defaults else {}
    pending: str | None = None
    for kind, value in pairs or []:
        if kind == "metric":
            if pending is not None:
                raise TriageError(f"'{pending}' has no --max-regression after it", key="--metric")
            parse_tolerance("0", value, key="--metric")  # unknown metric → TriageError
            pending = value
        elif pending is None:
            raise TriageError(f"'{value}' has no --metric before it", key="--max-regression")
        else:
            out[pending] = parse_tolerance(value, pending)
            pending = None
    if pending is not None:
        raise TriageError(f"'{pending}' has no --max-regression after it", key="--metric")
    if not out:
        raise TriageError("nothing to gate: give --metric ID --max-regression N%", key="--no-defaults")
    return out


def _slo(kb: Any, args: argparse.Namespace) -> Slo:
    try:
        return resolve_slo(kb, args.slo, ttft_p99_s=args.ttft_slo, tpot_p99_s=args.tpot_slo)
    except KeyError as exc:
        raise TriageError(f"unknown SLO preset {exc}; choose one of {', '.join(kb.slo_presets)}", key="--slo") from exc


def _techniques(kb: Any, given: list[str] | None) -> str | list[str] | None:
    for tid in given or []:
        if tid not in kb.techniques:
            raise TriageError(f"unknown technique '{tid}'; see `python -m triage tree`", key="--technique")
    if not given:
        return None
    return given[0] if len(given) == 1 else list(given)


def exit_code(c: Comparison, gate: GateResult) -> int:
    if c.overall == "unsound":
        return EXIT_BAD_INPUT
    return EXIT_PASS if gate.passed else EXIT_REGRESSION


# ---------------------------------------------------------------- report


def _side_json(side: Loaded) -> dict[str, Any]:
    return {"file": str(side.path), "format": side.bench.format, "run": side.number, "runs": len(side.bench.runs),
            "label": side.run.label, "requests": len(side.run.requests) if side.run.requests is not None else 0,
            "sha256": sha256(side.data)}


def gate_report(c: Comparison, gate: GateResult, base: Loaded, cand: Loaded, slo: Slo) -> dict[str, Any]:
    """The JSON contract: every metric with its values, change, interval, tolerance, verdict and gate status."""
    out = comparison_json(c)
    rows = {r.metric: r for r in gate.rows}
    for m in out["metrics"]:
        row = rows.get(m["metric"])
        m["tolerance"] = row.tolerance if row else None
        m["gate"] = row.status if row else "not gated"
    out["not_measured"] = [asdict(r) for r in gate.rows if r.status != "pass" and r.status != "fail"]
    out["gate"] = {"passed": gate.passed, "failed": gate.failed, "exit_code": exit_code(c, gate)}
    out["baseline"], out["candidate"] = _side_json(base), _side_json(cand)
    out["slo"] = {"name": slo.name, "ttft_p99_s": slo.values.get("ttft_p99_s"),
                  "tpot_p99_s": slo.values.get("tpot_p99_s")}
    return out


def _tolerance(tol: float, scale: str) -> str:
    return plain(tol) + (" pp" if scale == "pp" else " %")


def _table_row(m: MetricDelta, tol: float | None, status: str) -> list[str]:
    interval = fmt_interval(m.interval, m.scale, missing="no interval")
    return [m.metric, fmt_value(m.baseline, m.unit), fmt_value(m.candidate, m.unit),
            fmt_relative(m.delta, m.scale, missing="n/a"), interval,
            "" if tol is None else _tolerance(tol, m.scale), m.verdict, status]


def _table(c: Comparison, gate: GateResult) -> list[str]:
    rows = {r.metric: r for r in gate.rows}
    table = [["metric", "baseline", "candidate", "change", "95% interval", "tolerance", "verdict", "gate"]]
    for m in c.metrics:
        row = rows.get(m.metric)
        table.append(_table_row(m, row.tolerance if row else None, row.status if row else ""))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in table]


def _side_line(name: str, s: dict[str, Any]) -> str:
    n = f"{count(s['requests'])} requests" if s["requests"] else "summary only"
    return f"{name}: {s['file']} ({s['format']}), run {s['run']} of {s['runs']} \"{s['label']}\": {n}, " \
           f"sha256 {s['sha256'][:12]}"


def gate_text(c: Comparison, gate: GateResult, report: dict[str, Any]) -> str:
    slo = report["slo"]
    lines = [_side_line("baseline ", report["baseline"]), _side_line("candidate", report["candidate"]),
             f"SLO: {slo['name']} (TTFT p99 ≤ {fmt_value(slo['ttft_p99_s'], 's')}, "
             f"TPOT p99 ≤ {fmt_value(slo['tpot_p99_s'], 's')})",
             f"technique: {c.technique or 'not given'}", f"basis: {c.basis}", "", *_table(c, gate), "",
             f"overall: {c.overall}", c.headline]
    lines += [f"refused: {r}" for r in c.refused] + [f"warning: {w}" for w in c.warnings]
    lines += [f"not gated: {r.metric} ({r.status})" for r in gate.rows if r.status not in ("pass", "fail")]
    lines.append(_gate_line(c, gate))
    return "\n".join(lines)


def _gate_line(c: Comparison, gate: GateResult) -> str:
    if c.overall == "unsound":
        return "gate: UNSOUND: the runs cannot be compared (exit 2); fix what is refused above and re-run"
    if gate.passed:
        checked = sum(r.status == "pass" for r in gate.rows)
        return f"gate: PASS: {checked} gated metric(s) within tolerance"
    fails = []
    for metric in gate.failed:
        m, tol = c.get(metric), next(r.tolerance for r in gate.rows if r.metric == metric)
        scale = m.scale if m else "%"
        fails.append(f"{metric} {fmt_relative(m.delta if m else None, scale, missing='n/a')} "
                     f"(tolerance {_tolerance(tol, scale)})")
    return "gate: FAIL: " + "; ".join(fails)


# ---------------------------------------------------------------- commands


def cmd_gate(args: argparse.Namespace) -> int:
    kb = load_knowledge(args.tree_dir)
    tol = tolerances(args.pairs, args.gate, defaults=not args.no_defaults)
    slo = _slo(kb, args)
    technique = _techniques(kb, args.technique)
    base = read_any(args.baseline, args.run_baseline, "--run-baseline")
    cand = read_any(args.candidate, args.run_candidate, "--run-candidate")
    if isinstance(base, LoadedLog) or isinstance(cand, LoadedLog):
        return _gate_logs(args, kb, technique, base, cand)
    c = compare(base.run, cand.run, slo, technique=technique, kb=kb, seed=args.seed, n_boot=args.n_boot)
    gate = apply_gate(c, tol)
    report = gate_report(c, gate, base, cand, slo)
    _save_and_print(args, report, comparison_json(c), base, cand, lambda: gate_text(c, gate, report))
    return exit_code(c, gate)


def _save_and_print(args: argparse.Namespace, report: dict[str, Any], saved: dict[str, Any],
                    base: Loaded | LoadedLog, cand: Loaded | LoadedLog, text: Callable[[], str]) -> None:
    """With --save, ``saved`` goes to the experiment log (its id into the report); then the report as JSON, or
    ``text()`` and the saved id."""
    if args.save:
        entry = entry_from(saved, (base.path.name, base.data), (cand.path.name, cand.data), who=args.who,
                           note=args.note or "")
        report["saved_id"] = ExperimentLog(args.db).save(entry)
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        print(text())
        if args.save:
            print(f"saved as experiment {report['saved_id']}")


def _gate_logs(args: argparse.Namespace, kb: Any, technique: str | list[str] | None, base: Loaded | LoadedLog,
               cand: Loaded | LoadedLog) -> int:
    """Two server logs: their stats-line medians compared (exit 1 on a counted regression, 2 when unsound); a log
    against a benchmark file is refused (exit 2)."""
    from triage.service.verify_sides import compare_log_sides, side_title

    sides = [s.log if isinstance(s, LoadedLog) else s.bench for s in (base, cand)]
    c = compare_log_sides(sides[0], sides[1], technique=technique, kb=kb)
    if args.pairs:
        raise TriageError("gates a benchmark metric; a server log holds none of them (its medians are judged "
                          "against the summary tolerance)", key="--metric")
    assert c is not None and isinstance(base, LoadedLog) and isinstance(cand, LoadedLog)  # mixed sides raised
    report = comparison_json(c)
    report["kind"] = "server logs"
    for name, side in (("baseline", base), ("candidate", cand)):
        report[name] = {"file": str(side.path), "format": side.log.fmt, "read_as": side_title(side.log),
                        "sha256": sha256(side.data)}
    code = EXIT_BAD_INPUT if c.overall == "unsound" else EXIT_REGRESSION if c.overall == "regression" else EXIT_PASS
    report["gate"] = {"passed": code == EXIT_PASS, "exit_code": code}
    _save_and_print(args, report, report, base, cand, lambda: _logs_text(c, report, code))
    return code


def _logs_text(c: Comparison, report: dict[str, Any], code: int) -> str:
    table = [["metric", "baseline", "candidate", "change", "verdict"]]
    for m in c.metrics:
        table.append([m.label, fmt_value(m.baseline, m.unit), fmt_value(m.candidate, m.unit),
                      fmt_relative(m.delta, m.scale, missing="n/a"), m.verdict])
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines = [f"{name:<9}: {report[name]['file']} ({report[name]['read_as']}), sha256 {report[name]['sha256'][:12]}"
             for name in ("baseline", "candidate")]
    lines += [f"technique: {c.technique or 'not given'}", f"basis: {c.basis}", "",
              *("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in table), "",
              f"overall: {c.overall}", c.headline]
    lines += [f"refused: {r}" for r in c.refused] + [f"warning: {w}" for w in c.warnings]
    verdict = {EXIT_PASS: "PASS: no counted median regressed beyond the tolerance",
               EXIT_REGRESSION: "FAIL: a counted median regressed (exit 1)",
               EXIT_BAD_INPUT: "UNSOUND: the logs cannot be compared (exit 2); fix what is refused above and re-run"}
    lines.append(f"gate: {verdict[code]}")
    return "\n".join(lines)


def _pair(kind: str):
    def convert(value: str) -> tuple[str, str]:
        return kind, value

    convert.__name__ = kind
    return convert


def metric_names() -> str:
    """The compared metrics of the tree active when the parser is built, for help texts (a broken tree is
    reported when a command runs; --tree-dir takes effect for the run itself)."""
    try:
        return ", ".join(metric_specs())
    except TriageError:
        return "see tree/signals.yaml"


def add_gate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("baseline", type=Path, help="the baseline benchmark file, console summary or server log "
                                               "(before the change)")
    p.add_argument("candidate", type=Path, help="the candidate, of the same kind (after exactly one change)")
    p.add_argument("--metric", dest="pairs", action="append", type=_pair("metric"), metavar="ID",
                   help=f"a metric to gate, followed by --max-regression ({metric_names()})")
    p.add_argument("--max-regression", dest="pairs", action="append", type=_pair("max"), metavar="N%",
                   help="the largest worsening tolerated for the --metric before it (pp for error_rate)")
    p.add_argument("--no-defaults", action="store_true", help="gate only the --metric pairs given")
    p.add_argument("--gate", type=Path, default=None, help="a gate file to use instead of tree/gate.yaml")
    p.add_argument("--slo", default=None, help=f"SLO preset for goodput: {preset_names()} (default chat)")
    p.add_argument("--ttft-slo", type=numbers.SECONDS, default=None, help="TTFT p99 SLO in seconds")
    p.add_argument("--tpot-slo", type=numbers.SECONDS, default=None, help="TPOT p99 SLO in seconds")
    p.add_argument("--run-baseline", type=numbers.RUN_NUMBER, default=None,
                   help="run number in the baseline file (default last)")
    p.add_argument("--run-candidate", type=numbers.RUN_NUMBER, default=None,
                   help="run number in the candidate file (default last)")
    p.add_argument("--technique", action="append", metavar="ID", help="the one technique the candidate applies")
    p.add_argument("--json", action="store_true", help="print the JSON contract instead of text")
    p.add_argument("--save", action="store_true", help="record the result in the experiment log")
    p.add_argument("--db", default=None, help=DB_HELP)
    p.add_argument("--who", default=None, help="who ran the experiment (with --save)")
    p.add_argument("--note", default=None, help="a note for the experiment log (with --save)")
    p.add_argument("--seed", type=numbers.integer(0, 2**32 - 1), default=0, help="bootstrap seed (default 0)")
    p.add_argument("--n-boot", type=numbers.integer(MIN_BOOT, MAX_BOOT), default=2000,
                   help=f"bootstrap resamples ({MIN_BOOT} to {count(MAX_BOOT)}; default 2000)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gate", help="verify a change against its baseline; exit 1 on a regression",
                       description="Compare a candidate benchmark with its baseline, one change at a time. "
                                   "Exit 0: pass; 1: a gated metric regressed; 2: bad input or unsound comparison.")
    add_gate_arguments(p)
    p.set_defaults(func=cmd_gate)


# ---------------------------------------------------------------- log

DB_HELP = "experiment log: a file, sqlite:/// or postgresql:// URL (default: TRIAGE_LOG_DB, else user data dir)"


def _entry_line(e: Entry) -> str:
    who = f" by {e.who}" if e.who else ""
    note = f"  {e.note}" if e.note else ""
    return f"{e.id:>4}  {e.created_at}  {e.technique or '-':<24} {e.overall:<15} " \
           f"{e.baseline_name} → {e.candidate_name}{who}{note}"


def cmd_log_list(args: argparse.Namespace) -> int:
    entries = ExperimentLog(args.db).list(technique=args.technique, verdict=args.verdict)
    if args.json:
        print(json.dumps([asdict(e) for e in entries], ensure_ascii=False, indent=2))
    else:
        print("\n".join(_entry_line(e) for e in entries) if entries else "no experiments recorded")
    return 0


def cmd_log_show(args: argparse.Namespace) -> int:
    e = ExperimentLog(args.db).get(args.id)
    if args.json:
        print(json.dumps(asdict(e), ensure_ascii=False, indent=2))
        return 0
    lines = [_entry_line(e), f"baseline  {e.baseline_name}  sha256 {e.baseline_sha256}",
             f"candidate {e.candidate_name}  sha256 {e.candidate_sha256}",
             f"workload  {json.dumps(e.workload, ensure_ascii=False)}"]
    if e.created_by:  # the account that saved it ("local": no sign-in); rows from before issue 29 have none
        lines.append(f"recorded by {e.created_by}")
    for m in e.metrics:
        interval = m.get("interval")
        scale = str(m.get("scale"))
        shown = f" {fmt_interval((float(interval[0]), float(interval[1])), scale)}" if interval else ""
        delta = m.get("delta")
        lines.append(f"  {m.get('metric', '?'):<16} {fmt_relative(delta, scale, missing='n/a')}{shown}  "
                     f"{m.get('verdict', '')}")
    print("\n".join(lines))
    return 0


def cmd_log_copy(args: argparse.Namespace) -> int:
    source = ExperimentLog(args.db)
    target = ExperimentLog(args.to)
    print(f"copied {source.copy_to(target)} experiments to {target.where}")
    return 0


def cmd_log_export(args: argparse.Namespace) -> int:
    text = ExperimentLog(args.db).export_csv()
    if args.out is None:
        print(text, end="")
        return 0
    try:
        args.out.write_text(text, encoding="utf-8", newline="")
    except OSError as exc:
        raise TriageError(f"cannot write: {exc.strerror or exc}", where=str(args.out)) from exc
    return 0


def register_log(sub: argparse._SubParsersAction) -> None:
    log = sub.add_parser("log", help="the experiment log: list, show or export recorded gate results")
    log.add_argument("--db", default=None, help=DB_HELP)
    cmds = log.add_subparsers(dest="log_command", required=True)
    for name, func, text in (("list", cmd_log_list, "list experiments"), ("show", cmd_log_show, "one experiment"),
                             ("export", cmd_log_export, "all experiments as CSV"),
                             ("copy", cmd_log_copy, "copy every experiment into a new, empty log (e.g. PostgreSQL)")):
        p = cmds.add_parser(name, help=text)
        p.add_argument("--db", default=argparse.SUPPRESS, help="as for `log --db`")
        p.set_defaults(func=func)
        if name == "list":
            p.add_argument("--technique", default=None, help="only this technique")
            p.add_argument("--verdict", default=None, help="only this overall verdict (e.g. 'gain confirmed')")
        if name == "show":
            p.add_argument("id", type=numbers.integer(1, 2**63 - 1), help="experiment id")
        if name == "copy":
            p.add_argument("--to", required=True, help="the target log: a postgresql:// URL, a file or sqlite:///")
            continue
        if name == "export":
            p.add_argument("--out", type=Path, default=None, help="write to FILE instead of stdout")
        else:
            p.add_argument("--json", action="store_true", help="print JSON")

