"""The OpenAI-compatible simulator: streaming and whole chat/text completions with exact token counts, the
scenario's timing as a client measures it, /metrics reflecting the requests, curl, errors, the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.prom_harness import stop_process
from triage.errors import TriageError
from triage.sources.metrics.openai_server import count_tokens, serve_openai
from triage.sources.metrics.simulator import MODEL_NAME

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def server_url(request: pytest.FixtureRequest) -> Iterator[str]:
    scenario = getattr(request, "param", "healthy")
    server = serve_openai(scenario, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def stream_chat(url: str, prompt: str, max_tokens: int, usage: bool = True) -> dict:
    """One streamed chat completion, timed as a load-test client times it."""
    body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "stream": True}
    if usage:
        body["stream_options"] = {"include_usage": True}
    start = time.perf_counter()
    chunks, times, text, last_usage, done = [], [], "", None, False
    with requests.post(url + "/v1/chat/completions", json=body, stream=True, timeout=60) as resp:
        assert resp.status_code == 200 and resp.headers["Content-Type"].startswith("text/event-stream")
        for line in resp.iter_lines():
            if not line:
                continue
            assert line.startswith(b"data: ")
            data = line[6:]
            if data == b"[DONE]":
                done = True
                continue
            obj = json.loads(data)
            chunks.append(obj)
            if obj.get("usage"):
                last_usage = obj["usage"]
            for choice in obj["choices"]:
                piece = choice["delta"].get("content")
                if piece:
                    times.append(time.perf_counter() - start)
                    text += piece
    return {"chunks": chunks, "times": times, "text": text, "usage": last_usage, "done": done,
            "e2e": time.perf_counter() - start}


def metric_values(url: str) -> dict[tuple[str, str], float]:
    text = requests.get(url + "/metrics", timeout=10).text
    out: dict[tuple[str, str], float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, s.labels.get("finished_reason", s.labels.get("le", "")))] = s.value
    return out


def test_streaming_chat_exact_tokens_usage_and_done(server_url: str):
    prompt = "Tell me, in a few words, why the sky is blue."
    got = stream_chat(server_url, prompt, 17)
    content = [c for c in got["chunks"] if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert len(content) == 17 == len(got["times"])  # one token per chunk
    assert got["chunks"][0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert content[-1]["choices"][0]["finish_reason"] == "length"
    assert all(c["choices"][0]["finish_reason"] is None for c in content[:-1])
    assert got["usage"] == {"prompt_tokens": count_tokens(prompt), "completion_tokens": 17,
                            "total_tokens": count_tokens(prompt) + 17}
    assert count_tokens(prompt) == 14 and count_tokens(got["text"]) == 17 and got["done"]
    assert got["chunks"][-1]["choices"] == [] and all(c["model"] == MODEL_NAME for c in got["chunks"])
    assert got["times"] == sorted(got["times"])


def test_stream_without_usage_and_completions_stream(server_url: str):
    got = stream_chat(server_url, "hi", 3, usage=False)
    assert got["usage"] is None and got["done"] and count_tokens(got["text"]) == 3
    body = {"model": MODEL_NAME, "prompt": "one two three", "max_tokens": 5, "stream": True,
            "stream_options": {"include_usage": True}}
    with requests.post(server_url + "/v1/completions", json=body, stream=True, timeout=30) as resp:
        lines = [ln[6:] for ln in resp.iter_lines() if ln]
    assert lines[-1] == b"[DONE]"
    objs = [json.loads(x) for x in lines[:-1]]
    assert [o["choices"][0]["text"] for o in objs[:-1]] == ["the", " model", " writes", " one", " word"]
    assert objs[-1]["usage"] == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
    assert all(o["object"] == "text_completion" for o in objs)


def test_non_streaming_chat_and_completion(server_url: str):
    chat = requests.post(server_url + "/v1/chat/completions", timeout=30, json={
        "model": MODEL_NAME, "messages": [{"role": "system", "content": "be brief"},
                                          {"role": "user", "content": [{"type": "text", "text": "hello world"}]}],
        "max_completion_tokens": 9}).json()
    assert chat["object"] == "chat.completion" and chat["choices"][0]["finish_reason"] == "length"
    assert count_tokens(chat["choices"][0]["message"]["content"]) == 9
    assert chat["usage"] == {"prompt_tokens": 4, "completion_tokens": 9, "total_tokens": 13}
    comp = requests.post(server_url + "/v1/completions", timeout=30, json={"prompt": "a b", "max_tokens": 4}).json()
    assert comp["choices"][0]["text"] == "the model writes one" and comp["usage"]["completion_tokens"] == 4
    free = requests.post(server_url + "/v1/completions", timeout=60, json={"prompt": "a b"}).json()
    assert free["choices"][0]["finish_reason"] == "stop" and free["usage"]["completion_tokens"] >= 1


def test_models_health_and_errors(server_url: str):
    models = requests.get(server_url + "/v1/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == [MODEL_NAME]
    assert requests.get(server_url + "/health", timeout=10).status_code == 200
    post = server_url + "/v1/chat/completions"
    cases = [
        (requests.post(post, data=b"{not json", timeout=10), 400, "not JSON"),
        (requests.post(post, json={"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, timeout=10),
         400, "max_tokens"),
        (requests.post(post, json={"model": "other", "messages": [{"role": "user", "content": "x"}]}, timeout=10),
         404, "does not exist"),
        (requests.post(post, json={"messages": [{"role": "user", "content": "x"}], "max_tokens": 200_000},
                       timeout=10), 400, "maximum context length"),
        (requests.post(post, json={"messages": []}, timeout=10), 400, "messages"),
        (requests.get(server_url + "/nothing", timeout=10), 404, "no route"),
    ]
    for resp, code, words in cases:
        assert resp.status_code == code and words in resp.json()["message"]


def test_metrics_reflect_the_requests(server_url: str):
    before = metric_values(server_url)
    sizes = [5, 8, 13, 21]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda n: stream_chat(server_url, "word " * 50, n), sizes))
    assert [r["usage"]["completion_tokens"] for r in results] == sizes
    after = metric_values(server_url)

    def delta(name: str, sub: str = "") -> float:
        return after[(name, sub)] - before.get((name, sub), 0.0)

    assert delta("vllm:request_success_total", "length") == 4
    assert delta("vllm:generation_tokens_total") == sum(sizes)
    assert delta("vllm:prompt_tokens_total") == 4 * 50
    assert delta("vllm:time_to_first_token_seconds_count") == 4
    assert delta("vllm:request_generation_tokens_sum") == sum(sizes)
    assert delta("vllm:e2e_request_latency_seconds_count") == 4
    assert after[("vllm:num_requests_running", "")] == 0 and after[("vllm:num_requests_waiting", "")] == 0
    assert after[("vllm:kv_cache_usage_perc", "")] == 0


@pytest.mark.parametrize("server_url", ["queueing"], indirect=True)
def test_queueing_scenario_queues_beyond_max_num_seqs(server_url: str):
    """max_num_seqs is 16: of 32 simultaneous requests, the second 16 wait for the first to finish."""
    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(lambda _: stream_chat(server_url, "q " * 20, 40), range(32)))
    assert len(results) == 32
    # the server's own queue-time histogram, not the client's clock (32 client threads on a busy machine start
    # late and read their times late): at least the second 16 waited, and none of them briefly
    values = metric_values(server_url)
    count = values[("vllm:request_queue_time_seconds_count", "")]
    waited = count - values[("vllm:request_queue_time_seconds_bucket", "0.3")]
    assert count == 32 and waited >= 16
    assert values[("vllm:request_queue_time_seconds_sum", "")] / 32 > 0.2


@pytest.mark.parametrize("server_url", ["prefill_bound"], indirect=True)
def test_prefill_bound_scenario_has_a_slow_first_token(server_url: str):
    """0.2 ms per prefill token on a 3000-token prompt (15 % cached at most a few blocks more): TTFT > 0.35 s,
    while decode steps stay near step_base_s."""
    got = stream_chat(server_url, "p " * 3000, 6)
    assert got["times"][0] > 0.35
    gaps = [b - a for a, b in zip(got["times"], got["times"][1:])]
    assert max(gaps) < got["times"][0] / 3


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_cli_serves_openai_and_curl_streams(tmp_path: Path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "triage", "simulate", "--scenario", "healthy", "--openai",
                             "--port", "0"], stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "OpenAI-compatible" in line
        base = line.split("http://", 1)[1].split("/v1", 1)[0]
        body = json.dumps({"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                           "stream": True, "stream_options": {"include_usage": True}})
        out = subprocess.run(["curl", "-sN", f"http://{base}/v1/chat/completions", "-H",
                              "Content-Type: application/json", "-d", body],
                             capture_output=True, text=True, timeout=30)
        events = [ln[6:] for ln in out.stdout.splitlines() if ln.startswith("data: ")]
        assert events[-1] == "[DONE]" and json.loads(events[-2])["usage"]["completion_tokens"] == 4
        assert "".join(json.loads(e)["choices"][0]["delta"].get("content", "") for e in events[:-2]) == \
            "the model writes one"
    finally:
        stop_process(proc)


def test_port_in_use_and_unknown_scenario():
    server = serve_openai("healthy", 0)
    try:
        with pytest.raises(TriageError, match="cannot listen"):
            serve_openai("healthy", server.server_address[1])
    finally:
        server.server_close()
    with pytest.raises(TriageError, match="valid: healthy"):
        serve_openai("nope", 0)


def test_per_request_metrics_block_like_vllm():
    """--per-request-metrics: the final usage chunk carries vLLM's engine-side timing block."""
    server = serve_openai("healthy", 0, per_request_metrics=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        got = stream_chat(f"http://127.0.0.1:{server.server_address[1]}", "one two three", 6)
        final = got["chunks"][-1]
        m = final["metrics"]
        assert final["choices"] == [] and final["usage"]["completion_tokens"] == 6
        assert set(m) == {"time_to_first_token_ms", "generation_time_ms", "queue_time_ms", "mean_itl_ms",
                          "tokens_per_second"}
        assert m["queue_time_ms"] >= 0 and m["time_to_first_token_ms"] > 0 and m["generation_time_ms"] > 0
        assert m["mean_itl_ms"] == pytest.approx(m["generation_time_ms"] / 5)
        assert m["time_to_first_token_ms"] / 1e3 <= got["times"][0]  # engine TTFT excludes queue and network
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
