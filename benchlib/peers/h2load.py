"""h2load (nghttp2): run it pinned (HTTP/1.1 with ``--h1``) and parse its report."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from benchlib.errors import LoadGenError
from benchlib.peers.common import check_url, parse_time_ms, run_tool

__all__ = ["run_h2load", "parse_h2load"]


def run_h2load(url: str, *, connections: int = 50, duration_s: float = 10, threads: int = 1, h1: bool = True,
               warmup_s: float = 0, cpus: Sequence[int] | None = None, extra_args: Sequence[str] = ()) -> dict[str, Any]:
    """Run ``h2load [--h1] -t T -c C -D D [--warm-up-time W] URL`` pinned to ``cpus``."""
    check_url(url)
    cmd = ["h2load", "-t", str(threads), "-c", str(connections), "-D", f"{duration_s:g}"]
    if h1:
        cmd.append("--h1")
    if warmup_s:
        cmd += ["--warm-up-time", f"{warmup_s * 1000:.0f}ms"]  # h2load takes whole units: 300ms, not 0.3
    cmd += list(extra_args) + [url]
    run = run_tool(cmd, cpus=cpus, timeout_s=duration_s + warmup_s + 60)
    out = parse_h2load(run["stdout"])
    out.update({k: run[k] for k in ("command", "wall_s", "cpu_s", "cpu_fraction", "stdout")})
    return out


def parse_h2load(text: str) -> dict[str, Any]:
    """Parse h2load's report: ``requests_per_s``, ``duration_s``, ``requests`` (succeeded),
    ``failed``, ``errored``, ``timeout``, ``latency_min_ms``, ``latency_max_ms``,
    ``latency_avg_ms``, ``latency_stdev_ms`` ("time for request")."""
    out: dict[str, Any] = {"tool": "h2load"}
    m = re.search(r"finished in ([0-9.]+\w+), ([0-9.]+) req/s", text)
    if not m:
        raise LoadGenError(f"cannot parse h2load output (no 'finished in'):\n{text[-2000:]}")
    out["duration_s"] = parse_time_ms(m.group(1)) / 1e3
    out["requests_per_s"] = float(m.group(2))
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", text)
    if m:
        out.update(requests=int(m.group(4)), failed=int(m.group(5)), errored=int(m.group(6)), timeout=int(m.group(7)))
    m = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", text)
    if m:
        out.update(latency_min_ms=parse_time_ms(m.group(1)), latency_max_ms=parse_time_ms(m.group(2)),
                   latency_avg_ms=parse_time_ms(m.group(3)), latency_stdev_ms=parse_time_ms(m.group(4)))
    return out
