"""Read a user-named file within bounds: a regular file only, at most N MB, within a time limit, before parsing.

A FIFO would block the read forever, ``/dev/zero`` never ends and a sparse file claims gigabytes, so the kind
and the size are decided from ``stat`` before a byte is read, and the read itself stops at the cap.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from triage.errors import TriageError

MB = 1024 * 1024
MAX_BENCHMARK_BYTES = 256 * MB   # the pages accept 200 MB uploads; a CLI file may be a little larger
MAX_METRICS_BYTES = 32 * MB      # one /metrics text (the same cap as a live scrape)
MAX_CONFIG_BYTES = 4 * MB        # YAML / JSON configuration (config.json, gate files)
READ_TIMEOUT_S = 60.0
CHUNK = 1 * MB
KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
         (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _kind(mode: int) -> str:
    return next((name for test, name in KINDS if test(mode)), "not a regular file")


def check_regular(path: Path, max_bytes: int) -> os.stat_result:
    """The file's stat, or a TriageError if it is not a regular file or is larger than ``max_bytes``."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise TriageError(f"cannot read: {exc.strerror or exc}", where=str(path)) from None
    _check(path, info, max_bytes)
    return info


def _check(path: Path, info: os.stat_result, max_bytes: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise TriageError(f"is {_kind(info.st_mode)}, not a regular file; give a file", where=str(path))
    if info.st_size > max_bytes:
        raise TriageError(f"larger than {max_bytes / MB:g} MB ({info.st_size / MB:,.1f} MB); not read",
                          where=str(path))


def read_bounded(path: Path | str, max_bytes: int = MAX_BENCHMARK_BYTES, timeout: float = READ_TIMEOUT_S) -> bytes:
    """The bytes of the regular file ``path``: refused at once if it is not one or is larger than ``max_bytes``;
    the read stops at the cap (a file growing meanwhile) and at ``timeout`` seconds (a stalled mount)."""
    path = Path(path)
    check_regular(path, max_bytes)
    try:  # O_NONBLOCK: if the path was swapped for a FIFO since the stat, opening it still returns at once
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise TriageError(f"cannot read: {exc.strerror or exc}", where=str(path)) from None
    try:
        _check(path, os.fstat(fd), max_bytes)
        deadline = time.monotonic() + timeout
        parts: list[bytes] = []
        total = 0
        while True:
            try:
                chunk = os.read(fd, CHUNK)
            except OSError as exc:
                raise TriageError(f"cannot read: {exc.strerror or exc}", where=str(path)) from None
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                raise TriageError(f"larger than {max_bytes / MB:g} MB; not read further", where=str(path))
            parts.append(chunk)
            if time.monotonic() > deadline:
                raise TriageError(f"reading took longer than {timeout:g} s; stopped", where=str(path))
        return b"".join(parts)
    finally:
        os.close(fd)


PSEUDO_ROOTS = ("/proc", "/sys", "/dev")  # kernel-made files: environ, keys, registers; never quoted


def quotable(path: Path | str, data: bytes) -> bool:
    """Whether a message may quote a short head of ``data`` read from ``path``: only when the path names a plain
    regular file (not a symlink, not under /proc, /sys or /dev, the size on disk being what was read) that the
    real user may read. A symlink to /etc/shadow or /proc/self/environ is then refused without echoing a byte,
    even when the process runs with more rights than the user who named it."""
    path = Path(path)
    try:
        info = os.lstat(path)
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_size != len(data):
        return False
    if any(real == root or real.startswith(root + "/") for root in PSEUDO_ROOTS):
        return False
    return os.access(path, os.R_OK)  # real uid and gid, not the effective ones of a setuid or sudo run


def read_text_bounded(path: Path | str, max_bytes: int, timeout: float = READ_TIMEOUT_S) -> str:
    """As ``read_bounded``, decoded as UTF-8 (a clear error otherwise)."""
    data = read_bounded(path, max_bytes, timeout)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TriageError(f"not UTF-8 text (byte {exc.start})", where=str(path)) from None
