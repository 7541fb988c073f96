"""ghz v0.120.0, the gRPC load tool: build it, run unary calls against a loopback gRPC
server, parse its JSON report.

ghz sends ``concurrency`` calls at a time over ``connections`` HTTP/2 connections (the
calls spread evenly over them: ``concurrency / connections`` streams per connection), each
worker sending its next call as soon as the previous one returns (a closed loop), for
``requests`` calls or ``duration_s`` seconds; ``rps`` caps the rate (a constant schedule).
:func:`run_ghz` runs it against a URL of the form
``http://127.0.0.1:PORT/package.Service/Method`` (a gRPC endpoint's path, as the runner
builds it for a cross-check), with the request message as bytes and the ``.proto`` that
declares the method::

    from benchlib.loadgen.peers.ghz import run_ghz
    res = run_ghz("http://127.0.0.1:50051/SmallPayloadService/SendSmallPayload",
                  proto="payloads.proto", body=b"\\x0a\\x0cSmallRequest",
                  concurrency=50, connections=1, duration_s=5, cpus=[0])
    res["requests_per_s"], res["latency_percentiles_ms"]["99"], res["status_counts"]

ghz is not packaged for Debian: :func:`ensure_ghz` builds it once with ``go install
-ldflags "-X main.version=v0.120.0" github.com/bojand/ghz/cmd/ghz@v0.120.0`` (``GOBIN`` in
``$BENCHLIB_CACHE/tools/``, outside the clone; 10-60 s cold) unless ``$BENCHLIB_GHZ`` or a
``ghz`` on ``PATH`` already reports v0.120.0.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchlib.core import settings
from benchlib.core.errors import LoadGenError, ParameterError
from benchlib.loadgen.peers.common import check_url, ensure_go_tool, run_tool, tool_version_line

__all__ = ["GHZ_MODULE", "GHZ_VERSION", "ensure_ghz", "ghz_command", "ghz_version", "parse_ghz", "run_ghz"]

GHZ_MODULE = "github.com/bojand/ghz/cmd/ghz"
GHZ_VERSION = "v0.120.0"


def ghz_version(binary: str | os.PathLike[str]) -> str | None:
    """The ``--version`` line of ``binary`` (e.g. ``v0.120.0``), or ``None``."""
    return tool_version_line([str(binary), "--version"])


def _is_pinned(binary: str | os.PathLike[str]) -> bool:
    return (ghz_version(binary) or "").strip() == GHZ_VERSION


def ensure_ghz(*, build: bool = True, timeout_s: float = 1800.0) -> Path:
    """The path of a ghz v0.120.0 binary, building it into the cache if needed
    (``$BENCHLIB_GHZ``, then the cache, then ``ghz`` on ``PATH``; see
    :func:`benchlib.loadgen.peers.common.ensure_go_tool`).

    Raises
    ------
    ParameterError     ``$BENCHLIB_GHZ`` names a file that is not ghz v0.120.0.
    ToolchainMissing   no ghz v0.120.0 and no ``go`` to build it (or ``build=False``).
    BuildError         ``go install`` failed (its output's tail attached).
    """
    return ensure_go_tool(name="ghz", module=GHZ_MODULE, version=GHZ_VERSION, setting=settings.GHZ,
                          describe=ghz_version, is_pinned=_is_pinned, ldflags=f"-X main.version={GHZ_VERSION}",
                          build=build, timeout_s=timeout_s)


def split_grpc_url(url: str) -> tuple[str, str]:
    """``http://127.0.0.1:50051/pkg.Service/Method`` -> (``127.0.0.1:50051``,
    ``pkg.Service/Method``); the loopback rule applies."""
    check_url(url)
    parts = urlsplit(url)
    method = parts.path.strip("/")
    if method.count("/") != 1 or not all(method.split("/")):
        raise ParameterError(f"ghz needs a gRPC method URL http://HOST:PORT/package.Service/Method; got {url!r}")
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    return f"{host}:{parts.port or 80}", method


def ghz_command(
    binary: str | os.PathLike[str],
    target: str,
    call: str,
    *,
    proto: str | os.PathLike[str],
    binary_file: str | os.PathLike[str],
    concurrency: int = 50,
    connections: int = 1,
    requests: int | None = None,
    duration_s: float | None = None,
    rps: float = 0,
    timeout_s: float = 20.0,
    metadata: Mapping[str, str] | None = None,
) -> list[str]:
    """``ghz --insecure --proto P --call C -B FILE -c N --connections K (-n R | -z Ds) -O json HOST:PORT``.

    Parameters
    ----------
    concurrency: calls in flight at once (ghz's workers); at least ``connections``.
    connections: HTTP/2 connections the calls spread over.
    requests: calls to make; or duration_s: seconds (exactly one of the two).
    rps: a rate cap in calls/s (0: none, a closed loop).
    timeout_s: per call.
    """
    for name, v in (("concurrency", concurrency), ("connections", connections)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ParameterError(f"ghz {name} must be a positive integer, got {v!r}")
    if concurrency < connections:
        raise ParameterError(f"ghz concurrency ({concurrency}) must be at least connections ({connections}): "
                             "ghz spreads the concurrent calls over the connections")
    if (requests is None) == (duration_s is None):
        raise ParameterError("ghz needs exactly one of requests (a count) and duration_s; "
                             f"got requests={requests!r}, duration_s={duration_s!r}")
    if requests is not None and (isinstance(requests, bool) or not isinstance(requests, int) or requests < 1):
        raise ParameterError(f"ghz requests must be a positive integer, got {requests!r}")
    if duration_s is not None and not duration_s > 0:
        raise ParameterError(f"ghz duration_s must be positive, got {duration_s!r}")
    if not rps >= 0 or not timeout_s > 0:
        raise ParameterError(f"ghz rps must be >= 0 and timeout_s > 0, got rps={rps!r}, timeout_s={timeout_s!r}")
    cmd = [str(binary), "--insecure", "--proto", str(proto), "--call", call, "-B", str(binary_file),
           "-c", str(concurrency), "--connections", str(connections), "-t", f"{timeout_s * 1000:g}ms"]
    if requests is not None:
        cmd += ["-n", str(requests)]
    else:
        # calls still in flight when the time is up are left out (not counted as errors)
        cmd += ["-z", f"{duration_s * 1000:g}ms", "--duration-stop", "ignore"]
    if rps:
        cmd += ["-r", f"{rps:g}"]
    if metadata:
        cmd += ["-m", json.dumps(dict(metadata))]
    return cmd + ["-O", "json", target]


def parse_ghz(report: str | Mapping[str, Any]) -> dict[str, Any]:
    """Parse ghz's JSON report (``-O json``; a string or the decoded document).

    Returns
    -------
    dict with ``tool`` ("ghz"), ``call``, ``concurrency``, ``connections``, ``end_reason``,
    ``duration_s`` (ghz's total time), ``requests`` (calls counted), ``requests_per_s``
    (ghz's ``rps``), ``status_counts`` (gRPC status name -> calls), ``non_ok`` (calls
    whose status is not OK), ``errors`` (error text -> count), ``latency_avg_ms``,
    ``latency_min_ms``, ``latency_max_ms``, ``latency_percentiles_ms`` (``"10"`` ...
    ``"99"``). The per-call ``details`` are dropped.

    Raises
    ------
    LoadGenError  when the text is not a ghz JSON report.
    """
    try:
        doc = json.loads(report) if isinstance(report, str) else report
        opts = doc.get("options") or {}
        status = {str(k): int(v) for k, v in (doc.get("statusCodeDistribution") or {}).items()}
        out: dict[str, Any] = {
            "tool": "ghz",
            "call": opts.get("call"),
            "concurrency": opts.get("concurrency"),
            "connections": opts.get("connections"),
            "end_reason": doc.get("endReason"),
            "duration_s": float(doc["total"]) / 1e9,
            "requests": int(doc["count"]),
            "requests_per_s": float(doc["rps"]),
            "status_counts": status,
            "non_ok": sum(n for k, n in status.items() if k != "OK"),
            "errors": {str(k): int(v) for k, v in (doc.get("errorDistribution") or {}).items()},
            "latency_avg_ms": float(doc["average"]) / 1e6,
            "latency_min_ms": float(doc["fastest"]) / 1e6,
            "latency_max_ms": float(doc["slowest"]) / 1e6,
            "latency_percentiles_ms": {f"{float(p['percentage']):g}": float(p["latency"]) / 1e6
                                       for p in (doc.get("latencyDistribution") or [])},
        }
    except (ValueError, KeyError, TypeError) as exc:
        text = report if isinstance(report, str) else json.dumps(report, default=str)
        raise LoadGenError(f"cannot parse ghz's JSON report ({type(exc).__name__}: {exc}):\n{text[-2000:]}") from None
    return out


def run_ghz(
    url: str,
    *,
    proto: str | os.PathLike[str] | None = None,
    body: bytes = b"",
    concurrency: int = 50,
    connections: int = 1,
    requests: int | None = None,
    duration_s: float | None = None,
    rps: float = 0,
    cpus: Sequence[int] | None = None,
    timeout_s: float = 20.0,
    headers: Sequence[tuple[str, str]] = (),
    binary: str | os.PathLike[str] | None = None,
    max_wall_s: float | None = None,
) -> dict[str, Any]:
    """Run ghz against the gRPC method ``url`` (``http://HOST:PORT/package.Service/Method``)
    pinned with ``taskset`` to ``cpus``; return :func:`parse_ghz`'s dict plus ``command``,
    ``ghz_version``, ``wall_s``, ``cpu_s`` and ``cpu_fraction`` (ghz's own CPU).

    ``proto``: the ``.proto`` declaring the method (ghz needs it; the runner passes the
    endpoint's). ``body``: the serialized request message. ``headers``: the call's metadata.
    Exactly one of ``requests`` and ``duration_s``. ``max_wall_s`` bounds the run (default
    ``duration_s + 120`` s, or 1,800 s for a count).

    Raises
    ------
    LoadSpecError     for a non-loopback URL.
    ParameterError    for a bad URL, no proto, or a bad count, duration or concurrency.
    ToolchainMissing  no ghz v0.120.0 and no Go to build it.
    LoadGenError      ghz failed, ran too long, or printed no report.
    """
    target, call = split_grpc_url(url)
    if proto is None or not Path(proto).is_file():
        raise ParameterError(f"ghz needs the .proto file that declares {call} (proto=...); got {proto!r}")
    with tempfile.TemporaryDirectory(prefix="benchlib-ghz-") as tmp:
        req = Path(tmp) / "request.bin"
        req.write_bytes(bytes(body))
        cmd = ghz_command(binary or "ghz", target, call, proto=Path(proto).absolute(), binary_file=req,
                          concurrency=concurrency, connections=connections, requests=requests,
                          duration_s=duration_s, rps=rps, timeout_s=timeout_s,
                          metadata={k.lower(): v for k, v in headers})
        exe = Path(binary) if binary is not None else ensure_ghz()
        cmd[0] = str(exe)
        limit = max_wall_s if max_wall_s is not None else (duration_s + 120 if duration_s is not None else 1800.0)
        run = run_tool(cmd, cpus=cpus, timeout_s=limit)
    out = parse_ghz(run["stdout"])
    out.update({"command": run["command"], "ghz_version": ghz_version(exe), "wall_s": run["wall_s"],
                "cpu_s": run["cpu_s"], "cpu_fraction": run["cpu_fraction"]})
    return out
