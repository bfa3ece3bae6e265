"""The knobs in tree/techniques/ agree with the committed parser dumps of the engine versions they name
(tree/engines/flags/, written by scripts/verify_knobs.py); no engine is installed here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from triage.knowledge.knobs import (
    FLAGS_DIR,
    Dump,
    check_argv,
    check_claims,
    check_examples,
    check_flags,
    example_commands,
    flag_refs,
    literal,
    load_dump,
    paper_url,
    versions_line,
    well_formed_paper,
)
from triage.knowledge.loader import DEFAULT_TREE_DIR, load_knowledge

KB = load_knowledge()
TECHNIQUES = sorted(KB.techniques)


def _file(tid: str) -> str:
    return f"tree/techniques/{tid}.yaml"


@pytest.mark.parametrize("tid", TECHNIQUES)
def test_flags_match_the_dump_of_the_named_version(tid):
    problems = check_flags(KB.techniques[tid], _file(tid))
    assert not problems, "\n".join(map(str, problems))


@pytest.mark.parametrize("tid", TECHNIQUES)
def test_examples_match_the_dump_of_the_named_version(tid):
    problems = check_examples(KB.techniques[tid], _file(tid))
    assert not problems, "\n".join(map(str, problems))


@pytest.mark.parametrize("tid", TECHNIQUES)
def test_published_claims_name_a_well_formed_paper(tid):
    tech = KB.techniques[tid]
    problems = check_claims(tech, _file(tid))
    assert not problems, "\n".join(map(str, problems))
    for gain in tech.expected_gain.published:
        assert gain.papers or gain.url.startswith("https://"), gain.source


def test_every_named_version_has_a_committed_dump():
    for tech in KB.techniques.values():
        for tool, version in tech.verified.items():
            assert load_dump(tool, version).flags, f"{tech.id}: {tool} {version}"


def test_dumps_are_what_the_script_writes():
    for path in sorted(FLAGS_DIR.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        assert path.name == f"{data['engine']}-{data['version']}.json"
        assert data["flags"] and data.get("source")
        for name, entry in data["flags"].items():
            assert name == entry["names"][0]


@pytest.mark.parametrize("ref,ok", [
    ("arXiv:2403.02310", True), ("arXiv:2401.09670v3", True), ("arXiv:hep-th/9901001", True),
    ("10.1145/3600006.3613165", True), ("2403.02310", False), ("arXiv:2403.0231", False),
    ("arxiv:2403.02310", False), ("doi:10.1145/x", False), ("10.1/x", False),
])
def test_paper_ids_are_checked_for_form(ref, ok):
    assert well_formed_paper(ref) is ok


def test_paper_links():
    assert paper_url("arXiv:2403.02310") == "https://arxiv.org/abs/2403.02310"
    assert paper_url("10.1145/3600006.3613165") == "https://doi.org/10.1145/3600006.3613165"


def test_literal_defaults():
    assert literal("0 (no cap)").value == 0
    assert literal('"0.92"').value == 0.92
    assert literal("False").value is False
    assert literal("unset (off)").value is None
    assert literal("fcfs").value == "fcfs"
    assert literal("by GPU memory: < 20 GB 2048") is None


def test_flag_text_grammar():
    assert [(r.tool, r.kind, r.name) for r in flag_refs("sglang", "router --cb-failure-threshold / --queue-size")] == [
        ("sglang-router", "option", "--cb-failure-threshold"), ("sglang-router", "option", "--queue-size")]
    ref = flag_refs("vllm", "--compilation-config cudagraph_mode=FULL_DECODE_ONLY")[0]
    assert (ref.kind, ref.key, ref.value) == ("config", "cudagraph_mode", "FULL_DECODE_ONLY")
    assert flag_refs("vllm", "VLLM_CACHE_ROOT", env=True)[0].kind == "env"
    ref = flag_refs("vllm", "kv_load_failure_policy", inside="--kv-transfer-config")[0]
    assert (ref.kind, ref.name, ref.key) == ("config", "--kv-transfer-config", "kv_load_failure_policy")
    assert flag_refs("vllm", "--routing-logic (production-stack router)")[0].kind == "external"
    assert flag_refs("sglang", "--schedule-policy lpm")[0].value == "lpm"
    for text in ("--foo (somewhere else)", "VLLM_CACHE_ROOT (environment variable)"):  # env: true says it now
        with pytest.raises(ValueError):
            flag_refs("vllm", text)


def test_example_commands_split_env_comments_and_continuations():
    cmds = example_commands("# a comment\nCUDA_VISIBLE_DEVICES=0 vllm serve m \\\n  --max-num-seqs 8\n"
                            "python -m sglang_router.launch_router --worker-urls http://a\nfoo --bar\n")
    assert [c.tool for c in cmds] == ["vllm", "sglang-router", None]
    assert cmds[0].argv == ("m", "--max-num-seqs", "8")
    assert cmds[0].env == (("CUDA_VISIBLE_DEVICES", "0"),)


def test_argv_check_reads_like_argparse():
    vllm = load_dump("vllm", "0.33.0")
    assert check_argv(vllm, ("m", "--max-num-batched-tokens", "2048", "-O2")) == []
    gone = check_argv(vllm, ("m", "--max-num-partial-prefills", "2"))
    assert "unrecognized argument --max-num-partial-prefills" in gone
    spec = '{"method": "medusa", "num_speculative_tokens": 3}'
    assert any("medusa" in p for p in check_argv(vllm, ("m", "--speculative-config", spec)))
    kv = '{"kv_connector": "P2pNcclConnector", "kv_role": "kv_both"}'
    assert any("P2pNcclConnector" in p for p in check_argv(vllm, ("m", "--kv-transfer-config", kv)))
    assert any("not a choice" in p for p in check_argv(vllm, ("m", "--quantization", "marlin")))
    sglang = load_dump("sglang", "0.5.23")
    assert any("ambiguous" in p for p in check_argv(sglang, ("--cuda-graph-max-bs", "256")))
    assert any("fp4_e2m1" in p for p in check_argv(sglang, ("--kv-cache-dtype", "fp4_e2m1")))
    router = load_dump("sglang-router", "0.3.2")
    assert any("consistent_hashing" in p for p in check_argv(router, ("--policy", "consistent_hashing")))
    tgi = load_dump("tgi", "3.3.7")
    assert check_argv(tgi, ("--model-id", "m", "-p", "8080", "--quantize", "fp8")) == []
    assert check_argv(tgi, ("--max-batch-prefill",)) != []  # clap does not abbreviate


def _tree_with(tmp_path: Path, tid: str, old: str, new: str) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(DEFAULT_TREE_DIR, tree, ignore=shutil.ignore_patterns("sample"))
    shutil.copytree(DEFAULT_TREE_DIR / "sample", tree / "sample")
    path = tree / "techniques" / f"{tid}.yaml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return tree


@pytest.mark.parametrize("tid,old,new,expect", [
    ("continuous_batching", 'default: "0.92"', 'default: "0.9"', "the parser's default is 0.92"),
    ("chunked_prefill", '- flag: "--long-prefill-token-threshold"', '- flag: "--max-num-partial-prefills"',
     "--max-num-partial-prefills is not an option of vLLM 0.33.0"),
    ("prefix_caching", '- flag: "--schedule-policy lpm"', '- flag: "--schedule-policy fastest"',
     "fastest is not a choice of --schedule-policy"),
    ("chunked_prefill", "default: 0\n", "default: null\n", "default stated None, the parser's default is 0"),
    ("chunked_prefill", "default: 0\n        default_note:", "default: null\n        default_rule:",
     "default is a rule in words but the parser's default is the literal 0"),
    ("request_limits", "flag: VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS\n", "flag: VLLM_ENGINE_ITERATION_TIMEOUT_S\n",
     "VLLM_ENGINE_ITERATION_TIMEOUT_S is not an environment variable vLLM 0.33.0 reads"),
])
def test_a_contradicted_entry_fails_naming_file_flag_and_version(tmp_path, tid, old, new, expect):
    kb = load_knowledge(_tree_with(tmp_path, tid, old, new))
    problems = [str(p) for p in check_flags(kb.techniques[tid], _file(tid))]
    assert any(expect in p and p.startswith(_file(tid)) for p in problems), problems


def test_a_flag_entry_is_data_refused_when_contradictory():
    from pydantic import ValidationError

    from triage.knowledge.model import Flag

    words = {"en": "off", "zh": "关闭"}
    flag = Flag(flag="--a / --b", default=[None, 2], default_note=words, meaning=words)
    assert flag.defaults() == [None, 2] and Flag(flag="--a", default="0.92 / 32", meaning=words).defaults() == [
        "0.92", "32"]
    for bad in ({"default_note": words, "default_rule": words}, {"env": True, "inside": "--x"}, {"default": {}},
                {"default": "unset (off)"}, {"default": "0.92 / unset"}, {"default": ["off", "unset"]}):
        with pytest.raises(ValidationError):
            Flag(**{"flag": "X", "default": None, "meaning": words, **bad})
    with pytest.raises(ValidationError):  # every entry states its default, null when unset
        Flag(flag="X", meaning=words)


def test_a_version_without_a_dump_fails(tmp_path):
    tree = _tree_with(tmp_path, "streaming", 'vllm: "0.33.0"', 'vllm: "0.32.0"')
    kb = load_knowledge(tree)
    problems = [str(p) for p in check_flags(kb.techniques["streaming"], _file("streaming"))]
    assert any("vllm-0.32.0.json" in p and "vLLM 0.32.0" in p for p in problems), problems


def test_versions_line_in_both_languages():
    verified = KB.techniques["prefix_aware_routing"].verified
    assert versions_line(verified) == "vLLM 0.33.0, SGLang 0.5.23, sglang-router 0.3.2, vllm-router 0.1.17, TGI 3.3.7"
    assert "、" in versions_line(verified, "、")


def test_dump_type_is_frozen():
    assert Dump.__dataclass_params__.frozen  # type: ignore[attr-defined]
