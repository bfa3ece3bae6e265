"""The real knowledge base is complete, and every kind of broken YAML is refused by name."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import edit_yaml
from triage.errors import TriageError
from triage.knowledge.loader import load_knowledge

SYMPTOMS = ["ttft", "tpot", "memory", "tail_latency", "throughput"]
REQUIRED_CAUSES = """
ttft.prefill_compute ttft.queueing ttft.repeated_prefill ttft.prefill_blocks_decode
tpot.memory_bound tpot.one_token_per_step tpot.batch_interference tpot.single_gpu_compute
memory.weights memory.kv_cache memory.batch_activation
tail_latency.long_requests tail_latency.preemption_storm tail_latency.unbounded_requests tail_latency.slo_sensitive
throughput.expensive_requests throughput.low_batch_utilization throughput.repeated_prefix throughput.multi_gpu
throughput.long_sequences
""".split()
REQUIRED_TECHNIQUES = """
prefix_caching prefix_aware_routing chunked_prefill attention_kernels gemm_kernels continuous_batching scale_out
pd_disaggregation weight_quantization kv_cache_quantization speculative_decoding preemption_control parallelism
paged_attention slo_aware_scheduling request_limits kv_budget_reservation streaming
""".split()
# The seed's diagram and tables, cause → techniques in the seed's order (first ones must lead).
SEED_ORDER = {
    "ttft.prefill_compute": ["chunked_prefill", "attention_kernels", "gemm_kernels"],
    "ttft.queueing": ["continuous_batching", "scale_out", "pd_disaggregation"],
    "ttft.repeated_prefill": ["prefix_caching", "prefix_aware_routing"],
    "tpot.memory_bound": ["attention_kernels", "weight_quantization", "kv_cache_quantization"],
    "tpot.one_token_per_step": ["speculative_decoding"],
    "memory.weights": ["weight_quantization", "parallelism"],
    "memory.kv_cache": ["paged_attention", "kv_cache_quantization", "pd_disaggregation"],
    "tail_latency.preemption_storm": ["kv_budget_reservation", "preemption_control"],
    "throughput.low_batch_utilization": ["continuous_batching", "prefix_caching"],
}


def test_symptoms_in_seed_order(kb):
    """The seed's five symptoms, judged per replica, then the fleet's (issue 28), judged over every replica."""
    assert [s.id for s in kb.symptoms] == [*SYMPTOMS, "fleet"]
    assert [s.scope for s in kb.symptoms] == ["replica"] * len(SYMPTOMS) + ["fleet"]


@pytest.mark.parametrize("cause_id", REQUIRED_CAUSES)
def test_required_cause_exists(kb, cause_id):
    assert cause_id in kb.causes
    assert kb.parent[cause_id] == cause_id.split(".")[0]


@pytest.mark.parametrize("tid", REQUIRED_TECHNIQUES)
def test_required_technique_is_reachable(kb, tid):
    assert tid in kb.techniques
    assert kb.causes_reaching(tid), f"{tid} is not reached by any cause"


@pytest.mark.parametrize("cause_id,expected", SEED_ORDER.items())
def test_techniques_follow_the_seed(kb, cause_id, expected):
    assert [t.id for t in kb.causes[cause_id].techniques][: len(expected)] == expected


def test_every_technique_has_every_section_in_both_languages(kb):
    for tech in kb.techniques.values():
        assert set(tech.knobs) == {"vllm", "sglang", "tgi"}
        assert tech.checklist and tech.sources and tech.side_effects and tech.when_not_to_use
        for text in (tech.title, tech.principle, tech.verify.benchmark, tech.expected_gain.seed):
            assert text.en.strip() and text.zh.strip()


def test_guidance_has_flow_and_wrong_usages(kb):
    assert [s.id for s in kb.guidance.usage_flow] == ["baseline", "symptom", "technique", "minimal_change", "verify"]
    assert len(kb.guidance.wrong_usages) == 3


# A book section ("(10.4)", "a 9.2 load test", "9.4:", "Ch. 2", "第 2 章") means nothing to a user who does
# not hold the book; version numbers ("0.9.2+", "127.0.0.1:", "jitter 0.2:") are not sections.
SECTION_REF = re.compile(r"[（(]\d{1,2}\.[1-9]\d?[）)]"
                         r"|(?<![\d.])[1-9]\d?\.\d{1,2}\s*(?:[:：]|load test|regression|压测|回归)"
                         r"|\bCh\.\s*\d|第\s*\d+\s*章")
TREE_DIR = Path(__file__).resolve().parent.parent / "tree"


def _strings(node: object, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _strings(value, f"{path}.{i}")
    elif isinstance(node, str):
        yield path, node


def test_no_shown_text_cites_a_book_section():
    """seed_chapter keeps the source's chapter for maintainers; no text a user reads cites a section number."""
    cited = [f"{f.relative_to(TREE_DIR)}{path}: {m.group()!r}"
             for f in sorted(TREE_DIR.rglob("*.yaml"))
             for path, text in _strings(yaml.safe_load(f.read_text(encoding="utf-8")))
             if ".seed_chapter" not in path
             for m in SECTION_REF.finditer(text)]
    assert not cited, cited


def test_path_to_cause_and_technique(kb):
    assert kb.path_to("ttft.queueing") == ["root", "ttft", "ttft.queueing"]
    assert kb.path_to("prefix_caching")[-1] == "prefix_caching"


def test_tiny_tree_loads(tiny_tree):
    assert len(load_knowledge(tiny_tree).causes) == 1


def _refusal(tree_dir) -> str:
    with pytest.raises(TriageError) as err:
        load_knowledge(tree_dir)
    return err.value.line()


def test_unknown_technique_id(tiny_tree):
    edit_yaml(tiny_tree / "tree.yaml", lambda d: d["symptoms"][0]["causes"][0]["techniques"].append(
        {"id": "warp_drive", "gain": {"en": "x", "zh": "x"}}))
    line = _refusal(tiny_tree)
    assert "tree.yaml" in line and "techniques[1]" in line and "unknown technique id 'warp_drive'" in line


def test_cause_without_techniques(tiny_tree):
    edit_yaml(tiny_tree / "tree.yaml", lambda d: d["symptoms"][0]["causes"][0].update(techniques=[]))
    line = _refusal(tiny_tree)
    assert "tree.yaml" in line and "causes.0.techniques" in line and "at least 1" in line


def test_technique_no_cause_reaches(tiny_tree):
    src = tiny_tree / "techniques"
    only = next(src.glob("*.yaml"))
    edit_yaml(only, lambda d: None)
    orphan = src / "orphan.yaml"
    shutil.copy(only, orphan)
    edit_yaml(orphan, lambda d: d.update(id="orphan"))
    line = _refusal(tiny_tree)
    assert "orphan.yaml" in line and "not reached by any cause" in line


def test_missing_language(tiny_tree):
    edit_yaml(tiny_tree / "tree.yaml", lambda d: d["symptoms"][0]["title"].pop("zh"))
    line = _refusal(tiny_tree)
    assert "tree.yaml" in line and "symptoms[0].title.zh" in line and "missing language 'zh'" in line


def test_duplicate_id(tiny_tree):
    def dup(d):
        d["symptoms"][0]["causes"].append(dict(d["symptoms"][0]["causes"][0]))
    edit_yaml(tiny_tree / "tree.yaml", dup)
    line = _refusal(tiny_tree)
    assert "tree.yaml" in line and "duplicate id 'ttft.prefill_compute'" in line


def test_duplicate_technique_id_across_files(tiny_tree):
    only = next((tiny_tree / "techniques").glob("*.yaml"))
    shutil.copy(only, tiny_tree / "techniques" / "zz_copy.yaml")
    line = _refusal(tiny_tree)
    assert "zz_copy.yaml" in line and "duplicate id" in line


def test_unknown_field(tiny_tree):
    only = next((tiny_tree / "techniques").glob("*.yaml"))
    edit_yaml(only, lambda d: d.update(colour="red"))
    line = _refusal(tiny_tree)
    assert only.name in line and "colour" in line and "unknown field" in line


def test_invalid_yaml_syntax(tiny_tree):
    (tiny_tree / "guidance.yaml").write_text("root: {en: [unclosed\n", encoding="utf-8")
    line = _refusal(tiny_tree)
    assert "guidance.yaml" in line and "invalid YAML" in line


def test_checklist_must_go_config_first(tiny_tree):
    only = next((tiny_tree / "techniques").glob("*.yaml"))
    edit_yaml(only, lambda d: d["checklist"].insert(0, {**d["checklist"][0], "level": "architecture"}))
    line = _refusal(tiny_tree)
    assert "checklist" in line and "config → model → architecture" in line


def test_every_slo_number_is_cited_and_interactive_sits_beside_chat(kb):
    assert list(kb.slo_presets)[:2] == ["chat", "interactive"] and kb.default_slo == "chat"
    for preset in kb.slo_presets.values():
        numbers = {k for k, v in preset.values.items() if not isinstance(v, bool)}
        assert set(preset.cite) == numbers and preset.source.en and preset.source.zh
    chat, interactive = kb.slo_presets["chat"].values, kb.slo_presets["interactive"].values
    assert interactive["tpot_p99_s"] == 0.05 and interactive["ttft_p99_s"] == 0.2
    assert chat["tpot_p99_s"] == 0.2 and chat["ttft_p99_s"] == 2.0
    assert "MLPerf" in kb.slo_presets["chat"].cite["ttft_p99_s"]
    assert "GuideLLM" in kb.slo_presets["interactive"].cite["tpot_p99_s"]


def test_an_uncited_slo_number_is_refused(tiny_tree):
    edit_yaml(tiny_tree / "slo.yaml", lambda d: d["presets"]["chat"]["cite"].pop("tpot_p99_s"))
    with pytest.raises(TriageError, match="cite must give one non-blank citation per number"):
        load_knowledge(tiny_tree)


def _set_recipe(name: str, recipe: dict):
    def change(data: dict) -> None:
        next(s for s in data["signals"] if s["name"] == name)["recipe"] = recipe
    return change


@pytest.mark.parametrize(("name", "recipe", "says"), [
    ("ttft_p5_s", {"div": [{"signal": "ttft_spread"}, {"signal": "ttft_p99_s"}]},
     "recipe reads itself: ttft_p5_s → ttft_spread → ttft_p5_s"),
    ("ttft_p5_s", {"signal": "warp_speed"}, "recipe reads unknown signal 'warp_speed'"),
    ("ttft_p5_s", {"need": {"kind": "quantile", "key": "ttft", "q": 0.05}, "how": {"id": "server.nope"}},
     "unknown message 'server.nope'"),
    ("ttft_p5_s", {"need": {"kind": "quantile", "key": "ttft", "q": 0.05}, "how": {"id": "server.ttft_hist"}},
     "message 'server.ttft_hist' takes parameters ['p'], got []"),
])
def test_a_recipe_that_loops_or_names_a_wrong_message_is_refused(tiny_tree, name, recipe, says):
    edit_yaml(tiny_tree / "signals.yaml", _set_recipe(name, recipe))
    line = _refusal(tiny_tree)
    assert "signals.yaml" in line and says in line, line


def test_a_first_action_for_an_unknown_engine_or_missing_a_required_one_is_refused(tiny_tree):
    def action(change):
        def edit(data: dict) -> None:
            change(data["symptoms"][0]["causes"][0]["first_action"])
        return edit

    first = yaml.safe_load((tiny_tree / "tree.yaml").read_text(encoding="utf-8"))["symptoms"][0]["causes"][0]
    assert "first_action" in first
    edit_yaml(tiny_tree / "tree.yaml", action(lambda a: a.update(warp="--warp 9")))
    assert "unknown serving engine(s) warp" in _refusal(tiny_tree)
    edit_yaml(tiny_tree / "tree.yaml", action(lambda a: (a.pop("warp"), a.pop("tgi"))))
    assert "first action missing for engine(s): tgi" in _refusal(tiny_tree)
