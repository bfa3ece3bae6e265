"""SnapshotWindow arithmetic against hand computations: rates, resets, PromQL quantiles, gauges, filters, buffer."""

from __future__ import annotations

import math

import pytest

from triage.errors import TriageError
from triage.knowledge.engines import load_engines
from triage.knowledge.needs import Need
from triage.sources.metrics.exposition import parse_metrics_text
from triage.sources.metrics.snapshot_window import ONE_SCRAPE, ScrapeBuffer, SnapshotWindow, bucket_quantile


def hist(engine: str, buckets: list[tuple[str, float]], total: float) -> str:
    lab = f'engine="{engine}",model_name="m"'
    rows = [f'vllm:time_to_first_token_seconds_bucket{{{lab},le="{le}"}} {n}' for le, n in buckets]
    count = buckets[-1][1]
    return "\n".join([*rows, f"vllm:time_to_first_token_seconds_sum{{{lab}}} {total}",
                      f"vllm:time_to_first_token_seconds_count{{{lab}}} {count}"])


def text(prompt: tuple[float, float], gen: float, running: tuple[float, float], kv: tuple[float, float],
         h0: str, h1: str) -> str:
    return f"""# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{engine="0",model_name="m"}} {prompt[0]}
vllm:prompt_tokens_total{{engine="1",model_name="m"}} {prompt[1]}
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="m"}} {gen}
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} {running[0]}
vllm:num_requests_running{{engine="1",model_name="m"}} {running[1]}
vllm:num_requests_running{{engine="0",model_name="x"}} 100
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} {kv[0]}
vllm:kv_cache_usage_perc{{engine="1",model_name="m"}} {kv[1]}
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{block_size="16",engine="0",num_gpu_blocks="5080"}} 1.0
# TYPE vllm:time_to_first_token_seconds histogram
{h0}
{h1}
"""


ZERO = [("0.1", 0), ("0.5", 0), ("1.0", 0), ("+Inf", 0)]
# t=1000 → t=1010. Bucket deltas summed over engines: le 0.1: 4, 0.5: 14, 1.0: 20, +Inf: 24; sum Δ 24.
A = text((100, 50), 1000, (4, 2), (0.5, 0.7),
         hist("0", [("0.1", 10), ("0.5", 20), ("1.0", 30), ("+Inf", 30)], 12), hist("1", ZERO, 0))
B = text((250, 100), 30, (6, 2), (0.9, 0.6),
         hist("0", [("0.1", 12), ("0.5", 30), ("1.0", 44), ("+Inf", 46)], 30),
         hist("1", [("0.1", 2), ("0.5", 4), ("1.0", 6), ("+Inf", 8)], 6))
C = text((400, 150), 60, (8, 2), (0.2, 0.4),
         hist("0", [("0.1", 12), ("0.5", 30), ("1.0", 44), ("+Inf", 46)], 30),
         hist("1", [("0.1", 2), ("0.5", 4), ("1.0", 6), ("+Inf", 8)], 6))
M = {"model_name": "m"}


def snaps(*pairs):
    return [parse_metrics_text(body, t, f"scrape@{t}") for t, body in pairs]


def window(match=M, pairs=((1000.0, A), (1010.0, B))):
    return SnapshotWindow(snaps(*pairs), match=match)


def read(win, *needs):
    return win.read(list(needs))


def test_rate_is_delta_over_dt_summed_over_engines():
    need = Need("rate", "prompt_tokens")
    r = read(window(), need)
    assert r.values[need] == pytest.approx((150 + 50) / 10)
    assert r.window_seconds == 10.0


def test_counter_reset_counts_the_later_value():
    need = Need("rate", "generation_tokens")
    assert read(window(), need).values[need] == pytest.approx(30 / 10)  # 1000 → 30: restarted, +30


@pytest.mark.parametrize(("q", "expected"), [
    (0.5, 0.1 + 0.4 * (12 - 4) / 10),  # rank 12 in (0.1, 0.5]: 0.42
    (0.1, 0.1 * 2.4 / 4),  # first bucket interpolates from 0: 0.06
    (0.75, 0.5 + 0.5 * (18 - 14) / 6),  # 0.8333…
    (0.9, 1.0),  # rank 21.6 > 20 falls in +Inf: the highest finite bound
    (0.0, 0.0),
])
def test_quantile_from_bucket_deltas_like_histogram_quantile(q, expected):
    need = Need("quantile", "ttft", q=q)
    assert read(window(), need).values[need] == pytest.approx(expected)


def test_hist_mean_is_sum_delta_over_count_delta():
    need = Need("hist_mean", "ttft")
    assert read(window(), need).values[need] == pytest.approx(24 / 24)


def test_gauges_sum_counts_and_max_ratios():
    run_mean, run_max, run_last = Need("gauge_mean", "running"), Need("gauge_max", "running"), Need(
        "gauge_last", "running")
    kv_mean, kv_max = Need("gauge_mean", "kv_usage"), Need("gauge_max", "kv_usage")
    r = read(window(), run_mean, run_max, run_last, kv_mean, kv_max)
    assert (r.values[run_mean], r.values[run_max], r.values[run_last]) == (7.0, 8.0, 8.0)  # sums 6, 8
    assert r.values[kv_mean] == pytest.approx(0.8)  # max per scrape: 0.7, 0.9
    assert r.values[kv_max] == pytest.approx(0.9)


def test_match_filter():
    need = Need("gauge_mean", "running")
    assert read(window(match=None), need).values[need] == 107.0  # model x adds 100 to each scrape
    assert read(window(match={"model_name": "x"}), need).values[need] == 100.0
    r = read(window(match={"model_name": "nope"}), need)
    assert r.values[need] is None and 'model_name="nope"' in r.missing[need]


def test_info_gives_labels():
    need = Need("info", "cache_config")
    assert read(window(match=None), need).values[need] == {"block_size": "16", "engine": "0",
                                                            "num_gpu_blocks": "5080"}


def test_missing_metric_reason_is_the_engine_text():
    need = Need("rate", "preemptions")
    r = read(window(), need)
    assert r.values[need] is None
    assert r.missing[need] == load_engines()["vllm"].metric("preemptions").missing.en


def test_addon_absent_reason_and_unknown_key():
    gpu, nope = Need("gauge_mean", "gpu_util", engine="dcgm"), Need("gauge_mean", "nope")
    r = read(window(), gpu, nope)
    assert r.missing[gpu].startswith("DCGM_FI_DEV_GPU_UTIL is not exported")
    assert r.values[nope] is None and "no metric for 'nope'" in r.missing[nope]


def test_one_scrape_gives_gauges_but_not_rates():
    win = window(pairs=((1000.0, A),))
    rate, gauge = Need("rate", "prompt_tokens"), Need("gauge_last", "running")
    r = read(win, rate, gauge)
    assert r.values[rate] is None and r.missing[rate] == ONE_SCRAPE
    assert r.values[gauge] == 6.0


def test_no_observations_in_window():
    need = Need("quantile", "ttft", q=0.5)
    r = read(window(pairs=((1010.0, B), (1020.0, C))), need)  # histogram unchanged between B and C
    assert r.values[need] is None and "no observations" in r.missing[need]


def test_series_points_from_consecutive_pairs():
    win = window(pairs=((1000.0, A), (1010.0, B), (1020.0, C)))
    rate, gauge, info = Need("rate", "prompt_tokens"), Need("gauge_last", "running"), Need("info", "cache_config")
    out = win.series([rate, gauge, info], points=60)
    assert [(p.t, p.value) for p in out[rate]] == [(1010.0, 20.0), (1020.0, 20.0)]
    assert [p.value for p in out[gauge]] == [6.0, 8.0, 10.0]
    assert out[info] == []
    assert len(win.series([gauge], points=1)[gauge]) == 2  # first and last kept


def test_no_engine_is_an_error():
    other = "# TYPE node_load1 gauge\nnode_load1 0.5\n"
    with pytest.raises(TriageError, match="no vLLM, SGLang or TGI metrics"):
        SnapshotWindow(snaps((1.0, other), (2.0, other)))


def test_ring_buffer_is_bounded_and_windows_recent_scrapes():
    buf = ScrapeBuffer(capacity=3)
    for t, body in ((1000.0, A), (1010.0, B), (1020.0, C), (1030.0, C), (1040.0, C)):
        buf.add(parse_metrics_text(body, t, "s"))
    assert len(buf) == 3 and [s.taken_at for s in buf.snapshots] == [1020.0, 1030.0, 1040.0]
    win = buf.window(10.0, match=M)
    assert [s.taken_at for s in win.snapshots] == [1030.0, 1040.0]
    with pytest.raises(TriageError, match="no scrapes yet"):
        ScrapeBuffer(2).window(60)


def test_bucket_quantile_promql_edge_rules():
    buckets = [(0.1, 4.0), (0.5, 14.0), (1.0, 20.0), (math.inf, 24.0)]
    assert bucket_quantile(-0.1, buckets) == -math.inf
    assert bucket_quantile(1.5, buckets) == math.inf
    assert math.isnan(bucket_quantile(0.5, buckets[:-1]))  # no +Inf bucket
    assert math.isnan(bucket_quantile(0.5, [(1.0, 0.0), (math.inf, 0.0)]))  # no observations
    assert bucket_quantile(0.5, [(-1.0, 3.0), (1.0, 4.0), (math.inf, 4.0)]) == -1.0  # first bound <= 0
    assert bucket_quantile(0.5, [(math.inf, 24.0), (0.5, 14.0), (0.1, 4.0), (1.0, 20.0)]) == pytest.approx(0.42)
    assert bucket_quantile(0.5, [(0.1, 4.0), (0.5, 3.0), (1.0, 20.0), (math.inf, 24.0)]) == pytest.approx(
        0.5 + 0.5 * (12 - 4) / 16)  # non-monotonic counts are raised to the running max, as PromQL does
