"""Schemas of tree/models.yaml and tree/gpus.yaml (presets for the memory calculator and the roofline)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from triage.knowledge.model import Strict


class ModelEntry(Strict):
    """One entry of tree/models.yaml."""

    id: str = Field(min_length=1)
    title: str = Field(min_length=1)
    params_b: float = Field(gt=0)
    active_params_b: float | None = Field(default=None, gt=0)
    layers: int = Field(gt=0)
    hidden: int = Field(gt=0)
    heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    attention: Literal["mha_gqa", "mla"]
    kv_lora_rank: int | None = Field(default=None, gt=0)
    qk_rope_head_dim: int | None = Field(default=None, gt=0)
    max_position: int = Field(gt=0)
    vocab_size: int | None = Field(default=None, gt=0)
    tie_word_embeddings: bool = False
    checkpoint_dtype: Literal["bf16", "fp8", "int8", "int4"] = "bf16"
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _shapes(self) -> ModelEntry:
        if self.attention == "mla" and (self.kv_lora_rank is None or self.qk_rope_head_dim is None):
            raise ValueError("attention 'mla' needs kv_lora_rank and qk_rope_head_dim")
        if self.heads % self.kv_heads:
            raise ValueError("heads must be a multiple of kv_heads")
        if self.active_params_b is not None and self.active_params_b > self.params_b:
            raise ValueError("active_params_b exceeds params_b")
        return self


class GpuEntry(Strict):
    """One entry of tree/gpus.yaml."""

    id: str = Field(min_length=1)
    title: str = Field(min_length=1)
    memory_gb: float = Field(gt=0)
    memory_gib: float = Field(gt=0)
    bandwidth_gbs: float = Field(gt=0)
    bf16_tflops: float = Field(gt=0)
    fp8_tflops: float | None = Field(default=None, gt=0)
    nvlink: bool
    url: str = Field(pattern=r"^https://\S+$")  # the vendor page or datasheet the numbers come from
    source: str = Field(min_length=1)
