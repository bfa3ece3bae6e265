"""One number formatter (triage/knowledge/units.py): its rules hold for any number, and no view, report or CLI
module formats a number by hand (an f-string spec such as ``:.1f``, ``:,`` or ``:+.0f``) outside it."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from triage.knowledge.units import (
    count,
    fmt_delta,
    fmt_interval,
    fmt_relative,
    gib,
    kib,
    ms,
    number,
    percent,
    plain,
    signed,
    signed_count,
    tokens_per_s,
)

ROOT = Path(__file__).resolve().parent.parent
GROUPED = r"\d{1,3}(,\d{3})*"  # thousands separated, no leading zero group
FINITE = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False)
SIZES = st.floats(min_value=0, max_value=1e7, allow_nan=False, allow_infinity=False)


def _parse(text: str) -> float:
    return float(text.replace(",", ""))


# ---------------------------------------------------------------- the rules, for any number


@given(FINITE)
def test_a_number_has_grouped_thousands_no_exponent_and_reads_back_to_three_significant_digits(x):
    text = number(x)
    assert re.fullmatch(rf"-?{GROUPED}(\.\d+)?", text), text
    assert "e" not in text.lower() and "−" not in text
    # three significant digits, or the whole integer part when it is longer
    assert abs(_parse(text) - x) <= max(abs(x), 1e-6) * 5e-3 + 0.5, (x, text)


@given(FINITE, st.sampled_from(["", " %", " pp", " ms"]), st.sampled_from([None, 0, 1, 2]))
def test_a_signed_number_has_one_ascii_sign_and_zero_has_none(x, suffix, decimals):
    text = signed(x, suffix, decimals)
    assert text.endswith(suffix) and "−" not in text
    body = text[: len(text) - len(suffix)] if suffix else text
    if body == "0":
        return
    assert body[0] in "+-" and body[1:2].isdigit(), text
    assert (body[0] == "-") == (x < 0), (x, text)
    assert body.count("-") + body.count("+") == 1


@given(FINITE)
def test_a_relative_change_has_one_decimal_at_most_and_its_unit(x):
    for scale, unit in (("%", " %"), ("pp", " pp")):
        text = fmt_relative(x, scale)
        assert text.endswith(unit) and re.fullmatch(rf"([+-]{GROUPED}(\.\d)?|0){re.escape(unit)}", text), text
        assert abs(_parse(text[: -len(unit)]) - x) <= 0.05 + 1e-9 * abs(x)


@given(SIZES)
def test_a_memory_size_always_has_two_decimals_in_gib(x):
    text = gib(x)
    assert re.fullmatch(rf"{GROUPED}\.\d\d GiB", text), text
    assert abs(_parse(text[:-4]) - x) <= 0.005 + 1e-9 * x
    assert gib(x, unit=False) == text[:-4]


@given(SIZES)
def test_a_count_is_whole_and_grouped(x):
    text = count(x)
    assert re.fullmatch(GROUPED, text), text
    assert _parse(text) == round(x)


@given(st.integers(min_value=-10**9, max_value=10**9))
def test_a_change_in_a_count_is_signed_and_grouped(n):
    text = signed_count(n)
    assert text == "0" if n == 0 else re.fullmatch(rf"[+-]{GROUPED}", text), text
    assert _parse(text) == n


@given(FINITE, st.sampled_from(["s", "fraction", "ratio", "tok/s", "1/s", "r"]))
def test_a_delta_never_shows_the_typographic_minus(x, unit):
    """st.metric reads a delta as a fall only when it starts with ASCII "-": a "−" would show a rising arrow."""
    text = fmt_delta(x, unit, like=abs(x) or 1.0)
    assert "−" not in text and (text == "0" or text[0] in "+-"), text


@pytest.mark.parametrize("text, expected", [
    (gib(70.533), "70.53 GiB"), (gib(16.0), "16.00 GiB"), (gib(-0.001), "0.00 GiB"), (gib(None), "—"),
    (kib(131072), "128 KiB"), (kib(1536 * 1024), "1,536 KiB"), (ms(5.123), "5.12 ms"), (ms(1234.6), "1,235 ms"),
    (percent(0.934), "93.4 %"), (tokens_per_s(1520.4), "1,520 tok/s"), (count(1987), "1,987"),
    (signed_count(1024), "+1,024"), (signed_count(-512), "-512"), (plain(0.9), "0.9"), (plain(2000.0), "2,000"),
    (fmt_relative(-3.24, "%"), "-3.2 %"), (fmt_relative(3.25, "%"), "+3.2 %"), (fmt_relative(0.4, "pp"), "+0.4 pp"),
    (fmt_relative(-0.04, "%"), "0 %"), (fmt_relative(None, "%"), "—"),
    (fmt_interval((-5.1, -1.2), "%"), "[-5.1 %, -1.2 %]"), (fmt_interval(None, "%"), "—"),
])
def test_examples(text, expected):
    assert text == expected


def test_nan_and_infinity_are_missing_never_a_number():
    for f in (count, gib, kib, ms, plain, percent, tokens_per_s, signed_count):
        assert f(math.nan) == "—" and f(math.inf) == "—", f
    assert signed(-math.inf) == "—" and fmt_relative(math.nan, "pp") == "—"


# ---------------------------------------------------------------- no number formatted by hand

SCANNED = [*(ROOT / "components").glob("*.py"), *(ROOT / "triage/report").rglob("*.py"),
           *(ROOT / "triage/cli").rglob("*.py"), *(ROOT / "triage/memory").rglob("*.py"),
           *(ROOT / "triage/verify").rglob("*.py")]
# a format spec that formats a number: precision, grouping, a sign, or a numeric type (not alignment alone such as
# ``:<16``, nor a datetime's ``%H:%M``)
NUMERIC_SPEC = re.compile(r"^(?!%)[^\d.,+\- ]?[<>=^]?[+\- ]?#?0?\d*[,_]?(\.\d+)?[bcdeEfFgGnoxX%]?$")
NUMBER_PART = re.compile(r"[,_+]|\.\d|[eEfFgGn%]$")
# (file, the formatted expression, its spec): each allowed for the reason given
ALLOWED = {
    # a URL query value (read back by float()), not text a reader sees
    ("components/memory_view.py", "value", "g"),
    ("components/live_picker.py", "minutes", "g"),
}


def _specs(path: Path) -> list[tuple[int, str, str]]:
    """(line, expression, spec) of every f-string field with a literal numeric format spec, and of every
    ``format(x, "spec")`` call."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FormattedValue) and isinstance(node.format_spec, ast.JoinedStr):
            literal = "".join(v.value for v in node.format_spec.values
                              if isinstance(v, ast.Constant) and isinstance(v.value, str))
            nested = any(isinstance(v, ast.FormattedValue) for v in node.format_spec.values)
            if not nested and NUMERIC_SPEC.match(literal) and NUMBER_PART.search(literal):
                out.append((node.lineno, ast.unparse(node.value), literal))
        elif (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "format" and len(node.args) == 2
              and isinstance(node.args[1], ast.Constant)):
            out.append((node.lineno, ast.unparse(node.args[0]), str(node.args[1].value)))
    return out


def test_the_scanner_finds_the_hand_written_formats_it_is_meant_to():
    """The check is real: each of these shapes is caught, alignment and datetimes are not."""
    tree = 'a = f"{x:.1f} {y:,} {z:+.0f}% {w:.0%} {v:g} {u:<16} {t:%H:%M} {s:>{n}}"; format(q, ".2f")'
    path = ROOT / "tests" / "_scan_probe.py"
    try:
        path.write_text(tree, encoding="utf-8")
        found = {(expr, spec) for _, expr, spec in _specs(path)}
    finally:
        path.unlink()
    assert found == {("x", ".1f"), ("y", ","), ("z", "+.0f"), ("w", ".0%"), ("v", "g"), ("q", ".2f")}


def test_no_view_report_or_cli_formats_a_number_by_hand():
    """Every number a user reads goes through triage/knowledge/units.py (count, gib, kib, ms, percent, signed,
    fmt_value, fmt_delta, fmt_relative …); a new ``:.1f`` beside them would bring back "3.2" in one place and
    "3.25" in another for the same value."""
    found = [(str(path.relative_to(ROOT)), line, expr, spec) for path in SCANNED for line, expr, spec in _specs(path)]
    assert len(SCANNED) > 40
    offenders = [f"{f}:{line}: {{{expr}:{spec}}}" for f, line, expr, spec in found if (f, expr, spec) not in ALLOWED]
    assert offenders == [], "format these through triage/knowledge/units.py"
    stale = ALLOWED - {(f, expr, spec) for f, _, expr, spec in found}
    assert stale == set(), "an allowed format that no longer exists: drop it from ALLOWED"
