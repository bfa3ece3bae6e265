"""Model and GPU specs from outside input: tree presets, a pasted config.json, vLLM cache labels and startup logs."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from triage import safe_load
from triage.errors import TriageError
from triage.knowledge.specs import MemoryInput, ModelSpec, embedding_params
from triage.knowledge.units import plain
from triage.memory.calculator import GIB, kv_bytes_per_token_per_gpu

# ---------------------------------------------------------------- Hugging Face config.json


def _cfg_int(cfg: dict, key: str, where: str, default: int | None = None, why: str = "") -> int:
    value = cfg.get(key, default)
    if value is None:
        raise TriageError(f"missing{why}", where=where, key=key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TriageError(f"expected a non-negative integer, got {value!r}", where=where, key=key)
    return value


def _load_config(text: str, where: str) -> dict:
    from triage.bounded import MAX_CONFIG_BYTES

    # a pasted or uploaded config.json: size and depth bounded like every other user file
    try:
        cfg = safe_load.load_json(text, where=where, max_chars=MAX_CONFIG_BYTES)
    except TriageError as exc:
        raise safe_load.with_line_key(exc) from None
    if not isinstance(cfg, dict):
        raise TriageError("expected a JSON object", where=where)
    text_cfg = cfg.get("text_config")
    if "num_hidden_layers" not in cfg and isinstance(text_cfg, dict):
        cfg = {**cfg, **text_cfg}  # multimodal configs nest the language model
    return cfg


def _head_dim(cfg: dict, hidden: int, heads: int, where: str) -> int:
    if cfg.get("qk_nope_head_dim") is not None and cfg.get("qk_rope_head_dim") is not None:
        return _cfg_int(cfg, "qk_nope_head_dim", where) + _cfg_int(cfg, "qk_rope_head_dim", where)
    if cfg.get("head_dim") is not None:
        return _cfg_int(cfg, "head_dim", where)
    if heads == 0 or hidden % heads:
        raise TriageError(f"hidden_size {hidden} is not a multiple of num_attention_heads {heads}; give head_dim",
                          where=where, key="head_dim")
    return hidden // heads


def _attention_params(cfg: dict, hidden: int, heads: int, kv_heads: int, head_dim: int, where: str) -> int:
    """Attention weights of one layer (biases and norms ignored)."""
    if cfg.get("kv_lora_rank") is None:
        return hidden * heads * head_dim * 2 + 2 * hidden * kv_heads * head_dim
    rank, rope = _cfg_int(cfg, "kv_lora_rank", where), _cfg_int(cfg, "qk_rope_head_dim", where)
    nope, v_dim = head_dim - rope, _cfg_int(cfg, "v_head_dim", where, default=head_dim - rope)
    q_rank = cfg.get("q_lora_rank")
    q = hidden * q_rank + q_rank * heads * head_dim if q_rank else hidden * heads * head_dim
    return q + hidden * (rank + rope) + rank * heads * (nope + v_dim) + heads * v_dim * hidden


def _moe_layers(cfg: dict, layers: int, where: str) -> int:
    dense = _cfg_int(cfg, "first_k_dense_replace", where, default=0)
    freq = max(1, _cfg_int(cfg, "moe_layer_freq", where, default=1))
    return len([i for i in range(dense, layers) if (i - dense) % freq == 0])


def _mlp_params(cfg: dict, hidden: int, layers: int, where: str) -> tuple[int, int]:
    """(total, active) MLP weights over all layers: dense gate/up/down, or routed + shared experts."""
    need = " (needed to estimate the parameter count; or pass --params)"
    experts = cfg.get("num_local_experts") or cfg.get("n_routed_experts") or cfg.get("num_experts") or 0
    if not experts:
        dense = 3 * hidden * _cfg_int(cfg, "intermediate_size", where, why=need) * layers
        return dense, dense
    moe_inter = cfg.get("moe_intermediate_size") or _cfg_int(cfg, "intermediate_size", where, why=need)
    shared = (cfg.get("n_shared_experts") or 0) * moe_inter + (cfg.get("shared_expert_intermediate_size") or 0)
    top_k = _cfg_int(cfg, "num_experts_per_tok", where, why=need)
    moe = _moe_layers(cfg, layers, where)
    dense = 3 * hidden * _cfg_int(cfg, "intermediate_size", where, why=need) * (layers - moe) if moe < layers else 0
    per_expert, router = 3 * hidden * moe_inter, hidden * experts
    total = dense + moe * (experts * per_expert + 3 * hidden * shared + router)
    active = dense + moe * (top_k * per_expert + 3 * hidden * shared + router)
    return total, active


def _estimate_params(cfg: dict, spec: ModelSpec, where: str) -> tuple[float, float | None]:
    """(total, active or None) in billions from the shapes: embeddings + attention + MLP/experts."""
    if spec.vocab_size is None:
        raise TriageError("missing (needed to estimate the parameter count; or pass --params)",
                          where=where, key="vocab_size")
    attn = spec.layers * _attention_params(cfg, spec.hidden, spec.heads, spec.kv_heads, spec.head_dim, where)
    mlp_total, mlp_active = _mlp_params(cfg, spec.hidden, spec.layers, where)
    base = embedding_params(spec) + attn
    total, active = (base + mlp_total) / 1e9, (base + mlp_active) / 1e9
    return total, (active if mlp_active != mlp_total else None)


def _shape_spec(cfg: dict, where: str) -> ModelSpec:
    layers, hidden = _cfg_int(cfg, "num_hidden_layers", where), _cfg_int(cfg, "hidden_size", where)
    heads = _cfg_int(cfg, "num_attention_heads", where)
    kv_heads = _cfg_int(cfg, "num_key_value_heads", where, default=heads)
    mla = cfg.get("kv_lora_rank") is not None
    title = str(cfg.get("_name_or_path") or (cfg.get("architectures") or [None])[0] or cfg.get("model_type")
                or "custom model")
    return ModelSpec(
        id="custom", title=title, params_b=1.0, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
        head_dim=_head_dim(cfg, hidden, heads, where), attention="mla" if mla else "mha_gqa",
        kv_lora_rank=_cfg_int(cfg, "kv_lora_rank", where) if mla else None,
        qk_rope_head_dim=_cfg_int(cfg, "qk_rope_head_dim", where) if mla else None,
        max_position=cfg.get("max_position_embeddings"), vocab_size=cfg.get("vocab_size"),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)), checkpoint_dtype=_checkpoint_dtype(cfg))


def _checkpoint_dtype(cfg: dict) -> str:
    """The weights dtype a ``quantization_config`` implies (fp8, 4-bit AWQ/GPTQ …); bf16 without one."""
    quant = cfg.get("quantization_config")
    if not isinstance(quant, dict):
        return "bf16"
    text = json.dumps(quant).lower()
    if quant.get("bits") == 4 or "int4" in text or '"num_bits": 4' in text or "w4a16" in text:
        return "int4"
    if any(k in text for k in ("fp8", "float8", "e4m3", "float-quantized")):
        return "fp8"
    if quant.get("bits") == 8 or "int8" in text or '"num_bits": 8' in text:
        return "int8"
    return "bf16"


def parse_hf_config(text: str, params_b: float | None = None, where: str = "config.json") -> ModelSpec:
    """A ModelSpec from a pasted config.json (llama/qwen/mixtral/deepseek keys). The parameter count is
    estimated from the shapes unless ``params_b`` is given; a missing key raises TriageError naming it."""
    cfg = _load_config(text, where)
    spec = _shape_spec(cfg, where)
    if spec.heads == 0 or spec.kv_heads == 0 or spec.layers == 0 or spec.heads % spec.kv_heads:
        raise TriageError("num_attention_heads must be a positive multiple of num_key_value_heads",
                          where=where, key="num_key_value_heads")
    if params_b is None:
        total, active = _estimate_params(cfg, spec, where)
        source = f"parsed from {where}; parameter count estimated from the shapes"
    else:
        total, active = params_b, _active_if_known(cfg, spec, where)
        source = f"parsed from {where}; parameter count given ({plain(params_b)}B)"
    return replace(spec, params_b=total, active_params_b=min(active, total) if active else None, source=source)


def _active_if_known(cfg: dict, spec: ModelSpec, where: str) -> float | None:
    """Active params (MoE) estimated from the shapes when they allow it; None otherwise."""
    try:
        return _estimate_params(cfg, spec, where)[1]
    except TriageError:
        return None


# ---------------------------------------------------------------- measured capacity


@dataclass(frozen=True)
class MeasuredCapacity:
    """KV capacity as the server reports it, for showing measured vs estimate."""

    kv_capacity_tokens: int
    max_concurrency: int
    kv_gib: float
    source: str
    num_gpu_blocks: int | None = None
    block_size: int | None = None


def _label_int(labels: dict[str, str], key: str) -> int | None:
    raw = labels.get(key)
    if raw in (None, "", "None", "none", "null"):
        return None
    try:
        return int(float(raw))
    except ValueError as exc:
        raise TriageError(f"expected a number, got {raw!r}", where="vllm:cache_config_info", key=key) from exc


def from_cache_config(labels: dict[str, str], inp: MemoryInput) -> MeasuredCapacity:
    """KV capacity from vLLM ``cache_config_info`` labels: ``kv_cache_size_tokens`` if present, else
    ``num_gpu_blocks × block_size``; GiB per GPU and max concurrency computed for ``inp``."""
    blocks, block = _label_int(labels, "num_gpu_blocks"), _label_int(labels, "block_size") or inp.block_size
    tokens = _label_int(labels, "kv_cache_size_tokens")
    source = "kv_cache_size_tokens"
    if tokens is None:
        if blocks is None:
            raise TriageError("neither kv_cache_size_tokens nor num_gpu_blocks is set",
                              where="vllm:cache_config_info", key="num_gpu_blocks")
        tokens, source = blocks * block, "num_gpu_blocks × block_size"
    gib = tokens * kv_bytes_per_token_per_gpu(inp) / GIB
    return MeasuredCapacity(tokens, tokens // inp.max_model_len, gib, source, blocks, block)


@dataclass(frozen=True)
class StartupLog:
    """The vLLM startup lines the calculator can be checked against (§0); None when a line is absent."""

    weights_gib: float | None
    kv_available_gib: float | None
    kv_capacity_tokens: int | None
    max_concurrency: float | None
    max_model_len: int | None


_LOG = {
    "weights": re.compile(r"Model loading took ([\d.]+) ?GiB"),
    "kv_gib": re.compile(r"Available KV cache memory: ([\d.]+) ?GiB"),
    "tokens": re.compile(r"GPU KV cache size: ([\d,]+) tokens"),
    "conc": re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x"),
}


def parse_startup_log(text: str, where: str = "log") -> StartupLog:
    """The first of each vLLM startup line; TriageError when none of them is present."""
    hit = {k: p.search(text) for k, p in _LOG.items()}
    if not any(hit.values()):
        raise TriageError("no vLLM startup lines ('Model loading took', 'GPU KV cache size' …)", where=where)

    def num(key: str, group: int = 1) -> float | None:
        found = hit[key]
        return float(found.group(group).replace(",", "")) if found else None

    tokens, length = num("tokens"), num("conc")
    return StartupLog(num("weights"), num("kv_gib"), int(tokens) if tokens is not None else None,
                      num("conc", 2), int(length) if length is not None else None)
