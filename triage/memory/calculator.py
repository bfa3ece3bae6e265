"""GPU memory calculator: weights + KV cache + activations + overhead per GPU, the branch, and what-ifs."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from triage.diagnosis.roofline import DecodeFloor, decode_floor
from triage.errors import TriageError
from triage.knowledge.loader import KnowledgeBase, load_knowledge
from triage.knowledge.specs import (
    KV_BYTES,
    GpuSpec,
    MemoryInput,
    kv_bytes_per_layer,
    kv_bytes_per_token,
    kv_shards,
    weight_bytes,
)
from triage.knowledge.units import count, gib, signed_count

GIB = 1024**3

WEIGHT_DTYPES = ("bf16", "fp8", "int8", "int4")
KV_DTYPES = ("auto", "bf16", "fp8", "int8")
BRANCHES = ("memory.weights", "memory.kv_cache", "memory.batch_activation")

# Estimates, not measurements (the startup log is authoritative, §18.1):
ACT_VALUES_PER_TOKEN = 14  # × hidden BF16 values per batched token: MLP gate/up (≈7×), activation (≈3.5×), residuals
LOGIT_BYTES = 4  # FP32 logits per vocab entry per running sequence in the sampler
NON_TORCH_GIB = 0.3  # CUDA context leftovers and allocator slack vLLM reports as non-torch memory
CUDA_GRAPH_GIB = 0.5  # captured CUDA graphs
COMM_BUFFERS_GIB = 0.7  # NCCL / custom all-reduce buffers when TP × PP > 1
MAX_TP = 8  # one NVLink island


# ---------------------------------------------------------------- input checks


def _check_choices(inp: MemoryInput) -> None:
    if inp.weights not in WEIGHT_DTYPES:
        raise TriageError(f"unknown weights dtype '{inp.weights}' (use {', '.join(WEIGHT_DTYPES)})", key="weights")
    if inp.kv_dtype not in KV_DTYPES:
        raise TriageError(f"unknown KV dtype '{inp.kv_dtype}' (use {', '.join(KV_DTYPES)})", key="kv_dtype")


def _check_numbers(inp: MemoryInput) -> None:
    for key in ("tp", "pp", "max_model_len", "concurrency", "block_size"):
        if getattr(inp, key) < 1:
            raise TriageError("must be at least 1", key=key)
    if inp.max_num_batched_tokens is not None and inp.max_num_batched_tokens < 1:
        raise TriageError("must be at least 1", key="max_num_batched_tokens")
    if not 0 < inp.gpu_memory_utilization <= 1:
        raise TriageError("must be in (0, 1]", key="gpu_memory_utilization")


def _check_tp(inp: MemoryInput) -> None:
    m = inp.model
    if m.heads % inp.tp:
        raise TriageError(f"TP {inp.tp} does not divide the {m.heads} attention heads", key="tp")
    if m.attention != "mla" and m.kv_heads % inp.tp and inp.tp % m.kv_heads:
        raise TriageError(f"TP {inp.tp} and the {m.kv_heads} KV heads must divide one another", key="tp")


def validate(inp: MemoryInput) -> None:
    """TriageError for input vLLM would refuse (unknown dtype, TP not dividing the heads …)."""
    _check_choices(inp)
    _check_numbers(inp)
    _check_tp(inp)


# ---------------------------------------------------------------- formulas (§18.1)


def kv_bytes_per_token_per_gpu(inp: MemoryInput) -> int:
    """KV bytes per token on the busiest GPU: its PP stage's layers, its TP share of the KV heads."""
    layers = math.ceil(inp.model.layers / inp.pp)
    return layers * kv_bytes_per_layer(inp.model, inp.kv_dtype) // kv_shards(inp.model, inp.tp)


def default_batched_tokens(gpu: GpuSpec) -> int:
    """vLLM's API-server max_num_batched_tokens: 8192 on ≥70 GiB GPUs other than A100, else 2048 (§1)."""
    return 8192 if gpu.memory_gib >= 70 and not gpu.id.startswith("a100") else 2048


def batched_tokens(inp: MemoryInput) -> int:
    return inp.max_num_batched_tokens or default_batched_tokens(inp.gpu)


def activation_gib(inp: MemoryInput) -> float:
    """Peak activations, an estimate: the biggest forward pass (max_num_batched_tokens × hidden × 14 BF16
    values, split by TP) plus FP32 sampler logits for every running sequence."""
    forward = batched_tokens(inp) * inp.model.hidden * ACT_VALUES_PER_TOKEN * 2 / inp.tp
    logits = inp.concurrency * (inp.model.vocab_size or 0) * LOGIT_BYTES
    return (forward + logits) / GIB


def overhead_gib(inp: MemoryInput) -> float:
    """Non-torch memory + CUDA graphs, plus communication buffers when the model spans GPUs (estimates)."""
    comm = COMM_BUFFERS_GIB if inp.tp * inp.pp > 1 else 0.0
    return NON_TORCH_GIB + CUDA_GRAPH_GIB + comm


# ---------------------------------------------------------------- budget


@dataclass(frozen=True)
class Budget:
    """The four parts on one GPU and what is left for the KV cache."""

    usable_gib: float
    weights_gib: float
    activation_gib: float
    overhead_gib: float
    kv_available_gib: float
    kv_needed_gib: float
    kv_bytes_per_token_per_gpu: int
    kv_capacity_tokens: int
    max_concurrency: int
    needed_tokens: int

    @property
    def fits(self) -> bool:
        """The requested concurrency × max_model_len fits in the KV capacity (so weights fit too)."""
        return 0 < self.needed_tokens <= self.kv_capacity_tokens


def budget(inp: MemoryInput) -> Budget:
    """vLLM's rule: KV budget = utilization × memory − weights − peak activations − overhead (per GPU)."""
    validate(inp)
    usable = inp.gpu_memory_utilization * inp.gpu.memory_gib
    weights = weight_bytes(inp.model, inp.weights) / (inp.tp * inp.pp) / GIB
    act, over = activation_gib(inp), overhead_gib(inp)
    available = max(0.0, usable - weights - act - over)
    per_token = kv_bytes_per_token_per_gpu(inp)
    blocks = int(available * GIB // (per_token * inp.block_size))
    tokens = blocks * inp.block_size
    need = inp.concurrency * inp.max_model_len
    return Budget(usable, weights, act, over, available, need * per_token / GIB, per_token, tokens,
                  tokens // inp.max_model_len, need)


def pick_branch(weights_gib: float, kv_needed_gib: float, activation_gib: float) -> str:
    """The cause whose part is the biggest share of the need (ties go in tree order)."""
    parts = (weights_gib, kv_needed_gib, activation_gib)
    return BRANCHES[parts.index(max(parts))]


PARTS = ("weights", "kv_cache", "activation", "overhead")


def largest_part(b: Budget) -> str:
    """Which of the four parts per GPU is the biggest (ties go in PARTS order)."""
    sizes = (b.weights_gib, b.kv_needed_gib, b.activation_gib, b.overhead_gib)
    return PARTS[sizes.index(max(sizes))]


def branch_techniques(branch: str, kb: KnowledgeBase | None = None) -> list[str]:
    """The cause's technique ids in the seed's order, read from tree.yaml."""
    kb = kb or load_knowledge()  # the active tree (the CLI's --tree-dir), cached by the loader
    return [t.id for t in kb.causes[branch].techniques]


# ---------------------------------------------------------------- what-if ladder


@dataclass(frozen=True)
class WhatIf:
    """One cheaper step in the usual order (weights → KV → limits → TP) and what it buys, per GPU."""

    step: str
    technique: str
    label: dict[str, str]
    freed_gib: float
    max_concurrency: int
    delta_concurrency: int
    fits: bool
    gpus: int
    decode_floor_ms: float
    flags: str = ""  # the vLLM flags that apply the step (all steps so far, for a ladder entry)

    def text(self, lang: str = "en") -> str:
        flags = f" [{self.flags}]" if self.flags else ""
        freed, conc, change = gib(self.freed_gib), count(self.max_concurrency), signed_count(self.delta_concurrency)
        if lang == "zh":
            return (f"{self.label['zh']}{flags}：每卡腾出 {freed}，最大并发 {conc}"
                    f"（{change} 条序列），{'放得下' if self.fits else '仍放不下'}")
        return (f"{self.label['en']}{flags}: frees {freed}/GPU, max concurrency {conc} ({change} sequences), "
                f"{'fits' if self.fits else 'still does not fit'}")


CHECKPOINT = {"en": "use a quantized checkpoint (e.g. AWQ / GPTQ / FP8)",
              "zh": "使用量化 checkpoint（如 AWQ / GPTQ / FP8）"}
# Weights, then KV, then the two limits (config flags that shrink the KV need), and only then another GPU: a
# single-GPU deployment whose KV is short is offered a smaller max_model_len or max_num_seqs before a second GPU.
_STEPS: tuple[tuple[str, str, dict[str, str], dict[str, Any]], ...] = (
    ("weights_fp8", "weight_quantization", {"en": "FP8 weights", "zh": "FP8 权重"}, {"weights": "fp8"}),
    ("weights_int4", "weight_quantization",
     {"en": f"INT4 weights: {CHECKPOINT['en']}", "zh": f"INT4 权重：{CHECKPOINT['zh']}"}, {"weights": "int4"}),
    ("kv_fp8", "kv_cache_quantization", {"en": "FP8 KV", "zh": "FP8 KV"}, {"kv_dtype": "fp8"}),
    ("max_model_len", "request_limits", {"en": "Lower max_model_len", "zh": "降低 max_model_len"}, {}),
    ("max_num_seqs", "kv_budget_reservation", {"en": "Lower max_num_seqs", "zh": "降低 max_num_seqs"}, {}),
    ("tp_x2", "parallelism", {"en": "TP ×2", "zh": "TP ×2"}, {}),
)
MIN_MODEL_LEN = 256  # the smallest max_model_len the page accepts; below it a limit is no longer a deployment


def step_flags(inp: MemoryInput, cur: MemoryInput) -> str:
    """The vLLM serve flags that turn deployment ``inp`` into ``cur`` (weights, KV dtype, limits, TP), in that
    order. FP8 weights quantize a BF16 checkpoint online (``--quantization fp8``); INT4 has no flag to add: it
    needs a checkpoint quantized beforehand (AWQ, GPTQ …), whose method vLLM reads from its config."""
    flags = []
    if cur.weights != inp.weights and cur.weights != "int4":
        flags.append(f"--quantization {cur.weights}")
    if cur.kv_dtype != inp.kv_dtype:
        flags.append(f"--kv-cache-dtype {cur.kv_dtype}")
    if cur.max_model_len != inp.max_model_len:
        flags.append(f"--max-model-len {cur.max_model_len}")
    if cur.concurrency != inp.concurrency:
        flags.append(f"--max-num-seqs {cur.concurrency}")
    if cur.tp != inp.tp:
        flags.append(f"--tensor-parallel-size {cur.tp}")
    return " ".join(flags)


def _shorter_len(inp: MemoryInput) -> int | None:
    """The longest max_model_len (a multiple of 256) whose KV need for the wanted concurrency fits, when it is
    shorter than now and still at least MIN_MODEL_LEN; None otherwise (the weights leave no KV, or the cut
    would have to go below it)."""
    tokens = budget(inp).kv_capacity_tokens // max(inp.concurrency, 1)
    length = tokens // MIN_MODEL_LEN * MIN_MODEL_LEN
    if not MIN_MODEL_LEN <= length < inp.max_model_len:
        return None
    while length > MIN_MODEL_LEN and not budget(replace(inp, max_model_len=length)).fits:
        length -= MIN_MODEL_LEN  # a shorter length never needs more memory: this ends fast
    return length


def _fewer_seqs(inp: MemoryInput) -> int | None:
    """The most sequences at max_model_len that fit, when fewer than wanted and at least one; None otherwise.
    Fewer running sequences also need fewer sampler logits, so the count is read again at the lower setting."""
    seqs = budget(inp).max_concurrency
    if not 1 <= seqs < inp.concurrency:
        return None
    return min(inp.concurrency - 1, max(seqs, budget(replace(inp, concurrency=seqs)).max_concurrency))


def _applicable(step: str, inp: MemoryInput) -> bool:
    if step == "max_model_len":
        return _shorter_len(inp) is not None
    if step == "max_num_seqs":
        return _fewer_seqs(inp) is not None
    if step == "weights_fp8":
        return inp.weights == "bf16"
    if step == "weights_int4":
        return inp.weights != "int4"
    if step == "kv_fp8":
        return KV_BYTES[inp.kv_dtype] > 1
    tp = inp.tp * 2
    return tp <= MAX_TP and inp.model.heads % tp == 0 and (inp.model.kv_heads % tp == 0 or tp % inp.model.kv_heads == 0)


def _freed(before: Budget, after: Budget) -> float:
    """GiB per GPU the step frees (weights + activation + overhead + KV need)."""
    def used(b: Budget) -> float:
        return b.weights_gib + b.activation_gib + b.overhead_gib + b.kv_needed_gib
    return used(before) - used(after)


def _step(step: str) -> tuple[str, str, dict[str, str], dict[str, Any]]:
    return next(s for s in _STEPS if s[0] == step)


def _apply(step: str, inp: MemoryInput) -> MemoryInput:
    if step == "tp_x2":
        return replace(inp, tp=inp.tp * 2)
    if step == "max_model_len":
        return replace(inp, max_model_len=_shorter_len(inp) or inp.max_model_len)
    if step == "max_num_seqs":
        return replace(inp, concurrency=_fewer_seqs(inp) or inp.concurrency)
    return replace(inp, **_step(step)[3])


def running_floor(inp: MemoryInput, b: Budget) -> DecodeFloor:
    """Decode floor for the batch that can run: min(concurrency, max_concurrency) sequences at max_model_len."""
    return decode_floor(inp, batch=min(inp.concurrency, max(b.max_concurrency, 1)))


def _what_if(step: str, inp: MemoryInput, new: MemoryInput, base: Budget,
             label: dict[str, str] | None = None) -> WhatIf:
    _, technique, own_label, _ = _step(step)
    b = budget(new)
    if label is None:
        own_label = _own_label(step, inp, new, own_label)
    return WhatIf(step, technique, label or own_label, round(_freed(base, b), 3), b.max_concurrency,
                  b.max_concurrency - base.max_concurrency, b.fits, new.tp * new.pp,
                  round(running_floor(new, b).ms, 3), step_flags(inp, new))


def _own_label(step: str, inp: MemoryInput, new: MemoryInput, label: dict[str, str]) -> dict[str, str]:
    """A step's label with the value it moves to, where the step picks one (TP, the two limits)."""
    if step == "tp_x2":
        return {"en": f"TP {new.tp}", "zh": f"TP {new.tp}"}
    if step == "max_model_len":
        return {k: f"{v} {count(inp.max_model_len)} → {count(new.max_model_len)}" for k, v in label.items()}
    if step == "max_num_seqs":
        return {k: f"{v} {count(inp.concurrency)} → {count(new.concurrency)}" for k, v in label.items()}
    return label


def what_ifs(inp: MemoryInput, base: Budget | None = None) -> list[WhatIf]:
    """Each applicable step applied alone to ``inp``, in the usual order (weights → KV → limits → TP)."""
    base = base or budget(inp)
    return [_what_if(step, inp, _apply(step, inp), base) for step, *_ in _STEPS if _applicable(step, inp)]


def _describe(inp: MemoryInput, cur: MemoryInput) -> dict[str, str]:
    """What changed from ``inp`` to ``cur``, e.g. "INT4 weights + FP8 KV + TP 2"."""
    en, zh = [], []
    if cur.weights != inp.weights:
        checkpoint = cur.weights == "int4"  # no flag turns BF16 weights into INT4: a checkpoint does
        en.append(f"{cur.weights.upper()} weights" + (" (use a quantized checkpoint)" if checkpoint else ""))
        zh.append(f"{cur.weights.upper()} 权重" + ("（使用量化 checkpoint）" if checkpoint else ""))
    if cur.kv_dtype != inp.kv_dtype:
        en.append(f"{cur.kv_dtype.upper()} KV")
        zh.append(f"{cur.kv_dtype.upper()} KV")
    if cur.max_model_len != inp.max_model_len:
        en.append(f"max_model_len {count(cur.max_model_len)}")
        zh.append(f"max_model_len {count(cur.max_model_len)}")
    if cur.concurrency != inp.concurrency:
        en.append(f"max_num_seqs {count(cur.concurrency)}")
        zh.append(f"max_num_seqs {count(cur.concurrency)}")
    if cur.tp != inp.tp:
        en.append(f"TP {cur.tp}")
        zh.append(f"TP {cur.tp}")
    return {"en": " + ".join(en), "zh": " + ".join(zh)}


def ladder(inp: MemoryInput, base: Budget | None = None) -> list[WhatIf]:
    """The steps stacked one on another in the seed's order until the workload fits (TP doubles up to 8);
    each entry's label names everything applied so far. Empty when it already fits."""
    base = base or budget(inp)
    out: list[WhatIf] = []
    cur = inp
    for step in ("weights_fp8", "weights_int4", "kv_fp8", "max_model_len", "max_num_seqs", "tp_x2", "tp_x2", "tp_x2"):
        if base.fits or (out and out[-1].fits) or not _applicable(step, cur):
            continue
        cur = _apply(step, cur)
        out.append(_what_if(step, inp, cur, base, _describe(inp, cur)))
    return out


# ---------------------------------------------------------------- breakdown


@dataclass(frozen=True)
class MemoryBreakdown:
    """Per-GPU result. ``kv_cache_gib`` is the NEED (concurrency × max_model_len); ``kv_available_gib``
    is what is left after weights, activations and overhead; capacity and max concurrency follow from it.
    ``decode_floor_ms`` is the roofline floor for min(concurrency, max_concurrency) sequences all at
    max_model_len (worst-case KV reads); ``decode_floor_weights_ms`` is the weights-only floor at batch 1."""

    weights_gib: float
    kv_cache_gib: float
    kv_needed_gib: float
    kv_available_gib: float
    activation_gib: float
    overhead_gib: float
    usable_gib: float
    total_gib: float
    weights_share: float
    kv_bytes_per_token: int
    kv_bytes_per_token_per_gpu: int
    kv_capacity_tokens: int
    max_concurrency: int
    fits: bool
    starts: bool
    branch: str | None  # the shortage branch; None when the workload fits (nothing is short)
    techniques: list[str]
    what_if: list[WhatIf]
    ladder: list[WhatIf]
    try_first: str | None
    decode_floor_ms: float
    decode_bound: str
    decode_realistic_ms: tuple[float, float]
    decode_floor_weights_ms: float
    gpus: int
    notes: list[dict[str, str]] = field(default_factory=list)  # {lang: text}
    largest_part: str = "weights"  # one of PARTS: the biggest part per GPU (said when it fits)
    headroom_gib: float = 0.0  # usable − everything needed, per GPU; negative when it does not fit


def _notes(inp: MemoryInput) -> list[dict[str, str]]:
    """Caveats for this deployment, each in every UI language."""
    m = inp.model
    notes = [{"en": "Activation and overhead are estimates; the vLLM startup log is authoritative.",
              "zh": "激活与开销为估算值；以 vLLM 启动日志为准。"}]
    if m.attention == "mla" and inp.tp > 1:
        notes.append({"en": "MLA's latent KV is replicated on every TP rank (unverified); DP-attention avoids it.",
                      "zh": "MLA 的潜在 KV 在每个 TP rank 上都有一份（未经验证）；DP-attention 可避免。"})
    elif inp.tp > m.kv_heads:
        notes.append({"en": f"TP {inp.tp} > {m.kv_heads} KV heads: KV heads are replicated, per-GPU KV stops "
                            "shrinking.",
                      "zh": f"TP {inp.tp} > {m.kv_heads} 个 KV 头：KV 头被复制，每卡 KV 不再减少。"})
    if inp.tp > 1 and not inp.gpu.nvlink:
        notes.append({"en": f"{inp.gpu.title} has no NVLink: TP all-reduces go over PCIe; prefer replicas or PP.",
                      "zh": f"{inp.gpu.title} 没有 NVLink：TP 的 all-reduce 走 PCIe；优先多副本或 PP。"})
    if m.max_position and inp.max_model_len > m.max_position:
        notes.append({"en": f"max_model_len {inp.max_model_len} exceeds the model's {m.max_position} positions.",
                      "zh": f"max_model_len {inp.max_model_len} 超过模型的 {m.max_position} 个位置。"})
    if inp.weights == "fp8" and not inp.gpu.fp8_tflops:
        notes.append({"en": f"{inp.gpu.title} has no FP8 tensor cores: FP8 weights run as W8A16 (Marlin).",
                      "zh": f"{inp.gpu.title} 没有 FP8 张量核心：FP8 权重以 W8A16（Marlin）方式运行。"})
    return notes


def estimate(inp: MemoryInput, kb: KnowledgeBase | None = None) -> MemoryBreakdown:
    """The whole calculation for one deployment (per GPU), with branch, techniques and what-ifs."""
    b = budget(inp)
    branch = None if b.fits else pick_branch(b.weights_gib, b.kv_needed_gib, b.activation_gib)
    steps = what_ifs(inp, b)
    first = None if b.fits else next((w.step for w in steps if w.fits), None)
    floor = running_floor(inp, b)
    return MemoryBreakdown(
        weights_gib=b.weights_gib, kv_cache_gib=b.kv_needed_gib, kv_needed_gib=b.kv_needed_gib,
        kv_available_gib=b.kv_available_gib, activation_gib=b.activation_gib, overhead_gib=b.overhead_gib,
        usable_gib=b.usable_gib, total_gib=inp.gpu.memory_gib, weights_share=b.weights_gib / b.usable_gib,
        kv_bytes_per_token=kv_bytes_per_token(inp.model, inp.kv_dtype),
        kv_bytes_per_token_per_gpu=b.kv_bytes_per_token_per_gpu, kv_capacity_tokens=b.kv_capacity_tokens,
        max_concurrency=b.max_concurrency, fits=b.fits, starts=b.kv_capacity_tokens >= inp.max_model_len,
        branch=branch, techniques=branch_techniques(branch, kb) if branch else [], what_if=steps,
        ladder=ladder(inp, b),
        try_first=first,
        decode_floor_ms=floor.ms, decode_bound=floor.bound, decode_realistic_ms=floor.realistic_ms,
        decode_floor_weights_ms=decode_floor(inp, batch=1, context=0).ms, gpus=inp.tp * inp.pp, notes=_notes(inp),
        largest_part=largest_part(b),
        headroom_gib=b.usable_gib - b.weights_gib - b.activation_gib - b.overhead_gib - b.kv_needed_gib)


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def breakdown_dict(b: MemoryBreakdown) -> dict[str, Any]:
    """JSON-ready breakdown (GiB rounded to 3 decimals); what_if entries also carry their English text."""
    out = _rounded(asdict(b))
    out["notes"] = [n["en"] for n in b.notes]
    for key in ("what_if", "ladder"):
        out[key] = [{**_rounded(asdict(w)), "text": w.text()} for w in getattr(b, key)]
    return out


def input_dict(inp: MemoryInput) -> dict[str, Any]:
    """The input echoed in JSON output: ids instead of whole specs."""
    out = asdict(inp)
    out["model"], out["gpu"] = inp.model.id, inp.gpu.id
    out["max_num_batched_tokens"] = batched_tokens(inp)
    return out
