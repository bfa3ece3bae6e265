"""Peak memory of the CLI against an endless /metrics stream and a gzip bomb stays bounded (bench/hostile_rss.py
measures the same, plus 10 large uploads, for the README)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from hostile_rss import fetch_figures  # noqa: E402

CAP_MB = 32          # the body cap of the bounded fetch (after decompression)
SLACK_MB = 48        # one read chunk, one inflate step, the error path; unbounded it was 4.5 GB after 60 s
BALLAST_MB = 400     # held by this process while the children run: their figures must not include it


@pytest.mark.timeout(300)
def test_endless_stream_and_gzip_bomb_peak_rss():
    # Each child's peak is its own VmHWM. (ru_maxrss from wait4 starts from the parent's peak: under the whole
    # suite a 400 MB pytest process made the endless stream "peak" at 401 MB.) The ballast proves it.
    ballast = bytearray(BALLAST_MB * 1024 * 1024)
    ballast[::4096] = b"\1" * len(range(0, len(ballast), 4096))  # touched, so it is resident
    figures = fetch_figures(timeout=60)
    del ballast
    reference = float(figures["/metrics"]["peak_rss_mb"])  # type: ignore[arg-type]
    assert figures["/metrics"]["exit"] == 0 and reference < BALLAST_MB, figures["/metrics"]
    for path in ("/endless", "/bomb"):
        row = figures[path]
        assert row["exit"] == 2 and f"larger than {CAP_MB} MB" in str(row["message"]), row
        assert float(row["peak_rss_mb"]) < reference + CAP_MB + SLACK_MB, (row, reference)  # type: ignore[arg-type]
