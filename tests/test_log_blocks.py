"""The vLLM log's block path (the C line scanner or numpy over whole blocks) reads exactly what the careful path
(every line through ``feed``) reads, on mixed logs cut into blocks anywhere: every unusual line sends its block the
careful way. Every test runs with the C scanner and without it (numpy alone, as on a machine without a compiler)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from triage.sources.logs import v1scan, vllm
from triage.sources.logs.lines import iter_lines

ROOT_LOGS = Path(__file__).resolve().parent / "fixtures" / "real" / "logs"


@pytest.fixture(autouse=True, params=["c", "numpy"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The block path with the C line scanner, and with numpy alone; blocks of any size read in bulk (the tests cut
    logs into tiny chunks, which vllm.SMALL_BLOCK would send line by line)."""
    monkeypatch.setattr(vllm, "SMALL_BLOCK", 0)
    if request.param == "numpy":
        monkeypatch.setattr(v1scan, "_linescan", None)
    return str(request.param)

STATS = ("{pre}INFO {mo:02d}-{d:02d} {h:02d}:{m:02d}:{s:02d} [loggers.py:{ln}] {eng}Avg prompt throughput: {p} "
         "tokens/s, Avg generation throughput: {g} tokens/s, Running: {r} reqs, Waiting: {w} reqs, {preempt}GPU KV "
         "cache usage: {kv}%, Prefix cache hit rate: {hit}%{tail}")
ACCESS = '(APIServer pid=1) INFO:     10.0.0.{n}:4{n} - "POST /v1/chat/completions HTTP/1.1" 200 OK'
ODD = [  # lines the careful path reads differently from a plain stats line (or not at all)
    "INFO 01-22 18:27:05 metrics.py:449] Avg prompt throughput: 3.0 tokens/s, Avg generation throughput: 9.0 "
    "tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 1 reqs, GPU KV cache usage: 5.0%, CPU KV cache usage: 0.0%.",
    "INFO 01-22 18:27:05 metrics.py:449] Prefix cache hit rate: GPU: 41.20%, CPU: 0.00%",
    "INFO 09-07 06:35:31 [loggers.py:131] SpecDecoding metrics: Mean acceptance length: 2.5, Accepted: 120 tokens, "
    "Drafted: 200 tokens, Per-position acceptance rate: 0.8, 0.6",
    "INFO 01-22 18:27:05 spec_decode_worker.py:1] Speculative metrics: Draft acceptance rate: 0.712, System "
    "efficiency: 0.5",
    "WARNING 09-07 06:35:32 [scheduler.py:1] Sequence group 7 is preempted by PreemptionMode.RECOMPUTE mode because "
    "there is not enough KV cache space. total_num_cumulative_preemption=3",
    "INFO 09-07 06:30:00 [api_server.py:1] non-default args: {'max_num_seqs': 64, 'model': 'm'}",
    "Loading safetensors checkpoint shards: 100%",
    "INFO 09-07 06:35:33 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation "
    "throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usaga: 3.0%, Prefix cache hit rate: 0.0%",
    "INFO 09-07 06:35:33 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation "
    "throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, Deferred: 1 reqs, GPU KV cache usage: 3.0%, "
    "Prefix cache hit rate: 0.0%",
    "INFO 09-07 06:35:33 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation th",
]


def _stats(rng: random.Random, t: int, plain: bool = False) -> str:
    """A V1 stats line of any form; ``plain``: of a few forms the block path reads itself (the numbers' widths
    vary little, as in a real log; no earlier stamp in the wrapper, no number of 8 characters)."""
    mo, rest = divmod(t, 86400 * 3)
    h = rng.choice([rest // 3600 % 24, rest // 3600 % 24, 25])  # 25: a stamp that is no time
    stamp = {"mo": (9 + mo) % 12 + 1, "d": 1 + rest // 86400, "h": h, "m": rest // 60 % 60, "s": rest % 60}
    if plain:
        return STATS.format(pre="vllm-1  | (APIServer pid=7) ", **stamp, ln=123,
                            eng=rng.choice(["Engine 000: ", "Engine 001: "]), p=rng.choice(["0.0", "812.5"]),
                            g=f"{rng.uniform(1000, 9999):.1f}", r=rng.randint(10, 99), w=rng.randint(1, 9),
                            preempt=rng.choice(["", "Preemptions: 2, "]), kv=f"{rng.uniform(10, 99):.1f}",
                            hit="12.5", tail=rng.choice([", External prefix cache hit rate: 0.0%", "\r"]))
    pre = rng.choice(["", "", "(APIServer pid=1) ", "vllm-1  | ", "vllm-1  | (APIServer pid=7) ",
                      "INFO 01-01 00:00:00 wrapped: "])
    eng = rng.choice(["Engine 000: ", "Engine 000: ", "Engine 001: ", "", "2 Engines Aggregated: "])
    return STATS.format(pre=pre, **stamp, ln=rng.choice([123, 123, 140]), eng=eng,
                        p=rng.choice(["0.0", "812.5", "12345.6", "7", ".5", "1234567.8"]),
                        g=f"{rng.uniform(0, 5000):.1f}", r=rng.randint(0, 300), w=rng.choice([0, 3, 12, 1000]),
                        preempt=rng.choice(["", "", "Preemptions: 2, "]),
                        kv=rng.choice(["0.0", "56.1", "100.0", "9"]), hit=rng.choice(["0.0", "12.5"]),
                        tail=rng.choice(["", "", ", External prefix cache hit rate: 0.0%", "\r"]))


def _log(rng: random.Random, lines: int, odd: float, plain: bool) -> bytes:
    out, t = [], 0
    for i in range(lines):
        t += rng.choice([0, 1, 10, 10, 3600])
        kind = rng.random()
        if kind < odd:
            line = rng.choice(ODD)
            if rng.random() < 0.2:  # a Kubernetes partial line and its continuation
                line = f"2025-01-01T00:00:00Z stdout P {line[:40]}\n2025-01-01T00:00:00Z stdout F {line[40:]}"
            elif rng.random() < 0.2:  # a paste wrapped at a fixed width
                line = _stats(rng, t)
                line = line[:70] + "\n" + line[70:]
            elif rng.random() < 0.2:  # two records on one line
                line = _stats(rng, t) + " " + _stats(rng, t + 1)
        elif kind < 0.4:
            line = _stats(rng, t, plain)
        else:
            line = ACCESS.format(n=i % 250)
        out.append(line)
    text = "\n".join(out)
    return (text + ("\n" if rng.random() < 0.8 else "")).encode()


def _same(fast, slow) -> None:  # type: ignore[no-untyped-def]
    assert fast.engines == slow.engines
    assert list(fast.engines) == list(slow.engines)
    for name in ("lines", "stats_lines", "skipped", "untimed", "preemption_times", "spec", "config", "fmt", "title",
                 "interval_s", "preemptions_logged"):
        assert getattr(fast, name) == getattr(slow, name), name


@pytest.mark.parametrize("seed", range(40))
def test_block_path_reads_what_feed_reads_on_mixed_logs(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    plain = seed % 2 == 0  # even seeds: only lines the numpy path reads (it must then read every block)
    data = _log(rng, rng.choice([50, 400, 1500]), odd=0.0 if plain else rng.choice([0.0, 0.01, 0.1]), plain=plain)
    monkeypatch.setattr(vllm, "BLOCK", rng.choice([1, 700, 5000, 1 << 20]))  # blocks cut the log anywhere
    threads = rng.choice([0, 2])  # read on worker threads or inline: the same either way
    monkeypatch.setattr(vllm, "_threads", lambda: threads)
    careful = []
    feed_block = vllm.VllmLogParser.feed_block
    monkeypatch.setattr(vllm.VllmLogParser, "feed_block", lambda self, block: careful.append(feed_block(self, block)))
    size = rng.choice([1, 97, 4096, 1 << 20])
    fast = vllm.parse_chunks([data[i:i + size] for i in range(0, len(data), size)])
    slow = vllm.parse(iter_lines([data]))
    _same(fast, slow)
    assert not (plain and careful)


def test_standard_blocks_never_take_the_careful_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain V1 stats lines between access lines, in blocks cut mid-line: every block is read by numpy."""
    rng = random.Random(7)
    lines = []
    for i in range(3000):
        if i % 5:
            lines.append(ACCESS.format(n=i % 250))
            continue
        lines.append(STATS.format(pre="(APIServer pid=1) ", mo=12 + (i > 1500) * -11, d=31 if i <= 1500 else 1,
                                  h=23, m=i // 60 % 60, s=i % 60, ln=123, eng="Engine 000: ",
                                  p=rng.choice(["0.0", "812.5", "12345.6"]), g=f"{rng.uniform(1000, 9999):.1f}",
                                  r=rng.randint(10, 99), w=rng.randint(10, 40),
                                  preempt=rng.choice(["", "Preemptions: 2, "]), kv=f"{rng.uniform(10, 99):.1f}",
                                  hit="12.5", tail=""))
    data = ("\n".join(lines) + "\n").encode()
    careful = []
    monkeypatch.setattr(vllm.VllmLogParser, "feed_block", lambda self, block: careful.append(block))
    monkeypatch.setattr(vllm, "BLOCK", 20_000)
    fast = vllm.parse_chunks([data[i:i + 999] for i in range(0, len(data), 999)])
    assert careful == []
    monkeypatch.undo()
    _same(fast, vllm.parse(iter_lines([data])))
    assert fast.stats_lines == 600 and fast.span_s < 2 * 86400  # 31 Dec → 1 Jan of the next year, not back


def test_a_log_cut_mid_stats_line_keeps_what_it_holds() -> None:
    line = STATS.format(pre="", mo=9, d=7, h=6, m=35, s=1, ln=123, eng="Engine 000: ", p="1.0", g="2.0", r=3, w=4,
                        preempt="", kv="5.0", hit="6.0", tail="")
    data = (line + "\n" + line.replace(":01 ", ":11 ") + "\n" + line[:150]).encode()
    for size in (1, 33, 150, 10_000):
        fast = vllm.parse_chunks([data[i:i + size] for i in range(0, len(data), size)])
        _same(fast, vllm.parse(iter_lines([data])))
        assert fast.stats_lines == 3 and fast.lines == 3


@pytest.mark.parametrize("odd", range(len(ODD)))
def test_one_unusual_line_among_standard_lines_is_read_as_feed_reads_it(odd: int,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(odd)
    lines = [_stats(rng, 10 * i, plain=True) if i % 3 else ACCESS.format(n=i) for i in range(60)]
    lines[31] = ODD[odd]
    data = ("\n".join(lines) + "\n").encode()
    for block in (1, 1 << 20):
        monkeypatch.setattr(vllm, "BLOCK", block)
        _same(vllm.parse_chunks([data]), vllm.parse(iter_lines([data])))


@pytest.mark.parametrize("seed", range(12))
def test_numbers_of_every_width_are_parsed_as_float_parses_them(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """1–7 characters, with and without "%.1f"'s dot, random digits (leading zeros too): the numpy parse of the
    numbers' 8-byte words gives float()'s values, and the block path reads every block."""
    rng = random.Random(seed)
    widths = [rng.randint(1, 7) for _ in range(5)]
    dotted = [rng.random() < 0.7 for _ in range(5)]

    def number(i: int, dot: bool = True) -> str:
        digits = "".join(rng.choice("0123456789") for _ in range(widths[i]))
        return digits[:-2] + "." + digits[-1] if dot and dotted[i] and widths[i] >= 2 else digits

    lines = [STATS.format(pre="", mo=9, d=7, h=6, m=i // 60 % 60, s=i % 60, ln=123, eng="Engine 000: ",
                          p=number(0), g=number(1), r=number(2, dot=False), w=number(3, dot=False), preempt="",
                          kv=number(4), hit="12.5", tail="") for i in range(400)]
    data = ("\n".join(lines) + "\n").encode()
    careful = []
    feed_block = vllm.VllmLogParser.feed_block
    monkeypatch.setattr(vllm.VllmLogParser, "feed_block", lambda self, block: careful.append(feed_block(self, block)))
    fast = vllm.parse_chunks([data])
    assert careful == []
    _same(fast, vllm.parse(iter_lines([data])))


def test_blocks_are_read_on_worker_threads_and_taken_in_order(reader: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log of many blocks is read by numpy on the worker threads, and the parser takes their reads in the log's
    order: the samples, their times and the counts are those of the careful path. The C scanner reads on the
    parser's own thread (threads made it slower)."""
    import threading

    rng = random.Random(3)
    data = _log(rng, 1500, odd=0.0, plain=True)
    monkeypatch.setattr(vllm, "BLOCK", 3000)
    threads = []
    read_bulk = vllm.read_bulk

    def recorded(buf: bytes, start: int, end: int):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return read_bulk(buf, start, end)

    monkeypatch.setattr(vllm, "read_bulk", recorded)
    monkeypatch.setattr(vllm, "_threads", lambda: 2)  # as on a machine with a core to spare
    fast = vllm.parse_chunks([data[i:i + 4096] for i in range(0, len(data), 4096)])
    _same(fast, vllm.parse(iter_lines([data])))
    if reader == "c":
        assert threads and all(name == threading.current_thread().name for name in threads)
        return
    assert len(threads) > 20 and all(name.startswith("vllm-log") for name in threads)


def test_lines_holding_only_the_pairs_numpy_looks_for_stay_on_the_block_path(reader: str,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """"Av", "U:" and "P " are what numpy counts or looks for before a substring search: lines holding them but no
    keyword (an "Avatar" URL, "GPU: 0", "P " in a message) keep the block on the block path (the C scanner's or
    numpy's), read as feed reads it."""
    rng = random.Random(11)
    lines = [_stats(rng, 10 * i, plain=True) if i % 3 else ACCESS.format(n=i) for i in range(300)]
    lines[40] = '(APIServer pid=1) INFO:     10.0.0.1:4000 - "GET /v1/Avatar HTTP/1.1" 200 OK'
    lines[80] = "(APIServer pid=1) INFO 09-07 06:35:31 [gpu.py:1] GPU: 0 ready, memory P 3"
    data = ("\n".join(lines) + "\n").encode()
    careful = []
    feed_block = vllm.VllmLogParser.feed_block
    monkeypatch.setattr(vllm.VllmLogParser, "feed_block", lambda self, block: careful.append(feed_block(self, block)))
    counted = []
    if reader == "numpy":
        count = vllm._count
        monkeypatch.setattr(vllm, "_count", lambda pairs, two: counted.append(count(pairs, two)) or counted[-1])
    else:
        scanned = v1scan.scanned_rows
        monkeypatch.setattr(v1scan, "scanned_rows", lambda *a: counted.append(scanned(*a)) or counted[-1])
    fast = vllm.parse_chunks([data])
    assert careful == [] and counted
    _same(fast, vllm.parse(iter_lines([data])))


def test_column_runs_hold_the_runs_joined_in_order() -> None:
    """Runs of every size (none, one, many) appended in turn read as their join."""
    import numpy as np

    from triage.sources.logs.series import ColumnRuns, Sample

    rng = np.random.default_rng(5)
    runs = [{name: rng.random(size) for name in Sample._fields} for size in (0, 1, 700, 1500, 3, 0, 5000)]
    joined = ColumnRuns()
    for run in runs:
        joined.append(run)
    got = joined.columns()
    for name in Sample._fields:
        assert np.array_equal(got[name], np.concatenate([run[name] for run in runs]))


def test_threads_only_with_a_core_to_spare(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(vllm.os, "getloadavg", lambda: (0.4, 0.0, 0.0))
    assert vllm._threads() == vllm.WORKERS
    monkeypatch.setattr(vllm.os, "getloadavg", lambda: (1.6, 0.0, 0.0))  # both cores of two busy
    assert vllm._threads() == 0
    monkeypatch.setattr(vllm.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(vllm.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert vllm._threads() == 0


def test_a_block_of_a_few_lines_is_read_line_by_line(reader: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the C scanner, the line two chunks cut is a block of its own: shorter than SMALL_BLOCK, it goes line by
    line (cheaper than the bulk steps), and the log reads the same (numpy joins chunks into large blocks)."""
    monkeypatch.setattr(vllm, "SMALL_BLOCK", 4096)
    rng = random.Random(5)
    data = _log(rng, 3000, odd=0.0, plain=True)
    careful: list[int] = []
    feed_block = vllm.VllmLogParser.feed_block
    monkeypatch.setattr(vllm.VllmLogParser, "feed_block",
                        lambda self, block: careful.append(len(block)) or feed_block(self, block))
    chunk = 100_000
    fast = vllm.parse_chunks([data[i:i + chunk] for i in range(0, len(data), chunk)])
    _same(fast, vllm.parse(iter_lines([data])))
    assert all(size < 4096 for size in careful) and (reader == "numpy" or careful)


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT_LOGS).glob("vllm_*.txt")))
def test_real_vllm_logs_read_the_same_by_every_path(name: str) -> None:
    """The captured vLLM logs (tests/fixtures/real/logs, PROVENANCE.md), read in bulk from chunks of every size and
    line by line, give the same series (vllm.SMALL_BLOCK is 0 here: the bulk path reads even these short logs)."""
    data = (ROOT_LOGS / name).read_bytes()
    slow = vllm.parse(iter_lines([data]))
    for size in (1, 64, 700, len(data)):
        _same(vllm.parse_chunks([data[i:i + size] for i in range(0, len(data), size)]), slow)


SPEC = ("{pre}INFO {mo:02d}-{d:02d} {h:02d}:{m:02d}:{s:02d} [metrics.py:80] SpecDecoding metrics: Mean acceptance "
        "length: {mean}, Accepted throughput: {atp} tokens/s, Drafted throughput: {dtp} tokens/s, Accepted: {acc} "
        "tokens, Drafted: {dra} tokens, Per-position acceptance rate: 0.500, 0.300, Avg Draft acceptance rate: "
        "{rate}%")


@pytest.mark.parametrize("seed", range(12))
def test_spec_decoding_lines_are_read_in_bulk_as_feed_reads_them(seed: int, reader: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM V1's SpecDecoding line (one after each stats line with speculation on) ends in "%": the C scanner reads
    it in bulk, in line order with the stats lines (times, New Year), as feed reads it; numpy sends the block the
    careful way. Counts of any width, rates "%.1f", stamps that are no time."""
    rng = random.Random(seed)
    lines, t = [], 0
    for i in range(1500):
        t += rng.choice([1, 10, 3600])
        mo, rest = divmod(t, 86400 * 3)
        h = rng.choice([rest // 3600 % 24] * 20 + [25])
        stamp = {"mo": (11 + mo) % 12 + 1, "d": 1 + rest // 86400, "h": h, "m": rest // 60 % 60, "s": rest % 60}
        kind = i % 4
        if kind == 0:
            lines.append(_stats(rng, t, plain=True))
        elif kind == 1:
            lines.append(SPEC.format(pre=rng.choice(["", "(APIServer pid=1) "]), **stamp,
                                     mean=f"{rng.uniform(1, 4):.2f}", atp=f"{rng.uniform(100, 999):.2f}",
                                     dtp=f"{rng.uniform(100, 999):.2f}",
                                     acc=rng.choice([rng.randint(100, 999), rng.randint(10 ** 8, 10 ** 9)]),
                                     dra=rng.randint(1000, 9999), rate=f"{rng.uniform(0, 100):.1f}"))
        else:
            lines.append(ACCESS.format(n=i % 250))
    data = ("\n".join(lines) + "\n").encode()
    careful: list[bytes] = []
    feed_block = vllm.VllmLogParser.feed_block
    monkeypatch.setattr(vllm.VllmLogParser, "feed_block", lambda self, block: careful.append(block) or
                        feed_block(self, block))
    size = rng.choice([997, 20_000, 1 << 20])
    fast = vllm.parse_chunks([data[i:i + size] for i in range(0, len(data), size)])
    slow = vllm.parse(iter_lines([data]))
    _same(fast, slow)
    assert len(fast.spec) == 375 and (reader == "numpy" or not careful)
