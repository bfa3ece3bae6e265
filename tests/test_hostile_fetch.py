"""The one bounded fetch against a real misbehaving server on 127.0.0.1, and the address policy decided offline.

No test sends traffic beyond the loopback: link-local and metadata refusals are checked on the deciding
functions, which never connect (and literal addresses are never looked up)."""

from __future__ import annotations

import ipaddress
import time
from pathlib import Path

import pytest

from tests.hostile_server import PASSWD, hostile_server
from triage.errors import TriageError
from triage.sources.metrics.fetch import (
    Refused,
    ScrapePolicy,
    checked_addresses,
    fetch,
    parse_allow,
    policy_from_config,
    refusal,
)
from triage.sources.metrics.scrape import scrape

OPEN = ScrapePolicy()  # no allowlist: the tests' own default, independent of the environment
IP = ipaddress.ip_address


@pytest.fixture(scope="module")
def server():
    with hostile_server() as srv:
        yield srv


def test_good_metrics_still_scrape(server):
    snap = scrape(server.url + "/metrics", timeout=5, policy=OPEN)
    assert snap.series["vllm:num_requests_running"] == [({"model_name": "m"}, 3.0)]


@pytest.mark.parametrize("path", ["/trickle", "/trickle-headers"])
def test_trickling_server_is_cut_at_the_total_timeout(server, path):
    began = time.monotonic()
    with pytest.raises(TriageError, match=r"no complete answer within 1 s"):
        scrape(server.url + path, timeout=1.0, policy=OPEN)
    assert time.monotonic() - began < 4  # a trickle without the bound runs on for minutes; slack for a loaded CI


def test_endless_stream_stops_at_the_size_cap(server):
    began = time.monotonic()
    policy = ScrapePolicy(max_bytes=4 * 1024 * 1024)
    with pytest.raises(TriageError, match=r"larger than 4 MB \(after decompression\)"):
        scrape(server.url + "/endless", timeout=20, policy=policy)
    assert time.monotonic() - began < 10


def test_gzip_bomb_stops_at_the_size_cap(server):
    policy = ScrapePolicy(max_bytes=8 * 1024 * 1024)
    with pytest.raises(TriageError, match=r"larger than 8 MB \(after decompression\)"):
        fetch(server.url + "/bomb", timeout=20, policy=policy)


def test_redirect_loop_is_not_followed(server):
    before = server.hits.count("/loop")
    with pytest.raises(TriageError, match=r"HTTP 302: redirects to /loop; redirects are not followed"):
        scrape(server.url + "/loop", timeout=5, policy=OPEN)
    assert server.hits.count("/loop") == before + 1


def test_redirect_to_another_loopback_port_is_not_followed():
    with hostile_server() as target, hostile_server(redirect_to=target.url + "/passwd") as first:
        with pytest.raises(TriageError) as err:
            scrape(first.url + "/elsewhere", timeout=5, policy=OPEN)
        assert target.hits == []  # the other port was never asked
    assert f"redirects to {target.url}/passwd" in err.value.reason


def test_a_body_is_never_echoed(server):
    with pytest.raises(TriageError) as err:
        scrape(server.url + "/passwd", timeout=5, policy=OPEN)
    assert "root" not in err.value.line() and "/bin/bash" not in err.value.line()
    assert f"HTTP 200, text/plain, {len(PASSWD)} bytes" in err.value.reason
    assert "line 1 cannot be parsed" in err.value.reason


@pytest.mark.parametrize(("path", "message"), [
    ("/badle", "the le label must be a number"),
    ("/negative", "a counter, bucket or count must be a non-negative number"),
    ("/dup", "appears twice in one exposition"),
    ("/html", "answered text/html, not Prometheus metrics text"),
    ("/auth", "HTTP 401"),
])
def test_bad_answers_are_one_clear_line(server, path, message):
    with pytest.raises(TriageError, match=message) as err:
        scrape(server.url + path, timeout=5, policy=OPEN)
    assert "vllm:" not in err.value.line()  # nothing of the body


def test_credentials_in_the_url_are_never_in_a_message(server):
    with pytest.raises(TriageError) as err:
        scrape(server.url.replace("//", "//admin:PLANTED-pw@") + "/auth?access_token=PLANTED-tok", timeout=5,
               policy=OPEN)
    assert "PLANTED" not in err.value.line()
    assert "***@127.0.0.1" in err.value.where and "access_token=***" in err.value.where


# ---------------------------------------------------------------- the deciding functions (no connection)


@pytest.mark.parametrize("address", ["169.254.169.254", "169.254.170.2", "169.254.1.1", "fe80::1",
                                     "fd00:ec2::254", "100.100.100.200", "168.63.129.16",
                                     "::ffff:169.254.169.254", "[fe80::1]"])
def test_metadata_and_link_local_are_always_refused(address):
    host = address.strip("[]")
    assert refusal(address, [IP(host)], OPEN) is not None
    allow_all = parse_allow(["0.0.0.0/0", "::/0"])
    assert refusal(address, [IP(host)], allow_all) is not None  # no allowlist can let them in
    with pytest.raises(Refused):
        checked_addresses(address, 80, allow_all)  # a literal is decided without a lookup


@pytest.mark.parametrize("name", ["metadata.google.internal", "METADATA.GOOGLE.INTERNAL.", "instance-data",
                                  "metadata"])
def test_metadata_names_are_refused_before_any_lookup(name):
    with pytest.raises(Refused, match="cloud metadata host"):
        checked_addresses(name, 80, OPEN)


def test_a_host_resolving_to_a_metadata_address_is_refused():
    assert "metadata" in refusal("innocent.example", [IP("10.0.0.5"), IP("169.254.169.254")], OPEN)


def test_allowlist_by_cidr_and_by_name():
    policy = parse_allow(["10.0.0.0/8", "vllm.internal", " 192.168.1.7 "])
    assert refusal("10.1.2.3", [IP("10.1.2.3")], policy) is None
    assert refusal("vllm.internal", [IP("172.16.0.9")], policy) is None
    assert refusal("192.168.1.7", [IP("192.168.1.7")], policy) is None
    assert "not in the scrape allowlist" in refusal("127.0.0.1", [IP("127.0.0.1")], policy)
    assert refusal("127.0.0.1", [IP("127.0.0.1")], OPEN) is None


def test_an_allowlist_refuses_a_local_server_without_asking_it(server):
    with pytest.raises(TriageError, match="not in the scrape allowlist"):
        scrape(server.url + "/metrics?refused=1", timeout=5, policy=parse_allow(["10.0.0.0/8"]))
    assert "/metrics?refused=1" not in server.hits


def test_allowlist_from_env_and_secrets(tmp_path: Path):
    assert policy_from_config({"TRIAGE_SCRAPE_ALLOW": "127.0.0.1/32, vllm"}, []).hosts == {"vllm"}
    secrets = tmp_path / "secrets.toml"
    secrets.write_text('[scrape]\nallow = ["10.0.0.0/8", "prom.internal"]\n', encoding="utf-8")
    policy = policy_from_config({}, [secrets])
    assert policy.hosts == {"prom.internal"} and [str(n) for n in policy.networks] == ["10.0.0.0/8"]
    assert not policy_from_config({}, [tmp_path / "missing.toml"]).restricted
    secrets.write_text('[scrape]\nallow = ["not a host/"]\n', encoding="utf-8")
    with pytest.raises(TriageError, match="neither a host name nor an address/CIDR"):
        policy_from_config({}, [secrets])
