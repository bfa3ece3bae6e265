"""Fuzzing load_benchmark: random bytes and mutated fixtures may only ever raise TriageError."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triage.errors import TriageError
from triage.run import REQUEST_COLUMNS, Benchmark
from triage.sources.files import load_benchmark

FIXTURES = Path(__file__).parent / "fixtures" / "bench"
FILES = {p.name: p.read_bytes() for p in sorted(FIXTURES.iterdir())}
TEXT_FILES = [n for n in FILES if not n.endswith(".parquet")]
JSON_FILES = [n for n in TEXT_FILES if n.endswith((".json", ".jsonl"))]
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)


def check(data: bytes, name: str) -> None:
    """Parse; a TriageError naming the file is fine, anything else fails. A result must be well formed."""
    try:
        bench = load_benchmark(data, name)
    except TriageError as exc:
        assert exc.where == name and exc.reason
        return
    assert isinstance(bench, Benchmark) and bench.runs
    for run in bench.runs:
        assert run.label
        assert all(isinstance(v, float) and math.isfinite(v) for v in run.summary.values())
        if run.requests is not None:
            assert set(run.requests.columns) <= set(REQUEST_COLUMNS)
            for col in ("ttft_s", "e2e_s", "output_tokens", "prompt_tokens"):
                if col in run.requests:
                    x = run.requests[col].to_numpy(dtype=float)
                    assert not (x < 0).any()


@FUZZ
@given(data=st.binary(max_size=3000), name=st.sampled_from(["x.json", "x.csv", "x.jsonl", "x.yaml", "x.parquet"]))
def test_random_bytes(data, name):
    check(data, name)


@FUZZ
@given(name=st.sampled_from(sorted(FILES)), frac=st.floats(0.0, 1.0))
def test_truncated(name, frac):
    data = FILES[name]
    check(data[: int(len(data) * frac)], name)


@FUZZ
@given(name=st.sampled_from(sorted(FILES)), flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)),
                                                          min_size=1, max_size=8))
def test_flipped_bytes(name, flips):
    data = bytearray(FILES[name])
    for where, value in flips:
        data[min(int(where * len(data)), len(data) - 1)] = value
    check(bytes(data), name)


JUNK = st.one_of(st.binary(min_size=1, max_size=40),
                 st.sampled_from([b"NaN", b"-Infinity", b"Infinity", b'"=HYPERLINK(1)"', b"null", b"[]", b"{}",
                                  b",", b"\r\n", b'"', b"-1e309", b"1e400", b"\x00", b"\xef\xbb\xbf", b"-5", b"=",
                                  b"{\"a\":"]))


@FUZZ
@given(name=st.sampled_from(TEXT_FILES), where=st.floats(0, 1), junk=JUNK)
def test_inserted_junk(name, where, junk):
    data = FILES[name]
    pos = int(where * len(data))
    check(data[:pos] + junk + data[pos:], name)


def _mutate(obj: Any, rnd: random.Random, budget: list[int]) -> Any:
    """Drop keys, or swap values for odd ones, at random places in a JSON document."""
    odd = [None, "", "abc", -1, -0.5, float("nan"), float("inf"), [], {}, [None], True, 10**30]
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if budget[0] > 0 and rnd.random() < 0.08:
                budget[0] -= 1
                if rnd.random() < 0.5:
                    continue  # drop the key
                out[k] = rnd.choice(odd)
            else:
                out[k] = _mutate(v, rnd, budget)
        return out
    if isinstance(obj, list):
        items = [_mutate(v, rnd, budget) for v in obj]
        if items and budget[0] > 0 and rnd.random() < 0.1:
            budget[0] -= 1
            items.pop(rnd.randrange(len(items)))
        return items
    return obj


def _json_values(data: bytes) -> list[Any]:
    decoder, text, idx, values = json.JSONDecoder(), data.decode(), 0, []
    while idx < len(text.rstrip()):
        while text[idx].isspace():
            idx += 1
        obj, idx = decoder.raw_decode(text, idx)
        values.append(obj)
    return values


@FUZZ
@given(name=st.sampled_from(JSON_FILES), rnd=st.randoms(use_true_random=False), budget=st.integers(1, 6))
def test_dropped_and_replaced_keys(name, rnd, budget):
    values = [_mutate(v, rnd, [budget]) for v in _json_values(FILES[name])]
    check("\n".join(json.dumps(v) for v in values).encode(), name)


@FUZZ
@given(name=st.sampled_from([n for n in TEXT_FILES if n.endswith((".csv", ".yaml"))]),
       rnd=st.randoms(use_true_random=False))
def test_dropped_lines_and_cells(name, rnd):
    lines = FILES[name].split(b"\n")
    for _ in range(rnd.randint(1, 3)):
        i = rnd.randrange(len(lines))
        if rnd.random() < 0.5:
            lines.pop(i)
        else:
            cells = lines[i].split(b",")
            cells.pop(rnd.randrange(len(cells)))
            lines[i] = b",".join(cells)
    check(b"\n".join(lines), name)


@FUZZ
@given(values=st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none(), st.text(max_size=6)),
                       min_size=1, max_size=20))
def test_generic_csv_cells(values):
    """Odd cells in a required column of a generic CSV (NaN, inf, text, blanks)."""
    rows = [f"{'' if v is None else v},{abs(i) + 1.5},12" for i, v in enumerate(values)]
    text = "ttft_s,e2e_s,output_tokens\n" + "\n".join(r.replace("\n", " ").replace("\r", " ") for r in rows) + "\n"
    check(text.encode("utf-8", "surrogatepass"), "cells.csv")


def test_large_random_table_only_triage_errors():
    """A few thousand rows of random junk mixed into a valid table: vectorised paths, not loops."""
    rng = np.random.default_rng(3)
    n = 5000
    ttft = rng.random(n).astype(object)
    ttft[rng.integers(0, n, 20)] = "N/A"
    lines = ["ttft_s,e2e_s,output_tokens"] + [f"{t},{1 + i % 7},{i % 300}" for i, t in enumerate(ttft)]
    check("\n".join(lines).encode(), "big.csv")
