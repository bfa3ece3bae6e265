"""Generate tree/sample/benchmark.csv: a deterministic, queueing-bound chat workload (generic per-request CSV).

The simulated server runs at most SLOTS sequences at once (continuous batching with a fixed max batch),
so decode speed per request (TPOT) stays flat around 35 ms. Requests arrive as a Poisson stream: below
capacity in the first half of the run, above it in the second half, so requests wait for a free slot and
TTFT climbs with time and with the number in flight. Prompts are lognormal (median ~800 tokens,
p99/p50 ~5), outputs 150–400 tokens, ~0.5 % of requests fail.

Run: .venv/bin/python scripts/make_sample.py   (rewrites tree/sample/benchmark.csv)
"""

from __future__ import annotations

import heapq
from pathlib import Path

import numpy as np

SEED = 20250102
N = 2000
SLOTS = 48  # concurrent sequences the server runs
RATE_LOW, RATE_HIGH = 3.6, 5.6  # req/s in the first and second half; capacity is ~4.9 req/s
PREFILL_TOK_PER_S = 12_000.0
TPOT_MEAN_S, TPOT_SD_S = 0.035, 0.0025
ERROR_RATE = 0.005
OUT = Path(__file__).resolve().parents[1] / "tree" / "sample" / "benchmark.csv"


def simulate(rng: np.random.Generator) -> dict[str, np.ndarray]:
    half = N // 2
    gaps = np.concatenate([rng.exponential(1 / RATE_LOW, half), rng.exponential(1 / RATE_HIGH, N - half)])
    arrival = np.cumsum(gaps) - gaps[0]
    prompt = np.clip(np.round(rng.lognormal(np.log(800), 0.69, N)), 16, 32_000).astype(int)
    output = np.clip(np.round(rng.normal(275, 65, N)), 150, 400).astype(int)
    tpot = np.clip(rng.normal(TPOT_MEAN_S, TPOT_SD_S, N), 0.028, 0.045)
    prefill = prompt / PREFILL_TOK_PER_S + rng.gamma(2.0, 0.01, N)  # + scheduling and network jitter
    failed = rng.random(N) < ERROR_RATE
    ttft, e2e = np.empty(N), np.empty(N)
    free_at = [0.0] * SLOTS  # min-heap of the times the server's slots become free (FIFO admission)
    for i in range(N):
        start = max(arrival[i], heapq.heappop(free_at))
        if failed[i]:  # e.g. a reset connection: no token, the slot is freed at once
            ttft[i], e2e[i] = np.nan, (start - arrival[i]) + rng.uniform(0.05, 0.5)
            heapq.heappush(free_at, arrival[i] + e2e[i])
            continue
        ttft[i] = (start - arrival[i]) + prefill[i]
        e2e[i] = ttft[i] + (output[i] - 1) * tpot[i]
        heapq.heappush(free_at, arrival[i] + e2e[i])
    return {"start_s": arrival, "prompt_tokens": prompt, "output_tokens": np.where(failed, 0, output),
            "ttft_s": ttft, "e2e_s": e2e, "ok": ~failed}


def write(cols: dict[str, np.ndarray], path: Path) -> None:
    lines = ["start_s,prompt_tokens,output_tokens,ttft_s,e2e_s,ok"]
    for s, p, o, t, e, ok in zip(*cols.values(), strict=True):
        ttft = "" if np.isnan(t) else f"{t:.4f}"
        lines.append(f"{s:.3f},{p},{o},{ttft},{e:.4f},{'true' if ok else 'false'}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    cols = simulate(np.random.default_rng(SEED))
    write(cols, OUT)
    ok = cols["ok"]
    first, second = slice(0, N // 2), slice(N // 2, N)
    tpot = (cols["e2e_s"] - cols["ttft_s"]) / (cols["output_tokens"] - 1)
    print(f"wrote {OUT} ({N} requests, {int((~ok).sum())} failed)")
    for name, part in (("first half", first), ("second half", second)):
        t = cols["ttft_s"][part][ok[part]]
        print(f"  {name}: TTFT p50 {np.median(t):.2f} s, p90 {np.percentile(t, 90):.2f} s; "
              f"TPOT p50 {np.nanmedian(tpot[part][ok[part]]) * 1000:.1f} ms")
    p = cols["prompt_tokens"]
    print(f"  prompt p50 {np.median(p):.0f}, p99/p50 {np.percentile(p, 99) / np.median(p):.1f}")


if __name__ == "__main__":
    main()
