"""AppTest of the Verify and Log pages: a real gain is confirmed, an unsound pair refused, saved runs listed."""

from __future__ import annotations

import json

import pytest
import streamlit as st

from tests.apptest_tools import new_app, open_page, static_tables
from tests.synthetic import requests

COLUMNS = ["start_s", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s", "ok"]


def csv(**kw) -> bytes:
    return requests(n=1500, **kw)[COLUMNS].to_csv(index=False).encode()


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    st.cache_data.clear()
    monkeypatch.setenv("TRIAGE_LOG_DB", str(tmp_path / "log.sqlite3"))
    yield


def page(path: str):
    return open_page(path)


def upload_pair(at, base: bytes, cand: bytes):
    at.file_uploader(key="verify_base").upload("base.csv", base, "text/csv")
    at.file_uploader(key="verify_cand").upload("cand.csv", cand, "text/csv").run()
    assert not at.exception, at.exception
    return at


def test_real_gain_is_confirmed_and_saved_then_listed():
    at = upload_pair(page("pages/verify.py"), csv(ttft_base=0.4, seed=1), csv(ttft_base=0.2, seed=2))
    assert at.session_state["verify_result"] == "gain confirmed"
    assert "gain confirmed" in " ".join(s.value for s in at.success)
    at.text_input(key="verify_who").input("oncall")
    at.button(key="verify_save").click().run()
    assert "Saved as experiment #1" in " ".join(s.value for s in at.success)
    log = page("pages/log.py")
    assert "gain confirmed" in static_tables(log)[0].to_csv()
    assert not log.exception
    link = next(x for x in log.get("page_link") if x.proto.page == "verify")
    assert link.proto.query_string == "experiment=1"
    opened = new_app().run()
    opened.switch_page("pages/verify.py")
    opened.query_params["experiment"] = "1"
    opened.run()
    assert "#1 · Overall: gain confirmed" in " ".join(x.value for x in opened.success)


def test_different_workload_is_refused():
    at = upload_pair(page("pages/verify.py"), csv(seed=1), csv(seed=2, prompt_median=2000.0))
    assert at.session_state["verify_result"] == "unsound"
    assert "prompt" in " ".join(e.value for e in at.error).lower()
    assert not any(c.key == "verify_deltas" for c in at.get("plotly_chart"))  # no gain bars under "unsound"
    assert any("No change bars" in i.value for i in at.info)
    table = static_tables(at)[0]
    assert all(v.endswith(("ms", " s", "%", "req/s", "tok/s", "/s")) or v == "—"
               for v in table["Baseline"].astype(str)), table["Baseline"].tolist()
    # the changes are no evidence: no row is called a gain or a regression under "unsound"
    assert set(table["Verdict"]) == {"not comparable"}, table["Verdict"].tolist()


def test_waits_for_two_files():
    at = page("pages/verify.py")
    assert any("both runs" in i.value for i in at.info)


def test_log_page_empty_explains():
    at = page("pages/log.py")
    assert any("No experiment recorded" in i.value for i in at.info)


@pytest.mark.prometheus
def test_two_prometheus_windows_compare_without_intervals(tmp_path, monkeypatch):
    from datetime import UTC, datetime, timedelta

    from tests.prom_harness import five_minutes_ago, simulated_prometheus

    end = five_minutes_ago()
    with simulated_prometheus(tmp_path, "queueing", 45, seed=3, end=end) as server:
        monkeypatch.setenv("TRIAGE_PROMETHEUS_SIM_URL", server.url)
        at = page("pages/verify.py")
        next(b for b in at.get("button_group") if b.key == "verify_mode").set_value("windows").run()
        stop = datetime.fromtimestamp(end, UTC)
        for prefix, moment in (("verify_base_end", stop - timedelta(minutes=20)), ("verify_cand_end", stop)):
            at.date_input(key=f"{prefix}_end_date").set_value(moment.date())
            at.time_input(key=f"{prefix}_end_time").set_value(moment.time().replace(tzinfo=None))
        at.run()
        assert not at.exception, at.exception
        assert not at.error, [e.value for e in at.error]
        assert at.session_state["verify_result"] in ("no effect", "gain confirmed", "regression")
        table = static_tables(at)[0].to_csv()  # Verify's tables are static HTML: no inner scroll hides a row
        assert "TTFT p99" in table and "no interval" in table


def _legends(at) -> list[dict]:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return [s["layout"]["legend"] for s in specs if "legend" in s["layout"]]


def test_chart_legends_sit_above_the_plot_on_benchmark_and_verify():
    """A legend anchored by its top at y > 1 (plotly's 'auto' for a high y) hangs into the plot once it wraps in
    a half-width column; anchored by its bottom, plotly grows the margin for it instead."""
    verify = upload_pair(page("pages/verify.py"), csv(ttft_base=0.4, seed=1), csv(ttft_base=0.2, seed=2))
    bench = page("pages/benchmark.py")
    for at in (verify, bench):
        legends = _legends(at)
        assert legends, "no chart with a legend drawn"
        for legend in legends:
            assert legend.get("yanchor") == "bottom" and legend.get("y", 0) >= 1, legend


PUNCT = r"""\\([!-/:-@\[-`{-~])"""


def _rendered(markdown: str) -> str:
    """What a reader sees of Markdown source as far as escapes go: each backslash-escaped punctuation mark once."""
    import re

    return re.sub(PUNCT, r"\1", markdown)


def test_notes_and_headline_read_without_stray_backslashes():
    """Words quoted from the files (a definition's "ITL: …", "(e2e − ttft)/(out − 1)") and a change's interval
    "[-5.1 %, -1.2 %]" are escaped once: escaped twice, the reader saw "ITL\\:" and "\\(e2e − ttft\\)"."""
    from pathlib import Path

    bench = Path(__file__).resolve().parent / "fixtures" / "bench"
    at = page("pages/verify.py")
    at.file_uploader(key="verify_base").upload("vllm_detailed.json", (bench / "vllm_detailed.json").read_bytes(),
                                               "application/json")
    at.file_uploader(key="verify_cand").upload("sglang_bench.jsonl", (bench / "sglang_bench.jsonl").read_bytes(),
                                               "application/json").run()
    assert not at.exception, at.exception
    notes = [_rendered(x.value) for x in [*at.warning, *at.error]]
    assert any("defined differently" in n for n in notes), notes
    assert not [n for n in notes if "\\" in n], notes
    at = upload_pair(page("pages/verify.py"), csv(ttft_base=0.4, seed=1), csv(ttft_base=0.2, seed=2))
    (headline,) = [_rendered(x.value) for x in at.success]
    assert "[" in headline and "\\" not in headline, headline
