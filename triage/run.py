"""The canonical benchmark run every file format is normalized into."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

# Per-request columns, canonical units (seconds, tokens). A parser fills what its format has;
# a column the format cannot provide is left out, never filled with zeros.
REQUEST_COLUMNS: dict[str, str] = {
    "start_s": "request start, seconds since the first request of the run",
    "prompt_tokens": "input (prompt) length in tokens",
    "output_tokens": "generated tokens",
    "ttft_s": "time to first token, s",
    "e2e_s": "end-to-end latency, s",
    "tpot_s": "(e2e − ttft) / (output_tokens − 1), s; NaN when output_tokens ≤ 1 (a parser whose per-request "
              "token times end at the last token uses (last − first token) / (output_tokens − 1))",
    "itl_s": "mean gap between streamed chunks of this request, s",
    "queue_s": "time the request waited in the engine's queue before the server scheduled it, s (server-reported)",
    "client_wait_s": "time the load-test client held the request before sending it (waiting for a concurrency "
                     "slot, or behind its schedule), s; outside TTFT and E2E, so never a share of them",
    "ok": "True when the request succeeded",
}

# Summary keys, canonical units. Percentile keys follow <metric>_<p5|p50|p90|p99|mean>_s.
SUMMARY_KEYS: tuple[str, ...] = (
    "duration_s", "completed", "failed", "req_per_s", "out_tok_per_s", "total_tok_per_s",
    "offered_rate", "max_concurrency",
    "ttft_mean_s", "ttft_p5_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s",
    "tpot_mean_s", "tpot_p5_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s",
    "itl_mean_s", "itl_p5_s", "itl_p50_s", "itl_p90_s", "itl_p99_s",
    "e2e_mean_s", "e2e_p5_s", "e2e_p50_s", "e2e_p90_s", "e2e_p99_s",
    "prompt_tokens_mean", "output_tokens_mean",
)


LATENCY_PREFIXES = ("ttft_", "tpot_", "e2e_", "itl_")


@dataclass
class Run:
    """One benchmark run (one rate or concurrency point) in canonical form.

    ``requests`` holds the per-request table when the file has one (``None`` otherwise);
    ``summary`` holds the tool's own aggregate numbers converted to canonical units;
    ``definitions`` says, per metric, which definition the numbers follow
    (e.g. ``{"tpot": "recomputed: (e2e − ttft)/(out − 1)"}``), so views can label them.
    """

    label: str
    requests: pd.DataFrame | None = None
    summary: dict[str, float] = field(default_factory=dict)
    definitions: dict[str, str] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    # Exact quantiles (np.quantile's) of the successful requests' values per column of ``requests``, {q: value},
    # taken while parsing; the signals read them instead of selecting the order statistics of a column again.
    quantiles: dict[str, dict[float, float]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def has_requests(self) -> bool:
        return self.requests is not None and len(self.requests) > 0

    def empty_reason(self) -> str:
        """Why the run gives nothing to judge ("" when it does): an empty run is not a healthy one."""
        if self.has_requests:
            assert self.requests is not None
            if "ok" in self.requests.columns and not self.requests["ok"].astype(bool).any():
                return f"all {len(self.requests):,} requests failed: no latency to judge"
            return ""
        completed, failed = self.summary.get("completed"), self.summary.get("failed")
        latency = any(k.startswith(LATENCY_PREFIXES) for k in self.summary)
        if completed == 0 or (completed is None and not latency):
            lost = f" ({failed:,.0f} failed)" if failed else ""
            return f"no completed request in this run{lost}: no TTFT, TPOT or E2E to judge"
        if not latency:
            return "no TTFT, TPOT or E2E numbers in this run"
        return ""


@dataclass
class Benchmark:
    """A parsed benchmark file: where it came from, the detected format, and its runs."""

    source: str
    format: str
    runs: list[Run]
    parse_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
