"""One /metrics scrape is enough: diagnosed since the server started; self-contradicting histograms reported."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.cli_tools import python_m_triage, run_triage
from triage.knowledge.needs import Need
from triage.sources.metrics.exposition import parse_metrics_text
from triage.sources.metrics.since_start import SinceStartWindow, implausible_histograms, looks_like_metrics

ROOT = Path(__file__).resolve().parent.parent
VLLM = (ROOT / "tests" / "fixtures" / "metrics" / "vllm.txt").read_text()
SCRAPED_AT = 1_736_100_000.0
STARTED = SCRAPED_AT - 3600.0
START_LINE = f"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {STARTED}\n"


def window(text: str) -> SinceStartWindow:
    return SinceStartWindow(parse_metrics_text(text, SCRAPED_AT, "scrape.txt"))


def triage(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """The CLI in this process (tests/cli_tools.py); reading standard input launches the real `python -m triage`."""
    return run_triage(*args, stdin=stdin)


def test_detection_is_by_content() -> None:
    assert looks_like_metrics(VLLM.encode())
    assert not looks_like_metrics(b"ttft,e2e\n1,2\n")
    assert not looks_like_metrics(b"# TYPE http_requests_total counter\nhttp_requests_total 3\n")  # not an engine


def test_counters_and_histograms_are_cumulative_since_the_start() -> None:
    w = window(VLLM + START_LINE)
    read = w.read([Need("quantile", "ttft", 0.5), Need("hist_mean", "ttft"), Need("rate", "request_success"),
                   Need("gauge_mean", "running")])
    assert read.values[Need("hist_mean", "ttft")] == pytest.approx(48.6 / 152)
    assert read.values[Need("gauge_mean", "running")] == 21  # the instant's value, both engines
    success = sum(v for _, v in parse_metrics_text(VLLM, 0, "x").series["vllm:request_success_total"])
    assert read.values[Need("rate", "request_success")] == pytest.approx(success / 3600)
    assert w.window_seconds == 3600


def test_without_a_start_time_rates_are_not_measurable_and_never_zero() -> None:
    read = window(VLLM).read([Need("rate", "request_success"), Need("hist_mean", "ttft")])
    assert read.values[Need("rate", "request_success")] is None
    assert "process_start_time_seconds" in read.missing[Need("rate", "request_success")]
    assert read.values[Need("hist_mean", "ttft")] == pytest.approx(48.6 / 152)


MODEL = 'model_name="meta-llama/Llama-3.1-8B-Instruct"}'
TTFT_SUM = 'vllm:time_to_first_token_seconds_sum{engine="0",' + MODEL
TTFT_BUCKET = 'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",' + MODEL


@pytest.mark.parametrize("old, new, reason", [
    (TTFT_SUM + " 48.6", TTFT_SUM + " 5.0", "so the sum is at least 9.2"),
    (TTFT_BUCKET + " 140.0", TTFT_BUCKET + " 40.0", "cumulative bucket counts that fall"),
])
def test_a_histogram_that_contradicts_itself_is_implausible_not_healthy(old: str, new: str, reason: str) -> None:
    text = VLLM.replace(old, new)
    assert text != VLLM
    (bad,) = implausible_histograms(parse_metrics_text(text, SCRAPED_AT, "x"))
    assert bad.name == "vllm:time_to_first_token_seconds" and reason in bad.reason
    read = window(text + START_LINE).read([Need("quantile", "ttft", 0.99), Need("hist_mean", "e2e")])
    assert read.values[Need("quantile", "ttft", 0.99)] is None
    assert read.missing[Need("quantile", "ttft", 0.99)].startswith("implausible metrics")
    assert read.values[Need("hist_mean", "e2e")] is not None  # the other histograms are still read
    assert any("implausible metrics" in e for e in read.errors)


def test_the_real_fixture_is_plausible() -> None:
    assert implausible_histograms(parse_metrics_text(VLLM, SCRAPED_AT, "x")) == []


def test_cli_labels_the_window_since_the_server_started(tmp_path: Path) -> None:
    path = tmp_path / "metrics.txt"
    path.write_text(VLLM + START_LINE)
    os.utime(path, (SCRAPED_AT, SCRAPED_AT))
    out = triage("diagnose", str(path), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["window"].startswith("since the server started") and data["uptime_s"] == 3600
    assert data["format"] == "metrics:vllm" and data["implausible"] == []
    text = triage("diagnose", str(path)).stdout
    assert "window: since the server started" in text and "uptime 1 h" in text


def test_a_pasted_scrape_on_standard_input() -> None:
    out = python_m_triage("diagnose", "-", stdin=VLLM)
    assert out.returncode == 0, out.stderr
    assert "one /metrics scrape" in out.stdout and "rates not measurable" in out.stdout
