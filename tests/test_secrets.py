"""A planted password never appears in any output of any command: text, JSON, Markdown, errors or logs.

Real servers only: a basic-auth Prometheus (Debian's) and the vLLM simulator serving /metrics on 127.0.0.1."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.prom_harness import prometheus_fixture
from triage.cli import main
from triage.sources.metrics.profiles import profile_for_url, resolve_profile
from triage.sources.metrics.simulator import serve

USER_PASSWORD = ("triage", "PLANTED-pass-9c4d")
PLANTED = USER_PASSWORD[1]
TOKEN = "PLANTED-query-token-5b1e"
BENCH = Path(__file__).parent / "fixtures" / "bench" / "generic_requests.csv"
prom_auth = prometheus_fixture("prom_auth", auth=USER_PASSWORD)


@pytest.fixture(scope="module")
def simulator():
    server = serve("queueing", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _with_credentials(url: str) -> str:
    return url.replace("http://", f"http://{USER_PASSWORD[0]}:{PLANTED}@")


def run(capsys, caplog, argv: list[str]) -> tuple[int, str]:
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        code = main(argv)
    out, err = capsys.readouterr()
    return code, out + err + caplog.text


def assert_clean(text: str) -> None:
    assert PLANTED not in text and TOKEN not in text, text[-2000:]


def test_profile_from_a_url_moves_credentials_out_of_it():
    profile = profile_for_url(f"http://admin:{PLANTED}@127.0.0.1:9090/")
    assert profile.url == "http://127.0.0.1:9090/" and profile.auth() == ("admin", PLANTED)
    assert PLANTED not in repr(profile) and PLANTED not in profile.label()


def test_profile_by_name_from_env_and_secrets(tmp_path: Path):
    env = {"TRIAGE_PROMETHEUS_PROD_URL": "http://127.0.0.1:9090", "TRIAGE_PROMETHEUS_PROD_PASSWORD": PLANTED,
           "TRIAGE_PROMETHEUS_PROD_USERNAME": "admin"}
    secrets = tmp_path / "secrets.toml"
    secrets.write_text("", encoding="utf-8")
    assert resolve_profile("prod", secrets, env).auth() == ("admin", PLANTED)
    secrets.write_text(f'[prometheus.staging]\nurl = "http://127.0.0.1:9091"\ntoken = "{TOKEN}"\n', encoding="utf-8")
    staging = resolve_profile("staging", secrets, {})
    assert staging.request_headers()["Authorization"] == f"Bearer {TOKEN}" and staging.label() == "profile 'staging'"


@pytest.mark.prometheus
def test_every_prometheus_output_is_clean(capsys, caplog, prom_auth, monkeypatch, tmp_path):
    end = datetime.fromtimestamp(prom_auth.end, UTC).isoformat()
    url = _with_credentials(prom_auth.url)
    monkeypatch.setenv("TRIAGE_PROMETHEUS_PROD_URL", prom_auth.url)
    monkeypatch.setenv("TRIAGE_PROMETHEUS_PROD_USERNAME", USER_PASSWORD[0])
    monkeypatch.setenv("TRIAGE_PROMETHEUS_PROD_PASSWORD", PLANTED)
    window = ["--window", "15m", "--end", end]
    outputs = []
    for source in (url, "prod"):
        for argv in (["diagnose", "--prometheus", source, *window], ["diagnose", "--prometheus", source, *window,
                     "--json"], ["report", "--prometheus", source, *window]):
            code, text = run(capsys, caplog, argv)
            outputs.append(text)
            assert_clean(text)
            assert code in (0, 2)
    assert any("source: prometheus profile 'prod'" in t for t in outputs)  # a named profile, by name
    assert any(f"source: prometheus {prom_auth.url} 15m" in t for t in outputs)  # the URL, credentials moved out
    # wrong credentials and an unreachable server: the errors are clean too
    monkeypatch.setenv("TRIAGE_PROMETHEUS_PROD_PASSWORD", PLANTED + "-wrong")
    for source in ("prod", url.replace(PLANTED, PLANTED + "x"), "http://u:" + PLANTED + "@127.0.0.1:9/"):
        code, text = run(capsys, caplog, ["diagnose", "--prometheus", source, *window])
        assert code == 2 and text.startswith("error: ")
        assert_clean(text)


def test_every_endpoint_output_is_clean(capsys, caplog, simulator):
    url = _with_credentials(simulator) + f"/metrics?token={TOKEN}"
    for argv in (["diagnose", "--endpoint", url, "--interval", "1"],
                 ["diagnose", "--endpoint", url, "--interval", "1", "--json"],
                 ["report", "--endpoint", url, "--interval", "1"]):
        code, text = run(capsys, caplog, argv)
        assert code == 0, text
        assert_clean(text)
        assert "***@127.0.0.1" in text.replace("\\", "").replace("\u200b", "")  # the report's Markdown is escaped
    for argv in (["diagnose", "--endpoint", url.replace("/metrics", "/nothing"), "--interval", "1"],
                 ["report", "--endpoint", "http://u:" + PLANTED + "@127.0.0.1:9/metrics", "--interval", "1"]):
        code, text = run(capsys, caplog, argv)
        assert code == 2
        assert_clean(text)


def test_other_commands_never_print_the_environment(capsys, caplog, monkeypatch, tmp_path):
    monkeypatch.setenv("TRIAGE_PROMETHEUS_PROD_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("TRIAGE_PROMETHEUS_PROD_PASSWORD", PLANTED)
    monkeypatch.setenv("TRIAGE_PROMETHEUS_PROD_TOKEN", TOKEN)
    db = str(tmp_path / "log.db")
    for argv in (["tree"], ["memory"], ["diagnose", str(BENCH)], ["diagnose", str(BENCH), "--json"],
                 ["report", str(BENCH)], ["gate", str(BENCH), str(BENCH), "--save", "--db", db, "--n-boot", "1000"],
                 ["log", "--db", db, "list"], ["log", "--db", db, "show", "1"], ["log", "--db", db, "export"],
                 ["diagnose", "--prometheus", "nosuchprofile"]):
        _, text = run(capsys, caplog, argv)
        assert_clean(text)
