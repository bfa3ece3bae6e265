"""TPOT against the decode roofline floor, when the user names the model and GPU a run was served on."""

from __future__ import annotations

from dataclasses import dataclass

from triage.diagnosis.signals import SignalSet
from triage.errors import TriageError
from triage.knowledge.loader import KnowledgeBase
from triage.memory.calculator import MemoryInput, decode_floor
from triage.memory.presets import load_gpus, load_models, pick


@dataclass(frozen=True)
class Hardware:
    """What the run was served on; ids from tree/models.yaml and tree/gpus.yaml."""

    model: str
    gpu: str
    tp: int = 1
    weights: str | None = None  # default: the checkpoint's own dtype
    kv_dtype: str = "auto"


def _mean_batch_and_context(signals: SignalSet, summary: dict[str, float]) -> tuple[int, int] | None:
    """Little's law: requests in flight = completed per second × mean E2E; context ≈ prompt + half the output."""
    rate, e2e = signals.get("req_per_s"), signals.get("e2e_p50_s")
    prompt, output = summary.get("prompt_tokens_mean"), summary.get("output_tokens_mean")
    if rate is None or e2e is None or prompt is None or output is None:
        return None
    return max(1, round(float(rate.value) * float(e2e.value))), int(prompt + output / 2)


def add_roofline(kb: KnowledgeBase, signals: SignalSet, summary: dict[str, float], hw: Hardware) -> None:
    """Put ``tpot_over_roofline`` (measured TPOT p50 ÷ the floor for the run's mean batch) into ``signals``."""
    tpot = signals.get("tpot_p50_s")
    shape = _mean_batch_and_context(signals, summary)
    if tpot is None or shape is None:
        return
    model = pick(load_models(), hw.model, "--model")
    gpu = pick(load_gpus(), hw.gpu, "--gpu")
    if hw.tp < 1:
        raise TriageError("tensor parallelism must be at least 1", key="--tp")
    inp = MemoryInput(model, gpu, hw.weights or model.checkpoint_dtype, hw.kv_dtype, tp=hw.tp)
    batch, context = shape
    floor = decode_floor(inp, batch=batch, context=context)
    signals.put(kb, "tpot_over_roofline", float(tpot.value) * 1000 / floor.ms,
                f"TPOT p50 ÷ {floor.ms:.2f} ms floor ({model.title} on {hw.tp}× {gpu.title}, batch ≈ {batch}, "
                f"context ≈ {context:,} tokens, {floor.bound}-bound)")
