"""Lines of a server log as people paste them: wrappers (docker compose, Kubernetes, journald) and timestamps."""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable, Iterator

# Python logging's own stamp as vLLM and SGLang print it: "INFO 09-07 06:35:30" (vLLM, no year) or
# "[2025-01-04 10:11:12 TP0]" / "[2025-01-04 10:11:12]" (SGLang, with year).
VLLM_STAMP = re.compile(rb"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")
ISO_STAMP = re.compile(rb"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?")
# Kubernetes CRI log files: "<RFC3339 time> stdout P <text>" is a partial line continued by the next one.
K8S_PARTIAL = re.compile(rb"^\S+ (?:stdout|stderr) P ")
K8S_PREFIX = re.compile(rb"^\S+ (?:stdout|stderr) [FP] ")
YEARLESS = 2000  # vLLM's stamp has no year: a leap year, so "02-29" is a valid date, advanced at a new year


def vllm_stamp(line: bytes) -> re.Match[bytes] | None:
    """vLLM's stamp in a line as ``Clock.stamp`` reads it (the bulk readers take its place from here too)."""
    at = line.find(b"INFO ")  # most stamps are INFO: match there before searching the whole line
    m = VLLM_STAMP.match(line, at) if at >= 0 else None
    return m or VLLM_STAMP.search(line)


def iter_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Whole lines from byte chunks, without their line ends, holding only one partial line at a time; a
    Kubernetes partial line ("stdout P") is joined to its continuation."""
    rest = b""
    pending = b""
    for chunk in chunks:
        if not chunk:
            continue
        parts = (rest + chunk).split(b"\n")
        rest = parts.pop()
        for line in parts:
            line = line.rstrip(b"\r")
            if K8S_PARTIAL.match(line):
                pending += K8S_PREFIX.sub(b"", line, count=1)
                continue
            if pending:
                line, pending = pending + K8S_PREFIX.sub(b"", line, count=1), b""
            yield line
    if pending or rest:
        yield pending + rest.rstrip(b"\r")  # a paste cut mid-line still counts what it holds


class Clock:
    """Seconds for log stamps: the engine's own stamp first, else a wrapper's ISO time; vLLM's year-less stamp
    is placed in a fixed leap year and moved on a year when the month goes backwards (a log across New Year)."""

    def __init__(self) -> None:
        self.year = YEARLESS
        self.last_month = 0
        self.yearless = False  # once the engine's year-less stamps are seen, wrapper times are not mixed in
        self._days: dict[tuple[int, int, int], float | None] = {}  # (year, month, day) → epoch of midnight

    def stamp(self, line: bytes) -> float | None:
        m = vllm_stamp(line)
        if m:
            return self.yearless_time(int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]))
        iso = None if self.yearless else ISO_STAMP.search(line)
        return self._iso(iso)

    def yearless_time(self, month: int, day: int, hh: int, mm: int, ss: int) -> float | None:
        """Seconds of vLLM's "MM-DD hh:mm:ss" stamp (None when it is no date), in the running year."""
        if month < self.last_month:
            self.year += 1
        self.last_month = month
        self.yearless = True
        key = (self.year, month, day)
        if key not in self._days:
            self._days[key] = _epoch(self.year, month, day, 0, 0, 0, 0.0)
        midnight = self._days[key]
        if midnight is None or hh > 23 or mm > 59 or ss > 60:
            return None
        return midnight + hh * 3600 + mm * 60 + ss

    def _iso(self, iso: re.Match[bytes] | None) -> float | None:
        if iso:
            y, mo, d, hh, mm, ss = (int(g) for g in iso.groups()[:6])
            frac = float(b"0." + iso.group(7)) if iso.group(7) else 0.0
            return _epoch(y, mo, d, hh, mm, ss, frac)
        return None


def _epoch(year: int, month: int, day: int, hh: int, mm: int, ss: int, frac: float) -> float | None:
    if not (1 <= month <= 12 and 1 <= day <= 31 and hh < 24 and mm < 60 and ss < 61):
        return None
    try:
        return calendar.timegm((year, month, day, hh, mm, ss, 0, 0, 0)) + frac
    except (ValueError, OverflowError):
        return None
