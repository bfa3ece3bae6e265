"""Peak memory of the CLI against an endless /metrics stream and a gzip bomb stays bounded (bench/hostile_rss.py
measures the same, plus 10 large uploads, for the README)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from hostile_rss import fetch_figures  # noqa: E402

# the interpreter with pandas, numpy and the knowledge base is ~130 MB; the 32 MB body cap and one decompressed
# burst come on top. Before the bound: 4.5 GB for the stream after 60 s, a MemoryError at 4.2 GB for the bomb.
LIMIT_MB = 600  # one run under load peaked at 401 MB; unbounded it was 4.5 GB


@pytest.mark.timeout(300)
def test_endless_stream_and_gzip_bomb_peak_rss():
    figures = fetch_figures(timeout=60)
    assert figures["/metrics"]["exit"] == 0
    for path in ("/endless", "/bomb"):
        row = figures[path]
        assert row["exit"] == 2 and "larger than 32 MB" in str(row["message"]), row
        assert float(row["peak_rss_mb"]) < LIMIT_MB, row  # type: ignore[arg-type]
