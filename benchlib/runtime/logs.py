"""Service logs kept with a run, bounded in size.

A service that logs every request (the seeds' servers do) writes hundreds of megabytes per
trial; benchlib still reads or lets it write every line (that is the cost being measured),
but keeps at most :data:`DEFAULT_LOG_CAP_BYTES` of it per trial: the head and the tail,
with a marker saying how much was left out in between. Line and byte counts are recorded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_LOG_CAP_BYTES", "compact_log", "count_lines", "marker"]

#: Bytes of a service's log kept per trial (head and tail halves); the default of
#: :attr:`benchlib.runtime.base.StartOptions.log_cap_bytes`.
DEFAULT_LOG_CAP_BYTES = 16 * 2**20


def marker(lines: int, nbytes: int) -> bytes:
    """The line inserted where a log was cut."""
    return f"\n[benchlib: log cut here: {lines:,} lines ({nbytes:,} bytes) left out]\n".encode()


def count_lines(path: Path, chunk: int = 4 * 2**20) -> int:
    """Newlines in ``path``, streamed."""
    n = 0
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            n += block.count(b"\n")
    return n


def compact_log(path: str | os.PathLike[str], cap_bytes: int = DEFAULT_LOG_CAP_BYTES) -> dict[str, Any]:
    """Cut ``path`` down to its first and last ``cap_bytes / 2`` bytes (at line boundaries)
    if it is larger, with a :func:`marker` between; returns ``lines``, ``bytes`` (of the
    whole log), ``kept_bytes`` and ``truncated``. Call it after the service stopped."""
    p = Path(path)
    if not p.exists():
        return {"lines": 0, "bytes": 0, "kept_bytes": 0, "truncated": False}
    size = p.stat().st_size
    lines = count_lines(p)
    if size <= cap_bytes:
        return {"lines": lines, "bytes": size, "kept_bytes": size, "truncated": False}
    half = cap_bytes // 2
    with open(p, "rb") as fh:
        head = fh.read(half)
        head = head[: head.rfind(b"\n") + 1] or head
        fh.seek(size - half)
        tail = fh.read()
        tail = tail[tail.find(b"\n") + 1:] if b"\n" in tail else tail
    left_out = size - len(head) - len(tail)
    left_lines = max(0, lines - head.count(b"\n") - tail.count(b"\n"))
    tmp = p.with_name(f".{p.name}.tmp")
    with open(tmp, "wb") as out:
        out.write(head)
        out.write(marker(left_lines, left_out))
        out.write(tail)
    os.replace(tmp, p)
    return {"lines": lines, "bytes": size, "kept_bytes": p.stat().st_size, "truncated": True}
