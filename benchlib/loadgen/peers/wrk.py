"""wrk: run it pinned to the client's CPUs and parse its report.

Usable from a notebook::

    from benchlib.loadgen.peers.wrk import run_wrk
    res = run_wrk("http://127.0.0.1:8080/", threads=2, connections=100, duration_s=30, cpus=[0])
    res["requests_per_s"], res["latency_percentiles_ms"]["99"]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from benchlib.core.errors import ParameterError
from benchlib.loadgen.peers.common import check_url, parse_count, parse_size_bytes, parse_time_ms, run_tool

__all__ = ["run_wrk", "parse_wrk", "wrk_command"]


def wrk_command(
    url: str,
    *,
    threads: int = 2,
    connections: int = 100,
    duration_s: float = 30,
    latency: bool = True,
    timeout_s: float | None = None,
    headers: Sequence[tuple[str, str]] = (),
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The ``wrk`` argument list, e.g. ``wrk -t2 -c100 -d30s --latency URL``."""
    if threads < 1 or connections < threads:
        raise ParameterError(f"wrk needs threads >= 1 and connections >= threads, got -t{threads} -c{connections}")
    if duration_s < 1 or float(duration_s) != int(duration_s):
        raise ParameterError(f"wrk takes a whole number of seconds (-d{duration_s:g}s is refused by wrk); "
                             f"got duration_s={duration_s!r}")
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration_s:g}s"]
    if latency:
        cmd.append("--latency")
    if timeout_s is not None:
        cmd.append(f"--timeout={timeout_s:g}s")
    for k, v in headers:
        cmd += ["-H", f"{k}: {v}"]
    return cmd + list(extra_args) + [url]


def run_wrk(
    url: str,
    *,
    threads: int = 2,
    connections: int = 100,
    duration_s: float = 30,
    latency: bool = True,
    cpus: Sequence[int] | None = None,
    timeout_s: float | None = None,
    headers: Sequence[tuple[str, str]] = (),
    extra_args: Sequence[str] = (),
) -> dict[str, Any]:
    """Run ``wrk -t{threads} -c{connections} -d{duration_s}s [--latency] URL``, pinned with
    ``taskset`` to ``cpus``, and return :func:`parse_wrk`'s dict plus ``command``,
    ``wall_s``, ``cpu_s`` and ``cpu_fraction`` (wrk's own CPU use) and ``stdout``.

    Raises
    ------
    benchlib.core.errors.LoadSpecError      for a non-loopback URL (see ``benchlib.loadgen.preflight``).
    benchlib.core.errors.ToolchainMissing   when wrk is not installed (``apt-get install wrk``).
    benchlib.core.errors.LoadGenError       when wrk fails or its output cannot be parsed.
    """
    check_url(url)
    cmd = wrk_command(url, threads=threads, connections=connections, duration_s=duration_s, latency=latency,
                      timeout_s=timeout_s, headers=headers, extra_args=extra_args)
    run = run_tool(cmd, cpus=cpus, timeout_s=duration_s + 60)
    out = parse_wrk(run["stdout"])
    out.update({"command": run["command"], "wall_s": run["wall_s"], "cpu_s": run["cpu_s"],
                "cpu_fraction": run["cpu_fraction"], "stdout": run["stdout"]})
    return out


_NUM = r"([0-9.]+)"


def parse_wrk(text: str) -> dict[str, Any]:
    """Parse wrk's report (with or without ``--latency``).

    Returns
    -------
    dict with ``tool`` ("wrk"), ``threads``, ``connections``, ``requests_per_s``,
    ``transfer_bytes_per_s``, ``latency_avg_ms``, ``latency_stdev_ms``, ``latency_max_ms``,
    ``latency_within_stdev_pct``, ``latency_percentiles_ms`` ({"50", "75", "90", "99"}; empty
    without ``--latency``), ``req_per_thread`` (avg/stdev/max), ``requests``, ``duration_s``,
    ``bytes_read``, ``errors`` (``connect``, ``read``, ``write``, ``timeout``, ``non_2xx_3xx``).

    Raises
    ------
    benchlib.core.errors.LoadGenError  when the text is not a wrk report.
    """
    from benchlib.core.errors import LoadGenError

    out: dict[str, Any] = {"tool": "wrk"}
    try:
        m = re.search(r"(\d+) threads and (\d+) connections", text)
        if m:
            out["threads"], out["connections"] = int(m.group(1)), int(m.group(2))
        m = re.search(r"^\s*Latency\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)%", text, re.M)
        if not m:
            raise ValueError("no 'Latency' line")
        out["latency_avg_ms"] = parse_time_ms(m.group(1))
        out["latency_stdev_ms"] = parse_time_ms(m.group(2))
        out["latency_max_ms"] = parse_time_ms(m.group(3))
        out["latency_within_stdev_pct"] = float(m.group(4))
        m = re.search(r"^\s*Req/Sec\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)%", text, re.M)
        if m:
            out["req_per_thread"] = {"avg": parse_count(m.group(1)), "stdev": parse_count(m.group(2)),
                                     "max": parse_count(m.group(3)), "within_stdev_pct": float(m.group(4))}
        pct: dict[str, float] = {}
        if "Latency Distribution" in text:
            block = text.split("Latency Distribution", 1)[1]
            for pm in re.finditer(r"^\s*(\d+(?:\.\d+)?)%\s+(\S+)\s*$", block, re.M):
                pct[pm.group(1).rstrip("0").rstrip(".") if "." in pm.group(1) else pm.group(1)] = parse_time_ms(pm.group(2))
        out["latency_percentiles_ms"] = pct
        m = re.search(r"(\d+) requests in ([0-9.]+\w+), ([0-9.]+\w+) read", text)
        if not m:
            raise ValueError("no 'requests in' line")
        out["requests"] = int(m.group(1))
        out["duration_s"] = parse_time_ms(m.group(2)) / 1e3
        out["bytes_read"] = parse_size_bytes(m.group(3))
        m = re.search(r"Requests/sec:\s+" + _NUM, text)
        if not m:
            raise ValueError("no 'Requests/sec' line")
        out["requests_per_s"] = float(m.group(1))
        m = re.search(r"Transfer/sec:\s+(\S+)", text)
        out["transfer_bytes_per_s"] = parse_size_bytes(m.group(1)) if m else None
        errors = {"connect": 0, "read": 0, "write": 0, "timeout": 0, "non_2xx_3xx": 0}
        m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
        if m:
            errors.update(connect=int(m.group(1)), read=int(m.group(2)), write=int(m.group(3)), timeout=int(m.group(4)))
        m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
        if m:
            errors["non_2xx_3xx"] = int(m.group(1))
        out["errors"] = errors
    except ValueError as exc:
        raise LoadGenError(f"cannot parse wrk output ({exc}):\n{text[-2000:]}") from None
    return out
