"""``python -m triage simulate``: serve simulated vLLM /metrics for a scenario (with ``--openai``, a simulated
OpenAI-compatible vLLM server that load-test tools can benchmark), or write an OpenMetrics backfill."""

from __future__ import annotations

import argparse
import http.server
from pathlib import Path

from triage.cli import numbers
from triage.errors import TriageError
from triage.knowledge.units import plain
from triage.sources.metrics.openai_server import serve_openai
from triage.sources.metrics.simulator import MODEL_NAME, load_scenarios, serve, write_openmetrics
from triage.sources.metrics.stack import STACKS, write_stack_openmetrics

STACK_TITLES = {"dynamo": "NVIDIA Dynamo's frontend", "llm_d": "llm-d's endpoint picker"}


def _write(args: argparse.Namespace) -> int:
    if args.stack:
        n = write_stack_openmetrics(args.openmetrics, args.stack, [(args.scenario, {})] * args.replicas, args.minutes,
                                    step=args.step, end=args.end, seed=args.seed)
        what = f"'{args.scenario}' on {args.replicas} replica(s) behind {STACK_TITLES[args.stack]}"
    else:
        n = write_openmetrics(args.openmetrics, args.scenario, args.minutes, step=args.step, end=args.end,
                              seed=args.seed)
        what = f"'{args.scenario}'"
    print(f"wrote {n} samples ({plain(args.minutes)} min of {what}, one every {plain(args.step)} s) to "
          f"{args.openmetrics}")
    print(f"load it with: promtool tsdb create-blocks-from openmetrics {args.openmetrics} <prometheus-data-dir>")
    return 0


def _address(server: http.server.HTTPServer) -> tuple[str, int]:
    host, port = server.server_address[:2]
    return (host.decode() if isinstance(host, (bytes, bytearray)) else str(host)), int(port)


def _serve(args: argparse.Namespace) -> int:
    server: http.server.HTTPServer
    if args.openai:
        server = serve_openai(args.scenario, args.port, host=args.host, seed=args.seed,
                              per_request_metrics=args.per_request_metrics)
        host, port = _address(server)
        print(f"simulating vLLM scenario '{args.scenario}' as an OpenAI-compatible server on http://{host}:{port}/v1 "
              f"(model {MODEL_NAME}; /metrics, /health; "
              "Ctrl-C to stop)", flush=True)
    else:
        server = serve(args.scenario, args.port, host=args.host, seed=args.seed)
        host, port = _address(server)
        print(f"simulating vLLM scenario '{args.scenario}' on http://{host}:{port}/metrics (Ctrl-C to stop)",
              flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    if args.stack and not args.openmetrics:
        raise TriageError("--stack writes a backfill of every pod of the stack: give --openmetrics FILE",
                          key="--stack")
    return _write(args) if args.openmetrics else _serve(args)


def scenario_names() -> str:
    """The scenarios of the tree active when the parser is built, for help texts (--scenario is checked against
    the run's tree, --tree-dir included, when the command runs)."""
    try:
        return ", ".join(load_scenarios())
    except TriageError:
        return "see tree/scenarios.yaml"


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``simulate`` subcommand to the CLI's subparsers."""
    p = sub.add_parser("simulate", help="serve simulated vLLM /metrics for a scenario (or write a backfill file)",
                       description=f"Scenarios: {scenario_names()} (tree/scenarios.yaml).")
    p.add_argument("--scenario", required=True, help=f"one of: {scenario_names()}")
    p.add_argument("--port", type=numbers.integer(0, 65_535), default=8001,
                   help="port for /metrics (default 8001; 0 = any free port)")
    p.add_argument("--openai", action="store_true",
                   help="also serve the OpenAI API (/v1/completions, /v1/chat/completions, /v1/models, /health): "
                        "requests run through the scenario's engine in real time, for real load-test tools")
    p.add_argument("--per-request-metrics", action="store_true",
                   help="with --openai: add vLLM's per-request 'metrics' block (engine queue time, TTFT from "
                        "scheduling, …) to each response, as vLLM's --enable-per-request-metrics does")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--seed", type=numbers.integer(0, 2**32 - 1), default=0,
                   help="random seed (same seed, same numbers)")
    p.add_argument("--stack", choices=STACKS, default=None,
                   help="with --openmetrics: the scenario on --replicas vLLM replicas (each under its pod label) "
                        "behind NVIDIA Dynamo's frontend (dynamo) or llm-d's endpoint picker (llm_d), with the "
                        "router's own metrics")
    p.add_argument("--replicas", type=numbers.integer(1, 64), default=2,
                   help="with --stack: how many replicas (default 2)")
    p.add_argument("--openmetrics", type=Path, metavar="FILE",
                   help="write an OpenMetrics backfill file instead of serving")
    p.add_argument("--minutes", type=numbers.real(0, 7 * 24 * 60), default=30.0,
                   help="backfill length in minutes (default 30)")
    p.add_argument("--step", type=numbers.real(0, 3_600), default=15.0,
                   help="backfill sample interval in seconds (default 15)")
    p.add_argument("--end", type=numbers.real(0, 1e11), default=None, metavar="UNIX_SECONDS",
                   help="timestamp of the last backfill sample (default now)")
    p.set_defaults(func=cmd_simulate)
