"""``python -m triage webhook``: the Alertmanager receiver that diagnoses the alerting replica."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path

from triage.alerting.receiver.config import load_config
from triage.knowledge.loader import load_knowledge


def cmd_webhook(args: argparse.Namespace) -> int:
    from triage.service.webhook import Receiver
    from triage.service.webhook_http import make_server

    config = load_config(args.config, overrides={"listen": args.listen})
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    receiver = Receiver(config, load_knowledge(args.tree_dir))
    host, port = config.host_port
    server = make_server(receiver, host, port)
    receiver.start()
    bound_host, bound_port = server.server_address[:2]
    sinks = ", ".join(name for name, url in (("slack", config.slack_url), ("json", config.json_url),
                                             ("incident store", config.incident_db)) if url) or "none"
    print(f"receiving Alertmanager webhooks on http://{bound_host!s}:{bound_port}/ (metrics on /metrics); "
          f"diagnosing on {receiver.profile.label()}; delivering to {sinks}"
          f"{'; bearer token required' if config.token else ''}", flush=True)

    def _stop(*_: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        receiver.stop()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("webhook", help="an Alertmanager webhook receiver: diagnose the alerting replica, post the "
                                       "result to Slack / a JSON webhook / the incident store",
                       description="Configuration: the [webhook] table of .streamlit/secrets.toml (or --config FILE) "
                                   "and TRIAGE_WEBHOOK_* variables: prometheus (profile), listen, token, slack_url, "
                                   "json_url, incident_db, dashboard_url, window, slo, labels, workers, queue, "
                                   "timeout, post_timeout.")
    p.add_argument("--listen", default=None, metavar="HOST:PORT", help="address to listen on (default 127.0.0.1:9095)")
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="a TOML file with the [webhook] table (and the [prometheus.NAME] profiles it names)")
    p.set_defaults(func=cmd_webhook)
