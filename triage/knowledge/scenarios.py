"""Schema of tree/scenarios.yaml: the simulator's named scenarios and their engine parameters."""

from __future__ import annotations

from pydantic import Field, model_validator

from triage.knowledge.model import Strict, Text


class Params(Strict):
    """One scenario's traffic, cache, engine and step-time parameters (see tree/scenarios.yaml)."""

    rate: float = Field(gt=0)
    max_concurrency: int = Field(ge=1)
    prompt_median: float = Field(gt=0)
    prompt_sigma: float = Field(ge=0)
    long_frac: float = Field(ge=0, le=1)
    long_prompt_median: float = Field(gt=0)
    long_prompt_sigma: float = Field(ge=0)
    output_median: float = Field(gt=0)
    output_sigma: float = Field(ge=0)
    max_tokens: int = Field(ge=1)
    abort_frac: float = Field(ge=0, le=1)
    prefix_caching: bool
    prefix_hit: float = Field(ge=0, lt=1)
    max_model_len: int = Field(ge=16)
    num_gpu_blocks: int = Field(ge=1)
    block_size: int = Field(ge=1)
    max_num_seqs: int = Field(ge=1)
    max_num_batched_tokens: int = Field(ge=1)
    admit_reserve: float = Field(ge=0, lt=1)
    step_base_s: float = Field(gt=0)
    step_per_seq_s: float = Field(ge=0)
    step_per_kv_token_s: float = Field(ge=0)
    prefill_per_token_s: float = Field(gt=0)
    step_jitter: float = Field(ge=0)
    spec_tokens: int = Field(ge=0)
    spec_acceptance: float = Field(ge=0, le=1)
    spec_overhead: float = Field(ge=0)
    # PD disaggregation: this engine is a decode instance reading each prompt's KV from a prefill instance over NIXL
    # (0 s: a colocated engine, no connector series)
    kv_transfer_s: float = Field(ge=0)
    kv_transfer_sigma: float = Field(ge=0)
    kv_transfer_fail_frac: float = Field(ge=0, le=1)

    @model_validator(mode="after")
    def _fits(self) -> Params:
        if self.num_gpu_blocks * self.block_size < self.max_model_len:
            raise ValueError("num_gpu_blocks × block_size must hold max_model_len tokens (vLLM refuses to start)")
        return self

    @property
    def kv_max_concurrency(self) -> float:
        return self.num_gpu_blocks * self.block_size / self.max_model_len


class Scenario(Strict):
    id: str
    title: Text
    description: Text
    params: Params
