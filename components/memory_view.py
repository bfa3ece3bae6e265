"""The memory page: inputs, the four-part breakdown per GPU, the branch it points to, what each step frees."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from components import session
from components.chart_style import show
from components.node_panel import technique_link
from components.shell import knowledge, lang, t, translated_choice
from components.static_table import static_table
from triage.service.display import count, gib, kib, md_escape, ms, number, percent, plain, signed_count
from triage.service.memory import (
    KV_DTYPES,
    WEIGHT_DTYPES,
    MemoryBreakdown,
    MemoryInput,
    ModelSpec,
    WhatIf,
    estimate_memory,
    load_gpus,
    load_models,
    measured_capacity,
    model_from_config,
)
from triage.service.model import TriageError

CUSTOM, PASTED = "__custom__", "__config__"


# URL parameter → (widget key, parser): the inputs live in the URL so a link reproduces the result.
URL_FIELDS: dict[str, tuple[session.Widget[Any], Callable[[str], Any]]] = {
    "model": (session.MEM_MODEL, str), "gpu": (session.MEM_GPU, str), "weights": (session.MEM_WEIGHTS_DTYPE, str),
    "kv": (session.MEM_KV_DTYPE, str), "util": (session.MEM_UTIL, float), "tp": (session.MEM_TP, int),
    "pp": (session.MEM_PP, int), "len": (session.MEM_MAX_LEN, int), "conc": (session.MEM_CONCURRENCY, int),
    "layers": (session.MEM_LAYERS, int), "kv_heads": (session.MEM_KV_HEADS, int),
    "head_dim": (session.MEM_HEAD_DIM, int), "params": (session.MEM_PARAMS, float),
}


# URL parameter → (lowest, highest) accepted, the same bounds as the inputs' own
BOUNDS: dict[str, tuple[float, float]] = {
    "util": (0.5, 0.98), "len": (256, 1_048_576), "conc": (1, 4096), "layers": (1, 256), "kv_heads": (1, 256),
    "head_dim": (16, 512), "params": (0.1, 2000.0),
}
MAX_SHOWN = 40  # a refused value is quoted up to this many characters


def _accepted(param: str, allowed: list[Any] | None) -> str:
    """The values a parameter takes, in words: the choices, or the range."""
    if allowed is not None:
        return ", ".join(str(a) for a in allowed)
    lo, hi = BOUNDS[param]
    return t("mem_url_range", lo=number(lo), hi=number(hi))


def _from_url(param: str, raw: str, allowed: list[Any] | None) -> Any:
    """The URL's value when it is one the input accepts (a choice matched without case), else None."""
    try:
        value = URL_FIELDS[param][1](raw.strip())
    except ValueError:
        return None
    if allowed is not None:
        return next((a for a in allowed if str(a).lower() == str(value).lower()), None)
    lo, hi = BOUNDS.get(param, (-math.inf, math.inf))
    return value if math.isfinite(value) and lo <= value <= hi else None


def _seed(widget: session.Widget[Any], default: Any, refused: list[str],
          allowed: Iterable[Any] | None = None) -> None:
    """Give ``widget`` its first value: from the URL when valid, else ``default`` (once per session). A URL
    value the input does not take is said in ``refused`` with the accepted values, never silently replaced."""
    if widget.present():
        return
    param = next(p for p, (w, _) in URL_FIELDS.items() if w == widget)
    raw = st.query_params.get(param)
    choices = list(allowed) if allowed is not None else None
    value = default if raw is None else _from_url(param, raw, choices)
    if value is None:
        shown = raw if raw is not None and len(raw) <= MAX_SHOWN else f"{(raw or '')[:MAX_SHOWN]}…"
        refused.append(t("mem_url_refused", param=param, value=shown,
                         accepted=_accepted(param, choices),
                         used=number(default) if isinstance(default, (int, float)) else str(default)))
        value = default
    widget.seed(value)


def _to_url(widgets: Iterable[session.Widget[Any]]) -> None:
    """Write the inputs in use to the URL (other parameters, such as lang, stay)."""
    shown = {w.name for w in widgets}
    for param, (widget, _) in URL_FIELDS.items():
        if widget.name in shown and widget.present():
            value = widget.value()
            text = f"{value:g}" if isinstance(value, float) else str(value)
            if st.query_params.get(param) != text:
                st.query_params[param] = text
        elif param in st.query_params:
            del st.query_params[param]


def _custom_model(refused: list[str]) -> ModelSpec:
    c = st.columns(4)
    for widget, default in ((session.MEM_LAYERS, 32), (session.MEM_KV_HEADS, 8), (session.MEM_HEAD_DIM, 128),
                            (session.MEM_PARAMS, 8.0)):
        _seed(widget, default, refused)
    layers = c[0].number_input(t("mem_layers"), 1, 256, key=session.MEM_LAYERS.name)
    kv_heads = c[1].number_input(t("mem_kv_heads"), 1, 256, key=session.MEM_KV_HEADS.name)
    head_dim = c[2].number_input(t("mem_head_dim"), 16, 512, key=session.MEM_HEAD_DIM.name)
    params = c[3].number_input(t("mem_params"), 0.1, 2000.0, key=session.MEM_PARAMS.name)
    heads = max(int(kv_heads), 32 // int(kv_heads) * int(kv_heads))
    return ModelSpec("custom", "custom", float(params), int(layers), int(heads * head_dim), int(heads),
                     int(kv_heads), int(head_dim))


def _pasted_model() -> ModelSpec | None:
    text = st.text_area(t("mem_paste"), height=150, key=session.MEM_CONFIG.name)
    if not text.strip():
        st.info(t("mem_paste_hint"))
        return None
    try:
        return model_from_config(text, where="config.json")
    except TriageError as exc:
        st.error(md_escape(exc.line()))
        return None


def model_input(refused: list[str]) -> ModelSpec | None:
    models = load_models()
    options = [*models, CUSTOM, PASTED]
    names = {CUSTOM: "mem_custom", PASTED: "mem_pasted"}
    _seed(session.MEM_MODEL, options[0], refused, options)
    choice = translated_choice(st.selectbox, t("mem_model"), options, session.MEM_MODEL,
                               lambda o: t(names[o]) if o in names else models[o].title)
    if choice == CUSTOM:
        return _custom_model(refused)
    if choice == PASTED:
        return _pasted_model()
    return models[choice]


TP_CHOICES, PP_CHOICES = [1, 2, 4, 8, 16], [1, 2, 4, 8]


def deployment(model: ModelSpec, refused: list[str]) -> MemoryInput:
    gpus = load_gpus()
    live = _live_cache_config()
    util_live = float(live.get("gpu_memory_utilization", MemoryInput.gpu_memory_utilization))
    util_default = round(min(0.98, max(0.5, util_live)), 2)
    default_weights = model.checkpoint_dtype if model.checkpoint_dtype in WEIGHT_DTYPES else WEIGHT_DTYPES[0]
    if session.MEMORY_MODEL_SEEN.get() != model.id:  # a new model starts at its checkpoint's dtype
        if session.MEMORY_MODEL_SEEN.present():
            session.MEM_WEIGHTS_DTYPE.seed(default_weights)
        session.MEMORY_MODEL_SEEN.set(model.id)
    _seed(session.MEM_GPU, next(iter(gpus)), refused, list(gpus))
    _seed(session.MEM_WEIGHTS_DTYPE, default_weights, refused, WEIGHT_DTYPES)
    _seed(session.MEM_KV_DTYPE, KV_DTYPES[0], refused, KV_DTYPES)
    _seed(session.MEM_UTIL, util_default, refused)
    _seed(session.MEM_TP, 1, refused, TP_CHOICES)
    _seed(session.MEM_PP, 1, refused, PP_CHOICES)
    _seed(session.MEM_MAX_LEN, 8192, refused)
    _seed(session.MEM_CONCURRENCY, 32, refused)
    util_now = session.MEM_UTIL.value()
    if util_now is None or not 0.5 <= util_now <= 0.98:
        session.MEM_UTIL.seed(util_default)
    # three rows, the GPU and the slider wide: four to a row cut "Instinct MI300X 192GB" and broke
    # "gpu_memory_utilization" mid-word beside the sidebar at 1024 px
    c = st.columns([2, 1, 1])
    gpu = c[0].selectbox(t("mem_gpu"), list(gpus), format_func=lambda g: gpus[g].title, key=session.MEM_GPU.name)
    weights = c[1].selectbox(t("mem_weights"), WEIGHT_DTYPES, key=session.MEM_WEIGHTS_DTYPE.name)
    kv = c[2].selectbox(t("mem_kv_dtype"), KV_DTYPES, key=session.MEM_KV_DTYPE.name)
    c = st.columns([2, 1, 1])
    util = c[0].slider("gpu_memory_utilization", 0.5, 0.98, step=0.01, key=session.MEM_UTIL.name,
                       help=t("mem_prefilled") if live else None)
    tp = c[1].selectbox("TP", TP_CHOICES, key=session.MEM_TP.name)
    pp = c[2].selectbox("PP", PP_CHOICES, key=session.MEM_PP.name)
    left, right = st.columns(2)
    max_len = left.number_input("max_model_len", 256, 1_048_576, step=1024, key=session.MEM_MAX_LEN.name)
    conc = right.number_input(t("mem_concurrency"), 1, 4096, key=session.MEM_CONCURRENCY.name)
    block = int(live.get("block_size", 16)) if str(live.get("block_size", "16")).isdigit() else 16
    return MemoryInput(model, gpus[gpu], weights, kv, int(tp), int(pp), int(max_len), int(conc), float(util),
                       block_size=block)


PART_KEYS = {"weights": "mem_part_weights", "kv_cache": "mem_part_kv", "activation": "mem_part_activation",
             "overhead": "mem_part_overhead"}


def _part_gib(b: MemoryBreakdown, part: str) -> float:
    return {"weights": b.weights_gib, "kv_cache": b.kv_needed_gib, "activation": b.activation_gib,
            "overhead": b.overhead_gib}[part]


def breakdown_chart(b: MemoryBreakdown) -> go.Figure:
    parts = [(t("mem_part_weights"), b.weights_gib, "#1565C0"),
             (t("mem_part_kv"), b.kv_needed_gib, "#EF6C00"),
             (t("mem_part_activation"), b.activation_gib, "#6A1B9A"),
             (t("mem_part_overhead"), b.overhead_gib, "#757575")]
    fig = go.Figure([go.Bar(y=[t("mem_needed")], x=[size], name=f"{name} {gib(size)}", orientation="h",
                            marker_color=color, text=gib(size), textposition="inside", cliponaxis=False)
                     for name, size, color in parts])
    fig.add_vline(x=b.usable_gib, line_dash="dash", line_color="#D32F2F")
    # the label sits above the plot area, never on a bar
    fig.add_annotation(x=b.usable_gib, y=1.0, yref="paper", yanchor="bottom", showarrow=False,
                       text=t("mem_usable", gib=gib(b.usable_gib)), font=dict(color="#D32F2F"))
    total = b.weights_gib + b.kv_needed_gib + b.activation_gib + b.overhead_gib
    fig.update_layout(barmode="stack", height=240, margin=dict(l=10, r=10, t=30, b=10),
                      xaxis=dict(title="GiB / GPU", range=[0, max(total, b.usable_gib) * 1.05]),
                      legend=dict(orientation="h", yanchor="top", y=-0.45))
    return fig


def _verdict(b: MemoryBreakdown) -> None:
    # two by two: four in a row left each value ~100 px beside the sidebar at 1024 px ("459,…", "22.7…")
    top, bottom = st.columns(2), st.columns(2)
    # per GPU like every other number here: the capacity beside it is the KV budget ÷ this figure
    top[0].metric(t("mem_n_kv_per_token_gpu"), kib(b.kv_bytes_per_token_per_gpu), border=True)
    top[1].metric(t("mem_kv_capacity"), count(b.kv_capacity_tokens), border=True)
    bottom[0].metric(t("mem_max_concurrency"), count(b.max_concurrency), border=True)
    bottom[1].metric(t("mem_decode_floor"), ms(b.decode_floor_ms), border=True,
                     help=t("mem_decode_floor_help", lo=plain(b.decode_realistic_ms[0]),
                            hi=plain(b.decode_realistic_ms[1])))
    if b.fits:
        part = b.largest_part
        st.success(t("mem_fits_detail", part=t(PART_KEYS[part]), gib=gib(_part_gib(b, part)),
                     usable=gib(b.usable_gib), headroom=gib(b.headroom_gib)))
    else:
        st.error(_not_fits(b))


def _not_fits(b: MemoryBreakdown) -> str:
    """Which of the three ways it fails, with the numbers: an on-call reader should not have to work it out."""
    if b.kv_available_gib <= 0:
        return t("mem_not_fits_weights", weights=gib(b.weights_gib), usable=gib(b.usable_gib))
    if not b.starts:
        return t("mem_not_fits_start", avail=gib(b.kv_available_gib), tokens=count(b.kv_capacity_tokens))
    return t("mem_not_fits_kv", need=gib(b.kv_needed_gib), avail=gib(b.kv_available_gib),
             conc=count(b.max_concurrency))


def _steps_table(steps: list[WhatIf]) -> None:
    """What-if steps as a wrapping table: the step, the exact flag, what it frees and whether it then fits."""
    rows = [{t("mem_col_step"): w.label.get(lang(), w.label["en"]), t("mem_col_flag"): w.flags,
             t("mem_col_frees"): gib(w.freed_gib), t("mem_col_max_conc"): count(w.max_concurrency),
             t("mem_col_change"): signed_count(w.delta_concurrency), t("mem_col_gpus"): count(w.gpus),
             t("mem_col_fits"): t("word_yes") if w.fits else t("word_no")} for w in steps]
    static_table(pd.DataFrame(rows).set_index(t("mem_col_step")), whole_words=True)


def _branch(b: MemoryBreakdown) -> None:
    kb = knowledge()
    if b.branch is not None:
        st.markdown(f"**{t('mem_branch')}:** {kb.causes[b.branch].title.get(lang())} (`{b.branch}`)")
        for tid in b.techniques:
            technique_link(tid)
    if b.what_if:  # when it fits, the steps are capacity planning, not a fix: the heading says so
        st.markdown(f"**{t('mem_what_if_fits' if b.fits else 'mem_what_if')}**")
        _steps_table(b.what_if)
    if b.ladder and not b.fits:
        st.markdown(f"**{t('mem_ladder')}**")
        _steps_table(b.ladder)
    for note in b.notes:
        st.caption(note.get(lang(), note["en"]))


def numbers_table(inp: MemoryInput, b: MemoryBreakdown) -> pd.DataFrame:
    """Every number of the breakdown with its unit, rounded for reading."""
    lo, hi = b.decode_realistic_ms
    rows = [
        ("mem_n_usable", gib(b.usable_gib)), ("mem_n_total", gib(b.total_gib)),
        ("mem_part_weights", gib(b.weights_gib)), ("mem_part_kv", gib(b.kv_needed_gib)),
        ("mem_n_kv_available", gib(b.kv_available_gib)),
        ("mem_part_activation", gib(b.activation_gib)), ("mem_part_overhead", gib(b.overhead_gib)),
        ("mem_n_headroom", gib(b.headroom_gib)), ("mem_n_weights_share", percent(b.weights_share)),
        ("mem_kv_per_token", kib(b.kv_bytes_per_token)),
        ("mem_n_kv_per_token_gpu", kib(b.kv_bytes_per_token_per_gpu)),
        ("mem_kv_capacity", count(b.kv_capacity_tokens)), ("mem_max_concurrency", count(b.max_concurrency)),
        ("mem_concurrency", count(inp.concurrency)), ("mem_n_gpus", count(b.gpus)),
        ("mem_decode_floor", f"{ms(b.decode_floor_ms)} ({b.decode_bound})"),
        ("mem_n_decode_realistic", f"{plain(lo)}–{ms(hi)}"),
        ("mem_n_decode_weights", ms(b.decode_floor_weights_ms)),
    ]
    return pd.DataFrame({t("mem_col_value"): [v for _, v in rows]}, index=[t(k) for k, _ in rows])


def _live_cache_config() -> dict[str, str]:
    """The cache_config_info labels of the live vLLM opened last (empty when there is none)."""
    return session.LIVE_CACHE_CONFIG.get() or {}


def _measured(inp: MemoryInput, b: MemoryBreakdown) -> None:
    """Measured KV capacity from a live vLLM's cache_config_info, beside the estimate."""
    labels = _live_cache_config()
    if not labels:
        return
    try:
        measured = measured_capacity(labels, inp)
    except TriageError as exc:
        st.caption(md_escape(exc.line()))
        return
    st.info(t("mem_measured", tokens=count(measured.kv_capacity_tokens), conc=count(measured.max_concurrency),
              est=count(b.kv_capacity_tokens), source=measured.source))


def _refusals(where: Any, refused: list[str]) -> None:
    for line in refused:
        where.warning(line, icon=":material/link_off:")


def memory_page() -> None:
    st.title(t("mem_title"))
    st.caption(t("mem_hint"))
    notices = st.container()  # above the inputs: what the link asked for that could not be used
    refused: list[str] = []
    model = model_input(refused)
    if model is None:
        _refusals(notices, refused)
        _to_url([session.MEM_MODEL])
        return
    inp = deployment(model, refused)
    _refusals(notices, refused)
    _to_url([w for w, _ in URL_FIELDS.values()] if model.id == "custom" else
            [w for p, (w, _) in URL_FIELDS.items() if p not in ("layers", "kv_heads", "head_dim", "params")])
    try:
        b = estimate_memory(inp, knowledge())
    except TriageError as exc:
        st.error(md_escape(exc.line()))
        return
    show(breakdown_chart(b), width="stretch", key=session.MEM_CHART.name)
    _verdict(b)
    _measured(inp, b)
    _branch(b)
    details = st.expander(t("mem_details"), key=session.MEM_DETAILS.name, on_change="rerun")
    if details.open:  # lazy: computed and sent only once opened
        with details:
            st.table(numbers_table(inp, b))
