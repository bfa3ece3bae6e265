"""triage.service without Streamlit: the Live refresh on the simulator, baseline deltas, window pairs, upload ingest."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from tests.prom_harness import FakeBehaviour, fake_prometheus
from triage.diagnosis.compare import signal_deltas
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.window import window_signals
from triage.errors import TriageError
from triage.knowledge.needs import Need, SeriesPoint
from triage.run import Benchmark
from triage.service.live import CACHE_CONFIG, SERIES_POINTS, evidence_group, panel_needs, refresh, signal_keys
from triage.service.uploads import (
    MB,
    SAMPLE_PATH,
    ParseCache,
    Refused,
    SingleUploads,
    Uploads,
    digest_of,
    format_title,
    open_benchmark,
    parse_cache_from_env,
    sample_benchmark,
    snapshot_cache_from_env,
)
from triage.service.windows import DemoFeed, WindowPair, demo_pair, prometheus_pair, snapshot_pair
from triage.sources.files.parse_cache import benchmark_bytes
from triage.sources.metrics.demo_feed import BUFFER_CAPACITY, HISTORY_S, KEEP_UP_S, keep_up, keep_up_once
from triage.sources.metrics.simulator import Simulator
from triage.sources.readings import MetricWindow, Readings

T0 = 1_750_000_000.0


class Clock:
    """A clock the test moves by hand (the demo feeds read it instead of the wall clock)."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Feeds:
    """Demo engines on a hand-moved clock (the app shares one per process on the wall clock)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.made: dict[tuple[str, int], DemoFeed] = {}

    def __call__(self, scenario: str, seed: int) -> DemoFeed:
        if (scenario, seed) not in self.made:
            self.made[(scenario, seed)] = DemoFeed(scenario, seed, self.clock)
        return self.made[(scenario, seed)]

    def demo(self, scenario: str, minutes: float) -> WindowPair:
        return demo_pair(scenario, minutes, self)


@pytest.fixture(scope="module")
def demo():
    clock = Clock()
    return clock, Feeds(clock)


def test_demo_refresh_finds_the_scenario_and_compares_with_the_healthy_baseline(kb, demo):
    clock, feeds = demo
    pair = feeds.demo("queueing", 10)
    result = refresh(kb, pair, resolve_slo(kb), clock=clock)
    assert result.live.diagnosis.matched_ids[0] == "ttft.queueing"
    assert result.label == "demo · queueing" and result.at == T0
    by_name = {d.name: d for d in result.deltas}
    assert {"ttft_p99_s", "waiting_mean", "kv_usage_max"} <= set(by_name)
    assert by_name["waiting_mean"].delta > 0, "a queueing engine waits more than the healthy baseline"
    expected = signal_deltas(result.live.diagnosis.signals, window_signals(kb, pair.baseline)[0])
    assert [(d.name, d.current, d.baseline) for d in result.deltas] == [(d.name, d.current, d.baseline)
                                                                       for d in expected]
    assert set(result.series) == set(panel_needs())
    assert max(len(points) for points in result.series.values()) <= SERIES_POINTS
    assert result.cache_config.get("block_size"), "the simulator exports vllm:cache_config_info"
    assert result.missing == result.live.readings.missing


def test_demo_feed_follows_the_clock(demo):
    clock, feeds = demo
    feeds.demo("queueing", 10)
    feed = feeds.made[("queueing", 1)]
    before, sim_now = len(feed.buffer), feed.sim.now
    feeds.demo("queueing", 10)
    assert len(feed.buffer) == before, "no new scrape when the clock has not moved"
    clock.now += 40
    feeds.demo("queueing", 10)
    taken = [s.taken_at for s in feed.buffer.snapshots[before:]]
    assert taken == pytest.approx([sim_now + 15, sim_now + 30, sim_now + 40]), "a scrape per 15 s step, then now"
    assert feed.sim.now == pytest.approx(sim_now + 40)
    assert feed.buffer.capacity == BUFFER_CAPACITY


def test_a_demo_feed_left_idle_for_a_day_restarts_its_history_instead_of_simulating_the_day():
    clock = Clock()
    feed = DemoFeed("queueing", 1, clock)
    clock.now += 86_400  # simulating the day took about 200 s of CPU
    feed.catch_up()
    taken = [s.taken_at for s in feed.buffer.snapshots]
    assert taken[0] >= clock.now - HISTORY_S and taken[-1] == pytest.approx(clock.now)
    assert len(taken) == HISTORY_S // 15, "the history is rebuilt at 15 s steps"
    window = feed.window(600)
    assert len(window.snapshots) >= 40  # the panels have a shape again


def test_a_feed_kept_up_through_a_quiet_night_keeps_its_history():
    """The keeper advances a feed every minute, so the first page after a long pause catches up a minute of
    simulation (its scrapes continue the old history) instead of rebuilding 15 minutes from scratch."""
    clock = Clock()
    feed = DemoFeed("queueing", 1, clock)
    first = feed.buffer.snapshots[-1].taken_at
    # 80 minutes, a keeper period at a time: past the hour the buffer holds (BUFFER_CAPACITY), so all of the first
    # history has left it and the hour kept is the keeper's own (two hours asserted the same at 1.4x the simulation)
    for _ in range(80):
        clock.now += KEEP_UP_S
        keep_up_once([feed])
    clock.now += 20
    feed.catch_up()
    taken = [s.taken_at for s in feed.buffer.snapshots]
    assert taken[-1] == pytest.approx(clock.now)
    assert len(taken) == BUFFER_CAPACITY and taken[0] > first, "a full hour of 15 s scrapes, nothing rebuilt"
    assert all(b - a <= 15 + 1e-6 for a, b in zip(taken, taken[1:])), "no gap, so no jump restarted it"


def test_the_keeper_stops_when_told():
    stop = threading.Event()
    keeper = threading.Thread(target=keep_up, args=(stop, 3600), daemon=True)
    keeper.start()
    stop.set()
    keeper.join(timeout=10)  # a bound, not a wait: the event wakes it at once
    assert not keeper.is_alive()


def test_a_second_scenario_shares_the_baseline(kb, demo):
    clock, feeds = demo
    first = feeds.demo("queueing", 10)
    second = feeds.demo("kv_pressure", 10)
    assert refresh(kb, second, resolve_slo(kb)).live.diagnosis.matched_ids[0] == "memory.kv_cache"
    assert first.baseline.snapshots == second.baseline.snapshots  # type: ignore[union-attr]


@pytest.mark.parametrize("scenario,group", [
    ("queueing", "first_token"),        # queue share of TTFT: two first-token panels beat the waiting panel
    ("kv_pressure", "load"),            # KV usage, waiting, preemptions: all three load panels
    ("long_requests", "first_token"),   # prompt-length tail: no panel draws it, the symptom (tail) decides
    ("spec_low_acceptance", "decode"),  # running (load) vs acceptance (decode) tie: the symptom (tpot) decides
    ("healthy", "load"),                # nothing felt: the first note's evidence (an idle batch: KV, waiting)
])
def test_the_live_tab_that_opens_holds_the_top_findings_evidence(kb, demo, scenario, group):
    result = refresh(kb, demo[1].demo(scenario, 10), resolve_slo(kb), series_points=0)
    assert evidence_group(kb, result.live.diagnosis) == group


def test_signal_keys_follow_recipes_through_other_signals(kb):
    assert signal_keys(kb, "waiting_mean") == {"waiting"}
    assert signal_keys(kb, "queue_share_of_ttft") == {"queue_time", "ttft"}
    assert signal_keys(kb, "no_such_signal") == set()


def test_unknown_scenario_is_refused(demo):
    with pytest.raises(TriageError, match="unknown demo scenario"):
        demo[1].demo("nope", 10)


def test_cli_refresh_skips_the_panels(kb, demo):
    result = refresh(kb, demo[1].demo("queueing", 10), resolve_slo(kb), series_points=0)
    assert result.series == {} and result.live.diagnosis.matched_ids


@dataclass
class Gated:
    """A window whose first read and first series wait until all three reads of a refresh have started: proves
    they overlap. Later calls (the queueing diagnosis's running/waiting series for the batch cap) pass."""

    inner: MetricWindow
    gate: threading.Barrier
    waited: set[str] = field(default_factory=set)

    def _wait(self, kind: str) -> None:
        if kind not in self.waited:
            self.waited.add(kind)
            self.gate.wait()

    @property
    def engine(self):
        return self.inner.engine

    @property
    def addons(self):
        return self.inner.addons

    def read(self, needs: list[Need]) -> Readings:
        self._wait("read")
        return self.inner.read(needs)

    def series(self, needs: list[Need], points: int = 60) -> dict[Need, list[SeriesPoint]]:
        self._wait("series")
        return self.inner.series(needs, points)


def test_refresh_reads_window_panels_and_baseline_concurrently(kb, demo):
    pair = demo[1].demo("queueing", 10)
    gate = threading.Barrier(3, timeout=30)  # a sequential refresh would break the barrier
    gated = WindowPair(Gated(pair.current, gate), Gated(pair.baseline, gate), pair.label)  # type: ignore[arg-type]
    result = refresh(kb, gated, resolve_slo(kb))
    assert result.deltas and result.series and not gate.broken


def test_a_failing_source_raises_a_triage_error(kb, demo):
    pair = demo[1].demo("queueing", 10)

    class Broken(Gated):
        def read(self, needs: list[Need]) -> Readings:
            raise TriageError("scrape failed", where="test")

    broken = WindowPair(pair.current, Broken(pair.baseline, threading.Barrier(1)), pair.label)  # type: ignore[arg-type]
    with pytest.raises(TriageError, match="scrape failed"):
        refresh(kb, broken, resolve_slo(kb))


def test_snapshot_pair(kb):
    sim = Simulator("kv_pressure", seed=3, start=T0)
    before = sim.render().encode()
    sim.advance(120)
    pair = snapshot_pair(before, sim.render().encode(), ("a.txt", "b.txt"), 120, clock=Clock(T0 + 120))
    assert pair.baseline is None and pair.label == "a.txt → b.txt"
    assert refresh(kb, pair, resolve_slo(kb)).live.readings.window_seconds == pytest.approx(120)
    with pytest.raises(TriageError, match="more than 0"):
        snapshot_pair(before, before, ("a", "b"), 0)
    with pytest.raises(TriageError, match="not UTF-8") as exc:
        snapshot_pair(b"\xff\xfe", before, ("bad.bin", "b"), 60)
    assert exc.value.where == "bad.bin"


def test_prometheus_pair_baseline_is_the_same_span_earlier():
    end = datetime(2025, 1, 2, 12, 0, tzinfo=UTC)
    with fake_prometheus(FakeBehaviour()) as url:
        pair = prometheus_pair(url, end, 15, {}, 24.0, 2.0)
        alone = prometheus_pair(url, end, 15, {}, None, 2.0)
    assert (pair.current.start, pair.current.end) == (end - timedelta(minutes=15), end)  # type: ignore[attr-defined]
    assert pair.baseline.end == end - timedelta(hours=24)  # type: ignore[union-attr]
    assert pair.baseline.window_seconds == 900 and alone.baseline is None  # type: ignore[union-attr]
    assert pair.label == f"{url} · 15 min"


# ---------------------------------------------------------------- uploads


@dataclass
class FakeUpload:
    file_id: str
    name: str
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)

    def getvalue(self) -> bytes:
        return self.data


class CountingCache(ParseCache):
    def __init__(self, max_bytes: int = 64 * MB) -> None:
        super().__init__(max_bytes)
        self.parsed: list[str] = []

    def put(self, digest: str, bench: Benchmark) -> bool:
        self.parsed.append(bench.source)
        return super().put(digest, bench)


GOOD = SAMPLE_PATH.read_bytes()
BAD = b"this is not a benchmark file\n"


def test_ingest_parses_each_content_once_and_keeps_what_loaded():
    uploads, cache = Uploads(), CountingCache()
    progress: list[str] = []
    lines: list[str] = []
    released: list[str] = []
    good, bad = uploads.ingest([FakeUpload("1", "a.csv", GOOD)], cache, progress.append, lines.append,
                               lambda u: released.append(u.file_id))
    assert (good, bad) == (["a.csv"], []) and released == ["1"] and cache.parsed == ["a.csv"]
    digest = uploads.viewed
    assert digest == digest_of(GOOD, "a.csv") and list(uploads.loaded(cache)) == [digest]
    assert progress and "1/1" in progress[0] and "a.csv: generic_csv" in lines[0]
    # a rerun with the same uploads: nothing fresh, nothing parsed
    assert uploads.fresh([FakeUpload("1", "a.csv", GOOD)]) == []
    # the same content and name under a new upload id (another session, a re-upload): from the cache
    assert uploads.ingest([FakeUpload("2", "a.csv", GOOD)], cache)[0] == ["a.csv"] and cache.parsed == ["a.csv"]
    # a bad file: a message; what loaded stays, and stays viewed
    assert uploads.ingest([FakeUpload("3", "bad.json", BAD)], cache) == ([], ["bad.json"])
    name, reason = uploads.refused({"3"})[0]  # shown as "Could not read {name}: {reason}": the name once
    assert name == "bad.json" and reason and "bad.json" not in reason
    assert uploads.viewed == digest and list(uploads.loaded(cache)) == [digest]
    assert uploads.fresh([FakeUpload("3", "bad.json", BAD)]) == [], "a refused upload is not parsed again"


def test_the_memory_bound_drops_the_oldest_and_refuses_what_cannot_fit():
    small = ParseCache(max_bytes=benchmark_bytes(open_benchmark(GOOD, "a.csv")) + 1)
    uploads = Uploads()
    uploads.ingest([FakeUpload("1", "a.csv", GOOD)], small)
    uploads.ingest([FakeUpload("2", "b.csv", GOOD)], small)
    assert uploads.dropped(small) == 1 and len(uploads.loaded(small)) == 1
    tiny = ParseCache(max_bytes=1024)
    good, bad = Uploads().ingest([FakeUpload("9", "c.csv", GOOD)], tiny)
    assert good == [] and bad == ["c.csv"]


def test_parse_cache_bound_from_the_environment():
    assert parse_cache_from_env({}).max_bytes == 512 * MB
    assert parse_cache_from_env({"TRIAGE_PARSE_CACHE_MB": "1"}).max_bytes == 16 * MB
    assert parse_cache_from_env({"TRIAGE_PARSE_CACHE_MB": "lots"}).max_bytes == 512 * MB


def test_sample_and_format_title():
    bench = sample_benchmark()
    assert bench.runs and bench.parse_seconds > 0 and bench.source == SAMPLE_PATH.name
    assert format_title(bench.format) != bench.format
    assert format_title("no_such_format") == "no_such_format"


def test_cache_config_need_is_the_engine_info():
    assert CACHE_CONFIG == Need("info", "cache_config")


@pytest.mark.parametrize("behaviour,expected", [
    ({"status": 500}, "500"),
    ({"status": 401}, "401"),
    ({"query_delay": 30.0, "delay_everything": True}, "timed out"),
], ids=["http-500", "http-401", "slow"])
def test_prometheus_faults_raise_one_clear_error(kb, behaviour, expected):
    """What the Live page shows under "Refresh failed" (tests/test_live_page.py checks the page for one fault)."""
    with fake_prometheus(FakeBehaviour(**behaviour)) as url, pytest.raises(TriageError) as exc:
        refresh(kb, prometheus_pair(url, None, 15, {}, None, 1.0), resolve_slo(kb))
    assert expected in exc.value.line()


def test_single_uploads_parse_once_release_and_keep_no_bytes():
    uploads, cache, released = SingleUploads(), CountingCache(), []
    take = lambda key, fid, up: uploads.take(key, fid, up, cache, lambda u: released.append(u.file_id))  # noqa: E731
    held, bench = take("base", "1", FakeUpload("1", "a.csv", GOOD))  # type: ignore[misc]
    assert held.name == "a.csv" and held.digest == digest_of(GOOD, "a.csv") and released == ["1"]
    assert held.sha256 == hashlib.sha256(GOOD).hexdigest() and bench.runs
    # a rerun: the uploader shows the same upload id, its bytes released; from the cache, nothing parsed
    assert take("base", "1", None) == (held, bench) and cache.parsed == ["a.csv"]
    assert not any(isinstance(v, bytes) for v in vars(held).values())
    # a refused file: the message stays while the uploader shows it, its bytes are released at once
    refused = take("cand", "2", FakeUpload("2", "bad.json", BAD))
    assert isinstance(refused, Refused) and refused.name == "bad.json" and released[-1] == "2"
    assert take("cand", "2", None) == refused
    # the uploader emptied: nothing
    assert take("cand", None, None) is None and "cand" not in uploads.refused
    # the memory bound dropped the parse: a message, not a crash
    tiny = ParseCache(max_bytes=1024)
    assert isinstance(SingleUploads().take("x", "9", FakeUpload("9", "c.csv", GOOD), tiny), Refused)
    # a parse the bound dropped later (another session's uploads): the uploader says to upload it again
    one = ParseCache(max_bytes=benchmark_bytes(open_benchmark(GOOD, "a.csv")) + 1)
    later = SingleUploads()
    assert isinstance(later.take("base", "1", FakeUpload("1", "a.csv", GOOD), one), tuple)
    assert isinstance(later.take("cand", "2", FakeUpload("2", "b.csv", GOOD), one), tuple)  # drops a.csv
    gone = later.take("base", "1", None, one)
    assert isinstance(gone, Refused) and gone.name == "a.csv" and "upload it again" in gone.reason


def test_snapshot_cache_parses_once_and_refuses_past_the_metrics_cap():
    sim = Simulator("queueing", seed=1, start=T0)
    text = sim.render().encode()
    cache = snapshot_cache_from_env({})
    assert cache.max_bytes == 128 * MB
    digest, snap = cache.parse(text, "a.txt")
    assert cache.get(digest) is snap and snap.where == "a.txt" and snap.series
    with pytest.raises(TriageError, match="larger than 32 MB"):
        cache.parse(b"#" * (32 * MB + 1), "huge.txt")


def test_a_session_keeps_scrape_buffers_for_its_last_few_urls_only():
    """A visitor typing URL after URL kept a ring buffer (up to an hour of snapshots) for every one of them; the
    session now keeps the MAX_SCRAPED_URLS polled last, and polling an old one again makes it the newest."""
    import threading

    from triage.service.windows import MAX_SCRAPED_URLS, LiveFeeds
    from triage.sources.metrics.simulator import serve

    server = serve("healthy", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        urls = [f"{base}?n={i}" for i in range(MAX_SCRAPED_URLS + 3)]
        feeds = LiveFeeds()
        for url in urls:
            feeds.scrape(url, 15, 5.0)
        assert list(feeds.scrapes) == urls[-MAX_SCRAPED_URLS:]
        kept = urls[-MAX_SCRAPED_URLS]
        feeds.scrape(kept, 15, 5.0)
        assert list(feeds.scrapes)[-1] == kept and len(feeds.scrapes[kept]) == 2  # its history went on
    finally:
        server.shutdown()
        server.server_close()


def test_an_error_line_for_a_named_file_names_it_once():
    err = TriageError("not UTF-8 text", where="binary.json", key="line 3")
    assert err.line() == "binary.json: line 3: not UTF-8 text"
    assert err.line_for("binary.json") == "line 3: not UTF-8 text"
    assert err.line_for("other.json") == err.line()
