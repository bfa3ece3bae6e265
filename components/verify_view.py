"""The Verify page: baseline vs candidate per metric, beyond-noise verdicts, charts, and saving to the log."""

from __future__ import annotations

import os
from dataclasses import fields
from datetime import datetime
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from components import session, upload_store
from components.chart_style import LEGEND_ABOVE, show
from components.shell import knowledge, lang, t, translated_choice
from components.static_table import static_table
from triage.service.display import fmt_interval, fmt_relative, fmt_value, md_escape, number
from triage.service.experiments import (
    GAIN,
    NOISE_FLOOR_PCT,
    REGRESSION,
    SUMMARY_TOLERANCE_PCT,
    Comparison,
    MetricDelta,
    Note,
    compare_runs,
    experiment_log,
    label_digest,
    metric_specs,
    save_experiment,
)
from triage.service.model import Run, Slo, TriageError
from triage.service.params import SQLITE_MAX_ID, int_param, shown_param
from triage.service.uploads import BoundedCache, Refused, parse_cache_from_env
from triage.service.verify_sides import (
    LOG_SPECS,
    LogSeries,
    Side,
    compare_log_sides,
    open_side,
    side_bytes,
    side_title,
)
from triage.service.windows import prometheus_run

# text symbols every UI font has (the evidence tables use the same ✔ / ✘): emoji circles were empty boxes
# where no emoji font is installed
VERDICT_ICON = {"gain": "✔", "regression": "✘", "no effect": "○"}
# the core's verdict words → tree/ui.yaml keys (the log and JSON keep the English words)
VERDICT_KEYS = {"gain": "verdict_gain", "regression": "verdict_regression", "no effect": "verdict_no_effect",
                "not comparable": "verdict_not_comparable", "gain confirmed": "verdict_gain_confirmed",
                "unsound": "verdict_unsound"}
WORDS = ("baseline", "candidate", "prompt", "output", "offered rate", "max concurrency")  # words inside notes
WORKLOAD_ROWS = ("model", "prompt_tokens_median", "output_tokens_median", "offered_rate", "max_concurrency",
                 "requests")


def verdict_text(verdict: str) -> str:
    """A verdict in the reader's language (an unknown word, e.g. from an older log, as recorded)."""
    key = VERDICT_KEYS.get(verdict)
    return t(key) if key else verdict


def when_text(stamp: str | None) -> str:
    """A stored UTC timestamp as the reader writes dates: 'Dec 2, 2026 01:46 UTC', '2026年12月2日 01:46 UTC'."""
    try:
        when = datetime.fromisoformat(stamp or "")
    except ValueError:
        return stamp or "—"
    return t("date_time", y=when.year, m=when.month, mon=when.strftime("%b"), d=when.day, hm=when.strftime("%H:%M"))


def note_text(note: Note) -> str:
    """A warning or refusal in the reader's language; the words it quotes from the files stay as written."""
    params: dict[str, Any] = {k: t(f"verify_word_{v.replace(' ', '_')}") if v in WORDS else v
                              for k, v in note.params.items()}
    if note.code == "one_side" and (note.params.get("id") in metric_specs() or note.params.get("id") in LOG_SPECS):
        params["metric"] = _label_of(note.params["id"], note.params["metric"])
    return t(f"verify_note_{note.code}", **params)



# (file name or window label, SHA-256 of the file or label, the run compared, or the server log)
Picked = tuple[str, str, Run | LogSeries]


@st.cache_resource(show_spinner=False)
def side_cache() -> BoundedCache[Side]:
    """Verify's parsed uploads (benchmark files, console summaries, server logs) for the server process, bounded
    by half of TRIAGE_PARSE_CACHE_MB."""
    return BoundedCache(parse_cache_from_env(os.environ).max_bytes // 2, open_side, side_bytes)


def _pick(side: str) -> Picked | None:
    """The run (or server log) of one side: the upload is parsed once through the server's bounded cache, then
    its bytes are released; the session keeps its name and hashes."""
    uploader = session.VERIFY_BASE if side == "base" else session.VERIFY_CAND
    got = upload_store.take(uploader, st.file_uploader(t(uploader.name), key=uploader.name), side_cache())
    if got is None:
        return None
    if isinstance(got, Refused):
        st.error(t("upload_failed", name=got.name, reason=got.reason))
        return None
    held, bench = got
    if isinstance(bench, LogSeries):
        st.caption(t("verify_log_read", what=side_title(bench)))
        return held.name, held.sha256, bench
    labels = [f"{i}. {r.label}" for i, r in enumerate(bench.runs, start=1)]
    run_key = (session.VERIFY_BASE_RUN if side == "base" else session.VERIFY_CAND_RUN).name
    i = st.selectbox(t("run_picker"), range(len(labels)), index=len(labels) - 1, format_func=labels.__getitem__,
                     key=run_key) if len(labels) > 1 else 0
    return held.name, held.sha256, bench.runs[i]



def _pick_windows() -> tuple[Picked, Picked] | None:
    from components.live_picker import WINDOWS_MIN, pick_end, prometheus_profile

    profile = prometheus_profile()
    if profile is None:
        return None
    window = st.selectbox(t("live_window"), list(WINDOWS_MIN), index=1, key=session.VERIFY_WINDOW.name)
    left, right = st.columns(2)
    with left:
        st.markdown(f"**{t('verify_base')}**")
        base_end = pick_end(session.VERIFY_BASE_END)
    with right:
        st.markdown(f"**{t('verify_cand')}**")
        cand_end = pick_end(session.VERIFY_CAND_END)
    minutes = WINDOWS_MIN[window]
    try:
        runs = [prometheus_run(knowledge(), profile, end, minutes, f"{profile.name} {window} to {end:%Y-%m-%d %H:%M}Z")
                for end in (base_end, cand_end)]
    except TriageError as exc:
        st.error(md_escape(exc.line()))
        return None
    return tuple((r.label, label_digest(r.label), r) for r in runs)  # type: ignore[return-value]


def _label_of(metric: str, fallback: str) -> str:
    """A compared metric's label in the page's language, from the metric catalogue (a log's: tree/ui.yaml)."""
    if metric in LOG_SPECS:
        return t(f"verify_{metric}")
    spec = knowledge().compare.get(metric)
    return knowledge().signals[spec.signal].label.get(lang()) if spec else (fallback or metric)


def _label(m: MetricDelta) -> str:
    return _label_of(m.metric, m.label)


def comparison_table(metrics: list[MetricDelta], unsound: bool = False) -> pd.DataFrame:
    """One row per metric: both values in their units, the change, its interval and the verdict, in words. In an
    unsound comparison no row is called a gain or a regression (the page says its changes are no evidence)."""
    def interval(m: MetricDelta) -> str:
        return fmt_interval(m.interval, m.scale) if m.interval else t("verify_no_interval")

    def verdict(m: MetricDelta) -> str:
        if unsound:
            return verdict_text("not comparable")
        return f"{VERDICT_ICON.get(m.verdict, '')} {verdict_text(m.verdict)}"

    columns = [t(k) for k in ("verify_metric", "verify_baseline", "verify_candidate", "verify_change",
                              "verify_interval", "verify_verdict")]
    return pd.DataFrame([[
        _label(m), fmt_value(m.baseline, m.unit), fmt_value(m.candidate, m.unit),
        fmt_relative(m.delta, m.scale), interval(m),
        verdict(m).strip(),
    ] for m in metrics], columns=columns).set_index(columns[0])


def stored_deltas(rows: list[dict[str, Any]]) -> list[MetricDelta]:
    """The per-metric rows of a logged comparison (comparison_json) back as MetricDelta; a row that does not
    read as one (an older log) is left out."""
    names = {f.name for f in fields(MetricDelta)}
    out = []
    for row in rows:
        try:
            kept = {k: v for k, v in row.items() if k in names}
            interval = kept.get("interval")
            kept["interval"] = (float(interval[0]), float(interval[1])) if interval else None
            out.append(MetricDelta(**kept))
        except (TypeError, ValueError, IndexError):
            continue
    return out


def _delta_chart(c: Comparison) -> go.Figure:
    rows = [m for m in c.metrics if m.delta is not None]
    errs = [(d - m.interval[0], m.interval[1] - d) if m.interval and (d := m.delta) is not None else (0.0, 0.0)
            for m in rows]
    colors = {"gain": "#2E7D32", "regression": "#D32F2F"}
    fig = go.Figure(go.Bar(x=[_label(m) for m in rows], y=[m.delta for m in rows],
                           marker_color=[colors.get(m.verdict, "#9E9E9E") for m in rows],
                           error_y=dict(type="data", symmetric=False, array=[e[1] for e in errs],
                                        arrayminus=[e[0] for e in errs])))
    fig.update_layout(height=320, margin=dict(l=10, r=10, t=10, b=10), yaxis_title=t("verify_change_axis"))
    return fig


def _distributions(base: Run, cand: Run) -> None:
    if not (base.has_requests and cand.has_requests):
        st.info(t("verify_no_distributions"))
        return
    cols = st.columns(2)
    for col, metric in zip(cols, ("ttft_s", "tpot_s")):
        fig = go.Figure()
        for run, name in ((base, t("verify_baseline")), (cand, t("verify_candidate"))):
            df = run.requests
            if df is not None and metric in df.columns:
                fig.add_trace(go.Histogram(x=df[metric] * 1000, name=name, opacity=0.6, nbinsx=60))
        fig.update_layout(barmode="overlay", height=280, margin=dict(l=10, r=10, t=10, b=10),
                          xaxis_title=f"{metric[:-2].upper()} (ms)", yaxis_title=t("verify_requests_axis"),
                          legend=LEGEND_ABOVE)
        show(fig, col, width="stretch", key=session.VERIFY_DIST.key(metric))


def _change_text(m: MetricDelta) -> str:
    text = f"{_label(m)} {fmt_relative(m.delta, m.scale)}"
    if m.interval:
        text += f" {fmt_interval(m.interval, m.scale)}"
    return text


def _headline(c: Comparison) -> str:
    """The core's headline (comparison._headline) in the reader's language."""
    specs = {**metric_specs(), **LOG_SPECS}
    shown = [m for m in c.metrics if m.verdict in (GAIN, REGRESSION) and specs[m.metric].counts and m.delta is not None]
    shown.sort(key=lambda m: (m.verdict != REGRESSION, not specs[m.metric].primary))
    measured = "; ".join(_change_text(m) for m in shown[:4]) or t("verify_nothing_changed")
    return t("verify_measured", overall=verdict_text(c.overall), measured=measured)


def _verdict(c: Comparison, per_request: bool, logs: bool = False) -> None:
    box = {"gain confirmed": st.success, "regression": st.error, "unsound": st.error}.get(c.overall, st.info)
    box(f"**{t('verify_overall')}: {verdict_text(c.overall)}** — {_headline(c)}")  # t() escaped its pieces
    if c.technique and c.technique in knowledge().techniques:
        expected = " ".join(knowledge().techniques[c.technique].expected_gain.seed.get(lang()).split())
        st.caption(t("verify_expected", text=expected))
    for note in c.refused_notes:  # these sentences quote model names and labels from the files
        st.error(note_text(note), icon=":material/block:")  # t() escaped the words quoted from the files
    for note in c.warning_notes:
        st.warning(note_text(note))
    if logs:
        st.caption(t("verify_basis_logs", tol=number(SUMMARY_TOLERANCE_PCT)))
        return
    st.caption(t("verify_basis_requests", floor=number(NOISE_FLOOR_PCT)) if per_request else
               t("verify_basis_summary", tol=number(SUMMARY_TOLERANCE_PCT)))


def _save(c: Comparison, base: Picked, cand: Picked) -> None:
    from components import auth

    if not auth.can_edit():  # viewers read; the log records who saved each row (created_by)
        st.caption(t("auth_viewer_cannot_save"))
        return
    with st.container(border=True):
        who = st.text_input(t("verify_who"), key=session.VERIFY_WHO.name)
        note = st.text_area(t("verify_note"), key=session.VERIFY_NOTE.name)
        if st.button(t("verify_save"), icon=":material/save:", key=session.VERIFY_SAVE.name):
            try:
                entry_id = save_experiment(c, base[:2], cand[:2], who or None, note, created_by=auth.current().user)
            except TriageError as exc:
                st.error(md_escape(exc.line()))
                return
            st.success(t("verify_saved", id=entry_id))


def stored_experiment(raw_id: str) -> None:
    """An experiment from the log, opened by ``?experiment=ID``: its recorded comparison, as saved."""
    entry_id = int_param(raw_id, 1, SQLITE_MAX_ID)
    try:
        if entry_id is None:
            raise TriageError("not an experiment id (a whole number from 1)")
        entry = experiment_log().get(entry_id)
    except TriageError as exc:
        st.error(t("verify_no_experiment", id=shown_param(raw_id), reason=exc.line()))
        return
    box = {"gain confirmed": st.success, "regression": st.error, "unsound": st.error}.get(entry.overall, st.info)
    technique = knowledge().techniques.get(entry.technique or "")
    box(f"**#{entry.id} · {t('verify_overall')}: {md_escape(verdict_text(entry.overall))}** · "
        f"{md_escape(technique.title.get(lang()) if technique else entry.technique or '—')} · "
        f"{md_escape(when_text(entry.created_at))}")
    st.caption(t("verify_stored", base=entry.baseline_name, bd=entry.baseline_sha256[:12], cand=entry.candidate_name,
                 cd=entry.candidate_sha256[:12]))
    static_table(comparison_table(stored_deltas(entry.metrics), unsound=entry.overall == "unsound"))
    if entry.note:
        st.markdown(f"**{t('verify_note')}:** {md_escape(entry.note)}")
    static_table(workload_table(entry.workload))
    st.divider()


def workload_table(work: dict[str, Any]) -> pd.DataFrame:
    """What was held fixed, baseline beside candidate, named in the reader's language."""
    def shown(value: Any) -> str:
        if value is None:
            return "—"
        return number(float(value)) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)

    sides: list[dict[str, Any]] = []
    for side in ("baseline", "candidate"):
        found = work.get(side)
        sides.append(found if isinstance(found, dict) else {})
    return pd.DataFrame({t("verify_baseline"): [shown(sides[0].get(k)) for k in WORKLOAD_ROWS],
                         t("verify_candidate"): [shown(sides[1].get(k)) for k in WORKLOAD_ROWS]},
                        index=pd.Index([t(f"verify_wl_{k}") for k in WORKLOAD_ROWS], name=t("verify_workload")))


def verify_page(slo: Slo) -> None:
    st.title(t("verify_title"))
    st.caption(t("verify_hint"))
    if st.query_params.get("experiment"):
        stored_experiment(st.query_params["experiment"])
    kb = knowledge()
    mode = translated_choice(st.segmented_control, t("verify_mode"), ["files", "windows"], session.VERIFY_MODE,
                             lambda m: t(f"verify_mode_{m}"), default="files", required=True)
    if mode == "files":
        left, right = st.columns(2)
        with left:
            base = _pick("base")
        with right:
            cand = _pick("cand")
    else:
        pair = _pick_windows()
        base, cand = pair if pair else (None, None)
    techs = [None, *kb.techniques]
    technique = translated_choice(st.selectbox, t("verify_technique"), techs, session.VERIFY_TECHNIQUE,
                                  lambda x: t("verify_technique_none") if x is None
                                  else kb.techniques[x].title.get(lang()))
    if base is None or cand is None:
        st.info(t("verify_need_two"))
        return
    b, c_ = base[2], cand[2]
    if isinstance(b, LogSeries) or isinstance(c_, LogSeries):
        _compare_logs(base, cand, technique)
        return
    c = compare_runs(b, c_, slo, technique, kb)  # few requests: compared, never refused for that alone
    session.VERIFY_VERDICT.set(c.overall)
    _verdict(c, b.has_requests and c_.has_requests)
    # every row shown: no inner scroll hides the last one
    static_table(comparison_table(c.metrics, unsound=c.overall == "unsound"))
    if c.overall == "unsound":  # bars coloured as gains would contradict the verdict above
        st.info(t("verify_no_bars_unsound"), icon=":material/block:")
    else:
        show(_delta_chart(c), width="stretch", key=session.VERIFY_DELTAS.name)
    _distributions(b, c_)
    _save(c, base, cand)


def _compare_logs(base: Picked, cand: Picked, technique: str | None) -> None:
    """Two server logs: their stats-line medians; a log against a benchmark file: refused, saying why."""
    b, c_ = base[2], cand[2]
    if isinstance(b, LogSeries) != isinstance(c_, LogSeries):
        log_side = "baseline" if isinstance(b, LogSeries) else "candidate"
        st.error(t("verify_mixed", log=t(f"verify_word_{log_side}")), icon=":material/block:")
        return
    c = compare_log_sides(b, c_, technique=technique, kb=knowledge())  # type: ignore[arg-type]
    assert c is not None
    session.VERIFY_VERDICT.set(c.overall)
    _verdict(c, False, logs=True)
    static_table(comparison_table(c.metrics, unsound=c.overall == "unsound"))
    if c.overall == "unsound":
        st.info(t("verify_no_bars_unsound"), icon=":material/block:")
    else:
        show(_delta_chart(c), width="stretch", key=session.VERIFY_DELTAS.name)
    _save(c, base, cand)
