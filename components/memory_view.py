"""The memory page: inputs, the four-part breakdown per GPU, the branch it points to, what each step frees."""

from __future__ import annotations

import dataclasses

import plotly.graph_objects as go
import streamlit as st

from components.node_panel import technique_link
from components.shell import knowledge, lang, t
from triage.diagnosis.readings import Need
from triage.errors import TriageError
from triage.memory.calculator import (
    KV_DTYPES,
    WEIGHT_DTYPES,
    MemoryBreakdown,
    MemoryInput,
    ModelSpec,
    estimate,
)
from triage.memory.presets import from_cache_config, load_gpus, load_models, parse_hf_config

CUSTOM, PASTED = "__custom__", "__config__"
CACHE_CONFIG = Need("info", "cache_config")
LIVE_KEY = "live_last"


def _custom_model() -> ModelSpec:
    c = st.columns(4)
    layers = c[0].number_input(t("mem_layers"), 1, 256, 32, key="mem_layers")
    kv_heads = c[1].number_input(t("mem_kv_heads"), 1, 256, 8, key="mem_kv_heads")
    head_dim = c[2].number_input(t("mem_head_dim"), 16, 512, 128, key="mem_head_dim")
    params = c[3].number_input(t("mem_params"), 0.1, 2000.0, 8.0, key="mem_params")
    heads = max(int(kv_heads), 32 // int(kv_heads) * int(kv_heads))
    return ModelSpec("custom", "custom", float(params), int(layers), int(heads * head_dim), int(heads),
                     int(kv_heads), int(head_dim))


def _pasted_model() -> ModelSpec | None:
    text = st.text_area(t("mem_paste"), height=150, key="mem_config")
    if not text.strip():
        st.info(t("mem_paste_hint"))
        return None
    try:
        return parse_hf_config(text, where="config.json")
    except TriageError as exc:
        st.error(exc.line())
        return None


def model_input() -> ModelSpec | None:
    models = load_models()
    options = [*models, CUSTOM, PASTED]
    names = {**{k: m.title for k, m in models.items()}, CUSTOM: t("mem_custom"), PASTED: t("mem_pasted")}
    choice = st.selectbox(t("mem_model"), options, format_func=names.get, key="mem_model")
    if choice == CUSTOM:
        return _custom_model()
    if choice == PASTED:
        return _pasted_model()
    return models[choice]


def deployment(model: ModelSpec) -> MemoryInput:
    gpus = load_gpus()
    c = st.columns(4)
    gpu = c[0].selectbox(t("mem_gpu"), list(gpus), format_func=lambda g: gpus[g].title, key="mem_gpu")
    weights = c[1].selectbox(t("mem_weights"), WEIGHT_DTYPES, index=WEIGHT_DTYPES.index(model.checkpoint_dtype)
                             if model.checkpoint_dtype in WEIGHT_DTYPES else 0, key="mem_weights_dtype")
    kv = c[2].selectbox(t("mem_kv_dtype"), KV_DTYPES, key="mem_kv_dtype")
    live = _live_cache_config()
    util_default = min(0.98, max(0.5, float(live.get("gpu_memory_utilization", 0.9))))
    util = c[3].slider("gpu_memory_utilization", 0.5, 0.98, util_default, 0.01, key="mem_util",
                       help=t("mem_prefilled") if live else None)
    c = st.columns(4)
    tp = c[0].selectbox("TP", [1, 2, 4, 8, 16], key="mem_tp")
    pp = c[1].selectbox("PP", [1, 2, 4, 8], key="mem_pp")
    max_len = c[2].number_input("max_model_len", 256, 1_048_576, 8192, step=1024, key="mem_max_len")
    conc = c[3].number_input(t("mem_concurrency"), 1, 4096, 32, key="mem_concurrency")
    block = int(live.get("block_size", 16)) if str(live.get("block_size", "16")).isdigit() else 16
    return MemoryInput(model, gpus[gpu], weights, kv, int(tp), int(pp), int(max_len), int(conc), float(util),
                       block_size=block)


def breakdown_chart(b: MemoryBreakdown) -> go.Figure:
    parts = [(t("mem_part_weights"), b.weights_gib, "#1565C0"),
             (t("mem_part_kv"), b.kv_needed_gib, "#EF6C00"),
             (t("mem_part_activation"), b.activation_gib, "#6A1B9A"),
             (t("mem_part_overhead"), b.overhead_gib, "#757575")]
    fig = go.Figure([go.Bar(y=[t("mem_needed")], x=[gib], name=name, orientation="h", marker_color=color,
                            text=f"{gib:.1f}", textposition="inside") for name, gib, color in parts])
    fig.add_vline(x=b.usable_gib, line_dash="dash", line_color="#D32F2F",
                  annotation_text=t("mem_usable", gib=f"{b.usable_gib:.1f}"))
    fig.update_layout(barmode="stack", height=220, margin=dict(l=10, r=10, t=30, b=10), xaxis_title="GiB / GPU",
                      legend=dict(orientation="h", y=1.3))
    return fig


def _verdict(b: MemoryBreakdown) -> None:
    c = st.columns(4)
    c[0].metric(t("mem_kv_per_token"), f"{b.kv_bytes_per_token / 1024:,.0f} KiB", border=True)
    c[1].metric(t("mem_kv_capacity"), f"{b.kv_capacity_tokens:,}", border=True)
    c[2].metric(t("mem_max_concurrency"), f"{b.max_concurrency:,}", border=True)
    c[3].metric(t("mem_decode_floor"), f"{b.decode_floor_ms:.1f} ms", border=True,
                help=t("mem_decode_floor_help", lo=f"{b.decode_realistic_ms[0]:.1f}",
                       hi=f"{b.decode_realistic_ms[1]:.1f}"))
    (st.success if b.fits else st.error)(t("mem_fits") if b.fits else t("mem_not_fits"))


def _branch(b: MemoryBreakdown) -> None:
    kb = knowledge()
    st.markdown(f"**{t('mem_branch')}:** {kb.causes[b.branch].title.get(lang())} (`{b.branch}`)")
    for tid in b.techniques:
        technique_link(tid)
    st.markdown(f"**{t('mem_what_if')}**")
    st.markdown("\n".join(f"- {w.text(lang())}" for w in b.what_if))
    if b.ladder and not b.fits:
        st.markdown(f"**{t('mem_ladder')}**")
        st.markdown("\n".join(f"{i}. {w.text(lang())}" for i, w in enumerate(b.ladder, start=1)))
    for note in b.notes:
        st.caption(note)


def _live_cache_config() -> dict[str, str]:
    """The cache_config_info labels of the live vLLM opened last (empty when there is none)."""
    last = st.session_state.get(LIVE_KEY)
    labels = last.live.readings.values.get(CACHE_CONFIG) if last is not None else None
    return labels if isinstance(labels, dict) else {}


def _measured(inp: MemoryInput, b: MemoryBreakdown) -> None:
    """Measured KV capacity from a live vLLM's cache_config_info, beside the estimate."""
    labels = _live_cache_config()
    if not labels:
        return
    try:
        measured = from_cache_config(labels, inp)
    except TriageError as exc:
        st.caption(exc.line())
        return
    st.info(t("mem_measured", tokens=f"{measured.kv_capacity_tokens:,}", conc=measured.max_concurrency,
              est=f"{b.kv_capacity_tokens:,}", source=measured.source))


def memory_page() -> None:
    st.title(t("mem_title"))
    st.caption(t("mem_hint"))
    model = model_input()
    if model is None:
        return
    inp = deployment(model)
    try:
        b = estimate(inp, knowledge())
    except TriageError as exc:
        st.error(exc.line())
        return
    st.plotly_chart(breakdown_chart(b), width="stretch", key="mem_chart")
    _verdict(b)
    _measured(inp, b)
    _branch(b)
    with st.expander(t("mem_details")):
        st.json({k: v for k, v in dataclasses.asdict(b).items() if k not in ("what_if", "ladder")})
