"""The one formatter: a value, a delta or a threshold in its unit as text, the same on every page and report.

Rules: times under a second in ms, otherwise s; a fraction (0…1 share) in %, its delta in percentage points;
a ratio (p99 ÷ p50, achieved ÷ offered) as ``×``; three significant digits, thousands separated, never
scientific notation; a delta in the display unit of the value it belongs to, rounded like that value, so a
change too small to see is ``0``; zero is ``0``.
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
