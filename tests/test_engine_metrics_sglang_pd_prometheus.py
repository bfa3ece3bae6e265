"""SGLang's PD transfer metrics read from a real Prometheus: the recipes' PromQL selects the prefill server's transfer
stage (stage="prefill_transfer_kv_cache", not the decode server's decode_transferred) against its TTFT and rates the
failed-transfer and failed-bootstrap counters as the snapshot window does, and `promtool test rules` fires the exported
KV-transfer alert exactly where the Python diagnosis of the same window finds it; on a unified server's window the
transfer is not measurable and nothing fires for it."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from tests.prom_harness import PROMTOOL, serve_openmetrics
from tests.rules_harness import promtool_test_file, run_promtool_test
from triage.alerting.export import alert_name
from triage.alerting.promql import Compiler
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.window import diagnose_window, window_signals
from triage.knowledge import DEFAULT_TREE_DIR
from triage.knowledge.loader import load_knowledge
from triage.knowledge.model import NeedRef
from triage.knowledge.needs import Need
from triage.sources.metrics.prometheus_window import PrometheusWindow

ROOT = Path(__file__).resolve().parents[1]
STEP = 15
SPAN = 1800
PREFILL = {"engine_type": "prefill", "model_name": "pd", "tp_rank": "0"}
DECODE = {"engine_type": "decode", "model_name": "pd", "tp_rank": "0"}
UNIFIED = {"engine_type": "unified", "model_name": "co", "tp_rank": "0"}
LE = ("0.5", "1", "2.5", "5", "10", "+Inf")
# SGLang's own buckets of sglang:kv_transfer_latency_ms (ms) and sglang:kv_transfer_speed_gb_s (sgl-project/sglang
# @016d8605 python/sglang/srt/observability/metrics_collector.py, PR 19009+)
LATENCY_MS_LE = ("1", "2", "5", "10", "25", "50", "100", "250", "500", "1000", "2500", "5000", "+Inf")
SPEED_LE = ("0.1", "0.5", "1", "5", "10", "25", "50", "100", "200", "400", "+Inf")


def lab(labels: dict[str, str], **extra: str) -> str:
    return ",".join(f'{k}="{v}"' for k, v in {**labels, **extra}.items())


def series(name: str, labels: str, times: list[int], value) -> list[str]:
    return [f"{name}{{{labels}}} {value(i)} {t}" for i, t in enumerate(times)]


def histogram(name: str, labels: str, times: list[int], per_step: float, mean: float,
              bounds: tuple[str, ...] = LE) -> list[str]:
    """``per_step`` observations of ``mean`` each per step (all in the first bucket at or above it)."""
    out: list[str] = []
    for le in bounds:
        inside = le == "+Inf" or float(le) >= mean
        out += series(f"{name}_bucket", f'{labels},le="{le}"', times, lambda i, inside=inside: per_step * i * inside)
    out += series(f"{name}_sum", labels, times, lambda i: per_step * i * mean)
    return out + series(f"{name}_count", labels, times, lambda i: per_step * i)


def server(labels: dict[str, str], times: list[int], stages: dict[str, float],
           failed: tuple[float, float] | None) -> dict[str, list[str]]:
    """One SGLang server's samples by family: 10 requests per step with TTFT 4 s and queue 0.1 s, the stages given
    (stage → mean s, 10 per step), and (transfer, bootstrap) failures per step when given."""
    own = lab(labels)
    out = {"sglang:num_running_reqs": series("sglang:num_running_reqs", own, times, lambda i: 8),
           "sglang:time_to_first_token_seconds": histogram("sglang:time_to_first_token_seconds", own, times, 10, 4.0),
           "sglang:queue_time_seconds": histogram("sglang:queue_time_seconds", own, times, 10, 0.1),
           "sglang:per_stage_req_latency_seconds": [
               row for stage, mean in stages.items()
               for row in histogram("sglang:per_stage_req_latency_seconds", lab(labels, stage=stage), times, 10, mean)]}
    if failed is not None:
        for name, per_step in zip(("num_transfer_failed_reqs", "num_bootstrap_failed_reqs"), failed):
            out[f"sglang:{name}"] = series(f"sglang:{name}_total", own, times, lambda i, p=per_step: p * i)
    if labels["engine_type"] == "prefill":  # PR 19009+: the prefill server's own transfer histograms, in ms and GB/s
        out["sglang:kv_transfer_latency_ms"] = histogram("sglang:kv_transfer_latency_ms", own, times, 10,
                                                         stages["prefill_transfer_kv_cache"] * 1000, LATENCY_MS_LE)
        out["sglang:kv_transfer_speed_gb_s"] = histogram("sglang:kv_transfer_speed_gb_s", own, times, 10, 3.0,
                                                         SPEED_LE)
    return out


def openmetrics(end: int) -> str:
    """A PD prefill server (each request 2.4 s of its 4 s TTFT in the transfer stage, 1 transfer and 0.5 bootstrap
    failed per step), its decode server (a 3.5 s decode_transferred stage, which is no transfer time) and a unified
    server of another model (no PD series)."""
    t = list(range(end - SPAN, end + 1, STEP))
    families: dict[str, list[str]] = {}
    for one in (server(PREFILL, t, {"prefill_bootstrap": 0.01, "prefill_forward": 1.0,
                                    "prefill_transfer_kv_cache": 2.4}, (1, 0.5)),
                server(DECODE, t, {"decode_bootstrap": 0.01, "decode_transferred": 3.5}, (0, 0)),
                server(UNIFIED, t, {"prefill_forward": 1.0}, None)):
        for name, rows in one.items():
            families.setdefault(name, []).extend(rows)
    kinds = {"sglang:num_running_reqs": "gauge", "sglang:num_transfer_failed_reqs": "counter",
             "sglang:num_bootstrap_failed_reqs": "counter"}
    lines: list[str] = []
    for name, rows in families.items():
        lines += [f"# TYPE {name} {kinds.get(name, 'histogram')}", *rows]
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    yield from serve_openmetrics(tmp_path_factory, "sglang_pd", openmetrics, STEP)


def prometheus_window(kb, server, match: dict[str, str]) -> PrometheusWindow:
    stop = datetime.fromtimestamp(server.end, UTC)
    return PrometheusWindow(server.url, stop - timedelta(minutes=15), stop, match=match, timeout=30,
                            engines=kb.engines)


@pytest.mark.prometheus
def test_sglang_pd_signals_through_prometheus(prometheus):
    kb = load_knowledge(DEFAULT_TREE_DIR)
    prefill = window_signals(kb, prometheus_window(kb, prometheus, {"engine_type": "prefill"}))[0]
    assert prefill.get("kv_transfer_share_of_ttft").value == pytest.approx(0.6, rel=1e-3)
    assert prefill.get("kv_transfer_mean_s").value == pytest.approx(2.4, rel=1e-3)
    assert prefill.get("kv_transfer_failures_per_s").value == pytest.approx(1 / STEP, rel=1e-3)
    assert prefill.get("kv_bootstrap_failures_per_s").value == pytest.approx(0.5 / STEP, rel=1e-3)
    assert prefill.get("prefill_share_of_ttft").value == pytest.approx(0.25, rel=1e-3)
    # the mean transfer time reads sglang:kv_transfer_latency_ms (2400 ms per request) in seconds
    assert prefill.get("kv_transfer_mean_s").source.id == "server.kv_transfer_latency_ms"
    assert prefill.get("kv_transfer_speed_gib_s").value == pytest.approx(3.0, rel=1e-3)
    # the drawn series and a quantile are in seconds too: 10 transfers of 2400 ms per step, in the (1000, 2500] bucket
    win = prometheus_window(kb, prometheus, {"engine_type": "prefill"})
    mean, p50 = Need("hist_mean", "kv_xfer_latency"), Need("quantile", "kv_xfer_latency", 0.5)
    drawn = win.series([mean, p50], points=10)
    assert drawn[mean] and all(p.value == pytest.approx(2.4, rel=1e-3) for p in drawn[mean])
    assert drawn[p50] and all(p.value == pytest.approx(1.75, rel=1e-3) for p in drawn[p50])
    assert win.read([p50]).values[p50] == pytest.approx(1.75, rel=1e-3)
    # and the rules' PromQL scales the quantile as it scales the mean
    compiled = Compiler(kb, kb.engines, "15m", ("model_name",), inline=True).need(NeedRef(kind="quantile",
                                                                                          key="kv_xfer_latency", q=0.5))
    assert compiled is not None and compiled.count("))) * 0.001") == 2, compiled  # sglang: and sglang_ prefixes
    decode = window_signals(kb, prometheus_window(kb, prometheus, {"engine_type": "decode"}))[0]
    assert decode.get("kv_transfer_share_of_ttft") is None and decode.get("kv_transfer_mean_s") is None
    assert decode.get("kv_transfer_failures_per_s").value == 0.0  # counted there, none failed
    unified = window_signals(kb, prometheus_window(kb, prometheus, {"model_name": "co"}))[0]
    for name in ("kv_transfer_share_of_ttft", "kv_transfer_mean_s", "kv_transfer_failures_per_s",
                 "kv_bootstrap_failures_per_s"):
        assert unified.get(name) is None, name


@pytest.mark.prometheus
def test_promtool_fires_the_kv_transfer_alert_where_python_finds_it(prometheus, tmp_path):
    kb = load_knowledge(DEFAULT_TREE_DIR)
    preset = resolve_slo(kb, "chat")
    causes = {name: sorted(f.cause for f in diagnose_window(kb, prometheus_window(kb, prometheus, match),
                                                            preset).diagnosis.findings)
              for name, match in (("prefill", {"engine_type": "prefill"}), ("decode", {"engine_type": "decode"}),
                                  ("unified", {"model_name": "co"}))}
    assert "ttft.kv_transfer" in causes["prefill"] and "ttft.kv_transfer" not in causes["unified"], causes
    assert "ttft.kv_transfer" not in causes["decode"]  # measured there: no failure, and no transfer time to share
    done = subprocess.run([sys.executable, "-m", "triage", "rules", "--slo", "chat"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rules = tmp_path / "rules.yml"
    rules.write_text(done.stdout)
    check = subprocess.run([PROMTOOL, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    doc = yaml.safe_load(done.stdout)
    severity = {r["labels"]["cause"]: r["labels"]["severity"] for r in doc["groups"][0]["rules"] if "alert" in r}
    names = [r["alert"] for r in doc["groups"][0]["rules"] if "alert" in r]
    # alerts and recorded series carry the replica labels (sglang.yaml replica_labels), not tp_rank
    replica = lambda labels: {k: labels[k] for k in ("engine_type", "model_name")}  # noqa: E731
    firing = [{"alertname": alert_name(c), "alertstate": "firing", "cause": c, "symptom": c.split(".")[0],
               "severity": severity[c], **replica(labels)}
              for labels, found in ((PREFILL, causes["prefill"]), (DECODE, causes["decode"]),
                                    (UNIFIED, causes["unified"]))
              for c in found]
    test = promtool_test_file(rules, openmetrics(prometheus.end), STEP, firing, names)
    check_at = test["tests"][0]["promql_expr_test"][0]["eval_time"]
    # the recording rules read the prefill server alone (decode_transferred would read 3.5 s), the mean transfer
    # time from sglang:kv_transfer_latency_ms in seconds (2400 ms, never 2400 s), the share from the stage
    for rule, value in (("kv_transfer_mean_s", 2.4), ("kv_transfer_share_of_ttft", 0.6),
                        ("kv_transfer_speed_gib_s", 3.0)):
        test["tests"][0]["promql_expr_test"].append(
            {"expr": f"round(triage:{rule}:15m, 0.001)", "eval_time": check_at,
             "exp_samples": [{"labels": f"{{{lab(replica(PREFILL))}}}", "value": value}]})
    result = run_promtool_test(tmp_path, test)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
