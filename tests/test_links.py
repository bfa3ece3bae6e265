"""Deep links into the Live view: the scheme the alert runbook URLs, the Fleet page and the Live page share."""

from __future__ import annotations

from datetime import UTC, datetime

from triage.report.links import LiveLink, live_url, parse_live_link


def test_round_trip():
    at = datetime(2026, 11, 30, 13, 5, tzinfo=UTC)
    link = LiveLink(profile="prod", window="15m", end=at, match={"instance": "gpu-7:8000", "model_name": "a/b c"},
                    node="ttft.queueing")
    url = live_url(link, "https://triage.example/")
    assert url.startswith("https://triage.example/live?source=prometheus&profile=prod&window=15m&end=")
    query = dict(part.split("=", 1) for part in url.split("?", 1)[1].split("&"))
    from urllib.parse import unquote_plus

    assert parse_live_link({k: unquote_plus(v) for k, v in query.items()}) == link


def test_alert_style_params_and_bad_values():
    link = parse_live_link({"source": "prometheus", "end": "1796045640", "match_engine": "0", "window": "1 h",
                            "match_bad label": "x", "node": "memory.kv_cache"})
    assert link is not None and link.end == datetime.fromtimestamp(1796045640, UTC)
    assert link.match == {"engine": "0"} and link.window is None and link.node == "memory.kv_cache"
    assert parse_live_link({"source": "prometheus", "end": "yesterday"}).end is None
    assert parse_live_link({"node": "ttft.queueing"}) is None  # not a Prometheus link: the page opens as usual
