"""--tree-dir holds everywhere: the compared metrics, the simulator's scenarios, the alerting target labels and
the tree chart's nodes are read from the tree of the run, never from a copy of tree/ taken at import."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import edit_yaml
from tests.synthetic import requests
from triage.cli import main
from triage.errors import TriageError
from triage.knowledge.loader import DEFAULT_TREE_DIR, use_tree_dir

COLUMNS = ["start_s", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s", "ok"]


@pytest.fixture
def tree_copy(tmp_path) -> Path:
    """A full copy of tree/ to change; the process's active tree is the repository's again afterwards."""
    copy = tmp_path / "tree"
    shutil.copytree(DEFAULT_TREE_DIR, copy)
    yield copy
    use_tree_dir(None)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("runs")
    paths = []
    for seed in (1, 2):
        path = d / f"run{seed}.csv"
        requests(400, seed)[COLUMNS].to_csv(path, index=False)
        paths.append(path)
    return paths[0], paths[1]


def test_gate_compares_the_metrics_of_the_tree_dir(tree_copy, runs, capsys):
    def change(signals):
        signals["compare"] = [m for m in signals["compare"] if m["id"] != "ttft_p90"]
        next(s for s in signals["signals"] if s["name"] == "ttft_p50_s")["label"]["en"] = "First token, median"

    edit_yaml(tree_copy / "signals.yaml", change)
    base, cand = (str(p) for p in runs)
    assert main(["gate", base, cand, "--json", "--tree-dir", str(tree_copy)]) in (0, 1)
    by_id = {m["metric"]: m for m in json.loads(capsys.readouterr().out)["metrics"]}
    assert "ttft_p90" not in by_id and by_id["ttft_p50"]["label"] == "First token, median"
    assert main(["gate", base, cand, "--metric", "ttft_p90", "--max-regression", "5%",
                 "--tree-dir", str(tree_copy)]) == 2
    assert "unknown metric 'ttft_p90'" in capsys.readouterr().err
    assert main(["gate", base, cand, "--json"]) in (0, 1)  # the repository's tree again: both are there
    by_id = {m["metric"]: m for m in json.loads(capsys.readouterr().out)["metrics"]}
    assert "ttft_p90" in by_id and by_id["ttft_p50"]["label"] == "TTFT p50"


def test_simulate_and_the_demo_read_the_scenarios_of_the_tree_dir(tree_copy, tmp_path, capsys):
    from triage.service.windows import demo_pair, demo_scenarios

    def change(doc):
        queueing = next(s for s in doc["scenarios"] if s["id"] == "queueing")
        doc["scenarios"] = [s for s in doc["scenarios"] if s["id"] != "kv_pressure"]
        doc["scenarios"].append({**queueing, "id": "toy_burst", "title": {"en": "Toy burst", "zh": "玩具突发"}})

    edit_yaml(tree_copy / "scenarios.yaml", change)
    out = tmp_path / "toy.om"
    args = ["simulate", "--scenario", "toy_burst", "--openmetrics", str(out), "--minutes", "1"]
    assert main([*args, "--tree-dir", str(tree_copy)]) == 0
    assert "of 'toy_burst'" in capsys.readouterr().out and out.stat().st_size > 0
    assert main(args) == 2 and "unknown scenario 'toy_burst'" in capsys.readouterr().err

    use_tree_dir(tree_copy)  # what the CLI's --tree-dir does for the process
    assert "toy_burst" in demo_scenarios() and "kv_pressure" not in demo_scenarios()
    with pytest.raises(TriageError, match="unknown demo scenario 'kv_pressure'"):
        demo_pair("kv_pressure", 5)
    use_tree_dir(None)
    assert "kv_pressure" in demo_scenarios() and "toy_burst" not in demo_scenarios()


def test_fleet_groups_by_the_target_labels_of_the_tree_dir(tree_copy):
    """The labels a fleet read groups by (diagnosis.fleet.rule_labels, the raw read's replicas): the target labels
    of the run's tree, as `triage rules --tree-dir` writes the recording rules with."""
    from triage.knowledge.loader import load_knowledge
    from triage.knowledge.replicas import replica_labels, target_labels

    edit_yaml(tree_copy / "alerting.yaml", lambda d: d.update(target_labels=[*d["target_labels"], "cluster"]))
    assert "cluster" not in target_labels()
    use_tree_dir(tree_copy)
    assert target_labels()[-1] == "cluster" and "cluster" in replica_labels(target_labels(), load_knowledge().engines)
    use_tree_dir(None)
    assert "cluster" not in target_labels()


def test_tree_chart_draws_the_nodes_of_the_tree_dir(tree_copy):
    from tests.apptest_tools import open_page

    edit_yaml(tree_copy / "tree.yaml", lambda d: d["symptoms"][0]["short"].update(en="Toy first tokens"))

    def chart_text() -> str:
        at = open_page("pages/diagnose.py")
        return "".join(chart.proto.spec for chart in at.get("plotly_chart"))

    assert "Toy first tokens" not in chart_text()
    use_tree_dir(tree_copy)
    assert "Toy first tokens" in chart_text()


def test_live_page_explains_missing_metrics_from_the_engine_maps_of_the_tree_dir(tree_copy):
    from components.live_view import _missing_texts
    from components.shell import knowledge

    edit_yaml(tree_copy / "engines" / "vllm.yaml", lambda d: d["metrics"][0]["missing"].update(en="Toy: no TTFT."))
    assert "Toy: no TTFT." not in _missing_texts(knowledge().source_dir)
    use_tree_dir(tree_copy)
    assert "Toy: no TTFT." in _missing_texts(knowledge().source_dir)
