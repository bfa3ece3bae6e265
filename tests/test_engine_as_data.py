"""An engine is data: one new tree/engines/<id>.yaml in a copy of the tree diagnoses a scrape in its names,
without any Python change."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from tests.cli_tools import run_triage
from tests.conftest import edit_yaml
from tests.prom_harness import PROMETHEUS, PROMTOOL, data_end, generate_openmetrics, start_prometheus
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.verdict import engine_id, first_actions, ranked_techniques
from triage.diagnosis.verdict import verdict as verdict_of
from triage.diagnosis.window import diagnose_window
from triage.errors import TriageError
from triage.knowledge import DEFAULT_TREE_DIR
from triage.knowledge.knobs import check_technique, tools_of, versions_line
from triage.knowledge.loader import load_knowledge
from triage.sources.metrics.exposition import parse_metrics_text
from triage.sources.metrics.snapshot_window import SnapshotWindow

ROOT = Path(__file__).resolve().parent.parent
SCRAPE = ROOT / "tests" / "fixtures" / "metrics" / "vllm.txt"
RENAMES = {"kv_cache_usage_perc": "kv_blocks_used_ratio", "num_requests_waiting": "queue_depth"}


def grown(text: str) -> str:
    """The same server a minute later: every counter and histogram series doubled (rates equal the first values)."""
    out = []
    for line in text.splitlines():
        found = re.match(r"^([^#\s{]+)(\{[^}]*\})?\s+(\S+)$", line)
        if found and found.group(1).endswith(("_total", "_bucket", "_sum", "_count")):
            line = f"{found.group(1)}{found.group(2) or ''} {float(found.group(3)) * 2}"
        out.append(line)
    return "\n".join(out) + "\n"


def as_acme(text: str) -> str:
    """The scrape as a made-up engine would expose it: its own prefix, two metrics under names of its own."""
    for old, new in RENAMES.items():
        text = re.sub(rf"vllm:{old}\b", f"acme:{new}", text)
    return text.replace("vllm:", "acme:")


def acme_engine() -> dict:
    """tree/engines/acme.yaml: vLLM's map re-labelled (prefix acme:, its own names), no launcher (vLLM's is
    vllm serve)."""
    spec = yaml.safe_load((DEFAULT_TREE_DIR / "engines" / "vllm.yaml").read_text(encoding="utf-8"))
    spec.update(id="acme", title="Acme Serve", prefixes=["acme:"])
    # a new engine's knobs are optional
    for key in ("renamed", "removed", "renamed_prefixes", "knobs_required", "launcher"):
        spec.pop(key, None)
    spec["detect"] = [RENAMES.get(n, n) for n in spec["detect"] if n != "gpu_cache_usage_perc"]
    for metric in spec["metrics"]:
        metric["names"] = [RENAMES.get(n, n) for n in metric["names"]]
    return spec


def run(tree: Path | None, *source: str) -> subprocess.CompletedProcess:
    extra = ["--tree-dir", str(tree)] if tree else []
    return run_triage("diagnose", *source, "--json", *extra)  # in this process (tests/cli_tools.py)


def diagnose(tree: Path | None, before: Path, after: Path) -> subprocess.CompletedProcess:
    return run(tree, "--scrape", str(before), str(after), "--interval", "60")


def verdict(out: subprocess.CompletedProcess) -> tuple[list, list]:
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    return ([(s["symptom"], s["present"]) for s in data["symptoms"]],
            sorted((f["cause"], f["symptom"]) for f in data["findings"]))


def test_a_new_engine_yaml_diagnoses_its_scrape(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(DEFAULT_TREE_DIR, tree)
    text = SCRAPE.read_text(encoding="utf-8")
    vllm_before, vllm_after = tmp_path / "v1.txt", tmp_path / "v2.txt"
    vllm_before.write_text(text, encoding="utf-8")
    vllm_after.write_text(grown(text), encoding="utf-8")
    acme_before, acme_after = tmp_path / "a1.txt", tmp_path / "a2.txt"
    acme_before.write_text(as_acme(text), encoding="utf-8")
    acme_after.write_text(as_acme(grown(text)), encoding="utf-8")
    assert "vllm:" not in acme_before.read_text(encoding="utf-8")

    unknown = diagnose(tree, acme_before, acme_after)  # the tree does not know acme yet
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1

    (tree / "engines" / "acme.yaml").write_text(yaml.safe_dump(acme_engine(), allow_unicode=True), encoding="utf-8")
    expected = verdict(diagnose(None, vllm_before, vllm_after))
    assert ("memory.kv_cache", "memory") in expected[1]  # the scrape does say something
    assert verdict(diagnose(tree, acme_before, acme_after)) == expected
    nothing = tmp_path / "nothing.txt"
    nothing.write_text("# TYPE other_metric gauge\nother_metric 1\n", encoding="utf-8")
    out = diagnose(tree, nothing, nothing)  # the message names every serving engine the maps know
    assert out.returncode == 2 and "no vLLM, SGLang, TGI or Acme Serve metrics" in out.stderr


ACME_ACTION = "--acme-kv-fraction 0.95"
ACME_KNOBS = {"on_by_default": {"en": "Always on in Acme Serve.", "zh": "Acme Serve 中始终开启。"}, "default_on": True,
              "flags": [{"flag": "--acme-kv-block", "default": "32", "meaning": {"en": "Tokens per KV block.",
                                                                                "zh": "每个 KV 块的 token 数。"}}],
              "example": "ACME_KV_POOL=gpu acme serve my-model --acme-kv-block 32\n"}
ACME_LAUNCHER = {"label": "Acme Serve", "order": 5, "commands": [["acme", "serve"]], "env_prefixes": ["ACME_"]}
ACME_DUMP = {"engine": "acme", "version": "1.2.0", "allow_abbrev": False, "env": ["ACME_KV_POOL"],
             "flags": {"acme_kv_block": {"names": ["--acme-kv-block"], "default": 32, "takes_value": True}}}


def test_a_new_serving_engine_yaml_brings_its_own_first_action_and_technique_flags(tmp_path):
    """A serving engine is data end to end: with tree/engines/acme.yaml, a first action and a technique's knobs
    for acme in the YAML, the verdict of an acme window names acme's own command and flags."""
    tree = tmp_path / "tree"
    shutil.copytree(DEFAULT_TREE_DIR, tree)
    (tree / "engines" / "acme.yaml").write_text(yaml.safe_dump(acme_engine(), allow_unicode=True), encoding="utf-8")
    before = load_knowledge(tree)
    assert "acme" in before.serving and "acme" not in before.knob_engines  # knobs optional for a new engine

    def add_action(data: dict) -> None:
        for symptom in data["symptoms"]:
            for cause in symptom["causes"]:
                if cause["id"] == "memory.kv_cache":
                    cause["first_action"]["acme"] = ACME_ACTION

    edit_yaml(tree / "tree.yaml", add_action)
    edit_yaml(tree / "techniques" / "paged_attention.yaml", lambda d: d["knobs"].update(acme=ACME_KNOBS))
    kb = load_knowledge(tree)
    assert engine_id("acme-serve", kb) == "acme"

    text = SCRAPE.read_text(encoding="utf-8")
    snaps = [parse_metrics_text(as_acme(t), at, "acme") for t, at in ((text, 0.0), (grown(text), 60.0))]
    live = diagnose_window(kb, SnapshotWindow(snaps, engines=kb.engines), resolve_slo(kb, "chat"))
    assert live.engine == "acme"
    kv = next(f for f in live.diagnosis.findings if f.cause == "memory.kv_cache")  # as for vLLM's scrape
    assert verdict_of(kb, live.diagnosis, live.engine).engine == "acme"
    assert [(a.engine, a.command) for a in first_actions(kb, kv.cause, "acme")] == [("acme", ACME_ACTION)]
    assert ("acme", ACME_ACTION) in [(a.engine, a.command) for a in first_actions(kb, kv.cause, None)]
    paged = next(r for r in ranked_techniques(kb, kv.techniques, "acme") if r.id == "paged_attention")
    assert paged.default_on  # acme's own knobs say it is always on
    assert kb.techniques["paged_attention"].knobs["acme"].flags[0].flag == "--acme-kv-block"

    # with a launcher in its map and a parser dump, acme's technique flags are checked like vLLM's
    before_launcher = {p.message for p in check_technique(kb.techniques["paged_attention"], "t",
                                                           tree / "engines" / "flags", tools_of(kb.engines))}
    assert {"`verified` names no acme version", "no parser dump for: ACME_KV_POOL=gpu acme serve my-model "
            "--acme-kv-block 32"} <= before_launcher
    edit_yaml(tree / "engines" / "acme.yaml", lambda d: d.update(launcher=ACME_LAUNCHER))
    edit_yaml(tree / "techniques" / "paged_attention.yaml", lambda d: d["verified"].update(acme="1.2.0"))
    (tree / "engines" / "flags" / "acme-1.2.0.json").write_text(json.dumps(ACME_DUMP), encoding="utf-8")
    kb = load_knowledge(tree)
    tools = tools_of(kb.engines)
    paged = kb.techniques["paged_attention"]
    assert check_technique(paged, "t", tree / "engines" / "flags", tools) == []
    assert versions_line(paged.verified, tools=tools).endswith(", Acme Serve 1.2.0")
    wrong = ACME_KNOBS | {"flags": [ACME_KNOBS["flags"][0] | {"default": "16"}],
                          "example": "ACME_KV_SIZE=1 acme serve my-model --acme-kv 32\n"}
    edit_yaml(tree / "techniques" / "paged_attention.yaml", lambda d: d["knobs"].update(acme=wrong))
    problems = {p.message for p in check_technique(load_knowledge(tree).techniques["paged_attention"], "t",
                                                    tree / "engines" / "flags", tools)}
    assert {"default stated 16, the parser's default is 32", "unrecognized argument --acme-kv",
            "ACME_KV_SIZE is not an environment variable acme 1.2.0 reads"} <= problems

    edit_yaml(tree / "engines" / "acme.yaml", lambda d: d["launcher"].update(router={
        "id": "vllm-router", "label": "r", "commands": [["r"]]}))
    with pytest.raises(TriageError, match="launched by two engine maps: vllm-router"):
        load_knowledge(tree)
    edit_yaml(tree / "engines" / "acme.yaml", lambda d: d["launcher"].pop("router"))
    edit_yaml(tree / "techniques" / "paged_attention.yaml", lambda d: d["verified"].update(nope="1.0"))
    with pytest.raises(TriageError, match="no launcher for: nope"):
        load_knowledge(tree)
    edit_yaml(tree / "techniques" / "paged_attention.yaml", lambda d: d["knobs"].update(nope=ACME_KNOBS))
    with pytest.raises(TriageError, match="unknown serving engine"):
        load_knowledge(tree)


@pytest.fixture(scope="module")
def two_prometheus(tmp_path_factory):
    """The harness's vLLM-like data in one Prometheus, the same data in acme's names in another."""
    if not (Path(PROMETHEUS).exists() and Path(PROMTOOL).exists()):
        pytest.skip("prometheus / promtool are not installed")
    end = data_end()
    data = generate_openmetrics(end)
    vllm = start_prometheus(tmp_path_factory.mktemp("vllm"), data, end)
    try:
        acme = start_prometheus(tmp_path_factory.mktemp("acme"), as_acme(data), end)
    except BaseException:
        vllm.stop()
        raise
    yield vllm, acme
    vllm.stop()
    acme.stop()


def test_a_new_engine_yaml_reads_a_prometheus_in_its_names(tmp_path, two_prometheus):
    vllm, acme = two_prometheus
    tree = tmp_path / "tree"
    shutil.copytree(DEFAULT_TREE_DIR, tree)
    window = ["--window", "15m", "--end", datetime.fromtimestamp(vllm.end, UTC).isoformat()]
    unknown = run(tree, "--prometheus", acme.url, *window)
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1 and "metrics in this window" in unknown.stderr
    (tree / "engines" / "acme.yaml").write_text(yaml.safe_dump(acme_engine(), allow_unicode=True), encoding="utf-8")
    expected = verdict(run(None, "--prometheus", vllm.url, *window))
    assert any(present for _, present in expected[0])  # the data does show a symptom
    assert verdict(run(tree, "--prometheus", acme.url, *window)) == expected
