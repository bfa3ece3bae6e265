"""Verify one optimization against its baseline: per-metric change, bootstrap interval, verdict, soundness."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from triage.diagnosis.rules import Slo
from triage.knowledge.loader import KnowledgeBase, load_knowledge
from triage.knowledge.units import fmt_interval, fmt_relative, percent, plain
from triage.run import Run
from triage.verify.bootstrap import boot_mean, boot_quantile

NOISE_FLOOR_PCT = 2.0  # relative change an interval must clear to count as a gain or a regression
NOISE_FLOOR_PP = 0.1  # the same for error rate, in percentage points
SUMMARY_TOLERANCE_PCT = 5.0  # summary-only comparisons: no interval, so a wider margin
SUMMARY_TOLERANCE_PP = 0.5
MIN_REQUESTS = 100  # below this per side the intervals are wide: the gate refuses, the page shows them and says so
MIN_FOR_INTERVAL = 2  # successful requests a side needs for any bootstrap interval at all
MIN_BOOT = 1000
MAX_LENGTH_DIFF = 0.10  # median prompt / output tokens
MAX_LOAD_DIFF = 0.05  # offered rate, max concurrency
SUMMARY_ONLY = "summary statistics only: no confidence interval can be given"
GAIN, REGRESSION, NO_EFFECT, NOT_COMPARABLE = "gain", "regression", "no effect", "not comparable"


# Every warning and refusal as a code with its numbers, so a page can say it in the reader's language
# (tree/ui.yaml verify_note_<code>); the English sentence is kept for the CLI, JSON and the log.
NOTES_EN: dict[str, str] = {
    "techniques": "{n} techniques declared ({names}): one change at a time",
    "models": "different models: baseline {base}, candidate {cand}",
    "model_unknown": "the model is not recorded in both runs; cannot check it is the same",
    "lengths": "{what} lengths differ: median {base} vs {cand} tokens (more than {limit}); hold the dataset and "
               "ISL/OSL fixed",
    "load": "{what} differs: {base} vs {cand} (more than {limit}); hold the load fixed",
    "load_one_side": "{what} is recorded in only one run; cannot check that the load was the same",
    "arrival": "requests arrived at different rates: {base} vs {cand} req/s; if the test was open-loop at one "
               "rate, the load was not the same",
    "too_few": "too few requests: the {side} has {n} (need at least {need} per side)",
    "no_interval": "too few requests: the {side} has {n} successful (at least {need} are needed for any interval)",
    "few": "few requests (baseline {base}, candidate {cand}): the intervals are wide; about {more} more per side "
           "({target} each) would halve them",
    "definitions": "{metric} is defined differently: baseline '{base}', candidate '{cand}'",
    "one_side": "{metric}: only the {side} has it; not compared",
    "unknown_technique": "unknown technique '{id}': no expected gain to set the result against",
    # two server logs (triage/verify/logs.py)
    "log_short": "too few stats lines: the {side} log has {n} stats times (at least {need} are needed for a median "
                 "over the window)",
    "log_idle": "the {side} log shows no running or waiting request: the server was idle, there is nothing to compare",
    "log_formats": "the logs come from different engines or log formats ({base} vs {cand}): their stats lines are "
                   "not defined alike",
    "log_load": "prompt throughput differs: median {base} vs {cand} tok/s (more than {limit}); a log does not record "
                "the offered load, so it may not have been the same",
    "log_spans": "the windows differ in length: {base} vs {cand} min; they may cover different phases of the load",
    "log_limits": "server logs hold no per-request data: no TTFT, TPOT or E2E percentile, no error rate and no "
                  "bootstrap interval can be concluded from them; only the stats lines' medians (queue, KV usage, "
                  "token throughput) are compared, against a ±{tol}% tolerance",
}


@dataclass(frozen=True)
class Note:
    """One warning or refusal: ``code`` (a key of NOTES_EN) and the values its sentence names."""

    code: str
    params: dict[str, Any]

    def text(self) -> str:
        return NOTES_EN[self.code].format(**self.params)


@dataclass(frozen=True)
class MetricSpec:
    """One compared metric: where its value comes from and which way is better."""

    id: str
    label: str
    direction: str  # "lower" or "higher" is better
    unit: str
    column: str | None = None  # per-request column of a percentile metric
    q: float = 0.5
    summary_key: str = ""
    primary: bool = False  # a gain here can confirm the technique
    counts: bool = True  # a regression here makes the overall verdict a regression
    scale: str = "%"  # "%" relative change, "pp" percentage points


def metric_specs(kb: KnowledgeBase | None = None) -> dict[str, MetricSpec]:
    """The compared metrics of a tree's metric catalogue (signals.yaml ``compare``) by id, labelled from their
    signals; without ``kb``, the active tree's (the CLI's --tree-dir), never a copy read once at import."""
    kb = kb if kb is not None else load_knowledge()
    return {m.id: MetricSpec(m.id, kb.signals[m.signal].label.en,
                             "higher" if kb.signals[m.signal].higher_is_better else "lower",
                             kb.signals[m.signal].unit, m.column, m.q, m.signal, m.primary, m.counts, m.scale)
            for m in kb.compare.values()}


@dataclass
class MetricDelta:
    """One metric, baseline against candidate. ``delta`` and ``interval`` are in ``scale`` units (% or pp)."""

    metric: str
    direction: str
    baseline: float
    candidate: float
    change_pct: float | None
    interval: tuple[float, float] | None
    verdict: str
    basis: str
    label: str = ""
    unit: str = ""
    scale: str = "%"
    delta: float | None = None


@dataclass
class Comparison:
    """Every metric's change, the overall verdict, and why a comparison is unsound (``refused``)."""

    metrics: list[MetricDelta]
    overall: str
    warnings: list[str]
    refused: list[str]
    technique: str | None
    expected_gain_text: str | None
    basis: str
    headline: str = ""
    workload: dict[str, dict[str, Any]] = field(default_factory=dict)
    warning_notes: list[Note] = field(default_factory=list)  # ``warnings`` as codes, in the same order
    refused_notes: list[Note] = field(default_factory=list)  # ``refused`` as codes, in the same order

    def get(self, metric: str) -> MetricDelta | None:
        return next((m for m in self.metrics if m.metric == metric), None)


# ---------------------------------------------------------------- one side of the comparison


@dataclass
class _Side:
    """A run reduced to what the comparison reads: successful-request columns, counts, duration."""

    run: Run
    per_request: bool
    n_total: int = 0
    n_ok: int = 0
    cols: dict[str, np.ndarray] = field(default_factory=dict)
    duration: float | None = None
    gaps: np.ndarray | None = None  # inter-arrival gaps, for the sampling noise of any per-second rate
    pace: np.ndarray | None = None  # bootstrap replicates of observed ÷ resampled mean gap (see _pace)


def _float(df: pd.DataFrame, name: str) -> np.ndarray | None:
    if name not in df.columns:
        return None
    return pd.to_numeric(df[name], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)


def _duration(run: Run, df: pd.DataFrame) -> float | None:
    if run.summary.get("duration_s"):
        return float(run.summary["duration_s"])
    start, e2e = _float(df, "start_s"), _float(df, "e2e_s")
    if start is None:
        return None
    end = start + e2e if e2e is not None else start
    if not (np.isfinite(start).any() and np.isfinite(end).any()):
        return None
    span = float(np.nanmax(end) - np.nanmin(start))
    return span if span > 0 else None


def _side(run: Run, per_request: bool) -> _Side:
    if not per_request:
        return _Side(run, False)
    df = run.requests
    assert df is not None
    ok = df["ok"].astype(bool).to_numpy() if "ok" in df.columns else np.ones(len(df), dtype=bool)
    cols = {c: v[ok] for c in ("prompt_tokens", "output_tokens", "ttft_s", "tpot_s", "itl_s", "e2e_s")
            if (v := _float(df, c)) is not None}
    start = _finite(_float(df, "start_s"))
    gaps = np.diff(np.sort(start)) if start is not None and start.size > 2 else None
    return _Side(run, True, len(df), int(ok.sum()), cols, _duration(run, df), gaps)


def _finite(x: np.ndarray | None) -> np.ndarray | None:
    if x is None:
        return None
    x = x[np.isfinite(x)]
    return x if x.size else None


# ---------------------------------------------------------------- per-metric values


Sample = tuple[float | None, np.ndarray | None]  # point value, bootstrap replicates (None: no interval)


def _good(side: _Side, slo: Slo) -> int | None:
    ttft = side.cols.get("ttft_s")
    if ttft is None:
        return None
    good = ttft <= float(slo.values["ttft_p99_s"])
    tpot = side.cols.get("tpot_s")
    if tpot is not None:
        good &= ~(tpot > float(slo.values["tpot_p99_s"]))  # NaN (one-token output) meets it
    return int(good.sum())


def _pace(side: _Side, rng: np.random.Generator, n_boot: int) -> np.ndarray | None:
    """Observed ÷ resampled mean inter-arrival gap: how much any per-second rate of this run could have moved."""
    if side.gaps is None or not side.gaps.mean():
        return None
    return side.gaps.mean() / boot_mean(side.gaps, rng, n_boot)


def _request_sample(spec: MetricSpec, side: _Side, slo: Slo, rng: np.random.Generator, n_boot: int) -> Sample:
    if spec.column == "itl_s":  # ITL pools every gap of every request (the run's summary); the per-request
        return side.run.summary.get(spec.summary_key), None  # itl_s column is each request's mean gap (≈ TPOT)
    if spec.column is not None:
        x = _finite(side.cols.get(spec.column))
        if x is None:
            return None, None
        x = np.sort(x)
        return float(np.quantile(x, spec.q)), boot_quantile(x, spec.q, rng, n_boot)
    if spec.id == "error_rate":
        p = (side.n_total - side.n_ok) / side.n_total
        return p, rng.binomial(side.n_total, p, n_boot) / side.n_total
    if spec.id in ("req_per_s", "goodput", "out_tok_per_s"):
        return _rate_sample(spec.id, side, slo, rng, n_boot)
    return side.run.summary.get(spec.summary_key), None


def _rate_sample(metric: str, side: _Side, slo: Slo, rng: np.random.Generator, n_boot: int) -> Sample:
    """A per-second rate: the share of requests that count (resampled) × the arrival pace (gaps resampled)."""
    rate = side.run.summary.get("req_per_s") or (side.n_ok / side.duration if side.duration else None)
    if rate is None:
        return None, None
    factor = side.pace
    if metric == "req_per_s":
        return rate, None if factor is None else rate * factor
    if metric == "goodput":
        good = _good(side, slo)
        if good is None or not side.n_ok:
            return None, None
        share = rng.binomial(side.n_total, good / side.n_total, n_boot) / good if good else np.ones(n_boot)
        goodput = rate * good / side.n_ok
        return goodput, None if factor is None else goodput * share * factor
    out = _finite(side.cols.get("output_tokens"))
    tokens = side.run.summary.get("out_tok_per_s") or (rate * float(out.mean()) if out is not None else None)
    if tokens is None or out is None or not out.mean() or factor is None:
        return tokens, None
    return tokens, tokens * boot_mean(out, rng, n_boot) / out.mean() * factor


def _summary_value(spec: MetricSpec, run: Run) -> float | None:
    s = run.summary
    if spec.id == "error_rate":
        done, failed = s.get("completed"), s.get("failed")
        return failed / (done + failed) if done is not None and failed is not None and done + failed > 0 else None
    value = s.get(spec.summary_key)
    return float(value) if value is not None and math.isfinite(value) else None


# ---------------------------------------------------------------- change and verdict


def _delta(spec: MetricSpec, base: float, cand: float) -> float | None:
    if spec.scale == "pp":
        return (cand - base) * 100
    if base == 0:
        return 0.0 if cand == 0 else None
    return (cand / base - 1) * 100


def _interval(spec: MetricSpec, base: np.ndarray, cand: np.ndarray) -> tuple[float, float] | None:
    with np.errstate(divide="ignore", invalid="ignore"):
        d = (cand - base) * 100 if spec.scale == "pp" else (cand / base - 1) * 100
    if not np.isfinite(d).all():
        return None
    lo, hi = np.percentile(d, [2.5, 97.5])
    return float(lo), float(hi)


def _judge(spec: MetricSpec, delta: float | None, interval: tuple[float, float] | None, margin: float) -> str:
    """Gain / regression only when the whole interval (or, without one, the change) clears ``margin``."""
    if delta is None:
        return NOT_COMPARABLE
    sign = -1.0 if spec.direction == "lower" else 1.0
    lo, hi = sorted((sign * interval[0], sign * interval[1])) if interval else (sign * delta, sign * delta)
    if lo > margin:
        return GAIN
    if hi < -margin:
        return REGRESSION
    return NO_EFFECT


def _margin(spec: MetricSpec, with_interval: bool, floor_pct: float, tol_pct: float) -> float:
    """The noise floor an interval must clear, or the wider tolerance a bare change must clear."""
    if spec.scale == "pp":
        return NOISE_FLOOR_PP if with_interval else SUMMARY_TOLERANCE_PP
    return floor_pct if with_interval else tol_pct


def _metric_delta(spec: MetricSpec, b: Sample, c: Sample, summary: bool, floor: float, tol: float) -> MetricDelta:
    base, cand = float(b[0]), float(c[0])  # type: ignore[arg-type]
    delta = _delta(spec, base, cand)
    change_pct = (cand / base - 1) * 100 if base else None
    interval = _interval(spec, b[1], c[1]) if b[1] is not None and c[1] is not None else None
    unit = "pp" if spec.scale == "pp" else "%"
    if interval is not None:
        margin = _margin(spec, True, floor, tol)
        basis = f"95% bootstrap interval against a ±{plain(margin)} {unit} noise floor"
    else:
        margin = _margin(spec, False, floor, tol)
        why = "summary only" if summary else "one number per run"
        basis = f"{why}, no interval: change against a ±{plain(margin)} {unit} tolerance"
    return MetricDelta(spec.id, spec.direction, base, cand, change_pct, interval,
                       _judge(spec, delta, interval, margin), basis, spec.label, spec.unit, spec.scale, delta)


# ---------------------------------------------------------------- soundness


def _median(side: _Side, col: str) -> float | None:
    x = _finite(side.cols.get(col)) if side.per_request else None
    if x is not None:
        return float(np.median(x))
    mean = side.run.summary.get(f"{col}_mean")
    return float(mean) if mean is not None else None


def workload(run: Run, per_request: bool | None = None) -> dict[str, Any]:
    """What must be held fixed between baseline and candidate: model, lengths, load, size."""
    side = _side(run, run.has_requests if per_request is None else per_request)
    return {"model": run.meta.get("model"), "prompt_tokens_median": _median(side, "prompt_tokens"),
            "output_tokens_median": _median(side, "output_tokens"),
            "offered_rate": run.summary.get("offered_rate"), "max_concurrency": run.summary.get("max_concurrency"),
            "requests": side.n_total if side.per_request else None}


def _differs(a: float | None, b: float | None, limit: float) -> bool:
    return a is not None and b is not None and max(abs(a), abs(b)) > 0 and abs(a - b) / max(abs(a), abs(b)) > limit


def _length_checks(bw: dict, cw: dict, refused: list[Note]) -> None:
    for key, what in (("prompt_tokens_median", "prompt"), ("output_tokens_median", "output")):
        if _differs(bw[key], cw[key], MAX_LENGTH_DIFF):
            refused.append(Note("lengths", {"what": what, "base": plain(bw[key]), "cand": plain(cw[key]),
                                            "limit": percent(MAX_LENGTH_DIFF)}))


def _load_checks(bw: dict, cw: dict, refused: list[Note], warnings: list[Note]) -> None:
    for key, what in (("offered_rate", "offered rate"), ("max_concurrency", "max concurrency")):
        a, b = bw[key], cw[key]
        if _differs(a, b, MAX_LOAD_DIFF):
            refused.append(Note("load", {"what": what, "base": plain(a), "cand": plain(b),
                                         "limit": percent(MAX_LOAD_DIFF)}))
        elif (a is None) != (b is None):
            warnings.append(Note("load_one_side", {"what": what}))


def _arrival_check(base: _Side, cand: _Side, warnings: list[Note]) -> None:
    """Without a recorded rate, compare arrival rates: a warning only (closed-loop, a faster server arrives faster)."""
    rates = []
    for side in (base, cand):
        start = _finite(_float(side.run.requests, "start_s")) if side.per_request else None
        span = float(start.max() - start.min()) if start is not None else 0.0
        rates.append(start.size / span if start is not None and span > 0 else None)
    limit = MAX_LOAD_DIFF + 3 / math.sqrt(max(1, min(base.n_total, cand.n_total)))
    if _differs(rates[0], rates[1], limit):
        warnings.append(Note("arrival", {"base": plain(rates[0]), "cand": plain(rates[1])}))


def _definition_checks(base: Run, cand: Run, warnings: list[Note]) -> None:
    for key in sorted(set(base.definitions) & set(cand.definitions)):
        if base.definitions[key] != cand.definitions[key]:
            warnings.append(Note("definitions", {"metric": key.upper(), "base": base.definitions[key],
                                                 "cand": cand.definitions[key]}))


def _size_checks(base: _Side, cand: _Side, refuse_few: bool, refused: list[Note], warnings: list[Note]) -> None:
    """Too few requests: the gate refuses below MIN_REQUESTS per side; the page shows the wide intervals and says
    how many more requests would halve them (four times as many), refusing only where no interval exists."""
    if not base.per_request:
        return
    for name, side in (("baseline", base), ("candidate", cand)):
        if refuse_few and side.n_total < MIN_REQUESTS:
            refused.append(Note("too_few", {"side": name, "n": side.n_total, "need": MIN_REQUESTS}))
        elif side.n_ok < MIN_FOR_INTERVAL:
            refused.append(Note("no_interval", {"side": name, "n": side.n_ok, "need": MIN_FOR_INTERVAL}))
    fewest = min(base.n_total, cand.n_total)
    if not refuse_few and fewest < MIN_REQUESTS and min(base.n_ok, cand.n_ok) >= MIN_FOR_INTERVAL:
        warnings.append(Note("few", {"base": base.n_total, "cand": cand.n_total, "more": 3 * fewest,
                                     "target": 4 * fewest}))


def _soundness(base: _Side, cand: _Side, techniques: list[str], refuse_few: bool = True
               ) -> tuple[list[Note], list[Note], dict]:
    refused: list[Note] = []
    warnings: list[Note] = []
    bw, cw = workload(base.run, base.per_request), workload(cand.run, cand.per_request)
    if len(techniques) > 1:
        refused.append(Note("techniques", {"n": len(techniques), "names": ", ".join(techniques)}))
    if bw["model"] and cw["model"] and bw["model"] != cw["model"]:
        refused.append(Note("models", {"base": bw["model"], "cand": cw["model"]}))
    elif not (bw["model"] and cw["model"]):
        warnings.append(Note("model_unknown", {}))
    _length_checks(bw, cw, refused)
    _load_checks(bw, cw, refused, warnings)
    if base.per_request and bw["offered_rate"] is None and cw["offered_rate"] is None:
        _arrival_check(base, cand, warnings)
    _size_checks(base, cand, refuse_few, refused, warnings)
    _definition_checks(base.run, cand.run, warnings)
    return refused, warnings, {"baseline": bw, "candidate": cw}


# ---------------------------------------------------------------- overall


def _overall(metrics: list[MetricDelta], refused: list[Any], specs: dict[str, MetricSpec]) -> str:
    if refused:
        return "unsound"
    counted = [m for m in metrics if specs[m.metric].counts]
    if any(m.verdict == REGRESSION for m in counted):
        return "regression"
    if any(m.verdict == GAIN and specs[m.metric].primary for m in counted):
        return "gain confirmed"
    return "no effect"


def fmt_change(m: MetricDelta) -> str:
    """'TTFT p50 -42 % [-47 %, -38 %]' (pp for error rate)."""
    if m.delta is None:
        return f"{m.label} not comparable"
    text = f"{m.label} {fmt_relative(m.delta, m.scale)}"
    if m.interval:
        text += f" {fmt_interval(m.interval, m.scale)}"
    return text


def _headline(metrics: list[MetricDelta], overall: str, expected: str | None, specs: dict[str, MetricSpec]) -> str:
    shown = [m for m in metrics if m.verdict in (GAIN, REGRESSION) and specs[m.metric].counts]
    shown.sort(key=lambda m: (m.verdict != REGRESSION, not specs[m.metric].primary))
    measured = "; ".join(fmt_change(m) for m in shown[:4]) or "no metric changed beyond the noise floor"
    lead = f"expected: {expected} (seed); " if expected else ""
    return f"{lead}measured ({overall}): {measured}"


def _technique(technique: str | Sequence[str] | None, kb: Any) -> tuple[list[str], str | None, list[Note]]:
    techniques = [technique] if isinstance(technique, str) else list(technique or [])
    if len(techniques) != 1:
        return techniques, None, []
    tech = kb.techniques.get(techniques[0])
    if tech is None:
        return techniques, None, [Note("unknown_technique", {"id": techniques[0]})]
    return techniques, " ".join(tech.expected_gain.seed.en.split()), []


# ---------------------------------------------------------------- compare


def compare(baseline: Run, candidate: Run, slo: Slo, technique: str | Sequence[str] | None = None, kb: Any = None,
            seed: int = 0, n_boot: int = 2000, noise_floor_pct: float = NOISE_FLOOR_PCT,
            summary_tolerance_pct: float = SUMMARY_TOLERANCE_PCT, refuse_few: bool = True) -> Comparison:
    """Every metric both runs have, baseline → candidate, with an interval when both have per-request data.
    ``refuse_few`` (the gate) refuses fewer than MIN_REQUESTS per side; without it (the page) the comparison is
    shown with its wide intervals and a warning saying how many more requests would halve them."""
    if n_boot < MIN_BOOT:
        raise ValueError(f"n_boot must be at least {MIN_BOOT}")
    kb = kb if kb is not None else load_knowledge()  # the active tree (the CLI's --tree-dir)
    specs = metric_specs(kb)
    per_request = baseline.has_requests and candidate.has_requests
    base, cand = _side(baseline, per_request), _side(candidate, per_request)
    for j, side in enumerate((base, cand)):
        side.pace = _pace(side, np.random.default_rng([seed, len(specs), j]), n_boot) if per_request else None
    techniques, expected, tech_warnings = _technique(technique, kb)
    refused, warnings, work = _soundness(base, cand, techniques, refuse_few)
    metrics: list[MetricDelta] = []
    for i, spec in enumerate(specs.values()):
        samples = [_sample(spec, side, slo, np.random.default_rng([seed, i, j]), n_boot, per_request)
                   for j, side in enumerate((base, cand))]
        if samples[0][0] is None or samples[1][0] is None:
            if (samples[0][0] is None) != (samples[1][0] is None) and spec.column != "itl_s":
                which = "baseline" if samples[0][0] is not None else "candidate"
                warnings.append(Note("one_side", {"metric": spec.label, "side": which, "id": spec.id}))
            continue
        metrics.append(_metric_delta(spec, samples[0], samples[1], not per_request, noise_floor_pct,
                                     summary_tolerance_pct))
    overall = _overall(metrics, refused, specs)
    if per_request:
        basis = (f"per-request bootstrap: {n_boot} resamples of each run's requests (seed {seed}), 95% percentile "
                 f"intervals, ±{plain(noise_floor_pct)} % noise floor")
    else:
        basis = f"{SUMMARY_ONLY}; verdicts compare the change against a ±{plain(summary_tolerance_pct)} % tolerance"
    notes = tech_warnings + warnings
    return Comparison(metrics, overall, [n.text() for n in notes], [n.text() for n in refused],
                      techniques[0] if techniques else None, expected, basis,
                      _headline(metrics, overall, expected, specs), work, notes, refused)


def _sample(spec: MetricSpec, side: _Side, slo: Slo, rng: np.random.Generator, n_boot: int, per_request: bool
            ) -> Sample:
    if per_request:
        value, boot = _request_sample(spec, side, slo, rng, n_boot)
        return (float(value), boot) if value is not None and math.isfinite(value) else (None, None)
    return _summary_value(spec, side.run), None


def comparison_json(c: Comparison) -> dict[str, Any]:
    """The comparison as plain JSON types."""
    out = asdict(c)
    out["metrics"] = [{**asdict(m), "interval": list(m.interval) if m.interval else None} for m in c.metrics]
    return out
