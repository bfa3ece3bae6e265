"""Synthetic per-request runs with known behaviour, for rule and signal tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

from triage.run import Run


def requests(n: int = 2000, seed: int = 0, *, rate: float = 10.0, ttft_base: float = 0.15,
             prefill_s_per_tok: float = 0.0, queue_growth: float = 0.0, tpot: float = 0.03,
             prompt_sigma: float = 0.6, long_share: float = 0.0, long_len: int = 30000,
             prompt_median: float = 800.0) -> pd.DataFrame:
    """Open-loop arrivals at ``rate``; TTFT = base + prefill × prompt + queue that grows with time."""
    rng = np.random.default_rng(seed)
    start = np.cumsum(rng.exponential(1 / rate, n))
    prompt = rng.lognormal(np.log(prompt_median), prompt_sigma, n).round()
    if long_share:
        prompt[rng.random(n) < long_share] = long_len
    output = rng.integers(150, 400, n)
    queue = queue_growth * (start / start.max()) * rng.uniform(0.8, 1.2, n)
    ttft = ttft_base + prefill_s_per_tok * prompt + queue + rng.exponential(0.02, n)
    e2e = ttft + (output - 1) * tpot * rng.uniform(0.9, 1.1, n)
    return pd.DataFrame({"start_s": start - start.min(), "prompt_tokens": prompt, "output_tokens": output,
                         "ttft_s": ttft, "e2e_s": e2e, "tpot_s": (e2e - ttft) / (output - 1),
                         "ok": np.ones(n, dtype=bool)})


def run(df: pd.DataFrame, **summary: float) -> Run:
    return Run(label="synthetic", requests=df, summary=dict(summary))
