"""A server log is streamed: reading a large one holds a few chunks, never the file's text."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from triage.cli.text_input import read_source
from triage.sources.logs import vllm

STATS = ("(APIServer pid=1) INFO 09-01 {h:02d}:{m:02d}:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: "
         "{p:.1f} tokens/s, Avg generation throughput: 900.0 tokens/s, Running: 64 reqs, Waiting: {w} reqs, "
         "GPU KV cache usage: 61.0%, Prefix cache hit rate: 12.5%\n")
ACCESS = '(APIServer pid=1) INFO:     10.0.0.{n}:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'


def _write(path: Path, lines: int, every: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        for i in range(lines):
            if i % every == 0:
                t = i // every * 2
                out.write(STATS.format(h=t // 3600 % 24, m=t // 60 % 60, s=t % 60, p=i % 7 * 800.0, w=i % 30))
            else:
                out.write(ACCESS.format(n=i % 250, port=40000 + i % 20000))


@pytest.mark.parametrize("threads", [0, 2])  # blocks read inline, or on worker threads ahead of the parser
def test_reading_a_large_log_holds_a_bounded_amount_of_memory(tmp_path, monkeypatch, threads):
    """200,000 lines (18 MB): the parse's peak allocation stays under 8 MB, where reading the file whole (as one
    bytes object, or as its lines) would need more than the file's size. The stats lines are sparse (one in
    100) so that what the parse keeps, one sample per stats line, is small beside what it reads."""
    path = tmp_path / "vllm.log"
    _write(path, 200_000, 100)
    size = path.stat().st_size
    assert size > 18_000_000
    monkeypatch.setattr(vllm, "_threads", lambda: threads)
    tracemalloc.start()
    try:
        log = read_source(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert log.lines == 200_000 and log.stats_lines == 2_000
    assert peak < 8_000_000, f"peak {peak / 1e6:.1f} MB while reading a {size / 1e6:.0f} MB log"
