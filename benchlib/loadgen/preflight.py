"""Refusing a LoadSpec before any traffic: :func:`validate`."""

from __future__ import annotations

import ipaddress
import math
import os
import resource
import socket
from collections.abc import Sequence

from benchlib.core import settings
from benchlib.core.errors import LoadSpecError
from benchlib.core.model import LoadSpec, Target

__all__ = ["validate", "check_client_cpus", "fd_limit", "MAX_RATE_PER_WORKER_RPS"]

#: Open-model rates above this per worker process are refused: far beyond what one worker
#: can send, so the trial could only measure the client.
MAX_RATE_PER_WORKER_RPS = 500_000.0

#: File descriptors a worker needs besides its connections (pipes, stdio, libraries).
FD_RESERVE = 64


def fd_limit() -> int:
    """The open-file limit a worker can raise itself to (the hard ``RLIMIT_NOFILE``)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return hard if hard != resource.RLIM_INFINITY else 1 << 20


def _is_loopback(host: str) -> bool:
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise LoadSpecError(f"target host {host!r} does not resolve: {exc}") from None
    return all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos)


def check_client_cpus(client_cpus: Sequence[int] | None) -> list[int] | None:
    """Check ``client_cpus`` against the CPUs this process may use; return them as a list."""
    if client_cpus is None:
        return None
    cpus = list(client_cpus)
    allowed = sorted(os.sched_getaffinity(0))
    if not cpus:
        raise LoadSpecError(f"client_cpus is empty; valid CPUs: {allowed}")
    bad = [c for c in cpus if not isinstance(c, int) or c not in allowed]
    if bad:
        raise LoadSpecError(f"client_cpus {bad} are not available to this process; valid CPUs: {allowed}")
    return cpus


def validate(spec: LoadSpec, target: Target, *, probe: bool = True) -> None:
    """Refuse a spec that cannot run, before any traffic.

    Checks the rates (positive, finite, not beyond what the workers can send), the
    in-flight limit against the file-descriptor limit, the timeouts, the target (a port in
    range, a loopback address unless ``$BENCHLIB_ALLOW_REMOTE_TARGET`` is ``1``) and, with ``probe``,
    that something accepts TCP connections there.

    Raises
    ------
    benchlib.core.errors.LoadSpecError
        With the reason and, where there are any, the valid choices.
    """
    if not isinstance(spec, LoadSpec):
        raise LoadSpecError(f"spec must be a benchlib.core.model.LoadSpec, got {type(spec).__name__}")
    if not isinstance(target, Target):
        raise LoadSpecError(f"target must be a benchlib.core.model.Target, got {type(target).__name__}")
    if spec.model == "open":
        rates = [s.rate_rps for s in spec.stages] if spec.stages else [spec.rate_rps]
        for r in rates:
            if r is None or not (r > 0 and math.isfinite(r)):
                raise LoadSpecError(f"open-model rate must be a positive finite number of requests/s, got {r!r}")
            if r / spec.workers > MAX_RATE_PER_WORKER_RPS:
                raise LoadSpecError(
                    f"rate {r:g} req/s over {spec.workers} worker(s) is {r / spec.workers:,.0f} req/s per worker, "
                    f"above the {MAX_RATE_PER_WORKER_RPS:,.0f} one worker process can send; add workers"
                )
        if spec.stages:
            expected = sum(s.rate_rps * s.duration_s for s in spec.stages)
        else:
            expected = (spec.rate_rps or 0.0) * (spec.duration_s or 0.0)
        if expected < 1:
            raise LoadSpecError(
                f"the open-model schedule expects {expected:.3g} arrivals in its measured phase; "
                "raise rate_rps or duration_s"
            )
    per_worker = -(-spec.connections // spec.workers)
    limit = fd_limit()
    if per_worker + FD_RESERVE > limit:
        raise LoadSpecError(
            f"{spec.connections} connections over {spec.workers} worker(s) need {per_worker + FD_RESERVE} file descriptors "
            f"per worker, above this machine's limit of {limit} (ulimit -Hn); lower connections or add workers"
        )
    if not (0 < target.port < 65536):
        raise LoadSpecError(f"target port must be 1..65535, got {target.port!r}")
    if not _is_loopback(target.host) and not settings.ALLOW_REMOTE_TARGET.value():
        raise LoadSpecError(
            f"target host {target.host!r} is not a loopback address (127.0.0.0/8 or ::1); "
            f"set {settings.ALLOW_REMOTE_TARGET.name}=1 to load a machine of your own"
        )
    if not spec.keep_alive and spec.connections > 20000:
        raise LoadSpecError("a new connection per request with more than 20,000 concurrent connections "
                            "exhausts loopback ephemeral ports; lower connections")
    if probe:
        try:
            with socket.create_connection((target.host, target.port), timeout=min(spec.connect_timeout_s, 5.0)):
                pass
        except OSError as exc:
            raise LoadSpecError(
                f"target {target.base_url} is unreachable ({type(exc).__name__}: {exc}); is the service running?"
            ) from None
