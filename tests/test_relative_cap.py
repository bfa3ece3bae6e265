"""The queueing cause's first action is set relative to the batch cap the data shows, never a fixed number
presented as measured: 2x the cap bounded by the KV headroom; the memory branch when the KV cache is at the
ceiling; a starting point, said so, when no cap is measurable."""

from __future__ import annotations

import json

import pytest

from tests.test_live_scenarios import snapshots
from tests.test_server_logs import REAL, parse, triage, v1
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.verdict import first_actions, verdict
from triage.diagnosis.window import diagnose_window
from triage.knowledge.units import fmt_value
from triage.report.first_action import action_sentence
from triage.report.text import diagnosis_text
from triage.service.logs import diagnose_log
from triage.sources.metrics.snapshot_window import SnapshotWindow
from triage.sources.running_plateau import plateau

QUEUEING = "ttft.queueing"


def _log_signals(kb, text: str):
    return diagnose_log(kb, parse(text), resolve_slo(kb)).live.diagnosis.signals


def test_a_plateau_is_the_running_count_held_while_requests_wait() -> None:
    assert plateau([(256, 40), (256, 41), (255.8, 44), (200, 0)]) == plateau([(256, 1)] * 3)
    assert plateau([(256, 40), (256, 41), (255.8, 44)]).cap == 256  # type: ignore[union-attr]
    assert plateau([(100, 3), (150, 5), (256, 9), (190, 2)]) is None  # the running count moves: no cap shown
    assert plateau([(256, 40), (256, 41)]) is None  # two samples with a queue are too few
    assert plateau([(1, 40), (1, 41), (1, 9)]) is None  # one running request: a stalled engine as likely


def test_measured_cap_with_kv_headroom_doubles_it_in_a_window(kb) -> None:
    """The queueing demo (max_num_seqs 16) through a scrape window: running pinned at 16 while ~31 wait, KV in
    single digits → 2 × 16 = 32, with the measured numbers in the sentence. On the old code: a fixed 512."""
    diag = diagnose_window(kb, SnapshotWindow(snapshots("queueing")), resolve_slo(kb, "chat")).diagnosis
    cap = diag.signals.get("running_cap")
    assert cap is not None and cap.value == 16 and cap.source.id == "server.running_plateau"
    v = verdict(kb, diag, "vllm")
    assert v.cause == QUEUEING
    action = v.actions[0]
    assert action.command == "--max-num-seqs 32" and action.cap is not None and action.cap.state == "raise"
    kv = diag.signals.get("kv_usage_max").value  # type: ignore[union-attr]
    sentence = action_sentence(action, "en")
    assert sentence.startswith("Now 16 (running held at its peak in ")
    assert f"KV peaked at {fmt_value(kv, 'fraction')}:" in sentence
    assert "room for about 32" in sentence and "under 90 %" in sentence
    assert "当前上限 16" in action_sentence(action, "zh")
    every = {a.engine: a.command for a in first_actions(kb, QUEUEING, None, diag.signals)}
    assert every["sglang"] == "--max-running-requests 32" and every["tgi"] == "--max-batch-total-tokens 262144"


def test_the_kv_headroom_bounds_the_raise(kb) -> None:
    """A startup log names max_num_seqs 256; running is held there with KV at 62 %: 256 × 90 % ÷ 62 % = 371,
    under 2 × 256, so the KV cache is what bounds the step."""
    startup = "INFO 09-07 06:34:59 [api_server.py:1] non-default args: {'model': 'm', 'max_num_seqs': 256}"
    text = "\n".join([startup] + [v1(s, 256, 40 + s, 62.0) for s in range(0, 60, 10)])
    signals = _log_signals(kb, text)
    assert signals.get("running_cap").source.id == "server.cap_configured"  # type: ignore[union-attr]
    action = first_actions(kb, QUEUEING, "vllm", signals)[0]
    assert action.command == "--max-num-seqs 371"
    assert "Now 256 (max_num_seqs in the startup log)" in action_sentence(action, "en")
    assert "peaked at 62 %" in action_sentence(action, "en")


def test_cap_with_kv_at_the_ceiling_is_not_raised_and_names_the_memory_branch(kb) -> None:
    """Real SGLang excerpt: #running-req 4 with #queue-req 3 and full token usage 1.00. Raising the cap would
    only preempt: the action is the memory cause's, and the sentence says why."""
    signals = _log_signals(kb, (REAL / "sglang_decode_kv_full.txt").read_text())
    assert signals.get("running_cap").value == 4  # type: ignore[union-attr]
    action = first_actions(kb, QUEUEING, "sglang", signals)[0]
    memory = kb.causes["memory.kv_cache"].first_action
    assert action.cap is not None and action.cap.state == "kv_full"
    assert action.command == memory.command("sglang") and "--max-running-requests" not in action.command
    sentence = action_sentence(action, "en")
    assert "The cap is 4 (" in sentence and "peaked at 100 %" in sentence and "would only preempt" in sentence
    assert "GPU memory branch" in sentence and "显存分支" in action_sentence(action, "zh")


def test_no_measurable_cap_is_a_starting_point_said_so(kb) -> None:
    """Real vLLM V1 excerpt where the running count moves (18–21): no cap is shown, so 512 is offered as a
    starting point with where to read the current value and vLLM 0.33.0's default, never as measured."""
    signals = _log_signals(kb, (REAL / "vllm_v1_apiserver_kv_full.txt").read_text())
    assert signals.get("running_cap") is None
    action = first_actions(kb, QUEUEING, "vllm", signals)[0]
    assert action.command == "--max-num-seqs 512" and action.cap is not None and action.cap.state == "unmeasured"
    sentence = action_sentence(action, "en")
    assert sentence.startswith("Starting point, not measured")
    assert "max_num_seqs in the startup log" in sentence and "vLLM 0.33.0" in sentence and "Now" not in sentence
    assert "这是起点而非测量值" in action_sentence(action, "zh")
    sglang = first_actions(kb, QUEUEING, "sglang", signals)[0]
    assert "max_running_requests in the startup log" in action_sentence(sglang, "en")


def test_the_text_report_says_how_the_cap_was_read(kb) -> None:
    diag = diagnose_window(kb, SnapshotWindow(snapshots("queueing")), resolve_slo(kb, "chat")).diagnosis
    text = diagnosis_text(kb, diag, [])
    assert "first action: vllm --max-num-seqs 32 · sglang --max-running-requests 32" in text
    assert "      Now 16 (running held at its peak" in text


def test_cli_diagnose_json_holds_the_measured_cap() -> None:
    out = triage("diagnose", str(REAL / "sglang_decode_kv_full.txt"), "--json")
    assert out.returncode == 0, out.stderr
    cap = json.loads(out.stdout)["signals"]["running_cap"]
    assert cap["value"] == 4 and cap["unit"] == "req"
    assert "running held at its peak in 3 of 3 samples with requests waiting" in cap["source"]


def test_live_verdict_shows_the_measured_cap() -> None:
    """Live on the queueing demo: the verdict block's first action is 2 × the cap the window shows, with it;
    Diagnose then says the same in its verdict and in the selected node's panel (which said 512, "a starting
    point", before the panel was given the diagnosed source's signals)."""
    from tests.apptest_tools import open_page, texts

    at = open_page("pages/live.py", source="demo", scenario="queueing")
    assert at.session_state["findings"][0] == QUEUEING
    page = texts(at)
    assert "**First action** (vLLM): `--max-num-seqs 32` — Now 16 (running held at its peak" in page
    assert "--max-num-seqs 512" not in page
    at.switch_page("pages/diagnose.py")
    at.query_params["node"] = QUEUEING
    at.run()
    page = texts(at)
    assert page.count("`--max-num-seqs 32` — Now 16 (") == 2 and "--max-num-seqs 512" not in page



def test_the_loader_refuses_a_relative_action_it_could_not_render(tiny_tree) -> None:
    from tests.conftest import edit_yaml
    from triage.errors import TriageError
    from triage.knowledge.loader import load_knowledge

    real = load_knowledge().causes[QUEUEING].first_action
    assert real is not None and real.relative is not None
    relative = real.relative.model_dump()

    def put(change):
        def edit(d):
            cause = d["symptoms"][0]["causes"][0]
            cause["first_action"]["relative"] = change(dict(relative))
        return edit

    edit_yaml(tiny_tree / "tree.yaml", put(lambda r: r))  # memory.kv_cache is not in the one-cause tree
    with pytest.raises(TriageError, match="unknown cause 'memory.kv_cache'"):
        load_knowledge(tiny_tree)
    cause_id = yaml_cause_id(tiny_tree)
    edit_yaml(tiny_tree / "tree.yaml", put(lambda r: {**r, "memory_cause": cause_id,
                                                      "kv_full": {"en": "{cap} {kv}", "zh": "{cap}"}}))
    with pytest.raises(TriageError, match="different"):
        load_knowledge(tiny_tree)


def yaml_cause_id(tree_dir) -> str:
    import yaml

    return yaml.safe_load((tree_dir / "tree.yaml").read_text(encoding="utf-8"))["symptoms"][0]["causes"][0]["id"]


@pytest.mark.prometheus
def test_a_real_prometheus_window_shows_the_cap(kb, tmp_path) -> None:
    """The queueing demo backfilled into a real Prometheus: the range series of running and waiting show the
    plateau at 16 (the cap comes from the series, vLLM exports no max_num_seqs), so the action is 32."""
    import time
    from datetime import UTC, datetime, timedelta

    from tests.prom_harness import start_prometheus
    from triage.sources.metrics.prometheus_window import PrometheusWindow
    from triage.sources.metrics.simulator import write_openmetrics

    end = int(time.time() // 15 * 15) - 60
    path = tmp_path / "sim.om"
    write_openmetrics(path, "queueing", minutes=15, step=15, end=end, seed=5)
    server = start_prometheus(tmp_path, path.read_text(), end)
    try:
        stop = datetime.fromtimestamp(end, UTC)
        window = PrometheusWindow(server.url, stop - timedelta(minutes=10), stop, timeout=10)
        diag = diagnose_window(kb, window, resolve_slo(kb, "chat")).diagnosis
    finally:
        server.stop()
    cap = diag.signals.get("running_cap")
    assert cap is not None and cap.value == 16 and cap.source.id == "server.running_plateau"
    assert verdict(kb, diag, "vllm").actions[0].command == "--max-num-seqs 32"
