"""``python -m triage rules``: the tree as Prometheus rules, or (``--evaluate``) a dry run of its alerts."""

from __future__ import annotations

import argparse
import json
import re
import sys

from triage.alerting.export import RuleSet, Skipped, build, dump_yaml
from triage.cli.diagnose import preset_names, slo_from_args
from triage.cli.live import parse_end, parse_match
from triage.errors import TriageError
from triage.knowledge.loader import active_tree_dir, load_alerting_config, load_knowledge
from triage.knowledge.units import plain

# Kubernetes object names: a DNS subdomain (name) and a DNS label (namespace)
K8S_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
K8S_NAMESPACE_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _check_resource(args: argparse.Namespace) -> None:
    if not K8S_NAME_RE.fullmatch(args.name):
        raise TriageError("a PrometheusRule name is lower-case letters, digits, '-' and '.' (at most 253)",
                          key="--name")
    if args.namespace is not None and not K8S_NAMESPACE_RE.fullmatch(args.namespace):
        raise TriageError("a namespace is lower-case letters, digits and '-' (at most 63)", key="--namespace")


def _skipped_json(skipped: list[Skipped]) -> list[dict[str, str]]:
    return [{"cause": s.cause, "symptom": s.symptom, "reason": s.reason} for s in skipped]


def _print_skipped(skipped: list[Skipped]) -> None:
    if skipped:
        print(f"# {len(skipped)} cause(s) not decidable from server metrics, left out:", file=sys.stderr)
    for s in skipped:
        print(f"#   {s.cause}: {s.reason}", file=sys.stderr)


def _rules(kb, args: argparse.Namespace, inline: bool = False) -> RuleSet:
    config = load_alerting_config(args.tree_dir or active_tree_dir())
    return build(kb, slo_from_args(kb, args), window=args.window, for_=args.for_, dashboard_url=args.dashboard_url,
                 profile=args.profile, config=config, inline=inline,
                 match=parse_match(args.match) if inline else None, alert_time=not args.replayable)


def _evaluate(kb, args: argparse.Namespace) -> int:
    from triage.alerting.evaluate import evaluate

    if not args.prometheus:
        raise TriageError("--evaluate needs --prometheus URL", key="--evaluate")
    from triage.sources.metrics.profiles import resolve_profile

    rules = _rules(kb, args, inline=True)
    firing = evaluate(rules, resolve_profile(args.prometheus), parse_end(args.end), timeout=args.timeout)
    if args.json:
        print(json.dumps({"alerts": [f.as_json() for f in firing], "skipped": _skipped_json(rules.skipped)},
                         ensure_ascii=False, indent=2))
        return 0
    if not firing:
        print(f"no alert would fire ({len(rules.alerts)} evaluated)")
    for f in firing:
        labels = ", ".join(f"{k}={v}" for k, v in sorted(f.labels.items()))
        print(f"FIRING {f.alert} [{labels}] value={plain(f.value)}")
    _print_skipped(rules.skipped)
    return 0


def cmd_rules(args: argparse.Namespace) -> int:
    kb = load_knowledge(args.tree_dir)
    if args.evaluate:
        return _evaluate(kb, args)
    if args.prometheus or args.match or args.end:
        raise TriageError("--prometheus, --match and --end go with --evaluate", key="--evaluate")
    if args.format == "prometheus-rule":
        _check_resource(args)
    rules = _rules(kb, args)
    rules.recording_only = args.recording_only
    document = (rules.prometheus_rule(args.name, args.namespace) if args.format == "prometheus-rule"
                else rules.rule_file())
    if args.json:
        print(json.dumps({"format": args.format, "rules": document, "alerts": [a.name for a in rules.alerts],
                          "skipped": _skipped_json(rules.skipped)}, ensure_ascii=False, indent=2))
        return 0
    sys.stdout.write(dump_yaml(document))
    if not args.recording_only:
        _print_skipped(rules.skipped)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rules", help="write the tree as Prometheus recording + alerting rules (or --evaluate them)")
    p.add_argument("--format", choices=("rule-file", "prometheus-rule"), default="rule-file",
                   help="a Prometheus rule file (default) or a prometheus-operator PrometheusRule resource")
    p.add_argument("--slo", default=None, help=f"SLO preset: {preset_names()} (default chat)")
    p.add_argument("--ttft-slo", type=float, default=None, help="TTFT p99 SLO in seconds")
    p.add_argument("--tpot-slo", type=float, default=None, help="TPOT p99 SLO in seconds")
    p.add_argument("--window", default=None, help="range of the recording rules (default from tree/alerting.yaml)")
    p.add_argument("--recording-only", action="store_true",
                   help="only the recording rules (group <group>-<window>): e.g. a second --window for the Fleet "
                        "view, without a second set of alerts")
    p.add_argument("--for", dest="for_", default=None, help="how long a cause holds before its alert fires")
    p.add_argument("--dashboard-url", default=None,
                   help="base URL of this dashboard for runbook links (default TRIAGE_DASHBOARD_URL or "
                        "tree/alerting.yaml)")
    p.add_argument("--profile", default=None, help="Prometheus profile name the runbook link opens the Live view with")
    p.add_argument("--replayable", action="store_true",
                   help="for vmalert -replay: runbook links without the alert time (vmalert refuses the `query` "
                        "template function that reads it when replaying)")
    p.add_argument("--name", default="inference-triage", help="metadata.name of the PrometheusRule")
    p.add_argument("--namespace", default=None, help="metadata.namespace of the PrometheusRule")
    p.add_argument("--evaluate", action="store_true", help="dry run: evaluate every alert now against --prometheus")
    p.add_argument("--prometheus", metavar="URL|PROFILE", help="Prometheus (or compatible) base URL or profile name "
                                                                "for --evaluate")
    p.add_argument("--end", default=None, help="evaluation time for --evaluate, ISO 8601 (default now)")
    p.add_argument("--match", action="append", default=[], help='label matcher for --evaluate, e.g. model_name="x"')
    p.add_argument("--timeout", type=float, default=10.0, help="per-query timeout in seconds (default 10)")
    p.add_argument("--json", action="store_true", help="print JSON (rules and skipped causes, or the dry run)")
    p.set_defaults(func=cmd_rules)
