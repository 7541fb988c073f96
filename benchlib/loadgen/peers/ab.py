"""ab (ApacheBench): run it pinned and parse its report."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from benchlib.core.errors import LoadGenError
from benchlib.loadgen.peers.common import check_url, run_tool

__all__ = ["run_ab", "parse_ab"]


def run_ab(url: str, *, connections: int = 20, requests: int | None = None, duration_s: float | None = 10,
           keep_alive: bool = True, cpus: Sequence[int] | None = None, extra_args: Sequence[str] = (),
           timeout_s: float | None = None) -> dict[str, Any]:
    """Run ``ab [-k] -c C (-n N | -t T -n 10000000) URL`` pinned to ``cpus``; return :func:`parse_ab`'s dict.

    ab always speaks HTTP/1.0; ``keep_alive=False`` (no ``-k``) opens a new connection per
    request, as the seeds ran it (``ab -c 20 -n 20000 URL``: ``requests=20000,
    keep_alive=False``). ``-q`` only hides the progress lines. ``timeout_s`` bounds the run
    (default: ``duration_s`` + 60 s, or 600 s for a request count)."""
    check_url(url)
    cmd = ["ab", "-q", "-c", str(connections)]
    if keep_alive:
        cmd.append("-k")
    if requests is not None:
        cmd += ["-n", str(requests)]
    else:
        cmd += ["-t", f"{duration_s:g}", "-n", "100000000"]
    cmd += list(extra_args) + [url]
    if timeout_s is None:
        timeout_s = 600.0 if requests is not None else (duration_s or 600) + 60
    run = run_tool(cmd, cpus=cpus, timeout_s=timeout_s)
    out = parse_ab(run["stdout"])
    out.update({k: run[k] for k in ("command", "wall_s", "cpu_s", "cpu_fraction", "stdout")})
    out["keep_alive"] = keep_alive
    return out


def parse_ab(text: str) -> dict[str, Any]:
    """Parse ab's report.

    Keys: ``requests_per_s``, ``duration_s``, ``requests`` (complete), ``failed`` (ab's "Failed
    requests", which does not count non-2xx answers) with ``failed_by_kind`` (connect,
    receive, length, exceptions; empty when none failed), ``non_2xx``, ``keep_alive_requests``,
    ``concurrency``, ``document_length_bytes``, ``total_transferred_bytes``,
    ``html_transferred_bytes``, ``latency_mean_ms`` ("Time per request (mean)"),
    ``latency_mean_across_ms`` ("Time per request (mean, across all concurrent requests)"),
    ``longest_ms`` (the longest request, whole ms), ``latency_percentiles_ms`` (whole
    milliseconds, as ab prints them) and ``http_version`` (ab speaks HTTP/1.0)."""
    out: dict[str, Any] = {"tool": "ab"}

    def num(pattern: str, cast: Any = float) -> Any:
        m = re.search(pattern, text, re.M)
        return cast(m.group(1)) if m else None

    out["requests_per_s"] = num(r"Requests per second:\s+([0-9.]+)")
    if out["requests_per_s"] is None:
        raise LoadGenError(f"cannot parse ab output (no 'Requests per second'):\n{text[-2000:]}")
    out["duration_s"] = num(r"Time taken for tests:\s+([0-9.]+) seconds")
    out["requests"] = num(r"Complete requests:\s+(\d+)", int)
    out["failed"] = num(r"Failed requests:\s+(\d+)", int)
    out["non_2xx"] = num(r"Non-2xx responses:\s+(\d+)", int) or 0
    out["keep_alive_requests"] = num(r"Keep-Alive requests:\s+(\d+)", int) or 0
    out["latency_mean_ms"] = num(r"Time per request:\s+([0-9.]+) \[ms\] \(mean\)$")
    out["latency_mean_across_ms"] = num(r"Time per request:\s+([0-9.]+) \[ms\] \(mean, across all concurrent requests\)")
    out["concurrency"] = num(r"Concurrency Level:\s+(\d+)", int)
    out["document_length_bytes"] = num(r"Document Length:\s+(\d+) bytes", int)
    out["total_transferred_bytes"] = num(r"Total transferred:\s+(\d+) bytes", int)
    out["html_transferred_bytes"] = num(r"HTML transferred:\s+(\d+) bytes", int)
    kinds = re.search(r"\(Connect: (\d+), Receive: (\d+), Length: (\d+), Exceptions: (\d+)\)", text)
    out["failed_by_kind"] = ({k: int(v) for k, v in zip(("connect", "receive", "length", "exceptions"), kinds.groups())}
                             if kinds else {})
    out["longest_ms"] = num(r"^\s*100%\s+(\d+) \(longest request\)", float)
    out["http_version"] = "1.0"
    pct = {}
    if "Percentage of the requests" in text:
        for pm in re.finditer(r"^\s*(\d+)%\s+(\d+)", text.split("Percentage of the requests", 1)[1], re.M):
            pct[pm.group(1)] = float(pm.group(2))
    out["latency_percentiles_ms"] = pct
    return out
