"""GPU memory calculator: hand-computed cases from techniques.md §18, config.json parsing, the CLI."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest

from triage.cli import memory as cli_memory
from triage.diagnosis.roofline import decode_floor
from triage.errors import TriageError
from triage.knowledge.specs import MemoryInput, ModelSpec, kv_bytes_per_token, load_gpus, load_models, weight_bytes
from triage.memory.calculator import GIB, branch_techniques, budget, estimate, pick_branch
from triage.memory.presets import from_cache_config, parse_hf_config, parse_startup_log

FIXTURES = Path(__file__).parent / "fixtures" / "hf_config"
MODELS, GPUS = load_models(), load_gpus()
H100 = GPUS["h100"]
L8, L70, DSV3 = MODELS["llama-3.1-8b"], MODELS["llama-3.1-70b"], MODELS["deepseek-v3"]


def inp(model: ModelSpec = L8, **kw) -> MemoryInput:
    return MemoryInput(model=model, gpu=kw.pop("gpu", H100), **kw)


# ---------------------------------------------------------------- presets


def test_presets_load_and_cover_the_brief():
    assert set(MODELS) == {"llama-3.1-8b", "llama-3.1-70b", "qwen2.5-72b", "qwen3-32b", "mixtral-8x7b", "deepseek-v3"}
    assert set(GPUS) == {"h100", "h200", "b200", "h20", "a100-80gb", "mi300x", "l40s", "l40", "l4", "a10g",
                         "rtx-4090"}
    assert next(iter(GPUS)) == "h100"  # the page's default
    assert H100.bandwidth_gbs == 3350 and H100.bf16_tflops == 989.4 and GPUS["a100-80gb"].fp8_tflops is None
    assert all(m.source for m in MODELS.values()) and all(g.source for g in GPUS.values())
    assert all(g.url.startswith("https://") for g in GPUS.values())  # each cites the page its numbers come from
    l4, b200, mi300x = GPUS["l4"], GPUS["b200"], GPUS["mi300x"]
    assert (l4.memory_gb, l4.bandwidth_gbs, l4.nvlink) == (24, 300, False) and l4.memory_gib < 24
    assert (b200.memory_gb, b200.bandwidth_gbs) == (180, 8000)
    assert (mi300x.memory_gb, mi300x.bandwidth_gbs) == (192, 5300)


def test_preset_files_refuse_unknown_fields_and_half_mla(tiny_tree: Path):
    bad = tiny_tree / "models.yaml"
    bad.write_text("models:\n  - {id: x, title: X, params_b: 1, layers: 2, hidden: 8, heads: 2, kv_heads: 2,\n"
                   "     head_dim: 4, attention: mla, max_position: 8, source: s}\n", encoding="utf-8")
    with pytest.raises(TriageError) as exc:
        load_models(tiny_tree)
    assert "kv_lora_rank" in exc.value.reason
    bad.write_text("models:\n  - {id: x, title: X, params_b: 1, layers: 2, hidden: 8, heads: 2, kv_heads: 2,\n"
                   "     head_dim: 4, attention: mha_gqa, max_position: 8, source: s, colour: red}\n", encoding="utf-8")
    with pytest.raises(TriageError) as exc:
        load_models(tiny_tree)
    assert exc.value.key == "models[0].colour" and exc.value.reason == "unknown field"


# ---------------------------------------------------------------- §18.1 formulas, by hand


def test_llama_8b_kv_per_token_is_128_kib():
    # 2 (K and V) × 32 layers × 8 KV heads × 128 head_dim × 2 bytes = 131072
    assert kv_bytes_per_token(L8, "bf16") == 131072 == 128 * 1024
    assert kv_bytes_per_token(L8, "auto") == 131072


def test_llama_70b_weights_and_kv():
    # 70.6e9 params × 2 bytes = 141.2 GB = 131.50 GiB; KV 2 × 80 × 8 × 128 × 2 = 327680 B = 320 KiB
    assert weight_bytes(L70, "bf16") / GIB == pytest.approx(131.50, abs=0.01)
    assert kv_bytes_per_token(L70, "bf16") == 320 * 1024
    assert kv_bytes_per_token(L70, "fp8") == 160 * 1024  # FP8 halves it


def test_deepseek_v3_mla_kv_uses_the_latent():
    # MLA: 61 layers × (kv_lora_rank 512 + qk_rope_head_dim 64) × 2 bytes = 70272 B ≈ 68.6 KiB (§18.2)
    assert kv_bytes_per_token(DSV3, "bf16") == 61 * 576 * 2 == 70272
    assert kv_bytes_per_token(DSV3, "fp8") == 35136
    # MLA is not head-sharded: every TP rank keeps the whole latent
    assert budget(inp(DSV3, gpu=GPUS["h200"], weights="fp8", tp=8)).kv_bytes_per_token_per_gpu == 70272


def test_quantized_weights_keep_embeddings_in_bf16():
    # Llama-3.1-8B FP8: (8.03e9 − 2 × 128256 × 4096) × 1 B + 2 × 128256 × 4096 × 2 B = 9.08 GB
    assert weight_bytes(L8, "fp8") / 1e9 == pytest.approx(9.08, abs=0.01)
    assert weight_bytes(L8, "int4") < weight_bytes(L8, "fp8") < weight_bytes(L8, "bf16")


def test_tp2_halves_weights_and_kv_per_gpu():
    one, two = budget(inp(L70, tp=1)), budget(inp(L70, tp=2))
    assert two.weights_gib == pytest.approx(one.weights_gib / 2)
    assert two.kv_bytes_per_token_per_gpu == one.kv_bytes_per_token_per_gpu // 2 == 163840


def test_pp2_halves_weights_and_layers_per_gpu():
    one, two = budget(inp(L70, tp=4)), budget(inp(L70, tp=4, pp=2))
    assert two.weights_gib == pytest.approx(one.weights_gib / 2)
    assert two.kv_bytes_per_token_per_gpu == one.kv_bytes_per_token_per_gpu // 2


def test_tp_beyond_kv_heads_replicates_kv():
    # 8 KV heads: TP 16 still keeps one KV head per GPU, so per-GPU KV stops shrinking at TP 8
    eight, sixteen = budget(inp(L70, tp=8)), budget(inp(L70, tp=16))
    assert sixteen.kv_bytes_per_token_per_gpu == eight.kv_bytes_per_token_per_gpu == 327680 // 8
    assert any("replicated" in n["en"] for n in estimate(inp(L70, tp=16)).notes)


def test_llama_8b_h100_budget_by_hand():
    # usable 0.92 (vLLM 0.33's default) × 79.19 = 72.855 GiB; weights 16.06e9 B = 14.957 GiB;
    # activation (8192 tokens × 4096 × 14 × 2 B + 32 seqs × 128256 × 4 B) = 0.890 GiB; overhead 0.3 + 0.5 GiB;
    # KV 56.207 GiB → floor(56.207 GiB / (16 × 131072 B)) = 28778 blocks = 460448 tokens → 56 × 8192-token sequences
    b = budget(inp(L8))
    assert b.usable_gib == pytest.approx(72.8548)
    assert b.weights_gib == pytest.approx(14.957, abs=1e-3)
    assert b.activation_gib == pytest.approx(0.890, abs=1e-3)
    assert b.overhead_gib == pytest.approx(0.8)
    assert b.kv_available_gib == pytest.approx(56.207, abs=1e-3)
    assert b.kv_capacity_tokens == 460448 and b.kv_capacity_tokens % 16 == 0
    assert b.max_concurrency == 460448 // 8192 == 56
    assert b.kv_needed_gib == pytest.approx(32 * 8192 * 131072 / GIB) == 32.0
    assert b.fits


@pytest.mark.parametrize("length", [2048, 8192, 32768, 131072])
def test_max_concurrency_is_capacity_over_length(length: int):
    b = budget(inp(L8, max_model_len=length))
    assert b.max_concurrency == b.kv_capacity_tokens // length


# ---------------------------------------------------------------- branch, techniques, what-ifs


def test_70b_bf16_on_one_h100_is_a_weights_problem(kb):
    b = estimate(inp(L70), kb)
    assert not b.fits and not b.starts and b.kv_capacity_tokens == 0
    assert b.branch == "memory.weights"
    assert b.techniques == [t.id for t in kb.causes["memory.weights"].techniques] == ["weight_quantization",
                                                                                     "parallelism"]
    assert b.weights_share > 1


def test_70b_ladder_follows_the_order_until_it_fits(kb):
    """Weights, then KV, then a shorter max_model_len: one H100 is enough before a second GPU is asked for."""
    steps = estimate(inp(L70), kb).ladder
    assert [s.step for s in steps] == ["weights_fp8", "weights_int4", "kv_fp8", "max_model_len"]
    assert steps[-1].fits and not any(s.fits for s in steps[:-1])
    assert steps[-1].label["en"] == "INT4 weights (use a quantized checkpoint) + FP8 KV + max_model_len 6,656"
    assert steps[-1].gpus == 1


def test_limits_come_before_a_second_gpu(kb):
    """A single GPU short of KV (8B, 256 × 32k) is offered a shorter max_model_len and fewer max_num_seqs, each
    with its exact flag and a value that fits, before TP 2; the shorter length is the one to try first."""
    b = estimate(inp(L8, max_model_len=32768, concurrency=256), kb)
    order = [w.step for w in b.what_if]
    assert order == ["weights_fp8", "weights_int4", "kv_fp8", "max_model_len", "max_num_seqs", "tp_x2"]
    steps = {w.step: w for w in b.what_if}
    length, seqs = steps["max_model_len"], steps["max_num_seqs"]
    assert length.fits and seqs.fits and not steps["tp_x2"].fits and b.try_first == "max_model_len"
    new_len = int(length.flags.removeprefix("--max-model-len "))
    assert length.flags == f"--max-model-len {new_len}" and new_len % 256 == 0 and 256 <= new_len < 32768
    assert budget(inp(L8, max_model_len=new_len, concurrency=256)).fits
    assert not budget(inp(L8, max_model_len=new_len + 256, concurrency=256)).fits  # the longest that fits
    assert seqs.flags == f"--max-num-seqs {b.max_concurrency}" and length.technique == "request_limits"
    assert length.label["en"] == f"Lower max_model_len 32,768 → {new_len:,}" and length.gpus == seqs.gpus == 1


def test_limits_are_not_offered_when_the_weights_leave_no_kv(kb):
    """70B BF16 on one H100: no length or sequence count helps while the weights alone overflow the GPU."""
    steps = [w.step for w in estimate(inp(L70), kb).what_if]
    assert "max_model_len" not in steps and "max_num_seqs" not in steps and steps[-1] == "tp_x2"


def test_int4_is_a_quantized_checkpoint_not_a_flag(kb):
    b = estimate(inp(L70), kb)
    int4 = next(w for w in b.what_if if w.step == "weights_int4")
    assert int4.label["en"] == "INT4 weights: use a quantized checkpoint (e.g. AWQ / GPTQ / FP8)"
    assert "使用量化 checkpoint" in int4.label["zh"] and int4.flags == ""
    assert not any("awq" in w.flags for w in b.what_if + b.ladder)


def test_8b_at_128k_times_64_is_a_kv_problem(kb):
    b = estimate(inp(L8, max_model_len=131072, concurrency=64), kb)
    # need: 64 × 131072 × 128 KiB = 1024 GiB of KV, far above 15 GiB of weights
    assert b.kv_cache_gib == b.kv_needed_gib == pytest.approx(1024.0)
    assert b.branch == "memory.kv_cache" and not b.fits and b.starts
    assert b.techniques == [t.id for t in kb.causes["memory.kv_cache"].techniques]


def test_small_model_with_huge_batches_is_an_activation_problem(kb):
    tiny = ModelSpec(id="tiny", title="tiny", params_b=0.5, layers=24, hidden=896, heads=14, kv_heads=2, head_dim=64,
                     vocab_size=151936)
    b = estimate(inp(tiny, max_model_len=2048, concurrency=8, max_num_batched_tokens=131072), kb)
    # activation 131072 × 896 × 14 × 2 B ≈ 3.1 GiB > weights 0.93 GiB > KV 8 × 2048 × 12 KiB = 0.19 GiB
    # it fits, so no shortage branch is named; the largest part is still said
    assert b.fits and b.branch is None and b.largest_part == "activation"
    assert pick_branch(b.weights_gib, b.kv_needed_gib, b.activation_gib) == "memory.batch_activation"
    assert branch_techniques("memory.batch_activation", kb) == ["chunked_prefill", "streaming"]


def test_fp8_kv_what_if_doubles_concurrency(kb):
    b = estimate(inp(L8), kb)
    fp8 = next(w for w in b.what_if if w.step == "kv_fp8")
    assert fp8.technique == "kv_cache_quantization"
    assert fp8.max_concurrency > b.max_concurrency and fp8.max_concurrency == pytest.approx(2 * b.max_concurrency,
                                                                                           abs=2)
    assert fp8.delta_concurrency == fp8.max_concurrency - b.max_concurrency
    assert fp8.text().startswith(f"FP8 KV [--kv-cache-dtype fp8]: frees 16.00 GiB/GPU, "
                                 f"max concurrency {fp8.max_concurrency} (+")
    assert [w.step for w in b.what_if] == ["weights_fp8", "weights_int4", "kv_fp8", "tp_x2"]


def test_what_ifs_skip_steps_already_taken(kb):
    b = estimate(inp(L8, weights="int4", kv_dtype="fp8", tp=8), kb)
    assert b.what_if == []


# ---------------------------------------------------------------- decode roofline (§18.4)


def test_decode_floor_llama_8b_batch_1_on_h100():
    # 16.06 GB of BF16 weights / 3.35 TB/s = 4.79 ms per step (§18.4), before KV reads
    f = decode_floor(inp(L8), batch=1, context=0)
    assert f.ms == pytest.approx(16.06e9 / 3.35e12 * 1e3, rel=1e-3) == pytest.approx(4.8, abs=0.05)
    assert f.bound == "memory"
    lo, hi = f.realistic_ms
    assert lo == pytest.approx(f.ms / 0.85) and hi == pytest.approx(f.ms / 0.6)


def test_decode_floor_llama_70b_tp4_and_kv_reads():
    # 70.6e9 × 2 B / 4 GPUs = 35.3 GB per GPU / 3.35 TB/s ≈ 10.5 ms (§18.4)
    assert decode_floor(inp(L70, tp=4), batch=1, context=0).ms == pytest.approx(10.5, abs=0.1)
    # + 1 sequence × 8192 tokens × 128 KiB of KV = 1.07 GB → +0.32 ms
    with_kv = decode_floor(inp(L8), batch=1, context=8192).ms
    assert with_kv - 4.794 == pytest.approx(8192 * 131072 / 3.35e12 * 1e3, abs=1e-3)


# ---------------------------------------------------------------- input errors


@pytest.mark.parametrize(("change", "key"), [({"tp": 3}, "tp"), ({"weights": "fp4"}, "weights"),
                                             ({"kv_dtype": "fp16"}, "kv_dtype"), ({"concurrency": 0}, "concurrency"),
                                             ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization")])
def test_bad_input_is_a_triage_error(change: dict, key: str):
    with pytest.raises(TriageError) as exc:
        budget(replace(inp(L8), **change))
    assert exc.value.key == key


# ---------------------------------------------------------------- config.json


def test_parse_llama_config():
    spec = parse_hf_config((FIXTURES / "llama-3.1-8b.json").read_text())
    assert (spec.layers, spec.hidden, spec.heads, spec.kv_heads, spec.head_dim) == (32, 4096, 32, 8, 128)
    assert spec.attention == "mha_gqa" and spec.active_params_b is None
    assert spec.params_b == pytest.approx(8.03, abs=0.01)  # estimated from the shapes
    assert kv_bytes_per_token(spec) == 131072


def test_parse_deepseek_config():
    spec = parse_hf_config((FIXTURES / "deepseek-v3.json").read_text())
    assert spec.attention == "mla" and (spec.kv_lora_rank, spec.qk_rope_head_dim) == (512, 64)
    assert kv_bytes_per_token(spec) == 70272
    assert spec.params_b == pytest.approx(671, abs=1) and spec.active_params_b == pytest.approx(37, abs=1)
    assert spec.checkpoint_dtype == "fp8" == DSV3.checkpoint_dtype  # quantization_config quant_method fp8


def test_parse_qwen3_and_mixtral_configs():
    qwen = parse_hf_config((FIXTURES / "qwen3-32b.json").read_text())
    assert qwen.head_dim == 128 and kv_bytes_per_token(qwen) == 256 * 1024
    assert qwen.params_b == pytest.approx(32.8, abs=0.1)
    mix = parse_hf_config((FIXTURES / "mixtral-8x7b.json").read_text())
    assert mix.params_b == pytest.approx(46.7, abs=0.1) and mix.active_params_b == pytest.approx(12.9, abs=0.1)


def test_broken_config_names_the_missing_key():
    with pytest.raises(TriageError) as exc:
        parse_hf_config((FIXTURES / "broken-no-layers.json").read_text(), where="broken.json")
    assert exc.value.key == "num_hidden_layers" and exc.value.where == "broken.json"
    assert "num_hidden_layers" in exc.value.line()


def test_config_params_override_and_missing_vocab():
    text = json.dumps({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128})
    with pytest.raises(TriageError) as exc:
        parse_hf_config(text)
    assert exc.value.key == "vocab_size"
    assert parse_hf_config(text, params_b=1.5).params_b == 1.5
    with pytest.raises(TriageError) as exc:
        parse_hf_config("{not json")
    assert exc.value.key == "line 1"


# ---------------------------------------------------------------- measured capacity


def test_cache_config_labels_give_measured_capacity():
    m = from_cache_config({"num_gpu_blocks": "27967", "block_size": "16", "cache_dtype": "auto"}, inp(L8))
    assert m.kv_capacity_tokens == 447472 and m.max_concurrency == 54 and m.source == "num_gpu_blocks × block_size"
    assert m.kv_gib == pytest.approx(447472 * 131072 / GIB)
    preferred = from_cache_config({"kv_cache_size_tokens": "400000", "num_gpu_blocks": "1"}, inp(L8))
    assert preferred.kv_capacity_tokens == 400000 and preferred.source == "kv_cache_size_tokens"
    with pytest.raises(TriageError) as exc:
        from_cache_config({"block_size": "16", "num_gpu_blocks": "None"}, inp(L8))
    assert exc.value.key == "num_gpu_blocks"


def test_startup_log_lines():
    log = ("Model loading took 14.99 GiB and 4.5 seconds\nAvailable KV cache memory: 54.02 GiB\n"
           "GPU KV cache size: 442,464 tokens\nMaximum concurrency for 8,192 tokens per request: 54.01x\n")
    got = parse_startup_log(log)
    assert (got.weights_gib, got.kv_available_gib, got.kv_capacity_tokens) == (14.99, 54.02, 442464)
    assert (got.max_model_len, got.max_concurrency) == (8192, 54.01)
    with pytest.raises(TriageError):
        parse_startup_log("nothing here")


# ---------------------------------------------------------------- CLI


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    cli_memory.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["memory", *argv])
    code = args.func(args)
    return code, capsys.readouterr().out


REQUIRED = {"weights_gib", "kv_cache_gib", "activation_gib", "overhead_gib", "kv_bytes_per_token",
            "kv_capacity_tokens", "max_concurrency", "fits", "branch", "techniques"}


def test_cli_json(capsys):
    code, out = run_cli(["--model", "llama-3.1-70b", "--gpu", "h100", "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and REQUIRED <= set(data)
    assert data["fits"] is False and data["branch"] == "memory.weights"
    assert data["kv_bytes_per_token"] == 327680 and data["weights_gib"] == pytest.approx(131.503, abs=1e-3)
    assert data["what_if"][0]["step"] == "weights_fp8" and data["input"]["model"] == "llama-3.1-70b"


def test_cli_text(capsys):
    code, out = run_cli(["--model", "llama-3.1-8b", "--kv-dtype", "fp8", "--concurrency", "32"], capsys)
    assert code == 0
    assert "KV capacity: 894,944 tokens -> max concurrency 109 at 8,192 tokens" in out
    assert "fits: yes" in out and "branch:" not in out
    assert "no shortage: largest part kv cache, headroom" in out
    assert "decode floor:" in out


def test_cli_config_and_errors(capsys, tmp_path: Path):
    code, out = run_cli(["--config", str(FIXTURES / "deepseek-v3.json"), "--gpu", "h200", "--tp", "8", "--json"],
                        capsys)
    data = json.loads(out)
    assert code == 0 and data["kv_bytes_per_token"] == 70272
    assert data["input"]["weights"] == "fp8"  # the checkpoint's dtype when --weights is not given
    with pytest.raises(TriageError) as exc:
        run_cli(["--config", str(FIXTURES / "broken-no-layers.json")], capsys)
    assert exc.value.key == "num_hidden_layers"
    with pytest.raises(TriageError) as exc:
        run_cli(["--model", "gpt-5"], capsys)
    assert exc.value.key == "--model"
    with pytest.raises(TriageError) as exc:
        run_cli(["--config", str(tmp_path / "missing.json")], capsys)
    assert "cannot read" in exc.value.reason


# ---------------------------------------------------------------- fits and branch agree (issue 11)


def test_70b_fp8_on_4_h100_fits_and_names_no_shortage_branch(kb):
    b = estimate(inp(L70, weights="fp8", tp=4), kb)
    assert b.fits and b.branch is None and b.techniques == [] and b.try_first is None
    assert b.largest_part in ("weights", "kv_cache") and b.headroom_gib > 0
    assert b.headroom_gib == pytest.approx(b.usable_gib - b.weights_gib - b.activation_gib - b.overhead_gib
                                           - b.kv_needed_gib)


def test_what_if_steps_carry_exact_flags(kb):
    steps = {w.step: w for w in estimate(inp(L70), kb).what_if}
    assert steps["weights_fp8"].flags == "--quantization fp8"
    assert steps["weights_int4"].flags == ""  # a checkpoint, not a flag
    assert steps["kv_fp8"].flags == "--kv-cache-dtype fp8"
    assert steps["tp_x2"].flags == "--tensor-parallel-size 2"
    assert "[--kv-cache-dtype fp8]" in steps["kv_fp8"].text()
    last = estimate(inp(L70), kb).ladder[-1]
    assert last.flags == "--kv-cache-dtype fp8 --max-model-len 6656"
