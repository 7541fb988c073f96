"""hey: run it pinned and parse its summary."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from benchlib.core.errors import LoadGenError
from benchlib.loadgen.peers.common import check_url, run_tool

__all__ = ["run_hey", "parse_hey"]


def run_hey(url: str, *, connections: int = 50, duration_s: float = 10, cpus: Sequence[int] | None = None,
            keep_alive: bool = True, extra_args: Sequence[str] = ()) -> dict[str, Any]:
    """Run ``hey -z {duration_s}s -c {connections} URL`` pinned to ``cpus``; return :func:`parse_hey`'s dict."""
    check_url(url)
    cmd = ["hey", "-z", f"{duration_s:g}s", "-c", str(connections)]
    if not keep_alive:
        cmd.append("-disable-keepalive")
    cmd += list(extra_args) + [url]
    run = run_tool(cmd, cpus=cpus, timeout_s=duration_s + 60)
    out = parse_hey(run["stdout"])
    out.update({k: run[k] for k in ("command", "wall_s", "cpu_s", "cpu_fraction", "stdout")})
    return out


def parse_hey(text: str) -> dict[str, Any]:
    """Parse hey's summary: ``requests_per_s``, ``duration_s``, ``latency_avg_ms``,
    ``latency_max_ms``, ``latency_percentiles_ms`` (10..99), ``requests`` (responses by
    status, summed), ``status_counts``, ``errors`` (error lines' counts)."""
    out: dict[str, Any] = {"tool": "hey"}
    m = re.search(r"Requests/sec:\s+([0-9.]+)", text)
    if not m:
        raise LoadGenError(f"cannot parse hey output (no Requests/sec):\n{text[-2000:]}")
    out["requests_per_s"] = float(m.group(1))
    for key, label in (("duration_s", "Total"), ("latency_max_ms", "Slowest"), ("latency_min_ms", "Fastest"),
                       ("latency_avg_ms", "Average")):
        m = re.search(rf"^\s*{label}:\s+([0-9.]+) secs", text, re.M)
        if m:
            out[key] = float(m.group(1)) * (1.0 if key == "duration_s" else 1e3)
    out["latency_percentiles_ms"] = {
        pm.group(1): float(pm.group(2)) * 1e3 for pm in re.finditer(r"^\s*(\d+)% in ([0-9.]+) secs", text, re.M)
    }
    status = {pm.group(1): int(pm.group(2)) for pm in re.finditer(r"^\s*\[(\d+)\]\s+(\d+) responses", text, re.M)}
    out["status_counts"] = status
    out["requests"] = sum(status.values())
    errs: dict[str, int] = {}
    if "Error distribution:" in text:
        for em in re.finditer(r"^\s*\[(\d+)\]\s+(.+)$", text.split("Error distribution:", 1)[1], re.M):
            errs[em.group(2).strip()] = int(em.group(1))
    out["errors"] = errs
    return out
