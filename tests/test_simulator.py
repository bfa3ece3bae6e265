"""vLLM metrics simulator: valid exposition, scenario signatures, the HTTP server, a promtool-loadable backfill."""

from __future__ import annotations

import argparse
import math
import shutil
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from functools import cache
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from triage.cli import simulate as cli_simulate
from triage.errors import TriageError
from triage.sources.metrics.simulator import SCENARIOS, Simulator, serve, write_openmetrics

START = 1_700_000_000.0
WINDOW_S = 120.0
SCRAPE_S = 10.0
IDS = ["healthy", "queueing", "prefill_bound", "kv_pressure", "preemption_storm", "long_requests", "low_batch",
       "spec_low_acceptance", "decode_bound", "pd_slow_transfer"]
ENGINE_LABELS = {"model_name": "meta-llama/Llama-3.1-8B-Instruct", "engine": "0"}
GAUGES = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
          "vllm:cache_config_info"]
COUNTERS = ["vllm:num_preemptions", "vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:prompt_tokens",
            "vllm:generation_tokens", "vllm:request_success"]
SPEC_COUNTERS = ["vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                 "vllm:spec_decode_num_accepted_tokens"]
HISTOGRAMS = ["vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
              "vllm:request_time_per_output_token_seconds", "vllm:e2e_request_latency_seconds",
              "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds",
              "vllm:request_decode_time_seconds", "vllm:request_prompt_tokens", "vllm:request_generation_tokens"]


# ---- a scrape, parsed ----------------------------------------------------------------------------------
class Scrape:
    """One parsed exposition: family types, and sample values keyed by (sample name, le / finished_reason)."""

    def __init__(self, text: str) -> None:
        self.types: dict[str, str] = {}
        self.values: dict[tuple[str, str], float] = {}
        self.labels: dict[str, dict[str, str]] = {}
        for fam in text_string_to_metric_families(text):
            self.types[fam.name] = fam.type
            for s in fam.samples:
                self.values[(s.name, s.labels.get("le") or s.labels.get("finished_reason", ""))] = s.value
                self.labels.setdefault(s.name, s.labels)

    def get(self, name: str, sub: str = "") -> float:
        return self.values[(name, sub)]

    def buckets(self, base: str) -> list[tuple[float, float]]:
        return sorted((float(k[1]), v) for k, v in self.values.items() if k[0] == base + "_bucket")


def quantile(q: float, a: Scrape, b: Scrape, base: str) -> float:
    """histogram_quantile(q, increase(base_bucket[window])) as PromQL computes it."""
    cum = [(le, nb - na) for (le, nb), (_, na) in zip(b.buckets(base), a.buckets(base))]
    total = cum[-1][1]
    if total <= 0:
        return math.nan
    rank, lower, below = q * total, 0.0, 0.0
    for le, count in cum:
        if count >= rank:
            if math.isinf(le):
                return lower
            return lower + (le - lower) * (rank - below) / (count - below)
        lower, below = le, count
    return lower


def hist_mean(a: Scrape, b: Scrape, base: str) -> float:
    n = b.get(base + "_count") - a.get(base + "_count")
    return (b.get(base + "_sum") - a.get(base + "_sum")) / n if n else math.nan


def rate(a: Scrape, b: Scrape, name: str, sub: str = "") -> float:
    return (b.get(name, sub) - a.get(name, sub)) / WINDOW_S


@cache
def scrapes(scenario: str) -> tuple[Scrape, ...]:
    """Renders every SCRAPE_S over a WINDOW_S window (the first at t0, already past warm-up)."""
    sim = Simulator(scenario, seed=0, start=START)
    out = [Scrape(sim.render())]
    for _ in range(int(WINDOW_S / SCRAPE_S)):
        sim.advance(SCRAPE_S)
        out.append(Scrape(sim.render()))
    return tuple(out)


def signature(scenario: str) -> dict[str, float]:
    """The numbers the diagnosis reads from a server window: quantiles/means from deltas, gauge mean/max."""
    snaps = scrapes(scenario)
    a, b = snaps[0], snaps[-1]
    m = {f"{key}{int(q * 100)}": quantile(q, a, b, base) for q in (0.5, 0.99) for key, base in
         (("ttft", "vllm:time_to_first_token_seconds"), ("itl", "vllm:inter_token_latency_seconds"),
          ("e2e", "vllm:e2e_request_latency_seconds"), ("prompt", "vllm:request_prompt_tokens"))}
    ttft = hist_mean(a, b, "vllm:time_to_first_token_seconds")
    m["queue_share"] = hist_mean(a, b, "vllm:request_queue_time_seconds") / ttft
    m["prefill_share"] = hist_mean(a, b, "vllm:request_prefill_time_seconds") / ttft
    m["preempt_per_s"] = rate(a, b, "vllm:num_preemptions_total")
    queries = rate(a, b, "vllm:prefix_cache_queries_total")
    m["hit_rate"] = rate(a, b, "vllm:prefix_cache_hits_total") / queries if queries else 0.0
    if ("vllm:spec_decode_num_draft_tokens_total", "") in b.values:
        m["acceptance"] = (rate(a, b, "vllm:spec_decode_num_accepted_tokens_total")
                           / rate(a, b, "vllm:spec_decode_num_draft_tokens_total"))
    for key, name in (("running", "vllm:num_requests_running"), ("waiting", "vllm:num_requests_waiting"),
                      ("kv", "vllm:kv_cache_usage_perc")):
        values = [s.get(name) for s in snaps[1:]]
        m[f"{key}_mean"], m[f"{key}_max"] = sum(values) / len(values), max(values)
    for key in ("ttft", "e2e", "prompt"):
        m[f"{key}_tail"] = m[f"{key}99"] / m[f"{key}50"]
    if ("vllm:nixl_xfer_time_seconds_count", "") in b.values:  # a PD decode instance
        m["xfer_mean"] = hist_mean(a, b, "vllm:nixl_xfer_time_seconds")
        m["xfer_share"] = m["xfer_mean"] / ttft
        m["xfer_failed_per_s"] = rate(a, b, "vllm:nixl_num_failed_transfers_total")
    info = b.labels["vllm:cache_config_info"]
    m["prefix_caching"] = float(info["enable_prefix_caching"] == "True")
    m["max_concurrency"] = float(info["kv_cache_max_concurrency"])
    return m


# Thresholds from tree/tree.yaml rules and tree/slo.yaml (chat: TTFT p99 2 s, TPOT p99 0.2 s).
SIGNATURES: dict[str, list[tuple[str, str, float]]] = {
    "healthy": [("ttft99", "<", 1.0), ("itl99", "<", 0.1), ("kv_max", "<", 0.7), ("waiting_mean", "<=", 0.2),
                ("preempt_per_s", "==", 0), ("prefix_caching", "==", 1), ("hit_rate", ">", 0.5)],
    "queueing": [("waiting_mean", ">=", 5), ("queue_share", ">=", 0.6), ("ttft99", ">", 3), ("kv_max", "<=", 0.8),
                 ("preempt_per_s", "==", 0)],
    "prefill_bound": [("prompt50", ">=", 4500), ("prompt50", "<=", 8000), ("prefill_share", ">=", 0.6),
                      ("ttft99", ">", 2.5), ("waiting_mean", "<", 1), ("kv_max", "<=", 0.8),
                      ("preempt_per_s", "==", 0)],
    "kv_pressure": [("kv_max", ">=", 0.97), ("waiting_mean", ">=", 3), ("preempt_per_s", ">=", 0.05),
                    ("preempt_per_s", "<=", 0.3), ("ttft99", ">", 2.5)],
    "preemption_storm": [("preempt_per_s", ">=", 1), ("kv_mean", ">=", 0.95), ("e2e_tail", ">=", 4),
                         ("itl99", ">", 0.25)],
    "long_requests": [("prompt_tail", ">=", 8), ("ttft_tail", ">=", 8), ("preempt_per_s", "==", 0),
                      ("kv_max", "<=", 0.85), ("waiting_mean", "<", 1)],
    "low_batch": [("running_mean", "<=", 2), ("kv_mean", "<=", 0.1), ("waiting_max", "==", 0),
                  ("max_concurrency", ">=", 64), ("ttft99", "<", 1.0), ("itl99", "<", 0.1)],
    "spec_low_acceptance": [("acceptance", ">=", 0.25), ("acceptance", "<=", 0.35), ("running_mean", "<=", 6),
                            ("itl99", ">", 0.25), ("kv_max", "<=", 0.5), ("waiting_max", "==", 0)],
    "pd_slow_transfer": [("xfer_mean", ">=", 1.0), ("xfer_mean", "<=", 1.5), ("xfer_share", ">=", 0.8),
                         ("xfer_failed_per_s", ">", 0), ("ttft99", ">", 2.0), ("kv_max", "<=", 0.5),
                         ("preempt_per_s", "==", 0), ("waiting_mean", ">=", 2)],
    "decode_bound": [("running_mean", ">=", 64), ("itl50", ">=", 0.05), ("kv_max", "<=", 0.85),
                     ("preempt_per_s", "==", 0), ("waiting_max", "==", 0), ("ttft99", "<", 1.0)],
}
OPS = {"<": float.__lt__, "<=": float.__le__, ">": float.__gt__, ">=": float.__ge__, "==": float.__eq__}


def test_scenario_ids_and_texts():
    assert list(SCENARIOS) == IDS
    for sc in SCENARIOS.values():
        assert sc.title.en and sc.title.zh and sc.description.en and sc.description.zh


@pytest.mark.parametrize("scenario", IDS)
def test_exposition_is_valid_vllm(scenario: str):
    snaps = scrapes(scenario)
    last = snaps[-1]
    spec = SCENARIOS[scenario].params.spec_tokens > 0
    for name in GAUGES:
        assert last.types[name] == "gauge"
    for name in COUNTERS + (SPEC_COUNTERS if spec else []):
        assert last.types[name] == "counter"
        assert last.labels[name + "_total"].items() >= ENGINE_LABELS.items()
    if not spec:
        assert not any(n.startswith("vllm:spec_decode") for n in last.types)
    for name in HISTOGRAMS:
        assert last.types[name] == "histogram"
    assert {k[1] for k in last.values if k[0] == "vllm:request_success_total"} == {"stop", "length", "abort"}
    info = last.labels["vllm:cache_config_info"]
    assert info["block_size"] == "16" and info["engine"] == "0" and int(info["num_gpu_blocks"]) > 0
    assert info["enable_prefix_caching"] in ("True", "False") and float(info["kv_cache_max_concurrency"]) > 0
    assert 0.0 <= last.get("vllm:kv_cache_usage_perc") <= 1.0


PD_SERIES = ("vllm:nixl_xfer_time_seconds", "vllm:nixl_num_failed_transfers", "vllm:prompt_tokens_by_source",
             "vllm:num_requests_waiting_by_reason")


def by_label(text: str, family: str, label: str) -> dict[str, float]:
    fam = next(f for f in text_string_to_metric_families(text) if f.name == family)
    return {s.labels[label]: s.value for s in fam.samples if s.name.endswith(("_total", "_by_reason"))}


@pytest.mark.parametrize("scenario", IDS)
def test_only_the_pd_scenario_exports_the_nixl_connectors_series(scenario: str):
    last = scrapes(scenario)[-1]
    pd = SCENARIOS[scenario].params.kv_transfer_s > 0
    assert pd == (scenario == "pd_slow_transfer")
    assert all((name in last.types) == pd for name in PD_SERIES), scenario
    if pd:
        assert last.types["vllm:nixl_xfer_time_seconds"] == "histogram"
        assert last.types["vllm:nixl_num_failed_transfers"] == "counter"
        assert last.labels["vllm:nixl_num_failed_transfers_total"] == ENGINE_LABELS


def test_the_pd_decode_instance_counts_its_waiting_and_prompt_tokens_by_source():
    """Requests waiting for their KV are vLLM's deferred waiting (the waiting gauge counts both reasons); prompt tokens
    split into the local prefix-cache hit, the KV received over NIXL, and what a failed transfer left to prefill."""
    sim = Simulator("pd_slow_transfer", seed=1, start=START)
    sim.advance(120)
    text = sim.render()
    waiting = by_label(text, "vllm:num_requests_waiting_by_reason", "reason")
    assert set(waiting) == {"capacity", "deferred"} and waiting["deferred"] >= 1
    assert Scrape(text).get("vllm:num_requests_waiting") == waiting["capacity"] + waiting["deferred"]
    sources = by_label(text, "vllm:prompt_tokens_by_source", "source")
    assert set(sources) == {"local_compute", "local_cache_hit", "external_kv_transfer"}
    assert sources["external_kv_transfer"] > sources["local_cache_hit"] > 0
    # mostly the last partial block, plus the prompts of the few failed transfers
    assert 0 < sources["local_compute"] < 0.1 * sources["external_kv_transfer"]
    assert Scrape(text).get("vllm:nixl_num_failed_transfers_total") >= 1


@pytest.mark.parametrize("scenario", IDS)
def test_counters_monotonic_histograms_cumulative(scenario: str):
    snaps = scrapes(scenario)
    counters = [k for k in snaps[0].values if k[0].endswith(("_total", "_count", "_sum", "_bucket"))]
    for before, after in zip(snaps, snaps[1:]):
        assert all(after.values[k] >= before.values[k] for k in counters)
    for snap in snaps:
        for base in HISTOGRAMS:
            counts = [c for _, c in snap.buckets(base)]
            assert counts == sorted(counts)
            assert snap.get(base + "_count") == counts[-1]


@pytest.mark.parametrize("scenario", IDS)
def test_scenario_signature(scenario: str):
    m = signature(scenario)
    failed = [f"{key}={m[key]:.3g} (want {op} {value})" for key, op, value in SIGNATURES[scenario]
              if not OPS[op](float(m[key]), float(value))]
    assert not failed, f"{scenario}: " + "; ".join(failed)


def test_deterministic_and_advance_in_pieces():
    one = Simulator("kv_pressure", seed=3, start=START)
    one.advance(30)
    two = Simulator("kv_pressure", seed=3, start=START)
    two.advance(12.5)
    two.advance(17.5)
    assert one.render() == two.render() and one.now == two.now == START + 30
    assert Simulator("kv_pressure", seed=4, start=START).render() != Simulator("kv_pressure", seed=3,
                                                                                start=START).render()


def test_unknown_scenario_names_valid_ids(tmp_path: Path):
    for call in (lambda: Simulator("nope"), lambda: serve("nope", 0),
                 lambda: write_openmetrics(tmp_path / "x.om", "nope", 1)):
        with pytest.raises(TriageError) as exc:
            call()
        assert "nope" in str(exc.value) and all(i in str(exc.value) for i in IDS)


def _get(url: str) -> tuple[int, str, str]:
    with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 (local test server)
        return resp.status, resp.headers["Content-Type"], resp.read().decode("utf-8")


def test_serve_metrics_over_http():
    server = serve("healthy", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        first, second = _get(url), _get(url)
        for status, ctype, _ in (first, second):
            assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
        a, b = Scrape(first[2]), Scrape(second[2])
        totals = [k for k in a.values if k[0].endswith("_total")]
        assert totals and all(b.values[k] >= a.values[k] for k in totals)
        with pytest.raises(urllib.error.HTTPError) as exc:
            _get(url.replace("/metrics", "/nothing"))
        assert exc.value.code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_serve_port_in_use_is_a_triage_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        with pytest.raises(TriageError, match="cannot listen"):
            serve("low_batch", sock.getsockname()[1])


def _om_series(path: Path, sample: str) -> list[tuple[float, float]]:
    rows = [line.rsplit(" ", 2) for line in path.read_text().splitlines() if line.startswith(sample + "{")]
    return [(float(ts), float(v)) for _, v, ts in rows]


def test_openmetrics_backfill_loads_in_promtool(tmp_path: Path):
    path = tmp_path / "sim.om"
    n = write_openmetrics(path, "kv_pressure", 5, step=15, end=START)
    text = path.read_text()
    assert text.endswith("# EOF\n") and n == sum(1 for line in text.splitlines() if not line.startswith("#"))
    series = _om_series(path, "vllm:num_preemptions_total")
    assert len(series) == 21 and series[-1][0] == START and series[0][0] == START - 300
    assert [t for t, _ in series] == sorted(t for t, _ in series) and [v for _, v in series] == sorted(
        v for _, v in series)
    assert _om_series(path, "vllm:time_to_first_token_seconds_bucket")
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed")
    done = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(path), str(tmp_path / "db")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def _cli(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli_simulate.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_cli_writes_backfill_and_rejects_unknown_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "low.om"
    args = _cli(["simulate", "--scenario", "low_batch", "--openmetrics", str(out), "--minutes", "2", "--step", "30",
                 "--end", str(START)])
    assert args.func(args) == 0 and out.read_text().endswith("# EOF\n")
    assert "samples" in capsys.readouterr().out
    args = _cli(["simulate", "--scenario", "nope", "--openmetrics", str(out)])
    with pytest.raises(TriageError, match="valid: healthy"):
        args.func(args)


def test_snapshot_from_families_equals_the_parsed_text():
    from triage.sources.metrics.exposition import parse_metrics_text, snapshot_from_families

    sim = Simulator("queueing", seed=3, start=1_700_000_000.0)
    sim.advance(120)
    parsed = parse_metrics_text(sim.render(), sim.now, "demo")
    direct = snapshot_from_families(sim.families(), sim.now, "demo")
    assert direct.series.keys() == parsed.series.keys()
    for name, samples in parsed.series.items():
        def norm(pairs):
            return sorted((sorted(labels.items()), value) for labels, value in pairs)
        assert norm(direct.series[name]) == norm(samples), name
