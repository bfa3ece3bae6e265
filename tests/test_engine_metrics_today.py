"""Today's engine metrics read by the rules: vLLM's cached prompt tokens and admission rejections diagnosed from
scrapes in those names through the snapshot window; absent, they are not measurable, never healthy."""

from __future__ import annotations

import pytest

from tests.scrape_tools import finding, window
from triage.diagnosis.window import window_signals
from triage.knowledge import DEFAULT_TREE_DIR
from triage.knowledge.loader import load_knowledge
from triage.sources.metrics.exposition import parse_metrics_text
from triage.sources.metrics.since_start import SinceStartWindow

LAB = 'engine="0",model_name="m"'
TTFT_LE = ("0.5", "1.0", "2.5", "5.0", "10.0", "+Inf")


@pytest.fixture(scope="module")
def kb():
    return load_knowledge(DEFAULT_TREE_DIR)


def vllm_scrape(n: float, prompt: float, cached: float | None, rejected: dict[str, float] | None,
                waiting: float = 0.0) -> str:
    """A vLLM /metrics body after ``n`` requests whose TTFT all fell between 5 and 10 s (over the chat SLO)."""
    rows = [f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{LAB}}} 8",
            f"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{{LAB}}} {waiting}",
            f"# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{{{LAB}}} 0.3",
            "# TYPE vllm:request_success_total counter",
            f'vllm:request_success_total{{{LAB},finished_reason="stop"}} {n}',
            f"# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{{{LAB}}} {prompt}",
            "# TYPE vllm:time_to_first_token_seconds histogram"]
    rows += [f'vllm:time_to_first_token_seconds_bucket{{{LAB},le="{le}"}} {0 if float(le) < 10 else n}'
             for le in TTFT_LE]
    rows += [f"vllm:time_to_first_token_seconds_sum{{{LAB}}} {7.0 * n}",
             f"vllm:time_to_first_token_seconds_count{{{LAB}}} {n}"]
    if cached is not None:
        rows += ["# TYPE vllm:prompt_tokens_cached_total counter", f"vllm:prompt_tokens_cached_total{{{LAB}}} {cached}"]
    if rejected is not None:
        rows.append("# TYPE vllm:admission_rejections_total counter")
        rows += [f'vllm:admission_rejections_total{{{LAB},reason="{r}"}} {v}' for r, v in rejected.items()]
    return "\n".join(rows) + "\n"


def test_cached_prompt_share_lights_repeated_prefill(kb):
    # 60 s: 600 000 prompt tokens, 30 000 of them from the cache (5 %); no prefix-cache counters at all
    win = window(kb, vllm_scrape(100, 1e6, 5e4, None), vllm_scrape(200, 1.6e6, 8e4, None))
    signals, _ = window_signals(kb, win)
    share = signals.get("prompt_cached_share")
    assert share is not None and share.value == pytest.approx(0.05)
    assert signals.get("prefix_hit_rate") is None  # the older reading is absent here
    found = finding(kb, win, "ttft.repeated_prefill")
    assert found is not None
    held = {e.signal: e.value for e in found.evidence if e.holds}
    assert held == {"prompt_cached_share": pytest.approx(0.05)}


@pytest.mark.parametrize("cached", [0.0, 6e5])
def test_cached_prompt_share_stays_a_share(kb, cached):
    # every prompt token (or none) from the cache: exactly 1 (or 0), and a high share is no repeated-prefill cause
    win = window(kb, vllm_scrape(100, 1e6, 0.0, None), vllm_scrape(200, 1.6e6, cached, None))
    share = window_signals(kb, win)[0].get("prompt_cached_share")
    assert share is not None and 0.0 <= share.value <= 1.0
    assert share.value == pytest.approx(cached / 6e5)
    found = finding(kb, win, "ttft.repeated_prefill")
    assert (found is not None) == (cached == 0.0)


def test_absent_new_counters_are_not_measurable_never_healthy(kb):
    # an older vLLM: neither counter; requests wait (3 on average), so the queueing cause lights on the gauge
    win = window(kb, vllm_scrape(100, 1e6, None, None, waiting=3), vllm_scrape(200, 1.6e6, None, None, waiting=3))
    signals, _ = window_signals(kb, win)
    assert signals.get("prompt_cached_share") is None  # absent, never a share of 0 or 1
    assert signals.get("admission_rejections_per_s") is None  # absent, never 0/s
    queueing = finding(kb, win, "ttft.queueing")
    assert queueing is not None and "admission_rejections_per_s" in queueing.not_measurable
    assert not any(e.signal == "admission_rejections_per_s" and e.holds is not None for e in queueing.evidence)
    assert finding(kb, win, "ttft.repeated_prefill") is None  # nothing measured there: not a cause, not healthy
    # the engine map's reason for an absent counter names the version that brought it
    assert "0.32" in win.engine.metric("prompt_tokens_cached").missing.en
    assert win.engine.metric("admission_rejections").since == "0.32"


def test_one_scrape_since_the_start_gives_the_new_signals(kb):
    # one scrape, the server up an hour: 1 000 000 prompt tokens, 40 000 cached; 36 refusals
    body = vllm_scrape(100, 1e6, 4e4, {"max_num_queued_tokens": 36})
    body += "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1000\n"
    win = SinceStartWindow(parse_metrics_text(body, 4600.0, "scrape.txt"), engines=kb.engines)
    signals, _ = window_signals(kb, win)
    assert signals.get("prompt_cached_share").value == pytest.approx(0.04)
    assert signals.get("admission_rejections_per_s").value == pytest.approx(0.01)
    held = {e.signal for e in finding(kb, win, "ttft.repeated_prefill").evidence if e.holds}
    assert held == {"prompt_cached_share"}
    assert "admission_rejections_per_s" in {e.signal for e in finding(kb, win, "ttft.queueing").evidence if e.holds}


def test_admission_rejections_light_queueing(kb):
    # 12 + 6 refusals over 60 s, two reasons: 0.3/s summed over reason; no queue seen in the gauges
    before = vllm_scrape(100, 1e6, 9e5, {"max_num_queued_reqs": 10, "max_num_queued_tokens": 4})
    after = vllm_scrape(200, 1.6e6, 1.44e6, {"max_num_queued_reqs": 22, "max_num_queued_tokens": 10})
    win = window(kb, before, after)
    rate = window_signals(kb, win)[0].get("admission_rejections_per_s")
    assert rate is not None and rate.value == pytest.approx(0.3)
    found = finding(kb, win, "ttft.queueing")
    assert found is not None
    assert [e.signal for e in found.evidence if e.holds] == ["admission_rejections_per_s"]


def test_no_rejections_is_a_measured_zero_not_a_queue(kb):
    flat = {"max_num_queued_reqs": 3}
    win = window(kb, vllm_scrape(100, 1e6, 9e5, flat), vllm_scrape(200, 1.6e6, 1.44e6, flat))
    rate = window_signals(kb, win)[0].get("admission_rejections_per_s")
    assert rate is not None and rate.value == 0.0
    assert finding(kb, win, "ttft.queueing") is None


SG = 'model_name="m",engine_type="unified",tp_rank="0"'


def sglang_scrape(n: float, prompt: float, cached: dict[str, float], used: float | None,
                  token_usage: float | None = None, capacity: float = 100_000) -> str:
    """An SGLang /metrics body (v0.5.11 names): TTFT of ``n`` requests between 4 and 6 s, the KV pool as tokens."""
    rows = [f"# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{{{SG}}} 8",
            f"# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{{{SG}}} 0",
            f"# TYPE sglang:max_total_num_tokens gauge\nsglang:max_total_num_tokens{{{SG}}} {capacity}",
            f"# TYPE sglang:num_requests_total counter\nsglang:num_requests_total{{{SG}}} {n}",
            f"# TYPE sglang:prompt_tokens_total counter\nsglang:prompt_tokens_total{{{SG}}} {prompt}",
            "# TYPE sglang:cached_tokens_total counter",
            *[f'sglang:cached_tokens_total{{{SG},cache_source="{k}"}} {v}' for k, v in cached.items()],
            "# TYPE sglang:time_to_first_token_seconds histogram"]
    rows += [f'sglang:time_to_first_token_seconds_bucket{{{SG},le="{le}"}} {0 if float(le) < 6 else n}'
             for le in ("1", "4", "6", "+Inf")]
    rows += [f"sglang:time_to_first_token_seconds_sum{{{SG}}} {5.0 * n}",
             f"sglang:time_to_first_token_seconds_count{{{SG}}} {n}"]
    if used is not None:
        rows += ["# TYPE sglang:kv_used_tokens gauge", f"sglang:kv_used_tokens{{{SG}}} {used}",
                 "# TYPE sglang:kv_available_tokens gauge", f"sglang:kv_available_tokens{{{SG}}} {capacity - used}"]
    if token_usage is not None:
        rows += ["# TYPE sglang:token_usage gauge", f"sglang:token_usage{{{SG}}} {token_usage}"]
    return "\n".join(rows) + "\n"


def test_sglang_kv_usage_from_pool_tokens_lights_the_kv_cache_cause(kb):
    # no sglang:token_usage (a v0.5.11 server scraped without it): KV usage is used ÷ the pool's size
    win = window(kb, sglang_scrape(100, 1e6, {"device": 0}, 96_000), sglang_scrape(200, 1.6e6, {"device": 0}, 98_000))
    assert win.engine.id == "sglang"
    signals, _ = window_signals(kb, win)
    assert signals.get("kv_usage_max").value == pytest.approx(0.98)
    assert signals.get("kv_usage_mean").value == pytest.approx(0.97)
    assert signals.get("kv_usage_max").source.id == "server.kv_used_max"
    kv = finding(kb, win, "memory.kv_cache")
    assert kv is not None and any(e.signal == "kv_usage_max" and e.holds for e in kv.evidence)


def test_sglang_token_usage_wins_over_pool_tokens(kb):
    body = sglang_scrape(100, 1e6, {"device": 0}, 98_000, token_usage=0.4)
    win = window(kb, body, body.replace(" 100\n", " 200\n"))
    signals, _ = window_signals(kb, win)
    assert signals.get("kv_usage_max").value == pytest.approx(0.4)
    assert signals.get("kv_usage_max").source.id == "server.kv_usage_max"


def test_sglang_without_any_kv_gauge_is_not_measurable(kb):
    win = window(kb, sglang_scrape(100, 1e6, {}, None), sglang_scrape(200, 1.6e6, {}, None))
    signals, _ = window_signals(kb, win)
    assert signals.get("kv_usage_max") is None and signals.get("kv_usage_mean") is None


def test_sglang_cached_share_sums_cache_sources_once(kb):
    # 600 000 prompt tokens; 12 000 from the GPU radix cache and 6 000 from host memory: 3 %
    before = sglang_scrape(100, 1e6, {"device": 1000, "host": 500}, 10_000)
    after = sglang_scrape(200, 1.6e6, {"device": 13_000, "host": 6_500}, 10_000)
    win = window(kb, before, after)
    share = window_signals(kb, win)[0].get("prompt_cached_share")
    assert share is not None and share.value == pytest.approx(0.03)
    found = finding(kb, win, "ttft.repeated_prefill")
    assert found is not None and any(e.signal == "prompt_cached_share" and e.holds for e in found.evidence)
    # every prompt token cached (a "total" series from requests without a breakdown): exactly 1, no cause
    full = window(kb, sglang_scrape(100, 1e6, {"total": 0}, 10_000), sglang_scrape(200, 1.6e6, {"total": 6e5}, 10_000))
    assert window_signals(kb, full)[0].get("prompt_cached_share").value == pytest.approx(1.0)
    assert finding(kb, full, "ttft.repeated_prefill") is None
