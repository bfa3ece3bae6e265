"""A label filter picks the engine from the series it selects: one Prometheus holding a vLLM model and an SGLang
model (a shared cluster Prometheus) is read as SGLang when the filter names the SGLang model, in a real Prometheus."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.prom_harness import STEP, _family, _gauge_rows, data_end, start_prometheus
from triage.errors import TriageError
from triage.knowledge.needs import Need
from triage.sources.metrics.prometheus_window import PrometheusWindow

pytestmark = pytest.mark.prometheus

SPAN = 1200
VLLM_MODEL, SGLANG_MODEL = "llama-a", "qwen-b"
RUNNING = Need("gauge_last", "running")


def _two_engines(end: int) -> str:
    """vLLM serving one model (more keys: running, waiting, KV) and SGLang serving another (running, queue, token
    usage), both scraped into one Prometheus; without a filter vLLM is the engine exposing the most keys."""
    times = list(range(end - SPAN, end + 1, STEP))
    lines: list[str] = []
    vllm, sglang = {"model_name": VLLM_MODEL}, {"model_name": SGLANG_MODEL}
    for name, value in (("vllm:num_requests_running", 12), ("vllm:num_requests_waiting", 0),
                        ("vllm:kv_cache_usage_perc", 0.4)):
        _family(lines, name, "gauge", _gauge_rows(name, vllm, times, lambda i, v=value: v))
    for name, value in (("sglang:num_running_reqs", 48), ("sglang:num_queue_reqs", 30),
                        ("sglang:token_usage", 0.97)):
        _family(lines, name, "gauge", _gauge_rows(name, sglang, times, lambda i, v=value: v))
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    end = data_end()
    server = start_prometheus(tmp_path_factory.mktemp("shared"), _two_engines(end), end)
    yield server
    server.stop()


def _window(server, match: dict[str, str] | None) -> PrometheusWindow:
    start, end = (datetime.fromtimestamp(t, tz=UTC) for t in (server.end - 600, server.end))
    return PrometheusWindow(server.url, start, end, match=match)


def test_the_filter_picks_the_engine_of_the_series_it_selects(shared) -> None:
    """On the old code the engine came from every name in Prometheus: vLLM, whose running count carries no
    model_name "qwen-b", so the SGLang model read as having no samples."""
    assert _window(shared, None).engine.id == "vllm"
    win = _window(shared, {"model_name": SGLANG_MODEL})
    assert win.engine.id == "sglang" and not win.empty
    assert win.read([RUNNING]).values[RUNNING] == 48.0
    vllm = _window(shared, {"model_name": VLLM_MODEL})
    assert vllm.engine.id == "vllm" and vllm.read([RUNNING]).values[RUNNING] == 12.0


def test_a_filter_that_selects_no_serving_series_says_so(shared) -> None:
    with pytest.raises(TriageError, match='carry the labels {model_name="nope"}.*check the filter') as err:
        _window(shared, {"model_name": "nope"})
    assert err.value.key == "match"
