"""argparse types for numeric options: finite, in range, else argparse's one-line error and exit 2."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from triage.knowledge.units import plain
from triage.params import MAX_SCRAPE_INTERVAL_S, MAX_SLO_S


def real(low: float, high: float, *, low_open: bool = True) -> Callable[[str], float]:
    """A finite float in (low, high] (or [low, high] with ``low_open=False``); nan and inf are refused."""
    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text[:40]}' is not a number") from None
        above = value > low if low_open else value >= low
        if not math.isfinite(value) or not above or value > high:
            side = "(" if low_open else "["
            raise argparse.ArgumentTypeError(f"{text[:40]} is out of range: give a number in {side}{plain(low)}, "
                                             f"{plain(high)}]")
        return value

    convert.__name__ = "number"
    return convert


def integer(low: int, high: int) -> Callable[[str], int]:
    """An int in [low, high]."""
    def convert(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text[:40]}' is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range: give a whole number from {low} to {high}")
        return value

    convert.__name__ = "integer"
    return convert


SECONDS = real(0, MAX_SLO_S)          # an SLO or a duration in seconds: positive, at most a day
TIMEOUT = real(0, 600)                # a network timeout
INTERVAL = real(0, MAX_SCRAPE_INTERVAL_S)  # seconds between two scrapes
RUN_NUMBER = integer(1, 100_000)
PARALLEL = integer(1, 1_024)          # TP / PP sizes
