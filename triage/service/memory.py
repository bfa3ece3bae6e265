"""The Memory page's flow: model and GPU presets, a pasted config.json, the per-GPU estimate with its branch and
what-if steps, and a live vLLM's measured KV capacity beside it."""

from __future__ import annotations

from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.specs import MemoryInput, ModelSpec, load_gpus, load_models
from triage.memory.calculator import KV_DTYPES, WEIGHT_DTYPES, MemoryBreakdown, WhatIf, estimate
from triage.memory.presets import MeasuredCapacity, from_cache_config, parse_hf_config

__all__ = ["KV_DTYPES", "WEIGHT_DTYPES", "MeasuredCapacity", "MemoryBreakdown", "MemoryInput", "ModelSpec", "WhatIf",
           "estimate_memory", "load_gpus", "load_models", "measured_capacity", "model_from_config"]


def estimate_memory(inp: MemoryInput, kb: KnowledgeBase | None = None) -> MemoryBreakdown:
    """The whole calculation for one deployment, per GPU: the four parts, whether it fits, the branch of the tree
    it points to (with ``kb``), its techniques and what each what-if step frees."""
    return estimate(inp, kb)


def model_from_config(text: str, where: str = "config.json") -> ModelSpec:
    """A model from a pasted Hugging Face config.json; TriageError naming a missing or bad key."""
    return parse_hf_config(text, where=where)


def measured_capacity(labels: dict[str, str], inp: MemoryInput) -> MeasuredCapacity:
    """KV capacity measured by a live vLLM (its ``cache_config_info`` labels), for the deployment ``inp``."""
    return from_cache_config(labels, inp)
