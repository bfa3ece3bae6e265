"""What a deployment is made of and what it weighs: model and GPU specs, the tree's presets of both
(tree/models.yaml, tree/gpus.yaml), one deployment of a model on GPUs, and its weight and KV bytes (§18.1).

The roofline (triage/diagnosis/roofline.py) and the memory calculator (triage/memory/) both size with these."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triage.errors import TriageError
from triage.knowledge.loader import load_knowledge

# INT4 group scales/zeros at group size 128: ≈0.03–0.06 B/param (§18.1, UNSURE); the low end is used.
INT4_SCALE_BYTES = 0.03
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5 + INT4_SCALE_BYTES}
# "auto" follows the checkpoint's activation dtype, BF16 for every preset (also DeepSeek-V3's FP8 release).
KV_BYTES = {"auto": 2, "bf16": 2, "fp8": 1, "int8": 1}


# ---------------------------------------------------------------- specs


@dataclass(frozen=True)
class ModelSpec:
    """A model's shapes as the calculator needs them; counts in billions, dims as in config.json."""

    id: str
    title: str
    params_b: float
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    attention: str = "mha_gqa"
    active_params_b: float | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    max_position: int | None = None
    vocab_size: int | None = None
    tie_word_embeddings: bool = False
    checkpoint_dtype: str = "bf16"  # the weights dtype of the released checkpoint (DeepSeek-V3: fp8)
    source: str = ""

    @property
    def active_b(self) -> float:
        return self.active_params_b or self.params_b


@dataclass(frozen=True)
class GpuSpec:
    """One GPU: CUDA-visible memory, HBM bandwidth and dense peak throughput."""

    id: str
    title: str
    memory_gib: float
    memory_gb: float
    bandwidth_gbs: float
    bf16_tflops: float
    fp8_tflops: float | None
    nvlink: bool
    source: str
    url: str = ""  # the vendor page or datasheet (tree/gpus.yaml); empty for a GPU built in code


# ---------------------------------------------------------------- input


@dataclass(frozen=True)
class MemoryInput:
    """One deployment to size: model, GPU, dtypes, parallelism and the workload the user wants."""

    model: ModelSpec
    gpu: GpuSpec
    weights: str = "bf16"
    kv_dtype: str = "auto"
    tp: int = 1
    pp: int = 1
    max_model_len: int = 8192
    concurrency: int = 32
    gpu_memory_utilization: float = 0.92  # vLLM 0.33.0's default (tree/engines/flags/vllm-0.33.0.json); 0.9 before
    block_size: int = 16
    max_num_batched_tokens: int | None = None  # None: vLLM's default for this GPU (§1)


# ---------------------------------------------------------------- weight and KV bytes (§18.1)


def embedding_params(model: ModelSpec) -> float:
    """Input embedding + lm_head parameters (one table when tied); 0 when vocab_size is unknown."""
    tables = 1 if model.tie_word_embeddings else 2
    return float((model.vocab_size or 0) * model.hidden * tables)


def weight_bytes(model: ModelSpec, dtype: str) -> float:
    """All weights in bytes: params × bytes(dtype); quantized checkpoints keep embeddings/lm_head in BF16."""
    params = model.params_b * 1e9
    if dtype == "bf16":
        return params * 2
    embed = min(embedding_params(model), params)
    return (params - embed) * WEIGHT_BYTES[dtype] + embed * 2


def kv_bytes_per_layer(model: ModelSpec, kv_dtype: str) -> int:
    """KV bytes per token per layer: 2 × kv_heads × head_dim × bytes, MLA (kv_lora_rank + rope dim) × bytes."""
    if model.attention == "mla":
        if model.kv_lora_rank is None or model.qk_rope_head_dim is None:
            raise TriageError(f"{model.title}: MLA attention needs kv_lora_rank and qk_rope_head_dim")
        return (model.kv_lora_rank + model.qk_rope_head_dim) * KV_BYTES[kv_dtype]
    return 2 * model.kv_heads * model.head_dim * KV_BYTES[kv_dtype]


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str = "auto") -> int:
    """KV bytes per token for the whole model (all layers, all heads), as §18.1 states it."""
    return model.layers * kv_bytes_per_layer(model, kv_dtype)


def kv_shards(model: ModelSpec, tp: int) -> int:
    """How many ways TP splits the KV heads: min(TP, kv_heads); MLA's latent is replicated (1, UNSURE)."""
    return 1 if model.attention == "mla" else min(tp, model.kv_heads)


# ---------------------------------------------------------------- presets


def load_models(tree_dir: Path | None = None) -> dict[str, ModelSpec]:
    """Model presets from tree/models.yaml (validated with the rest of the tree, unknown fields refused)."""
    return {k: ModelSpec(**v.model_dump()) for k, v in load_knowledge(tree_dir).models.items()}


def load_gpus(tree_dir: Path | None = None) -> dict[str, GpuSpec]:
    """GPU presets from tree/gpus.yaml (validated with the rest of the tree, unknown fields refused)."""
    return {k: GpuSpec(**v.model_dump()) for k, v in load_knowledge(tree_dir).gpus.items()}


def pick(presets: dict[str, Any], name: str, flag: str) -> Any:
    """A preset by id, or a TriageError listing the known ids."""
    if name not in presets:
        raise TriageError(f"unknown '{name}' (known: {', '.join(presets)})", key=flag)
    return presets[name]
