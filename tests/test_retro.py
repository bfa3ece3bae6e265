"""Retro walk: wrong usages are flagged, the report renders and restores the same walk (core and AppTest)."""

from __future__ import annotations

import pytest
import streamlit as st

from tests.apptest_tools import open_page, texts
from triage.diagnosis.benchmark import diagnose_run
from triage.errors import TriageError
from triage.knowledge.loader import DEFAULT_TREE_DIR
from triage.report.markdown import report_markdown, restore_walk
from triage.report.retro import RetroState, load_steps, wrong_usages
from triage.sources.files import load_benchmark


@pytest.fixture(scope="module")
def sample_diag(kb):
    data = (DEFAULT_TREE_DIR / "sample" / "benchmark.csv").read_bytes()
    return diagnose_run(kb, load_benchmark(data, "benchmark.csv").runs[0])


def codes(kb, state, diag):
    return [w.code for w in wrong_usages(kb, state, diag)]


def test_heavy_technique_without_evidence_is_flagged(kb, sample_diag):
    assert codes(kb, RetroState(techniques=["parallelism"]), sample_diag) == ["heavy_without_evidence"]
    assert codes(kb, RetroState(techniques=["pd_disaggregation"]), sample_diag) == []  # queueing reaches PD


def test_several_techniques_at_once_is_flagged(kb, sample_diag):
    assert "several_at_once" in codes(kb, RetroState(techniques=["continuous_batching", "prefix_caching"]),
                                      sample_diag)


def test_claim_without_verification_is_flagged_at_the_end(kb, sample_diag):
    last = len(load_steps()) - 1
    state = RetroState(step=last, techniques=["continuous_batching"])
    assert codes(kb, state, sample_diag) == ["claim_without_verification"]
    state.verification = "gain confirmed"
    assert codes(kb, state, sample_diag) == []


def test_report_round_trip(kb, sample_diag):
    state = RetroState(title="TTFT incident | 11-30", source="sample", step=3, symptom="ttft",
                       cause="ttft.queueing", techniques=["continuous_batching"], change="--max-num-seqs 512",
                       notes={"symptom": "p99 22 s\nat peak"}, checklist={"baseline": [True, False]})
    state.log("symptom", "decided ttft")
    md = report_markdown(kb, sample_diag, state)
    assert "## Findings" in md and "| `ttft_load_corr` |" in md and "- [ ] [config]" in md
    assert "TTFT incident \\| 11-30" in md  # table-safe title
    assert restore_walk(md).to_dict() == state.to_dict()


def test_restore_refuses_plain_markdown():
    with pytest.raises(TriageError, match="no saved walk"):
        restore_walk("# just a note\n")
    with pytest.raises(TriageError, match="damaged"):
        restore_walk("<!-- triage-retro:bm90IGpzb24= -->")


@pytest.fixture(autouse=True)
def _fresh_cache():
    st.cache_data.clear()
    yield


def retro_page(**query):
    return open_page("pages/retro.py", **query)


def test_walk_forward_and_back_keeps_the_step_in_the_url():
    at = retro_page()
    assert "1. Baseline" in texts(at)
    at.button(key="retro_next").click().run()
    at.button(key="retro_next").click().run()
    assert at.query_params["step"] in ("3", ["3"])  # 1-based, as the heading
    assert "3. Cause" in texts(at) and "Requests queue too long" in texts(at)
    at.button(key="retro_back").click().run()
    assert "2. Symptom" in texts(at)


def test_deep_link_to_a_step():
    at = retro_page(step="4")
    assert "4. Technique" in texts(at)
    assert "3. Cause" in texts(retro_page(step="3"))


def test_walk_export_and_reimport_restore_the_same_state(kb):
    at = retro_page(step="4")
    at.multiselect(key="retro_techniques").set_value(["continuous_batching", "parallelism"]).run()
    warnings = " ".join(w.value for w in at.warning)
    assert "Several techniques" in warnings and "heavy" in warnings
    at.checkbox(key="retro_chk:technique:0").check().run()
    at.text_area(key="retro_note:technique").input("chosen in the retro").run()
    state = at.session_state["retro"]
    md = report_markdown(kb, None, state)
    fresh = retro_page()
    fresh.file_uploader(key="retro_import").upload("incident-report.md", md.encode(), "text/markdown").run()
    assert not fresh.exception, fresh.exception
    restored = fresh.session_state["retro"]
    assert restored.techniques == ["continuous_batching", "parallelism"]
    assert restored.notes["technique"] == "chosen in the retro"
    assert restored.checklist["technique"][0] is True
    assert "4. Technique" in texts(fresh)


def test_retro_lists_the_receivers_incidents(tmp_path, monkeypatch):
    """The Alertmanager receiver's incident store, listed on the Retro page: alert, replica, time, cause, link."""
    from datetime import UTC, datetime

    from triage.alerting.receiver.store import IncidentStore

    store = IncidentStore(tmp_path / "incidents.sqlite3")
    store.record(fingerprint="f1", starts_at=datetime(2026, 12, 2, 2, 5, tzinfo=UTC), alertname="TriageTtftQueueing",
                 labels={"alertname": "TriageTtftQueueing", "instance": "gpu-7"}, replica={"instance": "gpu-7"},
                 cause="ttft.queueing", message="m", diagnosis={"findings": []}, error=None,
                 link="https://triage.example/live?source=prometheus&node=ttft.queueing")
    monkeypatch.setenv("TRIAGE_WEBHOOK_INCIDENT_DB", str(tmp_path / "incidents.sqlite3"))
    at = open_page("pages/retro.py")
    assert not at.exception
    assert "Incidents on-call saw (1" in at.expander[0].label
    frame = at.dataframe[0].value
    assert list(frame["alert"]) == ["TriageTtftQueueing"] and list(frame["diagnosis"]) == ["ttft.queueing"]
    assert list(frame["labels"]) == ["instance=gpu-7"]
