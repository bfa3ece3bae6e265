"""The one formatter: every number a user reads (pages, reports, CLI, messages), the same everywhere.

Rules: times under a second in ms, otherwise s; a fraction (0…1 share) in %, its delta in percentage points;
a ratio (p99 ÷ p50, achieved ÷ offered) as ``×``; three significant digits, thousands separated, never
scientific notation; a delta in the display unit of the value it belongs to, rounded like that value, so a
change too small to see is ``0``; zero is ``0``. Memory sizes in GiB with two decimals (a breakdown's parts add
up to its total to the shown digit), per-token sizes in KiB; counts whole with thousands separators;
a relative change (Verify) with one decimal, in % or pp.

One minus sign: ASCII "-" (U+002D) everywhere, never "−" (U+2212). Streamlit's st.metric reads a delta as a fall
only when its text starts with "-" (a "−" shows a rising arrow in the wrong colour), and a terminal, grep, a
spreadsheet or a pasted number reads "-" as a number's sign; so text and metric cards agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SIGNIFICANT = 3
MAX_DECIMALS = 6
MISSING = "—"


@dataclass(frozen=True)
class Display:
    """How a value is shown: multiply by ``factor``, print ``decimals`` digits, append ``suffix``."""

    factor: float
    suffix: str  # " ms", " %", "×", …; "" for a bare number
    decimals: int
    delta_suffix: str  # the suffix of a delta in this display (" pp" for a fraction shown in %)


def _decimals(x: float) -> int:
    """Digits after the point for three significant digits of ``x`` (none for 1000 and above)."""
    if x == 0 or not math.isfinite(x):
        return 0
    return max(0, min(MAX_DECIMALS, SIGNIFICANT - 1 - math.floor(math.log10(abs(x)))))


def number(x: float, decimals: int | None = None) -> str:
    """``x`` with thousands separators and ``decimals`` digits (default: three significant), no exponent."""
    if not math.isfinite(x):
        return MISSING
    d = _decimals(x) if decimals is None else decimals
    text = f"{x:,.{d}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "0", "") else text


# "1/s" (events per second, e.g. preemptions) reads "0.8/s", not "0.8 1/s"
_SIMPLE = {"ratio": ("×", "×"), "r": ("", ""), "%": (" %", " pp"), "pp": (" pp", " pp"), "1/s": ("/s", "/s")}


def display(value: float, unit: str) -> Display:
    """The display chosen for ``value`` (its size decides ms or s, and the digits)."""
    if unit == "s":
        factor, suffix = (1000.0, " ms") if abs(value) < 1 else (1.0, " s")
        return Display(factor, suffix, _decimals(value * factor), suffix)
    if unit == "fraction":
        return Display(100.0, " %", _decimals(value * 100), " pp")
    suffix, delta_suffix = _SIMPLE.get(unit, (f" {unit}" if unit and unit != "bool" else "",) * 2)
    return Display(1.0, suffix, _decimals(value), delta_suffix)


def time_axis(peak: float, unit: str) -> tuple[float, str]:
    """(factor, unit) for a chart axis of times given in ``unit`` ("s" or "ms") whose largest value is ``peak``:
    the values times ``factor`` are in ms under a second, else in s, the rule every number here follows (a TTFT
    axis of "20k" ms beside a card of "19.3 s" reads as two scales). Any other unit is kept as it is."""
    if unit not in ("s", "ms"):
        return 1.0, unit
    to_s = 0.001 if unit == "ms" else 1.0
    shown = display(abs(peak) * to_s, "s")
    return to_s * shown.factor, shown.suffix.strip()


def fmt_value(value: float | bool | None, unit: str = "", missing: str = MISSING) -> str:
    """One value in its unit: ``24.8 ms``, ``2.3 s``, ``93.4 %``, ``2.16×``, ``1,520 tok/s``, ``yes``."""
    if value is None:
        return missing
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not math.isfinite(value):
        return missing
    d = display(value, unit)
    return number(value * d.factor) + d.suffix


def fmt_delta(delta: float | None, unit: str, like: float | None = None, missing: str = MISSING) -> str:
    """A signed change in the display unit of ``like`` (the value it belongs to), rounded like it: ``+1.2 ms``,
    ``-3.5 pp``, ``+0.4×``; a change that rounds away is ``0``."""
    if delta is None or not math.isfinite(delta):
        return missing
    ref = like if like is not None and math.isfinite(like) and like != 0 else delta
    d = display(ref, unit)
    decimals = d.decimals if like is not None else None
    text = number(delta * d.factor, decimals)
    if text == "0":
        return "0"
    return ("+" if not text.startswith("-") else "") + text + d.delta_suffix


def fmt_threshold(threshold: float | None, unit: str, like: float | None = None, missing: str = MISSING) -> str:
    """A threshold (an SLO, a rule's limit) in the display unit of the value it is compared with."""
    if threshold is None or not math.isfinite(threshold):
        return missing
    d = display(like if like is not None and math.isfinite(like) and like != 0 else threshold, unit)
    return number(threshold * d.factor) + d.suffix


def fmt_against(value: float, reference: float, unit: str, what: str) -> str:
    """``+20.3 s vs SLO 2 s``: the difference to a reference, both in the value's display unit."""
    return f"{fmt_delta(value - reference, unit, like=value)} {what} {fmt_threshold(reference, unit, like=value)}"


def count(n: float | None, missing: str = MISSING) -> str:
    """A count, whole, with thousands separators: ``1,987``."""
    if n is None or not math.isfinite(n):
        return missing
    return number(round(n), 0)


def signed(x: float | None, suffix: str = "", decimals: int | None = None, missing: str = MISSING) -> str:
    """``x`` with its sign always shown (``+`` or ASCII ``-``) and ``suffix``: ``+1,024``, ``-3.2 %``; zero
    (after rounding) is ``0`` with the suffix."""
    if x is None or not math.isfinite(x):
        return missing
    text = number(x, decimals)
    return ("+" if text != "0" and not text.startswith("-") else "") + text + suffix


def signed_count(n: float | None, missing: str = MISSING) -> str:
    """A change in a count: ``+1,024``, ``-512``, ``0``."""
    return missing if n is None or not math.isfinite(n) else signed(round(n), decimals=0)


GIB_DECIMALS = 2


def gib(x: float | None, missing: str = MISSING, unit: bool = True) -> str:
    """A memory size in GiB, always two decimals (a breakdown's rows line up and add up to the shown digit):
    ``70.53 GiB``, ``16.00 GiB``; ``unit=False`` for a column headed GiB."""
    if x is None or not math.isfinite(x):
        return missing
    text = f"{x:,.{GIB_DECIMALS}f}"
    text = text[1:] if text.startswith("-") and not text.strip("-0.,") else text  # "-0.00" is zero
    return text + (" GiB" if unit else "")


def kib(n_bytes: float | None, missing: str = MISSING) -> str:
    """A size given in bytes, shown in KiB (three significant digits): ``128 KiB``, ``1,536 KiB``."""
    return missing if n_bytes is None or not math.isfinite(n_bytes) else number(n_bytes / 1024) + " KiB"


def ms(x: float | None, missing: str = MISSING) -> str:
    """A duration given in milliseconds, kept in ms (a per-step floor): ``5.12 ms``."""
    return missing if x is None or not math.isfinite(x) else number(x) + " ms"


def percent(fraction: float | None, missing: str = MISSING) -> str:
    """A 0…1 share in %: ``93.4 %`` (as fmt_value's ``fraction``)."""
    return fmt_value(fraction, "fraction", missing)


def tokens_per_s(x: float | None, missing: str = MISSING) -> str:
    """A token rate: ``1,520 tok/s``."""
    return fmt_value(x, "tok/s", missing)


def plain(x: float | None, missing: str = MISSING) -> str:
    """A number without a unit, three significant digits (an option echoed back, a factor): ``0.9``, ``2,000``."""
    return missing if x is None or not math.isfinite(x) else number(x)


RELATIVE_DECIMALS = 1


def fmt_relative(delta: float | None, scale: str, missing: str = MISSING) -> str:
    """A relative change (Verify) in ``scale`` ("%" of the baseline, or "pp" for a rate): ``-3.2 %``, ``+0.4 pp``."""
    return signed(delta, " pp" if scale == "pp" else " %", RELATIVE_DECIMALS, missing)


def fmt_interval(interval: tuple[float, float] | None, scale: str, missing: str = MISSING) -> str:
    """A change's interval in ``scale``: ``[-5.1 %, -1.2 %]``."""
    if not interval:
        return missing
    return f"[{fmt_relative(interval[0], scale)}, {fmt_relative(interval[1], scale)}]"
