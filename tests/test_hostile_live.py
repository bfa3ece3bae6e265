"""The Live page against a hostile Prometheus or a typed URL (AppTest, fake servers on 127.0.0.1): one short line,
the page alive, bounded memory (issue 23, cases 2, 4 and 9).

TRIAGE_DEBUG is unset here so the page's error boundaries behave as they do for visitors."""

from __future__ import annotations

import re
import resource
from pathlib import Path

import pytest
import streamlit as st

from tests.apptest_tools import open_page
from tests.hostile_server import hostile_server


@pytest.fixture(autouse=True)
def visitor_mode(monkeypatch):
    monkeypatch.delenv("TRIAGE_DEBUG", raising=False)
    st.cache_data.clear()


def source(at):
    return next(b for b in at.get("button_group") if b.key == "live_kind")


def errors(at) -> list[str]:
    return [str(e.value).replace("\\", "") for e in at.error]  # as read: the page escapes Markdown


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.timeout(180)
@pytest.mark.parametrize("path,expected", [
    ("/redirect-bomb", "redirects are not followed"),     # a 302 whose own body inflates to 4.2 GB
    ("/elsewhere", "redirects are not followed"),         # a 302 to another origin's endless body
    ("/huge-error", "bad_data: parse error"),             # a 300 KB JSON error full of newlines
])
def test_a_hostile_prometheus_profile_gives_one_short_line(monkeypatch, path, expected):
    with hostile_server() as target, hostile_server(redirect_to=target.url + "/endless") as first:
        monkeypatch.setenv("TRIAGE_PROMETHEUS_HOSTILE_URL", first.url + path)
        monkeypatch.setenv("TRIAGE_PROMETHEUS_HOSTILE_TIMEOUT", "20")
        at = open_page("pages/live.py")
        before = _peak_mb()
        source(at).set_value("prometheus").run()
        assert not at.exception, at.exception
        shown = [e for e in errors(at) if expected in e]
        assert shown, errors(at)
        # before: the 300 KB body became a 300,239-character alert; a redirect took the page from 261 MB to 1.7 GB
        assert all(len(e) < 600 and "\n" not in e.strip() for e in errors(at)), [e[:300] for e in errors(at)]
        assert _peak_mb() - before < 300 and _peak_mb() < 600 + before, (before, _peak_mb())
        assert target.hits == []
        source(at).set_value("demo").run()  # the page keeps working
        assert not at.exception and at.session_state["findings"]


# ------------------------------------------------------------ typed URLs (issue 23, case 9)

from streamlit import config as st_config  # noqa: E402

from triage.service.typed_urls import TypedUrls, loopback_only, typed_url_access  # noqa: E402
from triage.sources.metrics.fetch import ScrapePolicy, parse_allow  # noqa: E402

UNREADABLE = "could not read metrics from that address"


@pytest.fixture
def listening_on(monkeypatch):
    """Set Streamlit's server.address as `streamlit run --server.address` would, restored afterwards."""
    before = st_config.get_option("server.address")

    def listen(address: str | None) -> None:
        st_config.set_option("server.address", address, "test")

    monkeypatch.delenv("TRIAGE_SCRAPE_ALLOW", raising=False)
    monkeypatch.delenv("TRIAGE_LIVE_TYPED_URLS", raising=False)
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)  # the repo's .streamlit/ has no [scrape] allow
    yield listen
    st_config.set_option("server.address", before, "test")


@pytest.mark.parametrize("address,allow,env,expected", [
    (None, "", {}, TypedUrls.OFF),                      # Streamlit's default: every interface
    ("0.0.0.0", "", {}, TypedUrls.OFF),
    ("::", "", {}, TypedUrls.OFF),
    ("10.1.2.3", "", {}, TypedUrls.OFF),
    ("myhost.example", "", {}, TypedUrls.OFF),
    ("127.0.0.1", "", {}, TypedUrls.LOOPBACK),
    ("127.0.0.2", "", {}, TypedUrls.LOOPBACK),
    ("::1", "", {}, TypedUrls.LOOPBACK),
    ("[::1]", "", {}, TypedUrls.LOOPBACK),
    ("localhost", "", {}, TypedUrls.LOOPBACK),
    ("0.0.0.0", "10.0.0.0/8", {}, TypedUrls.ALLOWLIST),
    (None, "vllm.internal", {}, TypedUrls.ALLOWLIST),
    ("127.0.0.1", "", {"TRIAGE_LIVE_TYPED_URLS": "off"}, TypedUrls.OFF),  # behind a reverse proxy
    ("0.0.0.0", "10.0.0.0/8", {"TRIAGE_LIVE_TYPED_URLS": "off"}, TypedUrls.OFF),
])
def test_typed_urls_are_allowed_only_on_the_loopback_or_with_an_allowlist(address, allow, env, expected):
    policy = parse_allow(allow.split(",")) if allow else ScrapePolicy()
    assert typed_url_access(address, policy, env) is expected
    assert loopback_only(address) is (address in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"))


def scrape_page(url: str | None = None):
    at = open_page("pages/live.py")
    source(at).set_value("scrape").run()
    assert not at.exception, at.exception
    if url is not None:
        at.text_input(key="live_url").set_value(url).run()
        assert not at.exception, at.exception
    return at


def test_a_page_listening_on_every_interface_offers_no_url_field(listening_on):
    listening_on(None)
    at = scrape_page()
    assert not [w for w in at.text_input if w.key == "live_url"]
    assert any("Typing a /metrics URL is off here" in i.value for i in at.info)


@pytest.mark.timeout(120)
def test_typed_url_errors_do_not_tell_open_from_closed_ports(listening_on):
    """On the loopback listener a typed URL is read; every failure reads the same, whatever is (or is not)
    listening there: a closed port, an HTTP server answering 404, HTML, a redirect, a passwd-like text."""
    from tests.prom_harness import free_port

    listening_on("127.0.0.1")
    with hostile_server() as server:
        targets = {
            "closed port": f"http://127.0.0.1:{free_port()}/metrics",
            "404": server.url + "/nothing",
            "html": server.url + "/html",
            "redirect": server.url + "/loop",
            "not metrics": server.url + "/passwd",
            "401": server.url + "/auth",
        }
        shown = {}
        for name, url in targets.items():
            at = scrape_page(url)
            failed = [e for e in errors(at) if "Refresh failed" in e]
            assert failed, (name, errors(at))
            shown[name] = re.sub(r"http\S*(?=: )", "URL", failed[0])  # the typed URL, as shown (redacted, escaped)
            assert shown[name] == f"Refresh failed: URL: {UNREADABLE}", (name, failed[0])
        assert len(set(shown.values())) == 1, shown  # one sentence for all: nothing tells the ports apart
        ok = scrape_page(server.url + "/metrics")  # a real /metrics still reads
        assert not [e for e in errors(ok) if "Refresh failed" in e], errors(ok)


def test_an_allowlist_offers_the_field_and_refuses_other_hosts_unasked(listening_on, monkeypatch):
    listening_on("0.0.0.0")
    monkeypatch.setenv("TRIAGE_SCRAPE_ALLOW", "10.0.0.0/8")
    with hostile_server() as server:
        at = scrape_page(server.url + "/metrics")
        refused = [e for e in errors(at) if "not allowed here" in e]
        assert refused and "127.0.0.1 (" not in refused[0], errors(at)  # no resolved address, no allowlist
        assert "10.0.0.0/8" not in " ".join(errors(at))
        assert server.hits == []


def test_a_typed_url_is_kept_across_a_page_switch_but_never_put_in_the_url(listening_on):
    """The session keeps the typed /metrics URL (credentials and all) for the trip back; the share link never
    carries it: a reload shows the source, the URL field empty."""
    from tests.prom_harness import free_port

    listening_on("127.0.0.1")
    url = f"http://ops:s3cret-token@127.0.0.1:{free_port()}/metrics"
    at = scrape_page(url)
    for target in ("pages/technique.py", "pages/live.py"):
        at.switch_page(target)
        at.query_params.clear()  # the navigation links carry no query parameters
        at.run()
        assert not at.exception, at.exception
    assert source(at).value == "scrape" and at.text_input(key="live_url").value == url
    assert at.query_params["source"] == "scrape"
    assert not any("s3cret" in str(v) or "127.0.0.1" in str(v) for v in dict(at.query_params).values())
    assert not any("s3cret" in message for message in errors(at))
