"""Fleet page in a real browser (Debian Chromium through Playwright) over a real Prometheus holding two simulated
replicas: one row per replica with its top cause, filterable, refreshing; a row's link opens the Live view of that
replica (Prometheus source, its labels as filters, the window ending at the chosen time)."""

from __future__ import annotations

import os
import re
import time

import pytest

from tests.browser_tools import ARTIFACTS, CHROMIUM, chromium_page, script_finished, streamlit_server
from tests.prom_harness import PROMETHEUS, start_prometheus
from tests.rules_harness import merge_openmetrics
from triage.sources.metrics.simulator import write_openmetrics

pytestmark = [pytest.mark.browser, pytest.mark.prometheus, pytest.mark.timeout(600),
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")]
SCENARIOS = ("queueing", "healthy")


@pytest.fixture(scope="module")
def two_replicas(tmp_path_factory):
    if not os.path.exists(PROMETHEUS):
        pytest.fail("prometheus missing: scripts/test.sh installs the Debian package")
    folder = tmp_path_factory.mktemp("fleet-page")
    end = int(time.time() // 60 * 60) - 60
    texts = {}
    for scenario in SCENARIOS:
        write_openmetrics(folder / f"{scenario}.om", scenario, minutes=16, step=15, end=end, seed=5)
        texts[scenario] = (folder / f"{scenario}.om").read_text()
    server = start_prometheus(folder, merge_openmetrics(texts), end)
    yield server
    server.stop()


def test_fleet_rows_filter_refresh_and_link_to_live(two_replicas):
    from playwright.sync_api import expect

    from triage.report.links import LiveLink, live_url

    env = {"TRIAGE_PROMETHEUS_FLEET_URL": two_replicas.url}
    with streamlit_server(env) as url, chromium_page() as page:
        page.goto(f"{url}/fleet")
        summary = page.get_by_text(re.compile(r"2 replicas, 1 with a finding; 2 shown · refreshed \d\d:\d\d:\d\d"))
        expect(summary).to_be_visible(timeout=90000)
        expect(page.locator("[data-testid=stDataFrame]").first).to_be_visible(timeout=30000)
        # no recording rules in this Prometheus: the page says it read the raw series, and how to make it faster
        expect(page.get_by_text(re.compile(r"Read from the raw series.*no recorded triage:running_mean:15m"))
               ).to_be_visible(timeout=30000)
        script_finished(page)
        first = summary.inner_text()
        expect(summary).not_to_have_text(first, timeout=40000)  # refreshes on its timer (default 15 s), like Live
        script_finished(page)  # the refresh's run is over: the filter typed next is not redrawn away by it
        page.get_by_label("Filter (replica or cause)").fill("queueing")
        page.keyboard.press("Enter")
        expect(page.get_by_text(re.compile(r"2 replicas, 1 with a finding; 1 shown"))).to_be_visible(timeout=30000)
        # the queueing row's link, as fleet_records builds it (the grid draws its cells on a canvas)
        link = live_url(LiveLink(profile="fleet", window="15m", match={"instance": "queueing"}, node="ttft.queueing"))
        page.goto(f"{url}/{link}")
        expect(page.get_by_label("instance")).to_have_value("queueing", timeout=60000)
        expect(page.get_by_text("Requests queue too long").first).to_be_visible(timeout=90000)
        page.screenshot(path=str(ARTIFACTS / "fleet-live-link.png"), full_page=True, timeout=120000)
