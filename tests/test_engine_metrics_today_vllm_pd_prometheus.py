"""vLLM's PD and KV-residency metrics read from a real Prometheus: the recipes' PromQL (prompt tokens by source selected
by their label, NIXL transfer time against TTFT, failed transfers, the residency histograms) gives what the snapshot
window gives, and `promtool test rules` fires the exported KV-transfer and KV-capacity alerts exactly where the
Python diagnosis of the same window finds those causes; the admission rejections' evidence names each queue limit's
rate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from tests.cli_tools import run_triage
from tests.prom_harness import serve_openmetrics
from tests.rules_harness import promtool_test_file, run_promtool_test
from triage.alerting.export import alert_name
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.window import diagnose_window, window_signals
from triage.knowledge import DEFAULT_TREE_DIR
from triage.knowledge.loader import load_knowledge
from triage.knowledge.messages import message_text
from triage.sources.metrics.prometheus_window import PrometheusWindow

ROOT = Path(__file__).resolve().parents[1]
STEP = 15
SPAN = 1800
LABELS = {"engine": "0", "model_name": "pd"}
LAB = ",".join(f'{k}="{v}"' for k, v in LABELS.items())


def counter(name: str, times: list[int], per_step: float, extra: str = "") -> list[str]:
    return [f"{name}_total{{{LAB}{extra}}} {per_step * i} {t}" for i, t in enumerate(times)]


def histogram(name: str, times: list[int], per_step: dict[str, float], sum_per_step: float) -> list[str]:
    """Cumulative buckets growing by ``per_step`` (le → observations at or under it) every step."""
    rows = [f'{name}_bucket{{{LAB},le="{le}"}} {n * i} {t}' for le, n in per_step.items() for i, t in enumerate(times)]
    count = max(per_step.values())
    rows += [f"{name}_sum{{{LAB}}} {sum_per_step * i} {t}" for i, t in enumerate(times)]
    return rows + [f"{name}_count{{{LAB}}} {count * i} {t}" for i, t in enumerate(times)]


def openmetrics(end: int) -> str:
    """A PD decode instance, per 15 s step: 10 first tokens (half by 2.5 s, all by 10 s; 40 s in all), 10 NIXL
    transfers of 2.4 s (60 % of the 4 s mean TTFT), one failed transfer; 10 000 prompt tokens of which 9 800 arrived
    over the connector and 200 were prefilled here; sampled KV blocks idle 4 s before eviction, reused every 3 s;
    the queue limits refused 3 requests by their count and 1.5 by their tokens; 3 requests wait, all for their KV
    (reason="deferred"), none for capacity."""
    t = list(range(end - SPAN, end + 1, STEP))
    out = ["# TYPE vllm:num_requests_running gauge", *[f"vllm:num_requests_running{{{LAB}}} 8 {x}" for x in t],
           "# TYPE vllm:num_requests_waiting gauge", *[f"vllm:num_requests_waiting{{{LAB}}} 3 {x}" for x in t],
           "# TYPE vllm:num_requests_waiting_by_reason gauge",
           *[f'vllm:num_requests_waiting_by_reason{{{LAB},reason="{r}"}} {n} {x}' for r, n in (("capacity", 0),
                                                                                             ("deferred", 3))
             for x in t],
           "# TYPE vllm:kv_cache_usage_perc gauge", *[f"vllm:kv_cache_usage_perc{{{LAB}}} 0.3 {x}" for x in t],
           "# TYPE vllm:request_success counter", *counter("vllm:request_success", t, 10, ',finished_reason="stop"'),
           "# TYPE vllm:prompt_tokens counter", *counter("vllm:prompt_tokens", t, 10_000),
           "# TYPE vllm:prompt_tokens_cached counter", *counter("vllm:prompt_tokens_cached", t, 9_800),
           "# TYPE vllm:prompt_tokens_by_source counter",
           *counter("vllm:prompt_tokens_by_source", t, 200, ',source="local_compute"'),
           *counter("vllm:prompt_tokens_by_source", t, 0, ',source="local_cache_hit"'),
           *counter("vllm:prompt_tokens_by_source", t, 9_800, ',source="external_kv_transfer"'),
           "# TYPE vllm:nixl_num_failed_transfers counter", *counter("vllm:nixl_num_failed_transfers", t, 1),
           "# TYPE vllm:admission_rejections counter",
           *counter("vllm:admission_rejections", t, 3, ',reason="max_num_queued_reqs"'),
           *counter("vllm:admission_rejections", t, 1.5, ',reason="max_num_queued_tokens"'),
           "# TYPE vllm:time_to_first_token_seconds histogram",
           *histogram("vllm:time_to_first_token_seconds", t,
                      {"1.0": 0, "2.5": 5, "5.0": 5, "10.0": 10, "+Inf": 10}, 40),
           "# TYPE vllm:nixl_xfer_time_seconds histogram",
           *histogram("vllm:nixl_xfer_time_seconds", t, {"1.0": 0, "5.0": 10, "+Inf": 10}, 24),
           "# TYPE vllm:kv_block_idle_before_evict_seconds histogram",
           *histogram("vllm:kv_block_idle_before_evict_seconds", t, {"2": 0, "5": 5, "+Inf": 5}, 20),
           "# TYPE vllm:kv_block_reuse_gap_seconds histogram",
           *histogram("vllm:kv_block_reuse_gap_seconds", t, {"2": 0, "5": 8, "+Inf": 8}, 24)]
    return "\n".join([*out, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    yield from serve_openmetrics(tmp_path_factory, "pd", openmetrics, STEP)


def prometheus_window(kb, server) -> PrometheusWindow:
    stop = datetime.fromtimestamp(server.end, UTC)
    return PrometheusWindow(server.url, stop - timedelta(minutes=15), stop, match={"model_name": "pd"},
                            timeout=30, engines=kb.engines)


def test_pd_and_residency_signals_through_prometheus(prometheus):
    kb = load_knowledge(DEFAULT_TREE_DIR)
    got = window_signals(kb, prometheus_window(kb, prometheus))[0]
    assert got.get("kv_transfer_share_of_ttft").value == pytest.approx(0.6, rel=1e-3)
    assert got.get("kv_transfer_mean_s").value == pytest.approx(2.4, rel=1e-3)
    assert got.get("kv_transfer_failures_per_s").value == pytest.approx(1 / STEP, rel=1e-3)
    assert got.get("kv_transfer_expired_per_s") is None  # a decode instance: counted on the prefill side only
    # the same counter, three sources: each recipe reads its own label value, never the sum
    assert got.get("prompt_transferred_share").value == pytest.approx(0.98, rel=1e-3)
    assert got.get("prompt_computed_over_transferred").value == pytest.approx(200 / 9_800, rel=1e-3)
    assert got.get("kv_reuse_gap_over_idle").value == pytest.approx(0.75, rel=1e-3)
    assert got.get("kv_idle_before_evict_mean_s").value == pytest.approx(4.0, rel=1e-3)
    assert got.get("waiting_deferred_mean").value == pytest.approx(3.0)  # the deferred series alone, not capacity
    # the queueing cause's waiting count is the capacity series alone: the 3 waiting for their KV are left out
    assert got.get("waiting_mean").value == pytest.approx(3.0)
    capacity = got.get("waiting_capacity_mean")
    assert capacity.value == 0.0 and capacity.source.id == "server.waiting_capacity_mean"
    # the rejections' total is the value; how it was measured names each limit's rate (sum by reason)
    rejected = got.get("admission_rejections_per_s")
    assert rejected.value == pytest.approx(0.3, rel=1e-3)
    assert message_text(rejected.source, "en").endswith("by reason: max_num_queued_reqs 0.2/s, "
                                                        "max_num_queued_tokens 0.1/s")


def test_promtool_fires_the_kv_transfer_alert_where_python_finds_it(prometheus, tmp_path):
    kb = load_knowledge(DEFAULT_TREE_DIR)
    live = diagnose_window(kb, prometheus_window(kb, prometheus), resolve_slo(kb, "chat"))
    causes = [f.cause for f in live.diagnosis.findings]
    assert sorted(causes) == ["memory.kv_cache", "ttft.kv_transfer", "ttft.queueing"], causes
    done = run_triage("rules", "--slo", "chat")
    assert done.returncode == 0, done.stderr
    rules = tmp_path / "rules.yml"
    rules.write_text(done.stdout)
    doc = yaml.safe_load(done.stdout)
    severity = {r["labels"]["cause"]: r["labels"]["severity"] for r in doc["groups"][0]["rules"] if "alert" in r}
    names = [r["alert"] for r in doc["groups"][0]["rules"] if "alert" in r]
    firing = [{"alertname": alert_name(c), "alertstate": "firing", "cause": c, "symptom": c.split(".")[0],
               "severity": severity[c], **LABELS} for c in causes]
    test = promtool_test_file(rules, openmetrics(prometheus.end), STEP, firing, names)
    # the recording rules select the by-source series by their label as the windows do (their sum would read 1)
    check = test["tests"][0]["promql_expr_test"][0]
    replica = ",".join(f'{k}="{v}"' for k, v in sorted(LABELS.items()))
    # and the capacity part of the queue by its reason (the total would read 3)
    for rule, value in (("prompt_transferred_share", 0.98), ("waiting_capacity_mean", 0.0)):
        test["tests"][0]["promql_expr_test"].append(
            {"expr": f"round(triage:{rule}:15m, 0.001)", "eval_time": check["eval_time"],
             "exp_samples": [{"labels": f"{{{replica}}}", "value": value}]})
    result = run_promtool_test(tmp_path, test)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
