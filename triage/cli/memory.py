"""``python -m triage memory``: the GPU memory calculator on the command line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from triage.cli import numbers
from triage.errors import TriageError
from triage.knowledge.specs import MemoryInput, ModelSpec, load_gpus, load_models, pick
from triage.knowledge.units import count, gib, kib, ms, plain
from triage.memory.calculator import (
    KV_DTYPES,
    WEIGHT_DTYPES,
    MemoryBreakdown,
    batched_tokens,
    breakdown_dict,
    estimate,
    input_dict,
)
from triage.memory.presets import parse_hf_config

DEFAULT_MODEL = "llama-3.1-8b"


def _model(args: argparse.Namespace) -> ModelSpec:
    if args.config is None:
        if args.params is not None:
            raise TriageError("--params only applies with --config", key="--params")
        return pick(load_models(), args.model or DEFAULT_MODEL, "--model")
    if args.model:
        raise TriageError("give --model or --config, not both", key="--config")
    from triage.bounded import MAX_CONFIG_BYTES, read_text_bounded

    text = read_text_bounded(args.config, MAX_CONFIG_BYTES)
    return parse_hf_config(text, params_b=args.params, where=str(args.config))


def memory_input(args: argparse.Namespace) -> MemoryInput:
    """The calculator input the parsed arguments describe."""
    model = _model(args)
    return MemoryInput(
        model=model, gpu=pick(load_gpus(), args.gpu, "--gpu"), weights=args.weights or model.checkpoint_dtype,
        kv_dtype=args.kv_dtype,
        tp=args.tp, pp=args.pp, max_model_len=args.max_model_len, concurrency=args.concurrency,
        gpu_memory_utilization=args.gpu_memory_utilization, block_size=args.block_size,
        max_num_batched_tokens=args.max_num_batched_tokens)


def _kib(n: int) -> str:
    return f"{count(n)} B ({kib(n)})"


def _table(inp: MemoryInput, b: MemoryBreakdown) -> list[str]:
    need = f"KV needed ({count(inp.concurrency)} × {count(inp.max_model_len)} tokens)"
    rows = [
        (f"usable ({plain(inp.gpu_memory_utilization)} × {gib(b.total_gib)})", b.usable_gib),
        ("weights", b.weights_gib),
        (f"activation peak (est., {count(batched_tokens(inp))} batched tokens)", b.activation_gib),
        ("overhead (est.)", b.overhead_gib),
        ("KV available", b.kv_available_gib),
        (need, b.kv_needed_gib),
    ]
    width = max(len(r[0]) for r in rows)
    return [f"{'per GPU':<{width + 9}}GiB"] + [f"  {name:<{width}} {gib(size, unit=False):>9}" for name, size in rows]


def _header(inp: MemoryInput) -> list[str]:
    kv = inp.kv_dtype + (" (bf16)" if inp.kv_dtype == "auto" else "")
    return [
        f"{inp.model.title} on {inp.tp * inp.pp} × {inp.gpu.title}: weights {inp.weights}, KV {kv}, "
        f"TP {inp.tp} × PP {inp.pp}",
        f"max_model_len {count(inp.max_model_len)}, concurrency {count(inp.concurrency)}, "
        f"gpu_memory_utilization {plain(inp.gpu_memory_utilization)}",
        "",
    ]


def _summary(inp: MemoryInput, b: MemoryBreakdown) -> list[str]:
    fits = "yes" if b.fits else "NO"
    lines = [
        f"KV bytes/token: {_kib(b.kv_bytes_per_token)} for the model, {_kib(b.kv_bytes_per_token_per_gpu)} per GPU",
        f"KV capacity: {count(b.kv_capacity_tokens)} tokens -> max concurrency {count(b.max_concurrency)} "
        f"at {count(inp.max_model_len)} tokens",
        f"fits: {fits} ({count(inp.concurrency)} requested, {count(b.max_concurrency)} fit)"
        + ("" if b.starts else "; vLLM would refuse to start (not one max_model_len sequence fits)"),
        (f"branch: {b.branch} -> {', '.join(b.techniques)}" if b.branch else
         f"no shortage: largest part {b.largest_part.replace('_', ' ')}, headroom {gib(b.headroom_gib)}/GPU"),
    ]
    return lines


def _steps(b: MemoryBreakdown) -> list[str]:
    lines = ["what if (each step alone; order weights -> KV -> limits -> TP):"]
    lines += [f"  {w.text()}" for w in b.what_if] or ["  nothing cheaper applies"]
    if b.ladder:
        lines.append("ladder (steps stacked until it fits):")
        lines += [f"  {w.text()}" for w in b.ladder]
    if b.try_first:
        lines.append(f"try first: {b.try_first}")
    return lines


def _decode(b: MemoryBreakdown) -> list[str]:
    lo, hi = b.decode_realistic_ms
    return [
        f"decode floor: {ms(b.decode_floor_ms)}/step ({b.decode_bound}-bound; weights alone "
        f"{ms(b.decode_floor_weights_ms)}); real kernels reach ~60-85% of bandwidth: {plain(lo)}-{ms(hi)}",
    ]


def memory_text(inp: MemoryInput, b: MemoryBreakdown) -> str:
    """The breakdown as the CLI prints it."""
    parts = [_header(inp), _table(inp, b), [""], _summary(inp, b), _steps(b), _decode(b)]
    notes = [f"note: {n['en']}" for n in b.notes]
    return "\n".join([line for part in parts for line in part] + notes)


def cmd_memory(args: argparse.Namespace) -> int:
    inp = memory_input(args)
    b = estimate(inp)
    if args.json:
        print(json.dumps({**breakdown_dict(b), "input": input_dict(inp)}, ensure_ascii=False, indent=2))
    else:
        print(memory_text(inp, b))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("memory", help="GPU memory calculator: weights + KV + activations per GPU, branch, what-ifs")
    p.add_argument("--model", default=None, help=f"preset id from tree/models.yaml (default {DEFAULT_MODEL})")
    p.add_argument("--config", type=Path, default=None, help="a Hugging Face config.json instead of --model")
    p.add_argument("--params", type=numbers.real(0, 100_000), default=None,
                   help="parameter count in billions (with --config)")
    p.add_argument("--gpu", default="h100", help="preset id from tree/gpus.yaml (default h100)")
    p.add_argument("--weights", choices=WEIGHT_DTYPES, default=None,
                   help="weight dtype (default: the checkpoint's, bf16 for most presets, fp8 for DeepSeek-V3)")
    p.add_argument("--kv-dtype", choices=KV_DTYPES, default="auto", help="KV cache dtype (auto = bf16)")
    p.add_argument("--tp", type=numbers.PARALLEL, default=1, help="tensor-parallel size")
    p.add_argument("--pp", type=numbers.PARALLEL, default=1, help="pipeline-parallel size")
    p.add_argument("--max-model-len", type=numbers.integer(1, 100_000_000), default=8192,
                   help="tokens per request (prompt + output)")
    p.add_argument("--concurrency", type=numbers.integer(1, 1_000_000), default=32, help="concurrent sequences wanted")
    p.add_argument("--gpu-memory-utilization", type=numbers.real(0, 1), default=0.9, help="vLLM's share of GPU memory")
    p.add_argument("--max-num-batched-tokens", type=numbers.integer(1, 100_000_000), default=None,
                   help="tokens per forward pass (default: vLLM's for the GPU, 8192 or 2048)")
    p.add_argument("--block-size", type=numbers.integer(1, 65_536), default=16, help="KV block size in tokens")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_memory)
