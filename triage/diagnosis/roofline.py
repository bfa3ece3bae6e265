"""TPOT and TTFT against the roofline floors, when the model and GPU a run was served on are known.

For a benchmark file the user names them; from a server's metrics the model comes from the ``model_name``
label (matched to tree/models.yaml) and the GPU from the user or DCGM's ``modelName`` label (tree/gpus.yaml).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from triage.diagnosis.signals import SignalSet
from triage.errors import TriageError
from triage.knowledge.loader import KnowledgeBase, load_knowledge
from triage.knowledge.messages import Msg
from triage.knowledge.specs import (
    GpuSpec,
    MemoryInput,
    ModelSpec,
    kv_bytes_per_token,
    kv_shards,
    load_gpus,
    load_models,
    pick,
    weight_bytes,
)
from triage.knowledge.units import plain

BW_EFFICIENCY = (0.6, 0.85)  # real decode kernels reach ≈60–85% of HBM bandwidth (§18.4, UNSURE)


# ---------------------------------------------------------------- floors (§18.1, §18.4)


@dataclass(frozen=True)
class DecodeFloor:
    """Lower bound for one decode step: bytes read ÷ bandwidth vs FLOPs ÷ peak, whichever is larger."""

    ms: float
    bound: str
    memory_ms: float
    compute_ms: float
    weights_ms: float

    @property
    def realistic_ms(self) -> tuple[float, float]:
        """The floor at 85% and at 60% of bandwidth, the range real kernels reach (UNSURE)."""
        return self.ms / BW_EFFICIENCY[1], self.ms / BW_EFFICIENCY[0]


def _peak_tflops(gpu: GpuSpec, weights: str) -> float:
    if weights in ("fp8", "int8") and gpu.fp8_tflops:
        return gpu.fp8_tflops
    return gpu.bf16_tflops


def decode_floor(inp: MemoryInput, batch: int | None = None, context: int | None = None) -> DecodeFloor:
    """Roofline floor of one decode step for ``batch`` sequences at ``context`` tokens (defaults: the
    requested concurrency at max_model_len, the worst case). PP stages run in turn for one token, so
    only TP divides the bytes. MoE reads min(all, active × batch) of its weights (an estimate)."""
    batch = inp.concurrency if batch is None else batch
    context = inp.max_model_len if context is None else context
    m, bw = inp.model, inp.gpu.bandwidth_gbs * 1e9
    read_share = min(1.0, m.active_b * max(batch, 1) / m.params_b)
    w_bytes = weight_bytes(m, inp.weights) * read_share / inp.tp
    kv_read = batch * context * kv_bytes_per_token(m, inp.kv_dtype) / kv_shards(m, inp.tp)
    memory_ms = (w_bytes + kv_read) / bw * 1e3
    compute_ms = 2 * m.active_b * 1e9 * batch / (inp.tp * _peak_tflops(inp.gpu, inp.weights) * 1e12) * 1e3
    bound = "memory" if memory_ms >= compute_ms else "compute"
    return DecodeFloor(max(memory_ms, compute_ms), bound, memory_ms, compute_ms, w_bytes / bw * 1e3)


def prefill_floor_ms(inp: MemoryInput, prompt: int) -> float:
    """Roofline floor of one prefill of ``prompt`` tokens alone: dense FLOPs (2 × active params per token plus
    causal attention, 2 × layers × prompt² × heads × head_dim) ÷ peak, or the weight read ÷ bandwidth."""
    m = inp.model
    flops = 2 * m.active_b * 1e9 * prompt + 2 * m.layers * prompt * prompt * m.heads * m.head_dim
    compute_ms = flops / (inp.tp * _peak_tflops(inp.gpu, inp.weights) * 1e12) * 1e3
    memory_ms = weight_bytes(m, inp.weights) / inp.tp / (inp.gpu.bandwidth_gbs * 1e9) * 1e3
    return max(compute_ms, memory_ms)


@dataclass(frozen=True)
class Hardware:
    """What the run was served on; ids from tree/models.yaml and tree/gpus.yaml."""

    model: str
    gpu: str
    tp: int = 1
    weights: str | None = None  # default: the checkpoint's own dtype
    kv_dtype: str = "auto"


# ---------------------------------------------------------------- from a benchmark


def _mean_batch_and_context(signals: SignalSet, summary: dict[str, float]) -> tuple[int, int] | None:
    """Little's law: requests in flight = completed per second × mean E2E; context ≈ prompt + half the output."""
    rate, e2e = signals.get("req_per_s"), signals.get("e2e_p50_s")
    prompt, output = summary.get("prompt_tokens_mean"), summary.get("output_tokens_mean")
    if rate is None or e2e is None or prompt is None or output is None:
        return None
    return max(1, round(float(rate.value) * float(e2e.value))), int(prompt + output / 2)


def _input(hw: Hardware) -> MemoryInput:
    model = pick(load_models(), hw.model, "--model")
    gpu = pick(load_gpus(), hw.gpu, "--gpu")
    if hw.tp < 1:
        raise TriageError("tensor parallelism must be at least 1", key="--tp")
    return MemoryInput(model, gpu, hw.weights or model.checkpoint_dtype, hw.kv_dtype, tp=hw.tp)


def add_roofline(kb: KnowledgeBase, signals: SignalSet, summary: dict[str, float], hw: Hardware) -> None:
    """``tpot_over_roofline`` (TPOT p50 ÷ the decode floor for the run's mean batch) and ``prefill_over_roofline``
    (TTFT p5 ÷ the prefill floor of the mean prompt) into ``signals``."""
    inp = _input(hw)
    where = Msg("roofline.where", model=inp.model.title, tp=hw.tp, gpu=inp.gpu.title)
    tpot, shape = signals.get("tpot_p50_s"), _mean_batch_and_context(signals, summary)
    if tpot is not None and shape is not None:
        batch, context = shape
        floor = decode_floor(inp, batch=batch, context=context)
        signals.put(kb, "tpot_over_roofline", float(tpot.value) * 1000 / floor.ms,
                    Msg("roofline.decode_floor", ms=plain(floor.ms), where=where, batch=batch, context=context,
                        bound=Msg(f"roofline.{floor.bound}")))
    ttft, prompt = signals.get("ttft_p5_s"), summary.get("prompt_tokens_mean")
    if ttft is not None and prompt:
        ms = prefill_floor_ms(inp, int(prompt))
        signals.put(kb, "prefill_over_roofline", float(ttft.value) * 1000 / ms,
                    Msg("roofline.prefill_floor", ms=plain(ms), where=where, n=int(prompt)))


# ---------------------------------------------------------------- from a server's labels


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def served_model(name: str, models: dict[str, ModelSpec] | None = None) -> ModelSpec | None:
    """The tree/models.yaml preset a served name (e.g. ``meta-llama/Llama-3.1-8B-Instruct``) is a variant of:
    the longest preset id the name's last path part starts with, followed by a separator or nothing."""
    if models is None:
        return _served_preset(load_knowledge(), name)
    base = _norm(name.rsplit("/", 1)[-1])
    found = [m for m in models.values() if base == m.id or (base.startswith(m.id) and base[len(m.id)] in "-_")]
    return max(found, key=lambda m: len(m.id), default=None)


@dataclass
class _ServedMemo:
    """served_model's answers per served name, for one loaded tree."""

    kb: KnowledgeBase | None = None
    found: dict[str, ModelSpec | None] = field(default_factory=dict)


_SERVED = _ServedMemo()


def _served_preset(kb: KnowledgeBase, name: str) -> ModelSpec | None:
    """served_model over the tree's presets, remembered per served name while the tree is the same (a fleet asks
    for the same few names once per replica)."""
    if _SERVED.kb is not kb:
        _SERVED.kb, _SERVED.found = kb, {}
    if name not in _SERVED.found:
        _SERVED.found[name] = served_model(name, load_models())
    return _SERVED.found[name]


def dcgm_gpu(name: str, gpus: dict[str, GpuSpec] | None = None) -> GpuSpec | None:
    """The tree/gpus.yaml preset of a DCGM ``modelName`` (e.g. ``NVIDIA H100 80GB HBM3``): its chip name must
    appear, and a memory size in the name must match the preset's."""
    words = set(_norm(name).split("-"))
    sizes = {w for w in words if re.fullmatch(r"\d+gb", w)}
    for gpu in (gpus or load_gpus()).values():
        chip = next((w for w in _norm(gpu.title).split("-") if re.search(r"\d", w) and not w.endswith("gb")), "")
        if chip in words and (not sizes or f"{gpu.memory_gb:g}gb" in sizes):
            return gpu
    return None


def _kv_dtype(cache_dtype: str | None) -> str:
    return "fp8" if cache_dtype and cache_dtype.startswith("fp8") else "auto"


def add_server_roofline(kb: KnowledgeBase, signals: SignalSet, model_name: str | None, cache_config: dict[str, str],
                        gpu_name: str | None, hw: Hardware | None = None) -> None:
    """``decode_gb_per_step`` (weights ÷ TP + the KV in use, per GPU) and, with a known GPU, ``tpot_over_roofline``
    (TPOT p50 ÷ those bytes over the GPU's bandwidth)."""
    model = pick(load_models(), hw.model, "--model") if hw else served_model(model_name) if model_name else None
    if model is None:
        return
    tp = hw.tp if hw else 1
    batch = signals.get("running_mean")
    share = min(1.0, model.active_b * max(float(batch.value) if batch else 1.0, 1.0) / model.params_b)
    weights = weight_bytes(model, (hw.weights if hw else None) or model.checkpoint_dtype) * share / tp
    usage = signals.get("kv_usage_mean")
    try:
        tokens = float(usage.value) * int(cache_config["num_gpu_blocks"]) * int(cache_config["block_size"]) \
            if usage is not None else 0.0
    except (KeyError, ValueError):
        tokens = 0.0
    kv_dtype = hw.kv_dtype if hw and hw.kv_dtype != "auto" else _kv_dtype(cache_config.get("cache_dtype"))
    kv = tokens * kv_bytes_per_token(model, kv_dtype) / kv_shards(model, tp)
    how = Msg("roofline.weights_kv", model=model.title, tp=tp, tokens=round(tokens)) if tokens \
        else Msg("roofline.weights", model=model.title, tp=tp)
    signals.put(kb, "decode_gb_per_step", (weights + kv) / 1e9, how)
    gpu = pick(load_gpus(), hw.gpu, "--gpu") if hw else dcgm_gpu(gpu_name) if gpu_name else None
    tpot = signals.get("tpot_p50_s")
    if gpu is not None and tpot is not None:
        floor_ms = (weights + kv) / (gpu.bandwidth_gbs * 1e9) * 1e3
        signals.put(kb, "tpot_over_roofline", float(tpot.value) * 1000 / floor_ms,
                    Msg("roofline.decode_bandwidth", ms=plain(floor_ms), gb=plain((weights + kv) / 1e9),
                        gpu=gpu.title, bw=round(gpu.bandwidth_gbs)))
