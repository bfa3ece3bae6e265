"""PrometheusWindow against a real backfilled Prometheus and the same data in VictoriaMetrics (known values), and
fake servers (faults); profiles."""

from __future__ import annotations

import json
import math
import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from tests.prom_harness import (
    CACHE_CONFIG,
    E2E_STEP,
    SPAN,
    FakeBehaviour,
    backfill,
    closed_port_url,
    data_end,
    fake_prometheus,
    generate_openmetrics,
    prometheus_fixture,
)
from tests.rules_harness import have_victoria, series_count, start_victoria, vmctl_import, with_import_padding
from triage.errors import TriageError
from triage.knowledge.engines import load_engines
from triage.knowledge.needs import Need
from triage.sources.metrics.profiles import Profile, list_profiles
from triage.sources.metrics.prometheus_window import PrometheusWindow, _error_detail
from triage.sources.metrics.snapshot_window import bucket_quantile

pytestmark = pytest.mark.prometheus

USER, PASSWORD = "triage", "s3cret-pass"
prom = prometheus_fixture("prom")
prom_auth = prometheus_fixture("prom_auth", auth=(USER, PASSWORD))
M = {"model_name": "m"}


def _victoria(folder, auth: tuple[str, str] | None = None):
    """VictoriaMetrics single-node holding the same generated data, imported by vmctl from promtool-built blocks;
    with ``auth``, restarted over the imported data behind basic auth."""
    if not have_victoria():
        pytest.fail("victoria-metrics / vmctl missing: scripts/test.sh installs the Debian package")
    end = data_end()
    text = generate_openmetrics(end)
    blocks = backfill(with_import_padding(text), folder)
    server = start_victoria(folder)
    try:
        vmctl_import(blocks, server, probe='{__name__=~"vllm:.+|DCGM_.+"}', expected=series_count(text))
        if auth:
            server.flush()
            server.stop()
            server = start_victoria(folder, auth=auth)
        yield SimpleNamespace(url=server.url, end=end)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def victoria(tmp_path_factory):
    yield from _victoria(tmp_path_factory.mktemp("victoria"))


@pytest.fixture(scope="module")
def victoria_auth(tmp_path_factory):
    yield from _victoria(tmp_path_factory.mktemp("victoria_auth"), auth=(USER, PASSWORD))


@pytest.fixture(scope="module", params=["prometheus", "victoria"])
def store(request):
    """Each known-value test runs against Prometheus and against VictoriaMetrics (one server of each per module)."""
    server = request.getfixturevalue("prom" if request.param == "prometheus" else "victoria")
    return SimpleNamespace(name=request.param, url=server.url, end=server.end)


@pytest.fixture(scope="module", params=["prometheus", "victoria"])
def store_auth(request):
    """A store behind basic auth: Prometheus (web config) and VictoriaMetrics (-httpAuth.*)."""
    server = request.getfixturevalue("prom_auth" if request.param == "prometheus" else "victoria_auth")
    return SimpleNamespace(name=request.param, url=server.url, end=server.end)


VLLM_NAMES = ["vllm:num_requests_running", "vllm:prompt_tokens_total", "vllm:kv_cache_usage_perc",
              "vllm:e2e_request_latency_seconds_bucket"]


def at(unix: float) -> datetime:
    return datetime.fromtimestamp(unix, tz=UTC)


def window(server, seconds: int = 600, ago: int = 0, **kwargs) -> PrometheusWindow:
    end = server.end - ago
    kwargs.setdefault("match", M)
    return PrometheusWindow(kwargs.pop("target", server.url), at(end - seconds), at(end), **kwargs)


def _utc_days(start: float, end: float) -> set:
    return {at(start).date(), at(end).date()}


def read(win: PrometheusWindow, *needs: Need):
    return win.read(list(needs))


# ---------------------------------------------------------------- known values


def test_engine_and_addon_detected(store):
    win = window(store)
    assert win.engine.id == "vllm" and [a.id for a in win.addons] == ["dcgm"]
    assert win.window_seconds == 600


def test_rates_and_gauges_match_the_generator(store):
    needs = {
        "prompt": Need("rate", "prompt_tokens"), "gen": Need("rate", "generation_tokens"),
        "run_mean": Need("gauge_mean", "running"), "run_max": Need("gauge_max", "running"),
        "run_last": Need("gauge_last", "running"), "wait_max": Need("gauge_max", "waiting"),
        "wait_mean": Need("gauge_mean", "waiting"), "kv_max": Need("gauge_max", "kv_usage"),
        "kv_last": Need("gauge_last", "kv_usage"), "kv_mean": Need("gauge_mean", "kv_usage"),
        "gpu": Need("gauge_max", "gpu_util", engine="dcgm"),
    }
    r = window(store).read(list(needs.values()))
    v = {k: r.values[n] for k, n in needs.items()}
    assert r.errors == []
    assert v["prompt"] == pytest.approx(15.0) and v["gen"] == pytest.approx(40.0)
    assert (v["run_mean"], v["run_max"], v["run_last"]) == (8.0, 8.0, 8.0)
    assert v["wait_max"] == 4.0 and v["wait_mean"] == pytest.approx(2.0, abs=0.25)
    # kv: max across engines = engine 0's ramp, 0.6 → 0.8 over the last 10 minutes
    assert v["kv_max"] == pytest.approx(0.8, abs=0.01) and v["kv_last"] == pytest.approx(0.8, abs=1e-9)
    assert v["kv_mean"] == pytest.approx(0.7, abs=0.02)
    assert v["gpu"] == 90.0  # percent: max across GPUs, not a sum


def test_quantiles_and_mean_match_hand_computation(store):
    needs = [Need("quantile", "e2e", q=q) for q in (0.5, 0.9, 0.99)] + [
        Need("hist_mean", "e2e"), Need("quantile", "ttft", q=0.99), Need("quantile", "ttft", q=0.5),
        Need("quantile", "ttft", q=0.1)]
    r = window(store).read(needs)
    got = [r.values[n] for n in needs]
    # e2e per step: le 0.1:2, 0.25:5, 0.5:8, 1:10 → p50 on the 0.25 bound, p90 = 0.5 + 0.5·1/2, p99 = 0.5 + 0.5·1.9/2
    # ttft per step: 0.5:5, 1:12, 2.5:19, +Inf:20 → p99 in +Inf = 2.5; p50 = 0.5 + 0.5·5/7; p10 = 0.5·2/5
    expected = [0.25, 0.75, 0.975, 0.4, 2.5, 0.5 + 0.5 * 5 / 7, 0.2]
    assert got == pytest.approx(expected)
    # the in-memory implementation agrees with Prometheus on the same buckets
    assert [bucket_quantile(q, E2E_STEP) for q in (0.5, 0.9, 0.99)] == pytest.approx(got[:3])


def test_info_labels(store):
    need = Need("info", "cache_config")
    assert window(store, match=None).read([need]).values[need] == CACHE_CONFIG


def test_match_filter(store):
    need = Need("gauge_last", "running")
    assert read(window(store, match=None), need).values[need] == 108.0
    assert read(window(store, match={"model_name": "other"}), need).values[need] == 100.0


def test_range_series_has_the_requested_points(store):
    rate, gauge, info = Need("rate", "prompt_tokens"), Need("gauge_last", "running"), Need("info", "cache_config")
    out = window(store).series([rate, gauge, info], points=20)
    assert len(out[rate]) == 20 and len(out[gauge]) == 20 and out[info] == []
    assert out[rate][-1].t == store.end and out[rate][1].t - out[rate][0].t == 30
    assert all(p.value == pytest.approx(15.0) for p in out[rate])


def test_missing_metric_is_none_with_the_engine_reason(store):
    need = Need("rate", "preemptions")
    r = read(window(store), need)
    assert r.values[need] is None and r.errors == []
    assert r.missing[need] == load_engines()["vllm"].metric("preemptions").missing.en


def test_empty_window_gives_none_and_a_message(store):
    needs = [Need("rate", "prompt_tokens"), Need("gauge_mean", "running")]
    r = window(store, ago=5 * 3600).read(needs)  # hours before the first sample
    assert all(r.values[n] is None for n in needs)
    # Prometheus lists no metric name in the window, so nothing is queried. VictoriaMetrics' name index is per UTC
    # day: a window on a day that holds samples lists that day's names, so each need is queried and finds none;
    # a window on an earlier day (a run just after midnight UTC) lists no name, as Prometheus does
    shares_a_day = _utc_days(store.end - 5 * 3600 - 600, store.end - 5 * 3600) & _utc_days(store.end - SPAN, store.end)
    reason = "no samples of" if store.name == "victoria" and shares_a_day else "no data in this window"
    assert all(reason in r.missing[n] for n in needs)
    assert r.errors and "no samples between" in r.errors[0]
    assert window(store, ago=5 * 3600).series(needs) == {n: [] for n in needs}


# ---------------------------------------------------------------- faults


def test_prometheus_down_is_unreachable():
    url = closed_port_url()
    now = datetime.now(UTC)
    with pytest.raises(TriageError) as err:
        PrometheusWindow(url, now - timedelta(minutes=10), now, timeout=2.0)
    assert err.value.reason == f"Prometheus at {url} is unreachable (connection refused)"


def test_slow_queries_time_out_concurrently_within_the_timeout():
    behaviour = FakeBehaviour(names=VLLM_NAMES, query_delay=10.0)
    now = datetime.now(UTC)
    needs = [Need("rate", "prompt_tokens"), Need("gauge_mean", "running"), Need("gauge_max", "kv_usage"),
             Need("quantile", "e2e", q=0.9), Need("gauge_last", "running")]
    with fake_prometheus(behaviour) as url:
        win = PrometheusWindow(url, now - timedelta(minutes=10), now, timeout=1.0)
        began = time.monotonic()
        with pytest.raises(TriageError, match=r"query timed out after 1\.0 s"):
            win.read(needs)
        assert time.monotonic() - began < 5.0  # the server answers only after 10 s; slack for a loaded CI


def test_slow_server_times_out_at_construction():
    behaviour = FakeBehaviour(names=VLLM_NAMES, query_delay=10.0, delay_everything=True)
    now = datetime.now(UTC)
    with fake_prometheus(behaviour) as url:
        began = time.monotonic()
        with pytest.raises(TriageError, match=r"timed out after 1\.0 s"):
            PrometheusWindow(url, now - timedelta(minutes=10), now, timeout=1.0)
        assert time.monotonic() - began < 5.0  # the server answers only after 10 s; slack for a loaded CI


def test_http_500_is_a_clear_error():
    now = datetime.now(UTC)
    with fake_prometheus(FakeBehaviour(status=500)) as url:
        with pytest.raises(TriageError) as err:
            PrometheusWindow(url, now - timedelta(minutes=10), now, timeout=2.0)
    assert err.value.reason == f"Prometheus at {url} answered HTTP 500: internal: fake failure for a test"


def test_one_failing_query_lands_in_errors_not_an_exception():
    now = datetime.now(UTC)
    need = Need("gauge_mean", "running")
    with fake_prometheus(FakeBehaviour(names=VLLM_NAMES, query_status=500)) as url:
        r = PrometheusWindow(url, now - timedelta(minutes=10), now, timeout=2.0).read([need])
    assert r.values[need] is None
    assert r.errors == [f"gauge_mean running (vllm:num_requests_running): Prometheus at {url} answered HTTP 500: "
                        "internal: fake failure for a test"]


def test_http_401_names_the_profile(store_auth):
    wrong = Profile(name="prod", url=store_auth.url, username=USER, password="wrong")
    with pytest.raises(TriageError) as err:
        window(store_auth, target=wrong)
    assert err.value.reason == "Prometheus answered HTTP 401: check the token / basic auth of profile 'prod'"
    with pytest.raises(TriageError, match="HTTP 401"):
        window(store_auth)  # no credentials at all


def test_basic_auth_profile_reads(store_auth):
    right = Profile(name="prod", url=store_auth.url + "/", username=USER, password=PASSWORD)
    need = Need("rate", "prompt_tokens")
    assert read(window(store_auth, target=right), need).values[need] == pytest.approx(15.0)


def test_bad_window_and_no_engine():
    now = datetime.now(UTC)
    with pytest.raises(TriageError, match="must end after it starts"):
        PrometheusWindow("http://127.0.0.1:9", now, now)
    with fake_prometheus(FakeBehaviour(names=["node_load1"])) as url:
        with pytest.raises(TriageError, match="no vLLM, SGLang or TGI metrics"):
            PrometheusWindow(url, now - timedelta(minutes=10), now, timeout=2.0)


# ---------------------------------------------------------------- profiles


SECRETS = """
[prometheus.prod]
url = "https://prom.example.com"
token = "tok-123-secret"
headers = { X-Scope-OrgID = "team-a" }
timeout = 3

[prometheus.lab]
url = "http://127.0.0.1:9090"
username = "alice"
password = "pw-secret"
verify_tls = false
"""


def test_profiles_from_secrets_and_env(tmp_path):
    path = tmp_path / "secrets.toml"
    path.write_text(SECRETS, encoding="utf-8")
    env = {"TRIAGE_PROMETHEUS_LAB_PASSWORD": "env-pw", "TRIAGE_PROMETHEUS_EDGE_URL": "http://edge:9090",
           "TRIAGE_PROMETHEUS_EDGE_VERIFY_TLS": "false", "UNRELATED": "x"}
    profiles = list_profiles(path, env)
    assert sorted(profiles) == ["edge", "lab", "prod"]
    prod, lab, edge = profiles["prod"], profiles["lab"], profiles["edge"]
    assert prod.request_headers() == {"X-Scope-OrgID": "team-a", "Authorization": "Bearer tok-123-secret"}
    assert prod.timeout == 3.0 and prod.auth() is None
    assert lab.auth() == ("alice", "env-pw") and lab.verify_tls is False
    assert edge.url == "http://edge:9090" and edge.verify_tls is False


def test_profile_repr_never_shows_secrets(tmp_path):
    path = tmp_path / "secrets.toml"
    path.write_text(SECRETS, encoding="utf-8")
    shown = " ".join(repr(p) + str(p) for p in list_profiles(path, {}).values())
    assert "tok-123-secret" not in shown and "pw-secret" not in shown and "team-a" not in shown
    assert "bearer token" in shown and "basic auth" in shown
    assert "hunter2" not in repr(Profile(name="u", url="https://bob:hunter2@prom.example.com"))


def test_bad_profiles_are_errors(tmp_path):
    path = tmp_path / "secrets.toml"
    path.write_text('[prometheus.x]\nurl = "prom:9090"\npassword = "pw-secret"\n', encoding="utf-8")
    with pytest.raises(TriageError, match="must start with http") as err:
        list_profiles(path, {})
    assert err.value.key == "prometheus.x.url" and "pw-secret" not in str(err.value)
    path.write_text("[prometheus.x\n", encoding="utf-8")
    with pytest.raises(TriageError, match="not valid TOML"):
        list_profiles(path, {})


def test_nan_guard():
    assert math.isnan(bucket_quantile(0.5, []))


@pytest.mark.parametrize("body, expected", [
    ({"status": "error", "errorType": "bad_data", "error": "parse error at char 5: unexpected 'É' \"x\""},
     "bad_data: parse error at char 5: unexpected 'É' \"x\""),
    ("proxy said: don't\n  retry", "proxy said: don't retry"),
    ("__import__('os').system('false')", "__import__('os').system('false')"),
])
def test_an_error_body_is_read_from_the_clients_repr_without_evaluating_it(body, expected):
    """prometheus-api-client reports an HTTP error as ``HTTP Status Code N (b'…')``: the repr of the server's
    bytes. Its escapes (quotes, UTF-8, newlines) are decoded; the text is never run as Python."""
    raw = json.dumps(body, ensure_ascii=False).encode() if isinstance(body, dict) else body.encode()
    assert _error_detail(repr(raw)) == expected
    assert _error_detail("not a repr") == "not a repr"
