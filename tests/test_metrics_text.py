"""Parsing real-looking /metrics text (vLLM new/old/underscore, SGLang, TGI, DCGM) and engine detection."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.prom_harness import FakeBehaviour, closed_port_url, fake_prometheus
from triage.errors import TriageError
from triage.knowledge.engines import detect_engines, load_engines
from triage.sources.metrics.exposition import Snapshot, parse_metrics_text, present_names
from triage.sources.metrics.scrape import scrape, two_scrapes

FIXTURES = Path(__file__).parent / "fixtures" / "metrics"


def load(name: str, taken_at: float = 1000.0) -> Snapshot:
    path = FIXTURES / name
    return parse_metrics_text(path.read_text(encoding="utf-8"), taken_at, str(path))


def engine_ids(name: str) -> list[str]:
    return [e.id for e in detect_engines(present_names(load(name)))]


def test_vllm_samples_keep_their_exposed_suffixes():
    snap = load("vllm.txt", taken_at=123.5)
    assert snap.taken_at == 123.5
    assert {"vllm:prompt_tokens_total", "vllm:time_to_first_token_seconds_bucket",
            "vllm:time_to_first_token_seconds_sum", "vllm:time_to_first_token_seconds_count"} <= set(snap.series)
    running = snap.series["vllm:num_requests_running"]
    assert ({"engine": "1", "model_name": "meta-llama/Llama-3.1-8B-Instruct"}, 9.0) in running
    buckets = {labels["le"]: v for labels, v in snap.series["vllm:time_to_first_token_seconds_bucket"]}
    assert buckets["0.02"] == 13.0 and buckets["+Inf"] == 152.0
    assert not any(name.endswith("_created") for name in snap.series)


def test_present_names_histogram_bases_counters_with_total():
    present = present_names(load("vllm.txt"))
    assert {"vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
            "vllm:inter_token_latency_seconds", "vllm:prompt_tokens_total", "vllm:num_preemptions_total",
            "vllm:kv_cache_usage_perc", "vllm:cache_config_info"} <= present
    assert "vllm:prompt_tokens" not in present  # the family name, not exposed
    assert "vllm:iteration_tokens_total" in present  # a histogram whose base ends in _total


@pytest.mark.parametrize(("fixture", "expected"), [
    ("vllm.txt", ["vllm"]), ("vllm_old.txt", ["vllm"]), ("vllm_underscore.txt", ["vllm"]),
    ("sglang.txt", ["sglang"]), ("tgi.txt", ["tgi"]), ("dcgm.txt", ["dcgm"]),
])
def test_engine_detection(fixture, expected):
    assert engine_ids(fixture) == expected


def test_resolve_new_old_and_underscore_names():
    vllm = load_engines()["vllm"]
    new, old, under = (present_names(load(n)) for n in ("vllm.txt", "vllm_old.txt", "vllm_underscore.txt"))
    assert vllm.resolve("kv_usage", new) == "vllm:kv_cache_usage_perc"
    assert vllm.resolve("kv_usage", old) == "vllm:gpu_cache_usage_perc"
    assert vllm.resolve("itl", old) == "vllm:time_per_output_token_seconds"
    assert vllm.resolve("prefix_hits", old) == "vllm:gpu_prefix_cache_hits_total"
    assert vllm.resolve("e2e", under) == "vllm_e2e_request_latency_seconds"
    assert vllm.resolve("generation_tokens", under) == "vllm_generation_tokens_total"


def test_sglang_tgi_dcgm_names():
    engines = load_engines()
    assert engines["sglang"].resolve("preemptions", present_names(load("sglang.txt"))) == \
        "sglang:num_retracted_requests_total"
    tgi = present_names(load("tgi.txt"))
    # TGI counters may lack _total; the parser adds it, and the map lists both spellings.
    assert engines["tgi"].resolve("request_success", tgi) == "tgi_request_success_total"
    assert engines["tgi"].resolve("itl", tgi) == "tgi_request_mean_time_per_token_duration"
    assert engines["tgi"].resolve("ttft", tgi) is None
    assert engines["dcgm"].resolve("fb_used", present_names(load("dcgm.txt"))) == "DCGM_FI_DEV_FB_USED"


def test_engine_and_dcgm_together():
    merged = present_names(load("vllm.txt")) | present_names(load("dcgm.txt"))
    assert sorted(e.id for e in detect_engines(merged)) == ["dcgm", "vllm"]


def test_bad_text_names_file_and_line():
    text = "# TYPE ok gauge\nok 1\nvllm:num_requests_running{engine=\"0\" 3\n"
    with pytest.raises(TriageError) as err:
        parse_metrics_text(text, 0.0, "http://127.0.0.1:8000/metrics")
    assert err.value.where == "http://127.0.0.1:8000/metrics"
    assert err.value.key == "line 3"
    assert "vllm:num_requests_running" in err.value.reason


@pytest.mark.parametrize("text", ["", "   \n", "<html><body>Login</body></html>\n"])
def test_empty_or_html_is_an_error(text):
    with pytest.raises(TriageError) as err:
        parse_metrics_text(text, 0.0, "scrape.txt")
    assert err.value.where == "scrape.txt"


# ---------------------------------------------------------------- scraping over HTTP


def pages() -> dict[str, tuple[int, str, str]]:
    return {"/metrics": (200, "text/plain; version=0.0.4; charset=utf-8", (FIXTURES / "vllm.txt").read_text()),
            "/login": (200, "text/html", "<html>sign in</html>"), "/secret": (401, "text/plain", "no")}


def test_scrape_and_two_scrapes():
    with fake_prometheus(FakeBehaviour(pages=pages())) as base:
        before = time.time()
        snap = scrape(base + "/metrics", timeout=2.0)
        assert snap.where == base + "/metrics" and snap.taken_at >= before
        assert "vllm:prompt_tokens_total" in snap.series
        first, second = two_scrapes(base + "/metrics", interval=0.05)
        assert second.taken_at - first.taken_at >= 0.05


@pytest.mark.parametrize(("path", "message"), [
    ("/nothing", "HTTP 404"), ("/login", "text/html, not Prometheus metrics text"), ("/secret", "HTTP 401"),
])
def test_scrape_http_problems(path, message):
    with fake_prometheus(FakeBehaviour(pages=pages(), status=404)) as base:
        with pytest.raises(TriageError, match=message) as err:
            scrape(base + path, timeout=2.0)
    assert err.value.where == base + path


def test_scrape_refused_and_slow():
    url = closed_port_url() + "metrics"
    with pytest.raises(TriageError, match=r"unreachable \(connection refused\)"):
        scrape(url, timeout=1.0)
    with fake_prometheus(FakeBehaviour(query_delay=5.0, delay_everything=True)) as base:
        began = time.monotonic()
        with pytest.raises(TriageError, match=r"no complete answer within 0\.5 s"):
            scrape(base + "/metrics", timeout=0.5)
        assert time.monotonic() - began < 3.5  # the server answers only after 5 s; slack for a loaded CI
