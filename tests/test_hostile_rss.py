"""Peak memory of the CLI against an endless /metrics stream and a gzip bomb stays bounded (bench/hostile_rss.py
measures the same, plus 10 large uploads, for the README)."""

from __future__ import annotations

import pytest

from bench.hostile_rss import fetch_figures, peak_rss_mb

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


PEAK_LIMIT_MB = 600  # issue 23's bar for every hostile case; unbounded, a redirect to a bomb took 3.4-4.5 GB


@pytest.mark.timeout(300)
def test_redirects_and_error_bodies_on_the_prometheus_path_peak_rss():
    """``diagnose --prometheus``, ``diagnose --endpoint`` and ``rules --evaluate`` against a 302 whose own body is
    endless or a gzip bomb, a cross-origin 302 to a bomb, a 300 KB error body, JSON nested 200,000 deep and
    answers of the wrong shape (a null metric, ``"le": "x"``, a value that is not a pair): exit 2 with one line on
    stderr (never "this is a bug"), the redirect target never asked, a bounded peak."""
    from tests.hostile_server import hostile_server

    with hostile_server() as target, hostile_server(redirect_to=target.url + "/bomb") as first:
        cases = {
            "prometheus 302, endless body": (["diagnose", "--prometheus", first.url + "/redirect-endless"],
                                             "redirects are not followed"),
            "prometheus 302, bomb body": (["diagnose", "--prometheus", first.url + "/redirect-bomb"],
                                          "redirects are not followed"),
            "prometheus 302 to a bomb elsewhere": (["diagnose", "--prometheus", first.url + "/elsewhere"],
                                                   "redirects are not followed"),
            "rules --evaluate 302 to a bomb": (["rules", "--evaluate", "--prometheus", first.url + "/elsewhere"],
                                               "redirects are not followed"),
            "/metrics 302, bomb body": (["diagnose", "--endpoint", first.url + "/redirect-bomb"],
                                        "redirects are not followed"),
            "prometheus 300 KB error": (["diagnose", "--prometheus", first.url + "/huge-error"], "bad_data"),
            "rules --evaluate 300 KB error": (["rules", "--evaluate", "--prometheus", first.url + "/huge-error"],
                                              "bad_data"),
            "prometheus JSON 200,000 deep": (["diagnose", "--prometheus", first.url + "/deep-json"],
                                             "did not answer with Prometheus JSON"),
            "prometheus answers of the wrong shape": (["diagnose", "--prometheus", first.url + "/wrong-shape"],
                                                      "did not answer with Prometheus JSON"),
            "fleet, answers of the wrong shape": (["diagnose", "--prometheus", first.url + "/wrong-shape", "--by",
                                                   "instance"], "did not answer with Prometheus JSON"),
            "rules --evaluate, wrong shape": (["rules", "--evaluate", "--prometheus", first.url + "/wrong-shape"],
                                              "did not answer with Prometheus JSON"),
        }
        for name, (argv, expected) in cases.items():
            mb, code, stderr, _ = peak_rss_mb([*argv, "--timeout", "30"])
            assert code == 2 and stderr.startswith("error: ") and "\n" not in stderr, (name, stderr[:500])
            assert expected in stderr and "this is a bug" not in stderr and len(stderr) < 400, (name, stderr[:500])
            assert mb < PEAK_LIMIT_MB, (name, mb)
        assert target.hits == []
