"""Test harness: a real Prometheus over a backfilled TSDB with known vLLM-like data, and fake faulty servers."""

from __future__ import annotations

import json
import math
import shutil
import socket
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
READY_DEADLINE = 30.0
STEP = 15  # seconds between generated samples
SPAN = 1800  # 30 min of data ending at END
MODEL = "m"
OTHER_MODEL = "other"

# Known generator values (per engine label). Counters grow by a constant per step, so every rate is exact.
PROMPT_PER_STEP = {"0": 150, "1": 75}  # → 10/s + 5/s = 15/s
GENERATION_PER_STEP = {"0": 300, "1": 300}  # → 40/s in total
RUNNING = {"0": 3, "1": 5}  # sum 8; model OTHER_MODEL adds OTHER_RUNNING
OTHER_RUNNING = 100
KV_FLAT = 0.3  # engine "1"; engine "0" ramps 0.2 → 0.8 over the 30 min (see kv_ramp)
# Cumulative buckets added per step: (le, count). e2e: p50 = 0.25, p90 = 0.75, mean = 0.4.
E2E_STEP = [(0.1, 2), (0.25, 5), (0.5, 8), (1.0, 10), (math.inf, 10)]
E2E_SUM_STEP = 4.0
# ttft: 1 in 20 above the last finite bound, so p99 falls in +Inf and PromQL answers 2.5.
TTFT_STEP = [(0.5, 5), (1.0, 12), (2.5, 19), (math.inf, 20)]
TTFT_SUM_STEP = 20.0
GPU_UTIL = {"0": 90.0, "1": 70.0}
CACHE_CONFIG = {"block_size": "16", "num_gpu_blocks": "5080", "enable_prefix_caching": "True",
                "gpu_memory_utilization": "0.9", "engine": "0"}


def kv_ramp(i: int, steps: int) -> float:
    return 0.2 + 0.6 * i / steps


def waiting(i: int) -> int:
    return i % 5


# ---------------------------------------------------------------- OpenMetrics generator


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else ""


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(bound)


def _family(lines: list[str], name: str, kind: str, rows: Iterator[str]) -> None:
    lines.append(f"# TYPE {name} {kind}")
    lines.extend(rows)


def _gauge_rows(name: str, labels: dict[str, str], times: list[int], value: Callable[[int], float]) -> Iterator[str]:
    for i, t in enumerate(times):
        yield f"{name}{_labels(**labels)} {value(i)} {t}"


def _hist_rows(name: str, labels: dict[str, str], times: list[int], buckets: list[tuple[float, int]],
               sum_step: float) -> Iterator[str]:
    for i, t in enumerate(times):
        for le, n in buckets:
            yield f"{name}_bucket{_labels(**labels, le=_le(le))} {n * i} {t}"
        yield f"{name}_sum{_labels(**labels)} {sum_step * i} {t}"
        yield f"{name}_count{_labels(**labels)} {buckets[-1][1] * i} {t}"


def generate_openmetrics(end: int, span: int = SPAN, step: int = STEP) -> str:
    """vLLM-like counters, gauges, histograms and an info gauge plus DCGM gauges, every ``step`` s up to ``end``."""
    times = list(range(end - span, end + 1, step))
    steps = len(times) - 1
    lines: list[str] = []
    eng = {e: {"engine": e, "model_name": MODEL} for e in ("0", "1")}
    _family(lines, "vllm:prompt_tokens", "counter", (row for e in eng for row in _gauge_rows(
        "vllm:prompt_tokens_total", eng[e], times, lambda i, e=e: 1000 + PROMPT_PER_STEP[e] * i)))
    _family(lines, "vllm:generation_tokens", "counter", (row for e in eng for row in _gauge_rows(
        "vllm:generation_tokens_total", eng[e], times, lambda i, e=e: GENERATION_PER_STEP[e] * i)))
    running = [*((eng[e], RUNNING[e]) for e in eng), ({"engine": "0", "model_name": OTHER_MODEL}, OTHER_RUNNING)]
    _family(lines, "vllm:num_requests_running", "gauge", (row for labels, v in running for row in _gauge_rows(
        "vllm:num_requests_running", labels, times, lambda i, v=v: v)))
    _family(lines, "vllm:num_requests_waiting", "gauge", _gauge_rows(
        "vllm:num_requests_waiting", eng["0"], times, waiting))
    _family(lines, "vllm:kv_cache_usage_perc", "gauge", (*_gauge_rows(
        "vllm:kv_cache_usage_perc", eng["0"], times, lambda i: kv_ramp(i, steps)), *_gauge_rows(
        "vllm:kv_cache_usage_perc", eng["1"], times, lambda i: KV_FLAT)))
    _family(lines, "vllm:e2e_request_latency_seconds", "histogram", _hist_rows(
        "vllm:e2e_request_latency_seconds", eng["0"], times, E2E_STEP, E2E_SUM_STEP))
    _family(lines, "vllm:time_to_first_token_seconds", "histogram", _hist_rows(
        "vllm:time_to_first_token_seconds", eng["0"], times, TTFT_STEP, TTFT_SUM_STEP))
    _family(lines, "vllm:cache_config_info", "gauge", _gauge_rows(
        "vllm:cache_config_info", CACHE_CONFIG, times, lambda i: 1))
    _family(lines, "DCGM_FI_DEV_GPU_UTIL", "gauge", (row for g, v in GPU_UTIL.items() for row in _gauge_rows(
        "DCGM_FI_DEV_GPU_UTIL", {"gpu": g, "Hostname": "node-a"}, times, lambda i, v=v: v)))
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- a real Prometheus


@dataclass
class PromServer:
    url: str
    process: subprocess.Popen
    folder: Path
    end: int  # unix seconds of the last generated sample
    auth: tuple[str, str] | None = None
    log: Path = field(default_factory=Path)

    def stop(self) -> None:
        stop_process(self.process)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_process(process: subprocess.Popen, grace: float = 10.0) -> None:
    """Stop a process this test started, by its PID: SIGTERM, then SIGKILL after ``grace`` seconds."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


def bcrypt_hash(password: str) -> str | None:
    """A bcrypt hash for Prometheus' web config: htpasswd, else the bcrypt package, else crypt(3), else None."""
    if shutil.which("htpasswd"):
        out = subprocess.run(["htpasswd", "-nbBC", "10", "u", password], capture_output=True, text=True, check=True)
        return out.stdout.strip().split(":", 1)[1]
    try:
        import bcrypt
    except ImportError:
        return _crypt_bcrypt(password)
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=10)).decode()


def _crypt_bcrypt(password: str) -> str | None:
    """The standard library's crypt (libxcrypt) when it offers bcrypt; None when it does not (or is gone)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import crypt
        except ImportError:
            return None
    if crypt.METHOD_BLOWFISH not in crypt.methods:
        return None
    hashed = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10))
    return hashed if hashed and hashed.startswith("$2") else None


def backfill(openmetrics: str, folder: Path) -> Path:
    """Write the OpenMetrics text and turn it into TSDB blocks with promtool."""
    source, data = folder / "input.om", folder / "data"
    source.write_text(openmetrics, encoding="utf-8")
    data.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
                          capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise RuntimeError(f"promtool backfill failed: {done.stderr[-2000:]}")
    return data


def _config_files(folder: Path, auth: tuple[str, str] | None) -> list[str]:
    config = folder / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 15s\nscrape_configs: []\n", encoding="utf-8")
    flags = [f"--config.file={config}"]
    if auth:
        hashed = bcrypt_hash(auth[1])
        if hashed is None:
            pytest.skip("no htpasswd (apache2-utils), no bcrypt package and no bcrypt in crypt(3): "
                        "cannot build a basic-auth web config")
        web = folder / "web.yml"
        web.write_text(f"basic_auth_users:\n  {auth[0]}: '{hashed}'\n", encoding="utf-8")
        flags.append(f"--web.config.file={web}")
    return flags


def wait_ready(server: PromServer, deadline: float = READY_DEADLINE) -> None:
    """Poll /-/ready until 200, the process dies, or the deadline passes."""
    stop_at = time.monotonic() + deadline
    while time.monotonic() < stop_at:
        if server.process.poll() is not None:
            raise RuntimeError(f"prometheus exited: {server.log.read_text(errors='replace')[-2000:]}")
        try:
            if requests.get(server.url + "/-/ready", auth=server.auth, timeout=1).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)  # poll interval; the loop is bounded by the deadline
    server.stop()
    raise RuntimeError(f"prometheus not ready after {deadline} s: {server.log.read_text(errors='replace')[-2000:]}")


def serve_openmetrics(tmp_path_factory, name: str, openmetrics, step: int):
    """A real Prometheus holding ``openmetrics(end)`` for a module's tests, ``end`` now rounded down to ``step``;
    the test is skipped where prometheus / promtool are not installed. Yields the server, stops it after."""
    if not (Path(PROMETHEUS).exists() and Path(PROMTOOL).exists()):
        pytest.skip("prometheus / promtool are not installed")
    end = int(time.time()) // step * step
    server = start_prometheus(tmp_path_factory.mktemp(name), openmetrics(end), end)
    yield server
    server.stop()


def start_prometheus(folder: Path, openmetrics: str, end: int, auth: tuple[str, str] | None = None) -> PromServer:
    return serve_tsdb(folder, backfill(openmetrics, folder), end, auth)


def serve_tsdb(folder: Path, data: Path, end: int, auth: tuple[str, str] | None = None) -> PromServer:
    """A Prometheus over the TSDB blocks in ``data`` (e.g. backfilled, plus recording-rule blocks)."""
    port = free_port()
    flags = [*_config_files(folder, auth), f"--storage.tsdb.path={data}", f"--web.listen-address=127.0.0.1:{port}",
             "--storage.tsdb.retention.time=30d", "--log.level=warn"]
    log = folder / "prometheus.log"
    with log.open("w") as sink:
        process = subprocess.Popen([PROMETHEUS, *flags], stdout=sink, stderr=subprocess.STDOUT, cwd=folder)
    server = PromServer(url=f"http://127.0.0.1:{port}", process=process, folder=folder, end=end, auth=auth, log=log)
    wait_ready(server)
    return server


def data_end(now: float | None = None) -> int:
    """'now' rounded down to the step: the time of the last generated sample."""
    now = time.time() if now is None else now
    return int(now // STEP * STEP)


def prometheus_fixture(name: str, auth: tuple[str, str] | None = None, scope: str = "module"):
    """A pytest fixture (registered as ``name``) yielding a running PromServer over generated data."""

    @pytest.fixture(scope=scope, name=name)
    def _fixture(tmp_path_factory):
        if not (Path(PROMETHEUS).exists() and Path(PROMTOOL).exists()):
            pytest.skip("prometheus / promtool are not installed")
        end = data_end()
        server = start_prometheus(tmp_path_factory.mktemp(name), generate_openmetrics(end), end, auth)
        yield server
        server.stop()

    return _fixture


# ---------------------------------------------------------------- fake servers for faults


@dataclass
class FakeBehaviour:
    """What the fake server does: the metric names it lists, a delay on queries (or on everything), a status
    for every answer or for queries only, and fixed ``pages`` (path → status, content type, body)."""

    names: list[str] = field(default_factory=lambda: ["vllm:num_requests_running"])
    query_delay: float = 0.0
    delay_everything: bool = False
    status: int = 200
    query_status: int = 200
    pages: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    release: threading.Event = field(default_factory=threading.Event)


def _handler(behaviour: FakeBehaviour) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server API)
            is_query = self.path.startswith("/api/v1/query")
            if behaviour.query_delay and (is_query or behaviour.delay_everything):
                behaviour.release.wait(behaviour.query_delay)  # the fault: answer late (released at teardown)
            status = behaviour.query_status if is_query and behaviour.status == 200 else behaviour.status
            if self.path in behaviour.pages:
                code, kind, text = behaviour.pages[self.path]
                self._send(code, text.encode(), kind)
            elif status != 200:
                self._json(status, {"status": "error", "errorType": "internal", "error": "fake failure for a test"})
            elif is_query:
                self._json(200, {"status": "success", "data": {"resultType": "vector", "result": []}})
            else:
                self._json(200, {"status": "success", "data": behaviour.names})

        do_POST = do_GET  # noqa: N815

        def _json(self, status: int, payload: dict) -> None:
            self._send(status, json.dumps(payload).encode(), "application/json")

        def _send(self, status: int, body: bytes, kind: str) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)

        def log_message(self, *args) -> None:
            pass

    return Handler


@contextmanager
def fake_prometheus(behaviour: FakeBehaviour) -> Iterator[str]:
    """A local HTTP server imitating Prometheus' API with the given fault; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(behaviour))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        behaviour.release.set()
        server.shutdown()
        server.server_close()


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (connection refused)."""
    return f"http://127.0.0.1:{free_port()}/"


def five_minutes_ago() -> int:
    """A data end on a 5-minute boundary in the recent past, so time pickers can name it exactly."""
    return int(time.time() // 300 * 300) - 300


@contextmanager
def simulated_prometheus(folder: Path, scenario: str, minutes: float, seed: int, end: int) -> Iterator[PromServer]:
    """A real Prometheus backfilled with ``minutes`` of the simulator's ``scenario`` ending at ``end``."""
    from triage.sources.metrics.simulator import write_openmetrics

    source = folder / "sim.om"
    write_openmetrics(source, scenario, minutes=minutes, step=15, end=end, seed=seed)
    server = start_prometheus(folder, source.read_text(), end)
    try:
        yield server
    finally:
        server.stop()
