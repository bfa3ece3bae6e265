"""The C line scanner (triage/sources/logs/_linescan.c) on its own: built, counting and grouping lines exactly, and
safe on any bytes (it reads untrusted logs)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from triage.sources.logs import v1scan

Scan = Callable[[bytes, int, int, bytes], Any]



@pytest.fixture
def scan() -> Scan:
    """The scanner's ``scan`` (the tests below are skipped without it: test_the_c_line_scanner_is_built fails)."""
    if v1scan._linescan is None:
        pytest.skip("the C line scanner is not built")
    return v1scan._linescan.scan  # type: ignore[no-any-return]


def test_the_c_line_scanner_is_built() -> None:
    """setup.py builds it on install (scripts/setup.sh): without it, logs are read at numpy's slower pace."""
    assert v1scan.available()


def _rows(got: tuple[int, bytes, bytes]) -> list[tuple[int, int, int]]:
    import numpy as np

    return [tuple(r) for r in np.frombuffer(got[1], np.int64).reshape(-1, 3).tolist()]


def test_lines_ending_in_percent_are_grouped_by_their_text_without_digits(scan: Scan) -> None:
    buf = b"a 12%\nxx\nb 3%\r\na 99%\n\nb 4%\n100%"
    lines, _, firsts = got = scan(buf, 0, len(buf), b"")
    rows = _rows(got)
    assert lines == 7  # the last line has no newline: still a line
    assert [(buf[s:e], g) for s, e, g in rows] == [(b"a 12%", 0), (b"b 3%", 1), (b"a 99%", 0), (b"b 4%", 1),
                                                   (b"100%", 2)]
    assert list(memoryview(firsts).cast("q")) == [0, 1, 4]


def test_a_kubernetes_partial_line_sends_the_block_the_careful_way(scan: Scan) -> None:
    buf = b"x 1%\n2025-01-01T00:00:00Z stdout P half of a \n2025-01-01T00:00:00Z stdout F line 5%\n"
    assert scan(buf, 0, len(buf), b"") is None
    fine = buf.replace(b" P ", b" F ")
    assert scan(fine, 0, len(fine), b"") is not None


def test_more_than_256_patterns_are_refused(scan: Scan) -> None:
    lines = b"".join(b"x" * i + b"%\n" for i in range(1, 258))
    assert scan(lines, 0, len(lines), b"") is None
    assert scan(lines, 0, lines.index(b"\n", 255 * 257 // 2), b"") is not None


def test_only_the_given_range_is_read(scan: Scan) -> None:
    buf = b"zz 1%\nab 2%\ncd 3%\nzz"
    start = buf.index(b"ab")
    got = scan(buf, start, buf.index(b"zz", 1), b"")
    assert got[0] == 2 and [buf[s:e] for s, e, _ in _rows(got)] == [b"ab 2%", b"cd 3%"]
    with pytest.raises(ValueError):
        scan(buf, 0, len(buf) + 1, b"")
    with pytest.raises(ValueError):
        scan(buf, -1, 3, b"")


@pytest.mark.parametrize("seed", range(30))
def test_random_bytes_count_and_group_as_python_does(seed: int, scan: Scan) -> None:
    """Any bytes (digits, '%', '\\r', lines over 512 bytes, which are no rows): the C scanner's lines, rows and groups
    are those a plain Python reading gives."""
    rng = random.Random(seed)
    alphabet = b"0123456789%\r\n ab.:P" + bytes([0, 255, 0x3A, 0x2F, 0x39, 0x30])
    text = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 3000)))
    if rng.random() < 0.3:
        text += b"7" * 700 + b"%\n" + b"8" * 500 + b"%\n"  # a line too long to be a row, one just short enough
    lines = text.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    got = scan(text, 0, len(text), b"")
    expected, groups, at = [], {}, 0
    for line in lines:
        body = line[:-1] if line.endswith(b"\r") else line
        if body.endswith(b"%") and len(body) <= 512:  # longer lines are left to the careful path
            key = body.translate(bytes.maketrans(b"123456789", b"000000000"))
            expected.append((at, at + len(body), groups.setdefault(key, len(groups))))
        at += len(line) + 1
    if len(groups) > 256:
        assert got is None
        return
    assert got[0] == len(lines) and _rows(got) == expected


def test_digits_after_the_marker_stay_in_the_pattern(scan: Scan) -> None:
    buf = b"Engine 000: 5 Engine 000%\nEngine 001: 7 Engine 000%\nEngine 000: 9 Engine 001%\nEngine 000: 1 x%\n"
    assert [g for _, _, g in _rows(scan(buf, 0, len(buf), b"Engine "))] == [0, 1, 2, 3]
    assert [g for _, _, g in _rows(scan(buf, 0, len(buf), b""))] == [0, 0, 0, 1]


def _numbers(scan: Scan, buf: bytes, layout: list[int]) -> tuple[list[list[float]], list[list[int]]]:
    import numpy as np

    from triage.sources.logs.v1scan import _linescan

    rows = np.frombuffer(scan(buf, 0, len(buf), b"")[1], np.int64).reshape(-1, 3)
    assert _linescan is not None
    values, stamps = _linescan.numbers(buf, rows[:, 0].copy(), rows[:, 1].copy(), np.zeros(len(rows), np.int64),
                                       np.array([layout], np.int64))
    return (np.frombuffer(values, np.float64).reshape(-1, 7).tolist(),
            np.frombuffer(stamps, np.int64).reshape(-1, 5).tolist())


def test_numbers_are_read_where_the_layout_says(scan: Scan) -> None:
    buf = b"09-07 06:35:30 a=12.5 b=7 c=%\n12-31 23:59:59 a=00.0 b=0 c=%\n"
    #        ends of the 7 fields        widths          dots            stamp
    layout = [21, 25, 8, 8, 8, 8, 8] + [4, 1, 0, 0, 0, 0, 0] + [1, 0, 0, 0, 0, 0, 0] + [0]
    values, stamps = _numbers(scan, buf, layout)
    assert values[0][:2] == [12.5, 7.0] and values[1][:2] == [0.0, 0.0]
    assert all(v != v for row in values for v in row[2:])  # width 0: not printed (NaN)
    assert stamps == [[9, 7, 6, 35, 30], [12, 31, 23, 59, 59]]


@pytest.mark.parametrize("bad", [[99] + [8] * 6 + [4] + [0] * 6 + [0] * 7 + [0],  # past the line's end
                                 [21] + [8] * 6 + [30] + [0] * 6 + [0] * 7 + [0],  # starts before the line
                                 [21] + [8] * 6 + [4] + [0] * 6 + [0] * 7 + [20]])  # a stamp past the end
def test_a_layout_never_reads_outside_its_line(scan: Scan, bad: list[int]) -> None:
    with pytest.raises(ValueError, match="outside its line"):
        _numbers(scan, b"09-07 06:35:30 a=12.5 b=7 c=%\n", bad)


@pytest.mark.parametrize("needle", [b"Av", b"Avg prompt throughput", b"aa", b"%"])
def test_count_is_bytes_count(needle: bytes, scan: Scan) -> None:
    rng = random.Random(len(needle))
    text = bytes(rng.choice(b"Avg prompt throughput a%") for _ in range(20_000))
    for start, end in ((0, len(text)), (17, 9000), (5, 5)):
        assert v1scan.count(text, start, end, needle) == text.count(needle, start, end)


@pytest.mark.parametrize("seed", range(20))
def test_any_layout_reads_inside_its_line_or_is_refused(seed: int, scan: Scan) -> None:
    """Random layouts (places, widths, dots, stamp offsets) over random lines: every value is read from inside its
    line, or the call is a ValueError; never a read elsewhere (the sanitizer build of the scanner checks the same)."""
    import numpy as np

    from triage.sources.logs.v1scan import _linescan

    assert _linescan is not None
    rng = random.Random(seed)
    lines = [bytes(rng.choice(b"0123456789.- :%x") for _ in range(rng.randint(0, 60))) + b"%" for _ in range(50)]
    buf = b"\n".join(lines) + b"\n"
    rows = np.frombuffer(scan(buf, 0, len(buf), b"")[1], np.int64).reshape(-1, 3)
    layouts = np.array([[rng.randint(-3, 70) for _ in range(7)] + [rng.randint(-2, 20) for _ in range(7)] +
                        [rng.randint(0, 1) for _ in range(7)] + [rng.randint(-2, 60)] for _ in range(4)], np.int64)
    forms = np.array([rng.randint(0, 3) for _ in range(len(rows))], np.int64)
    try:
        values, stamps = _linescan.numbers(buf, rows[:, 0].copy(), rows[:, 1].copy(), forms, layouts)
    except ValueError as exc:
        assert "outside its line" in str(exc)
        return
    assert len(values) == 8 * 7 * len(rows) and len(stamps) == 8 * 5 * len(rows)
