"""h2load (nghttp2): run it pinned (HTTP/1.1 with ``--h1``) and parse its report.

It sends ``GET`` requests, or ``POST`` ones with a body (``-d FILE``: the runner passes an
endpoint's method, body and headers, so it can stand beside benchlib on a JSON endpoint
as ghz stands beside it on a gRPC method)::

    from benchlib.loadgen.peers.h2load import run_h2load
    res = run_h2load("http://127.0.0.1:8080/small", connections=1, duration_s=1, method="POST",
                     body=b'{"Message":"SmallRequest"}',
                     headers=(("Content-Type", "application/json; charset=utf-8"),), cpus=[0])
    res["requests_per_s"], res["latency_percentiles_ms"]["50"], res["status_counts"]

h2load prints only the minimum, maximum, mean and standard deviation of its request
times; with ``latencies=True`` (the default) it also writes every request's time to a
log file (``--log-file``, whole µs), from which the percentiles are computed (linear
interpolation, as the other tools report theirs).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from typing import Any

from benchlib.core.errors import LoadGenError, ParameterError
from benchlib.loadgen.peers.common import check_url, parse_time_ms, run_tool

__all__ = ["H2LOAD_METHODS", "PERCENTILES", "h2load_command", "parse_h2load", "parse_h2load_log", "run_h2load"]

#: The methods h2load sends: GET without a body, POST with one (``-d``).
H2LOAD_METHODS = ("GET", "POST")
#: The percentiles computed from the per-request log.
PERCENTILES = ("50", "75", "90", "95", "99", "99.9")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # a header name (RFC 9110 section 5.6.2)


def _check_request(method: str, body: bytes | None, headers: Sequence[tuple[str, str]]) -> str:
    """The method, upper-cased, after checking the request h2load is asked to send."""
    m = method.upper() if isinstance(method, str) else method
    if m not in H2LOAD_METHODS:
        raise ParameterError(f"h2load sends GET (no body) or POST (a body, -d); got method {method!r}; "
                             f"valid: {', '.join(H2LOAD_METHODS)}")
    if body is not None and not isinstance(body, bytes | bytearray):
        raise ParameterError(f"h2load body must be bytes, got {type(body).__name__}")
    if m == "GET" and body:
        raise ParameterError(f"h2load sends a body only with POST; got method GET and a {len(body)}-byte body")
    for pair in headers:
        if not (isinstance(pair, tuple | list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            raise ParameterError(f"h2load headers must be (name, value) pairs of strings, got {pair!r}")
        name, value = pair
        if not _TOKEN.fullmatch(name) or name.startswith(":"):
            raise ParameterError(f"h2load header name {name!r} is not a valid HTTP field name")
        if any(c in value for c in "\r\n\0"):
            raise ParameterError(f"h2load header {name!r}: its value holds CR, LF or NUL: {value!r}")
    return m


def h2load_command(url: str, *, connections: int = 50, duration_s: float = 10, threads: int = 1, h1: bool = True,
                   warmup_s: float = 0, method: str = "GET", body_file: str | None = None,
                   headers: Sequence[tuple[str, str]] = (), log_file: str | None = None,
                   extra_args: Sequence[str] = ()) -> list[str]:
    """``h2load [--h1] -t T -c C -D Dms [--warm-up-time Wms] [-d FILE] [-H 'k: v']...
    [--log-file F] URL``; durations in whole milliseconds (h2load refuses ``0.8``).
    ``method`` POST needs ``body_file`` (its bytes are the body; an empty file sends none)."""
    m = _check_request(method, None, headers)
    if not isinstance(threads, int) or not isinstance(connections, int) or threads < 1 or connections < threads:
        raise ParameterError(f"h2load needs threads >= 1 and connections >= threads, got -t{threads} -c{connections}")
    if not duration_s * 1000 >= 1:
        raise ParameterError(f"h2load duration_s must be at least 0.001 s, got {duration_s!r}")
    if (m == "POST") != (body_file is not None):
        raise ParameterError("h2load sends POST exactly when it has a body file (-d): method POST needs body_file, "
                             f"GET takes none; got method {m}, body_file={body_file!r}")
    cmd = ["h2load", "-t", str(threads), "-c", str(connections), "-D", f"{duration_s * 1000:.0f}ms"]
    if h1:
        cmd.append("--h1")
    if warmup_s:
        cmd += ["--warm-up-time", f"{warmup_s * 1000:.0f}ms"]  # h2load takes whole units: 300ms, not 0.3
    if body_file is not None:
        cmd += ["-d", body_file]
    for k, v in headers:
        cmd += ["-H", f"{k}: {v}"]
    if log_file is not None:
        cmd.append(f"--log-file={log_file}")
    return cmd + list(extra_args) + [url]


def run_h2load(url: str, *, connections: int = 50, duration_s: float = 10, threads: int = 1, h1: bool = True,
               warmup_s: float = 0, cpus: Sequence[int] | None = None, method: str = "GET",
               body: bytes | None = None, headers: Sequence[tuple[str, str]] = (), latencies: bool = True,
               extra_args: Sequence[str] = ()) -> dict[str, Any]:
    """Run h2load (:func:`h2load_command`) pinned to ``cpus``; ``body`` (bytes, with method
    POST) is written to a temporary file for ``-d``. Returns :func:`parse_h2load`'s dict plus
    ``method``, ``body_bytes``, ``command``, ``wall_s``, ``cpu_s``, ``cpu_fraction`` and
    ``stdout``; with ``latencies``, :func:`parse_h2load_log`'s percentiles of the per-request
    log (``latency_percentiles_ms``, ``logged``).

    Raises
    ------
    LoadSpecError     for a non-loopback URL.
    ParameterError    for a method other than GET/POST, a body with GET, a header that is not
        a (name, value) pair of valid strings, bad threads, connections or duration.
    ToolchainMissing  h2load is not installed (``apt-get install nghttp2-client``).
    LoadGenError      h2load failed or its output cannot be parsed.
    """
    check_url(url)
    m = _check_request(method, body, headers)
    if m == "POST" and body is None:
        body = b""
    with tempfile.TemporaryDirectory(prefix="benchlib-h2load-") as tmp:
        body_file = None
        if body is not None:
            body_file = os.path.join(tmp, "body")
            with open(body_file, "wb") as fh:
                fh.write(body)
        log_file = os.path.join(tmp, "requests.log") if latencies else None
        cmd = h2load_command(url, connections=connections, duration_s=duration_s, threads=threads, h1=h1,
                             warmup_s=warmup_s, method=m, body_file=body_file, headers=headers, log_file=log_file,
                             extra_args=extra_args)
        run = run_tool(cmd, cpus=cpus, timeout_s=duration_s + warmup_s + 60)
        out = parse_h2load(run["stdout"])
        if log_file is not None:
            with open(log_file, encoding="ascii", errors="replace") as fh:
                out.update(parse_h2load_log(fh.read()))
    out.update({k: run[k] for k in ("command", "wall_s", "cpu_s", "cpu_fraction", "stdout")})
    out.update(method=m, body_bytes=len(body or b""))
    return out


def parse_h2load_log(text: str) -> dict[str, Any]:
    """Parse h2load's per-request log (``--log-file``: start time µs, status, duration µs per
    line): ``logged`` (requests logged) and ``latency_percentiles_ms`` (:data:`PERCENTILES`,
    linear interpolation; empty when nothing was logged).

    Raises
    ------
    LoadGenError  a line that is not three tab-separated numbers.
    """
    import numpy as np

    durations = []
    for n, line in enumerate(text.splitlines(), 1):
        parts = line.split("\t")
        if len(parts) < 3 or not parts[2].strip().isdigit():
            raise LoadGenError(f"h2load's request log, line {n}, is not 'start<TAB>status<TAB>duration_us': {line!r}")
        durations.append(int(parts[2]))
    pct = {}
    if durations:
        values = np.percentile(np.asarray(durations, dtype=float), [float(p) for p in PERCENTILES])
        pct = {p: float(v) / 1e3 for p, v in zip(PERCENTILES, values, strict=True)}
    return {"logged": len(durations), "latency_percentiles_ms": pct}


def parse_h2load(text: str) -> dict[str, Any]:
    """Parse h2load's report: ``requests_per_s``, ``duration_s``, ``requests`` (succeeded),
    ``failed``, ``errored``, ``timeout``, ``status_counts`` (``2xx`` ... ``5xx``),
    ``non_2xx``, ``latency_min_ms``, ``latency_max_ms``, ``latency_avg_ms``,
    ``latency_stdev_ms`` ("time for request")."""
    out: dict[str, Any] = {"tool": "h2load"}
    m = re.search(r"finished in ([0-9.]+\w+), ([0-9.]+) req/s", text)
    if not m:
        raise LoadGenError(f"cannot parse h2load output (no 'finished in'):\n{text[-2000:]}")
    out["duration_s"] = parse_time_ms(m.group(1)) / 1e3
    out["requests_per_s"] = float(m.group(2))
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, "
                  r"(\d+) timeout", text)
    if m:
        out.update(requests=int(m.group(4)), failed=int(m.group(5)), errored=int(m.group(6)), timeout=int(m.group(7)))
    m = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text)
    if m:
        out["status_counts"] = {k: int(v) for k, v in zip(("2xx", "3xx", "4xx", "5xx"), m.groups(), strict=True)}
        out["non_2xx"] = sum(out["status_counts"].values()) - out["status_counts"]["2xx"]
    m = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", text)
    if m:
        out.update(latency_min_ms=parse_time_ms(m.group(1)), latency_max_ms=parse_time_ms(m.group(2)),
                   latency_avg_ms=parse_time_ms(m.group(3)), latency_stdev_ms=parse_time_ms(m.group(4)))
    return out
