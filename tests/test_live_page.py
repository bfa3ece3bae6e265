"""AppTest of the Live page: the demo source lights its scenario's branch; faults give a message, not a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import streamlit as st

from tests.apptest_tools import open_page, texts
from tests.cli_tools import run_triage
from tests.prom_harness import free_port
from triage.sources.metrics.simulator import Simulator


@pytest.fixture(autouse=True)
def _fresh_cache():
    st.cache_data.clear()
    yield


def source(at):
    return next(b for b in at.get("button_group") if b.key == "live_kind")


def live_page():
    return open_page("pages/live.py")


def panel_keys(at) -> set[str]:
    return {str(c.key).removeprefix("panel:") for c in at.get("plotly_chart") if str(c.key).startswith("panel:")}


def open_tab(at, title: str):
    """Open the panel tab whose label names ``title`` (the user's click: the tab's label becomes its state)."""
    label = next(tab.label for tab in at.tabs if title in tab.label)
    at.session_state["live_group"] = label
    return at.run()


def test_demo_source_shows_panels_and_lit_branch():
    at = live_page()
    assert at.session_state["findings"][0] == "ttft.queueing"
    assert any(c.key == "tree" for c in at.get("plotly_chart"))
    labels = [m.label for m in at.metric]
    assert "TTFT p99" in labels and "KV usage (max)" in labels
    assert "vs baseline" in " ".join(str(m.proto.delta) for m in at.metric)
    assert not at.dataframe  # "Every signal against the baseline" is lazy: no table until it is opened
    at.session_state["live_all_deltas"] = True
    at.run()
    table = at.dataframe[0].value
    assert {"kv_usage_max", "waiting_mean", "ttft_p99_s"} <= set(table["Signal"])


def test_panel_legends_sit_above_the_plot_area():
    """A three-line panel in a third of the page wraps its legend to three rows: anchored by its bottom above
    the plot area, plotly grows the top margin for it instead of drawing it over the start of the lines."""
    at = live_page()
    layout = json.loads(next(c for c in at.get("plotly_chart") if c.key == "panel:phases").proto.spec)["layout"]
    assert layout["legend"]["yanchor"] == "bottom" and layout["legend"]["y"] >= 1
    assert layout.get("margin", {}).get("autoexpand", True)


def test_panels_come_in_tabs_and_the_evidence_group_opens_first():
    """Queueing lights ttft.queueing: its evidence (queue share of TTFT) is drawn in the first-token tab, which
    opens alone and is marked; another tab's panels appear only once it is opened."""
    at = live_page()
    tabs = [tab.label for tab in at.tabs]
    assert tabs == [":red[●] Time to first token (3 panels)", "Load and KV cache (3 panels)",
                    "Decode and throughput (3 panels)"]
    assert at.session_state["live_group"] == tabs[0]
    assert panel_keys(at) == {"ttft", "phases", "prefix"}
    open_tab(at, "Decode and throughput")
    assert not at.exception, at.exception
    assert panel_keys(at) == {"itl", "throughput"}
    at.run()  # a refresh keeps the tab the user opened
    assert panel_keys(at) == {"itl", "throughput"}
    at.selectbox(key="live_scenario").set_value("kv_pressure").run()  # another lit branch opens its own tab
    assert at.session_state["live_group"] == ":red[●] Load and KV cache (3 panels)"
    assert panel_keys(at) == {"load", "kv", "preemptions"}


def test_kv_pressure_opens_the_load_tab():
    at = open_page("pages/live.py", source="demo", scenario="kv_pressure")
    assert at.session_state["findings"][0] == "memory.kv_cache"
    assert ":red[●] Load and KV cache (3 panels)" in [tab.label for tab in at.tabs]
    assert panel_keys(at) == {"load", "kv", "preemptions"}


def test_missing_metric_panel_says_why():
    at = live_page()
    assert "Speculative decoding is not configured" not in " ".join(i.value for i in at.info)  # tab closed
    open_tab(at, "Decode and throughput")
    infos = " ".join(i.value for i in at.info)
    assert "Speculative decoding is not configured" in infos
    assert panel_keys(at) == {"itl", "throughput"}  # the spec panel says why instead of a chart


def test_demo_scenario_switch_changes_the_finding():
    at = live_page()
    at.selectbox(key="live_scenario").set_value("kv_pressure").run()
    assert not at.exception
    assert at.session_state["findings"][0] == "memory.kv_cache"


def test_snapshot_upload_is_diagnosed(tmp_path: Path):
    at = live_page()
    source(at).set_value("snapshots").run()
    sim = Simulator("queueing", seed=1)
    before = sim.render().encode()
    sim.advance(120)
    at.file_uploader(key="snap_before").upload("a.txt", before, "text/plain")
    at.file_uploader(key="snap_after").upload("b.txt", sim.render().encode(), "text/plain")
    at.number_input(key="snap_interval").set_value(120.0).run()
    assert not at.exception, at.exception
    assert at.session_state["findings"][0] == "ttft.queueing"


def test_bad_snapshot_gives_a_message_and_the_page_works():
    at = live_page()
    source(at).set_value("snapshots").run()
    at.file_uploader(key="snap_before").upload("a.txt", b"this is { not metrics", "text/plain")
    at.file_uploader(key="snap_after").upload("b.txt", b"vllm:num_requests_running 1\n", "text/plain").run()
    assert not at.exception, at.exception
    assert any("a.txt" in e.value for e in at.error)


def test_unreachable_prometheus_profile_reports_and_keeps_page(monkeypatch):
    monkeypatch.setenv("TRIAGE_PROMETHEUS_DOWN_URL", f"http://127.0.0.1:{free_port()}")
    at = live_page()
    source(at).set_value("prometheus").run()
    assert not at.exception, at.exception
    errors = " ".join(e.value for e in at.error)
    assert "Refresh failed" in errors and "unreachable" in errors
    assert "TRIAGE_PROMETHEUS_DOWN_URL" not in texts(at)


def test_no_profiles_explains_how_to_add_one(monkeypatch):
    at = live_page()
    source(at).set_value("prometheus").run()
    if not any("No Prometheus profile" in i.value for i in at.info):
        pytest.skip("a Prometheus profile is configured on this machine")


# One fault through the page (message, and the page keeps working); every fault's message is checked without
# Streamlit in tests/test_service.py::test_prometheus_faults_raise_one_clear_error.
@pytest.mark.parametrize("behaviour,expected", [({"status": 500}, "500")], ids=["http-500"])
def test_prometheus_faults_give_a_message_and_the_page_works(monkeypatch, behaviour, expected):
    from tests.prom_harness import FakeBehaviour, fake_prometheus

    with fake_prometheus(FakeBehaviour(**behaviour)) as url:
        monkeypatch.setenv("TRIAGE_PROMETHEUS_FAULTY_URL", url)
        monkeypatch.setenv("TRIAGE_PROMETHEUS_FAULTY_TIMEOUT", "1")
        at = live_page()
        source(at).set_value("prometheus").run()
        assert not at.exception, at.exception
        errors = " ".join(e.value for e in at.error)
        assert "Refresh failed" in errors and expected in errors
        source(at).set_value("demo").run()  # the page keeps working on another source
        assert at.session_state["findings"][0] == "ttft.queueing"


def test_page_and_cli_agree_on_two_snapshots(tmp_path: Path):
    import json

    sim = Simulator("kv_pressure", seed=7)
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(sim.render())
    sim.advance(90)
    b.write_text(sim.render())
    at = live_page()
    source(at).set_value("snapshots").run()
    at.file_uploader(key="snap_before").upload("a.txt", a.read_bytes(), "text/plain")
    at.file_uploader(key="snap_after").upload("b.txt", b.read_bytes(), "text/plain")
    at.number_input(key="snap_interval").set_value(90.0).run()
    root = Path(__file__).resolve().parent.parent
    out = run_triage("diagnose", "--scrape", str(a), str(b), "--interval", "90", "--json", cwd=root)
    cli = [f["cause"] for f in json.loads(out.stdout)["findings"]]
    assert cli and at.session_state["findings"] == cli


@pytest.mark.prometheus
def test_prometheus_incident_window_against_a_chosen_baseline(tmp_path, monkeypatch):
    from datetime import UTC, datetime, timedelta

    from tests.prom_harness import five_minutes_ago, simulated_prometheus

    end = five_minutes_ago()
    with simulated_prometheus(tmp_path, "kv_pressure", 50, seed=2, end=end) as server:
        monkeypatch.setenv("TRIAGE_PROMETHEUS_SIM_URL", server.url)
        at = live_page()
        source(at).set_value("prometheus").run()
        at.segmented_control(key="live_range").set_value("custom").run()  # a past incident: custom end
        stop = datetime.fromtimestamp(end, UTC)
        at.number_input(key="live_custom_min").set_value(15.0)
        at.date_input(key="live_custom_end_date").set_value(stop.date())
        at.time_input(key="live_custom_end_time").set_value(stop.time().replace(tzinfo=None))
        at.selectbox(key="prom_baseline").set_value("chosen").run()
        base = stop - timedelta(minutes=30)
        at.date_input(key="prom_base_end_date").set_value(base.date())
        at.time_input(key="prom_base_end_time").set_value(base.time().replace(tzinfo=None)).run()
        assert not at.exception, at.exception
        assert not at.error, [e.value for e in at.error]
        assert at.session_state["findings"][0] == "memory.kv_cache"
        assert any(m.proto.delta for m in at.metric)  # KPI deltas against the chosen baseline
        assert at.query_params["window"] == "custom" and at.query_params["end"] == stop.strftime("%Y-%m-%dT%H:%MZ")


def test_idle_window_says_nothing_to_diagnose_not_no_symptom():
    at = live_page()
    source(at).set_value("snapshots").run()
    idle = (Path(__file__).parent / "fixtures" / "metrics" / "vllm.txt").read_text()
    idle = "\n".join(line.rsplit(" ", 1)[0] + " 0.0" if line.startswith(("vllm:num_requests_running",
                                                                          "vllm:num_requests_waiting")) else line
                     for line in idle.splitlines()).encode()
    at.file_uploader(key="snap_before").upload("a.txt", idle, "text/plain")
    at.file_uploader(key="snap_after").upload("b.txt", idle, "text/plain")
    at.number_input(key="snap_interval").set_value(60.0).run(timeout=120)
    assert not at.exception, at.exception
    errors = " ".join(e.value for e in at.error)
    assert "Nothing to diagnose: no request finished in the window" in errors
    assert "No symptom" not in texts(at)


def test_live_view_state_is_in_the_url_and_a_link_reopens_it():
    at = live_page()
    assert at.query_params["source"] == "demo" and at.query_params["window"] == "15m"
    at = open_page("pages/live.py", source="demo", scenario="healthy", window="1h", node="ttft.queueing")
    assert at.segmented_control(key="live_range").value == "1h"
    assert at.selectbox(key="live_scenario").value == "healthy"
    assert at.query_params["node"] == "ttft.queueing" and at.query_params["scenario"] == "healthy"


@pytest.mark.parametrize("current, baseline, better_higher, color", [
    (0.639, 0.640, True, "off"),       # -0.1 pp of a 64 % hit rate: noise, grey (was red)
    (0.50, 0.64, True, "normal"),      # -22 %: red, because higher is better
    (3.0, 2.0, False, "inverse"),      # TTFT +50 %: red, because lower is better
    (0.8, 0.0, False, "inverse"),      # preemptions from none: no percentage, still a change that counts
    (0.0, 0.0, False, "off"),
])
def test_a_kpi_delta_is_coloured_only_past_the_noise(current, baseline, better_higher, color):
    from components.live_view import delta_color
    from triage.diagnosis.compare import SignalDelta

    assert delta_color(SignalDelta("x", "fraction", current, baseline), better_higher) == color


def _away_and_back(at, query: dict[str, str] | None = None):
    """Live → Technique → Live as the navigation links do it: each link's URL carries no query parameters."""
    at.switch_page("pages/technique.py")
    at.query_params.clear()
    at.run()
    assert not at.exception, at.exception
    assert not any(b.key == "live_kind" for b in at.get("button_group"))  # the picker was not drawn there
    at.switch_page("pages/live.py")
    at.query_params.clear()
    at.query_params.update(query or {})
    at.run()
    assert not at.exception, at.exception
    return at


def _source_label(at) -> str:
    """The label of the source the page shows (its caption: label · engine · refreshed at)."""
    return next(str(c.value) for c in at.caption if " · engine " in str(c.value)).split(" · ")[0]


def test_a_page_switch_keeps_the_live_source_window_and_scenario():
    at = live_page()
    at.selectbox(key="live_scenario").set_value("kv_pressure").run()
    at.segmented_control(key="live_range").set_value("1h").run()
    at.segmented_control(key="live_refresh").set_value(60).run()
    label = _source_label(at)
    _away_and_back(at)
    assert source(at).value == "demo"
    assert at.selectbox(key="live_scenario").value == "kv_pressure"
    assert at.segmented_control(key="live_range").value == "1h"
    assert at.segmented_control(key="live_refresh").value == 60
    assert _source_label(at) == label
    assert at.session_state["findings"][0] == "memory.kv_cache"
    # and the URL says it again, so a reload or a shared link opens the same view
    assert at.query_params["scenario"] == "kv_pressure" and at.query_params["window"] == "1h"


def test_a_page_switch_keeps_the_snapshot_source_and_its_paste():
    at = live_page()
    source(at).set_value("snapshots").run()
    _away_and_back(at)
    assert source(at).value == "snapshots"
    assert at.query_params["source"] == "snapshots"


def test_two_uploaded_snapshots_are_diagnosed_again_after_a_page_switch():
    at = live_page()
    source(at).set_value("snapshots").run()
    sim = Simulator("queueing", seed=1)
    before = sim.render().encode()
    sim.advance(120)
    at.file_uploader(key="snap_before").upload("a.txt", before, "text/plain")
    at.file_uploader(key="snap_after").upload("b.txt", sim.render().encode(), "text/plain")
    at.number_input(key="snap_interval").set_value(120.0).run()
    label = _source_label(at)
    _away_and_back(at)
    assert source(at).value == "snapshots" and at.number_input(key="snap_interval").value == 120.0
    assert at.file_uploader(key="snap_before").value is None  # the uploaders come back empty…
    assert "Showing the snapshots uploaded before: a.txt → b.txt" in texts(at)  # …the pair stays in use
    assert _source_label(at) == label and at.session_state["findings"][0] == "ttft.queueing"
    at.button(key="snap_forget").click().run()
    assert not at.exception, at.exception
    assert "Showing the snapshots uploaded before" not in texts(at)
    assert not any(" · engine " in str(c.value) for c in at.caption)


def test_a_page_switch_keeps_the_prometheus_profile_filters_and_baseline(monkeypatch):
    monkeypatch.setenv("TRIAGE_PROMETHEUS_DOWN_URL", f"http://127.0.0.1:{free_port()}")
    at = live_page()
    source(at).set_value("prometheus").run()
    at.text_input(key="match:model_name").set_value("llama-3-70b").run()
    at.selectbox(key="prom_baseline").set_value(24.0).run()
    at.segmented_control(key="live_range").set_value("6h").run()
    _away_and_back(at)
    assert source(at).value == "prometheus" and at.selectbox(key="prom_profile").value == "down"
    assert at.text_input(key="match:model_name").value == "llama-3-70b"
    assert at.selectbox(key="prom_baseline").value == 24.0
    assert at.segmented_control(key="live_range").value == "6h"
    assert "TRIAGE_PROMETHEUS_DOWN_URL" not in texts(at) and "127.0.0.1" not in str(dict(at.query_params))


def test_an_alert_link_in_the_same_session_still_opens_its_replica(monkeypatch):
    """The page's own ?source=prometheus is no link (a typed filter stays); a link from elsewhere is applied."""
    monkeypatch.setenv("TRIAGE_PROMETHEUS_DOWN_URL", f"http://127.0.0.1:{free_port()}")
    at = live_page()
    source(at).set_value("prometheus").run()
    at.text_input(key="match:pod").set_value("pod-a").run()
    at.segmented_control(key="live_range").set_value("1h").run()
    assert at.text_input(key="match:pod").value == "pod-a"
    _away_and_back(at, {"source": "prometheus", "profile": "down", "window": "6h", "match_instance": "10.0.0.7:8000"})
    assert at.text_input(key="match:instance").value == "10.0.0.7:8000"
    assert at.text_input(key="match:pod").value == ""  # the link names its replica alone
    assert at.segmented_control(key="live_range").value == "6h"


def test_a_link_back_to_live_wins_over_the_session_choice():
    at = live_page()
    source(at).set_value("snapshots").run()
    _away_and_back(at, {"source": "demo", "scenario": "healthy"})
    assert source(at).value == "demo"
    assert at.selectbox(key="live_scenario").value == "healthy"


def test_an_absurd_snapshot_interval_is_refused_in_words_not_a_failed_page():
    """'Seconds apart' took any number: 1e300 put the first snapshot before any date a chart can draw and the
    page failed ('Something went wrong'). The input stops at an hour, as the CLI's --interval, and the core
    refuses a larger value, whoever sends it, with one sentence."""
    from triage.errors import TriageError
    from triage.service.windows import parse_snapshot, parsed_snapshot_pair

    at = live_page()
    source(at).set_value("snapshots").run()
    assert at.number_input(key="snap_interval").max == 3600
    sim = Simulator("queueing", seed=1)
    snap = parse_snapshot(sim.render().encode(), "a.txt")
    sim.advance(60)
    later = parse_snapshot(sim.render().encode(), "b.txt")
    for bad in (1e300, 3600.5, float("inf"), 0.0):
        with pytest.raises(TriageError, match=r"more than 0 and at most 3,600 s"):
            parsed_snapshot_pair(snap, later, bad)
    parsed_snapshot_pair(snap, later, 3600.0)


def test_the_same_snapshot_twice_is_said():
    """The same file as both snapshots read 0 req/s and 0 tok/s with no word why: the page now says the two are
    one file, so only its gauges (running, waiting, KV usage) mean anything, and diagnoses those."""
    text = Simulator("queueing", seed=1).render().encode()
    at = live_page()
    source(at).set_value("snapshots").run()
    at.file_uploader(key="snap_before").upload("a.txt", text, "text/plain")
    at.file_uploader(key="snap_after").upload("b.txt", text, "text/plain").run()
    assert not at.exception, at.exception
    assert any("the same file" in w.value and "b.txt" in w.value for w in at.warning), [w.value for w in at.warning]
    assert at.metric  # the gauges are still diagnosed


def test_a_latency_panel_is_in_ms_under_a_second_and_in_s_above():
    """The TTFT panel's axis follows the one formatter's rule, as its card does: the queueing demo's TTFT is
    seconds long, so its axis reads s (it read "20k" ms beside a card of "19.3 s"), a sub-second one ms."""
    at = live_page()
    spec = json.loads(next(c for c in at.get("plotly_chart") if c.key == "panel:ttft").proto.spec)
    title = spec["layout"]["yaxis"]["title"]["text"]
    peak = max(max(trace["y"]) for trace in spec["data"])
    assert (title, peak >= 1) == ("s", True), (title, peak)
    at.session_state["live_scenario"] = "healthy"
    at = open_tab(at.run(), "Time to first token")
    spec = json.loads(next(c for c in at.get("plotly_chart") if c.key == "panel:ttft").proto.spec)
    title = spec["layout"]["yaxis"]["title"]["text"]
    assert title == "ms" and max(max(trace["y"]) for trace in spec["data"]) < 1000
