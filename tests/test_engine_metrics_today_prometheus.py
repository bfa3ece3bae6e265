"""Today's engine metrics read from a real Prometheus: the recipes' PromQL gives the cached prompt share, the
admission-rejection rate and SGLang's KV usage from pool tokens as the snapshot window does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.prom_harness import serve_openmetrics
from triage.diagnosis.window import window_signals
from triage.knowledge import DEFAULT_TREE_DIR
from triage.knowledge.loader import load_knowledge
from triage.sources.metrics.prometheus_window import PrometheusWindow

STEP = 15
SPAN = 1800


def family(name: str, kind: str, rows: list[str]) -> list[str]:
    return [f"# TYPE {name} {kind}", *rows]


def series(name: str, labels: str, times: list[int], value) -> list[str]:
    return [f"{name}{{{labels}}} {value(i)} {t}" for i, t in enumerate(times)]


def openmetrics(end: int) -> str:
    """Per 15 s step: vLLM 1000 prompt tokens (50 cached) and 0.3 refusals/s as 4.5 per step over two reasons;
    SGLang 1000 prompt tokens (30 on the device, 20 on the host) and 90 000 of its 100 000 KV tokens in use."""
    t = list(range(end - SPAN, end + 1, STEP))
    v, s = 'engine="0",model_name="mv"', 'engine_type="unified",model_name="ms",tp_rank="0"'
    lines: list[str] = []
    lines += family("vllm:num_requests_running", "gauge", series("vllm:num_requests_running", v, t, lambda i: 8))
    lines += family("vllm:prompt_tokens", "counter", series("vllm:prompt_tokens_total", v, t, lambda i: 1000 * i))
    lines += family("vllm:prompt_tokens_cached", "counter",
                    series("vllm:prompt_tokens_cached_total", v, t, lambda i: 50 * i))
    lines += family("vllm:admission_rejections", "counter",
                    series("vllm:admission_rejections_total", v + ',reason="max_num_queued_reqs"', t, lambda i: 3 * i)
                    + series("vllm:admission_rejections_total", v + ',reason="max_num_queued_tokens"', t,
                             lambda i: 1.5 * i))
    lines += family("sglang:num_running_reqs", "gauge", series("sglang:num_running_reqs", s, t, lambda i: 8))
    lines += family("sglang:kv_used_tokens", "gauge", series("sglang:kv_used_tokens", s, t, lambda i: 90_000))
    lines += family("sglang:max_total_num_tokens", "gauge",
                    series("sglang:max_total_num_tokens", s, t, lambda i: 100_000))
    lines += family("sglang:prompt_tokens", "counter", series("sglang:prompt_tokens_total", s, t, lambda i: 1000 * i))
    lines += family("sglang:cached_tokens", "counter",
                    series("sglang:cached_tokens_total", s + ',cache_source="device"', t, lambda i: 30 * i)
                    + series("sglang:cached_tokens_total", s + ',cache_source="host"', t, lambda i: 20 * i))
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    yield from serve_openmetrics(tmp_path_factory, "today", openmetrics, STEP)


def signals_of(kb, server, model: str, engine: str):
    """Both engines share one Prometheus here, so the engine is named (as --engine does), the model filtered."""
    stop = datetime.fromtimestamp(server.end, UTC)
    window = PrometheusWindow(server.url, stop - timedelta(minutes=15), stop, match={"model_name": model},
                              timeout=30, engines=kb.engines, engine=engine)
    return window_signals(kb, window)[0]


def test_vllm_new_counters_through_prometheus(prometheus):
    kb = load_knowledge(DEFAULT_TREE_DIR)
    got = signals_of(kb, prometheus, "mv", "vllm")
    assert got.get("prompt_cached_share").value == pytest.approx(0.05, rel=1e-3)
    assert got.get("admission_rejections_per_s").value == pytest.approx(0.3, rel=1e-3)
    assert got.get("kv_usage_max") is None  # no KV gauge in this data: not measurable, never 0


def test_sglang_pool_tokens_and_cache_sources_through_prometheus(prometheus):
    kb = load_knowledge(DEFAULT_TREE_DIR)
    got = signals_of(kb, prometheus, "ms", "sglang")
    assert got.get("kv_usage_max").value == pytest.approx(0.9)
    assert got.get("kv_usage_mean").value == pytest.approx(0.9)
    assert got.get("prompt_cached_share").value == pytest.approx(0.05, rel=1e-3)
    assert got.get("admission_rejections_per_s") is None
