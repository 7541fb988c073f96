"""bombardier v1.2.6, the load tool of study 02 (seed 001, "Iris vs Kestrel"): build it, run
the seed's closed-loop shape, parse its JSON report.

The seed ran ``bombardier -c 125 -n 500000 http://localhost:5000/api/values/5``: 125
keep-alive connections, each sending its next request as soon as the previous answer
arrives, until 500,000 requests are done. :func:`run_bombardier` runs that shape (or a
duration instead of a count) against any loopback URL, pinned to the client's CPUs, and
returns the report as the other peers do::

    from benchlib.loadgen.peers.bombardier import run_bombardier
    res = run_bombardier("http://127.0.0.1:8080/api/values/5", connections=125, requests=50_000, cpus=[0])
    res["requests_per_s"], res["latency_percentiles_ms"]["99"], res["reqs_per_s_sampled"]["mean"]

bombardier's own "Reqs/sec" row (what the seed reports) is the mean, standard deviation and
maximum of request rates it samples every 20 ms (``reqs_per_s_sampled``); ``requests_per_s``
is the requests completed over the test's time, as every other peer reports it.

bombardier is not packaged for Debian: :func:`ensure_bombardier` builds it once with
``go install -ldflags "-X main.version=v1.2.6" github.com/codesenberg/bombardier@v1.2.6``
(``GOBIN`` in ``$BENCHLIB_CACHE/tools/``, outside the clone; about 10-60 s cold) unless
``$BENCHLIB_BOMBARDIER`` or a ``bombardier`` on ``PATH`` already reports v1.2.6. The seed's
bombardier (1.1, 2017) is not on the Go module proxy; v1.2.6 (2023-04-29) is the newest
release and prints the same report. Its default client is fasthttp, as 1.1's was.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchlib.core import settings
from benchlib.core.errors import LoadGenError, ParameterError
from benchlib.loadgen.peers.common import check_url, ensure_go_tool, run_tool, tool_version_line

__all__ = [
    "BOMBARDIER_MODULE",
    "BOMBARDIER_VERSION",
    "bombardier_command",
    "bombardier_version",
    "ensure_bombardier",
    "parse_bombardier",
    "run_bombardier",
]

BOMBARDIER_MODULE = "github.com/codesenberg/bombardier"
BOMBARDIER_VERSION = "v1.2.6"
#: The percentiles bombardier reports (its JSON keys).
PERCENTILES = ("50", "75", "90", "95", "99")
_STATUS_KEYS = (("1xx", "req1xx"), ("2xx", "req2xx"), ("3xx", "req3xx"), ("4xx", "req4xx"), ("5xx", "req5xx"),
                ("others", "others"))
_CLIENTS = ("fasthttp", "http1", "http2")


def bombardier_version(binary: str | os.PathLike[str]) -> str | None:
    """The ``--version`` line of ``binary`` (e.g. ``bombardier version v1.2.6 linux/amd64``), or ``None``."""
    return tool_version_line([str(binary), "--version"])


def _is_pinned(binary: str | os.PathLike[str]) -> bool:
    v = bombardier_version(binary)
    return v is not None and v.split()[:3] == ["bombardier", "version", BOMBARDIER_VERSION]


def ensure_bombardier(*, build: bool = True, timeout_s: float = 1800.0) -> Path:
    """The path of a bombardier v1.2.6 binary, building it into the cache if needed.

    Looks at ``$BENCHLIB_BOMBARDIER``, then the cache
    (``$BENCHLIB_CACHE/tools/bombardier-v1.2.6/bombardier``), then ``bombardier`` on
    ``PATH``; any of them must report v1.2.6 (``bombardier --version``; a build without the
    version linked in reports "unspecified" and is not taken). Otherwise, with ``build``,
    ``go install``s it with the version linked in (one build at a time, under a lock; see
    :func:`benchlib.loadgen.peers.common.ensure_go_tool`).

    Raises
    ------
    ParameterError     ``$BENCHLIB_BOMBARDIER`` names a file that is not bombardier v1.2.6.
    ToolchainMissing   no bombardier v1.2.6 and no ``go`` to build it (or ``build=False``).
    BuildError         ``go install`` failed (its output's tail attached).
    """
    return ensure_go_tool(name="bombardier", module=BOMBARDIER_MODULE, version=BOMBARDIER_VERSION,
                          setting=settings.BOMBARDIER, describe=bombardier_version, is_pinned=_is_pinned,
                          ldflags=f"-X main.version={BOMBARDIER_VERSION}", build=build, timeout_s=timeout_s)


def bombardier_command(
    binary: str | os.PathLike[str],
    url: str,
    *,
    connections: int = 125,
    requests: int | None = None,
    duration_s: float | None = None,
    timeout_s: float = 2.0,
    method: str = "GET",
    headers: Sequence[tuple[str, str]] = (),
    client: str = "fasthttp",
) -> list[str]:
    """``bombardier -c N (-n R | -d Ds) -t Ts -l -o json -p r URL``: the JSON report only.

    Parameters
    ----------
    connections: concurrent keep-alive connections (the seed: 125).
    requests: requests to complete (the seed: 500,000); or
    duration_s: the test's length in seconds, at least 1 (exactly one of the two).
    timeout_s: bombardier's per-request socket timeout (its default, 2 s).
    client: ``fasthttp`` (bombardier's default, as in the seed), ``http1`` or ``http2`` (net/http).
    """
    if not isinstance(connections, int) or connections < 1:
        raise ParameterError(f"bombardier connections must be a positive integer, got {connections!r}")
    if (requests is None) == (duration_s is None):
        raise ParameterError("bombardier needs exactly one of requests (a count, like the seed's -n 500000) "
                             f"and duration_s; got requests={requests!r}, duration_s={duration_s!r}")
    if requests is not None and (not isinstance(requests, int) or requests < 1):
        raise ParameterError(f"bombardier requests must be a positive integer, got {requests!r}")
    if duration_s is not None and not duration_s >= 1:
        raise ParameterError(f"bombardier refuses tests shorter than 1 s (duration_s >= 1), got {duration_s!r}")
    if not timeout_s > 0:
        raise ParameterError(f"bombardier timeout_s must be positive, got {timeout_s!r}")
    if client not in _CLIENTS:
        raise ParameterError(f"unknown bombardier client {client!r}; valid: {', '.join(_CLIENTS)}")
    cmd = [str(binary), "-c", str(connections)]
    cmd += ["-n", str(requests)] if requests is not None else ["-d", f"{duration_s * 1000:g}ms"]
    cmd += ["-t", f"{timeout_s * 1000:g}ms", "-l", "-o", "json", "-p", "r", "-m", method.upper()]
    for k, v in headers:
        cmd += ["-H", f"{k}: {v}"]
    if client != "fasthttp":
        cmd.append(f"--{client}")
    return cmd + [url]


def _stats(d: Mapping[str, Any], scale: float) -> dict[str, float]:
    return {k: float(d[k]) * scale for k in ("mean", "stddev", "max")}


def parse_bombardier(report: str | Mapping[str, Any]) -> dict[str, Any]:
    """Parse bombardier's JSON report (``-o json -p r``; a string or the decoded document).

    Returns
    -------
    dict with ``tool`` ("bombardier"), ``client``, ``connections``, ``method``, ``url``,
    ``test_type`` ("number-of-requests" or "timed"), ``requests_planned`` or
    ``duration_planned_s``, ``duration_s`` (bombardier's time taken), ``requests`` (responses
    and failures counted), ``requests_per_s`` (``requests / duration_s``),
    ``status_counts`` (``1xx`` ... ``5xx`` and ``others``: failed requests, no status),
    ``errors`` (description -> count; empty when none), ``non_2xx`` (everything but 2xx),
    ``latency_avg_ms``, ``latency_stdev_ms``, ``latency_max_ms``, ``latency_percentiles_ms``
    (``"50"``, ``"75"``, ``"90"``, ``"95"``, ``"99"``; bombardier records latencies in whole
    microseconds), ``reqs_per_s_sampled`` (``mean``, ``stddev``, ``max`` and
    ``percentiles`` of the 20-ms request-rate samples: the seed's "Reqs/sec" row),
    ``bytes_read``, ``bytes_written`` and ``throughput_bytes_per_s`` (read + written over
    the time taken: the seed's "Throughput" row, which bombardier prints in MiB/s).

    Raises
    ------
    LoadGenError  when the text is not a bombardier JSON report.
    """
    try:
        doc = json.loads(report) if isinstance(report, str) else report
        spec, result = doc["spec"], doc["result"]
        status = {name: int(result[key]) for name, key in _STATUS_KEYS}
        took = float(result["timeTakenSeconds"])
        lat = result["latency"]
        rps = result["rps"]
        requests = sum(status.values())
        out: dict[str, Any] = {
            "tool": "bombardier",
            "client": spec.get("client", "net/http"),
            "connections": int(spec["numberOfConnections"]),
            "method": spec.get("method", "GET"),
            "url": spec.get("url"),
            "test_type": spec.get("testType"),
            "duration_s": took,
            "requests": requests,
            "requests_per_s": requests / took if took > 0 else 0.0,
            "status_counts": status,
            "non_2xx": requests - status["2xx"],
            "errors": {str(e["description"]): int(e["count"]) for e in result.get("errors", [])},
            "latency_avg_ms": float(lat["mean"]) / 1e3,
            "latency_stdev_ms": float(lat["stddev"]) / 1e3,
            "latency_max_ms": float(lat["max"]) / 1e3,
            "latency_percentiles_ms": {k: float(v) / 1e3 for k, v in lat.get("percentiles", {}).items()},
            "reqs_per_s_sampled": {**_stats(rps, 1.0),
                                   "percentiles": {k: float(v) for k, v in rps.get("percentiles", {}).items()}},
            "bytes_read": int(result["bytesRead"]),
            "bytes_written": int(result["bytesWritten"]),
            "throughput_bytes_per_s": (int(result["bytesRead"]) + int(result["bytesWritten"])) / took
            if took > 0 else 0.0,
        }
        if "numberOfRequests" in spec:
            out["requests_planned"] = int(spec["numberOfRequests"])
        if "testDurationSeconds" in spec:
            out["duration_planned_s"] = float(spec["testDurationSeconds"])
    except (ValueError, KeyError, TypeError) as exc:
        text = report if isinstance(report, str) else json.dumps(report, default=str)
        raise LoadGenError(f"cannot parse bombardier's JSON report ({type(exc).__name__}: {exc}):\n"
                           f"{text[-2000:]}") from None
    return out


def run_bombardier(
    url: str,
    *,
    connections: int = 125,
    requests: int | None = None,
    duration_s: float | None = None,
    cpus: Sequence[int] | None = None,
    timeout_s: float = 2.0,
    method: str = "GET",
    headers: Sequence[tuple[str, str]] = (),
    client: str = "fasthttp",
    binary: str | os.PathLike[str] | None = None,
    max_wall_s: float | None = None,
) -> dict[str, Any]:
    """Run bombardier against ``url`` pinned with ``taskset`` to ``cpus``; return
    :func:`parse_bombardier`'s dict plus ``command``, ``bombardier_version``, ``wall_s``,
    ``cpu_s`` and ``cpu_fraction`` (bombardier's own CPU use, from ``wait4``) and ``stdout``.

    Exactly one of ``requests`` (the seed's ``-n``) and ``duration_s`` (``-d``).
    ``max_wall_s`` bounds the run (default: ``duration_s + 120`` s, or 1,800 s for a count);
    a run past it is killed and raises.

    Raises
    ------
    LoadSpecError     for a non-loopback URL.
    ParameterError    for a bad connection count, request count, duration or client.
    ToolchainMissing  no bombardier v1.2.6 and no Go to build it.
    LoadGenError      bombardier failed, ran too long, or printed no report.
    """
    check_url(url)
    exe = Path(binary) if binary is not None else None
    cmd = bombardier_command(exe or "bombardier", url, connections=connections, requests=requests,
                             duration_s=duration_s, timeout_s=timeout_s, method=method, headers=headers,
                             client=client)
    if exe is None:
        exe = ensure_bombardier()
        cmd[0] = str(exe)
    limit = max_wall_s if max_wall_s is not None else (duration_s + 120 if duration_s is not None else 1800.0)
    run = run_tool(cmd, cpus=cpus, timeout_s=limit)
    out = parse_bombardier(run["stdout"])
    out.update({"command": run["command"], "bombardier_version": bombardier_version(exe), "wall_s": run["wall_s"],
                "cpu_s": run["cpu_s"], "cpu_fraction": run["cpu_fraction"], "stdout": run["stdout"]})
    return out
