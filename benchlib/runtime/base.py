"""The runtime interface: how a service under test is built, started, checked and stopped.

Two implementations, picked by name (:func:`benchlib.runtime.get_runtime`): ``local``
(processes, the default) and ``docker`` (containers through the Docker SDK).

A runtime's :meth:`Runtime.start` returns a :class:`ServiceHandle` only once the service is
healthy; on any failure it has already stopped what it started and raises
:class:`~benchlib.core.errors.ServiceStartError` with the log tail attached. A handle is a
context manager and is always stopped, also on errors and Ctrl-C.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from benchlib.core.errors import ServiceStartError
from benchlib.core.model import Limits
from benchlib.runtime.manifest import ResolvedService
from benchlib.runtime.ports import free_ports

__all__ = ["Prepared", "Runtime", "ServiceHandle", "StartOptions", "StopInfo", "handle_ports", "reset_service", "run_steps"]


@dataclass(frozen=True)
class Prepared:
    """A service built and ready to start.

    Attributes
    ----------
    service: the resolved manifest (one variant).
    build_dir: where the local build's outputs live (``None`` for Docker).
    image: the Docker image id (``None`` locally).
    built: ``True`` if this call built it, ``False`` if a cached build was reused.
    info: provenance of the build (toolchain versions, image id, build seconds, ...).
    """

    service: ResolvedService
    build_dir: Path | None = None
    image: str | None = None
    built: bool = False
    info: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StartOptions:
    """How to start one service instance.

    Attributes
    ----------
    port: TCP port to listen on (loopback).
    cpus: CPU ids the service is pinned to.
    limits: CPU quota and memory cap.
    log_sink: ``pipe`` | ``file`` | ``discard`` (see :class:`benchlib.core.model.Arm`).
    log_path: where the service's log is kept (pipe: the runtime writes it; file: the service does).
    env: extra environment variables.
    deps: handles of the services this one requires, by name (for ``{dep.NAME.port}``).
    run_id: labels containers and processes of one run (for clean-up).
    role: ``"service"`` (under test) or ``"dependency"`` (a database it needs); runtimes apply
        their default limits to services only.
    log_cap_bytes: bytes of the service's log kept per trial (head and tail; see :mod:`benchlib.runtime.logs`).
    ports: every port of a multi-process service (``[run] ports = N``), the first being
        ``port``; empty for a service with one port.
    backend: for a front (``role = "front"``), the running service it forwards to
        (``{backend.host}``, ``{backend.port}``, ``{backend.ports}``).
    """

    port: int
    cpus: tuple[int, ...]
    limits: Limits = Limits()
    log_sink: str = "pipe"
    log_path: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    deps: Mapping[str, ServiceHandle] = field(default_factory=dict)
    run_id: str = ""
    role: str = "service"
    log_cap_bytes: int = 16 * 2**20
    ports: tuple[int, ...] = ()
    backend: ServiceHandle | None = None

    @property
    def all_ports(self) -> tuple[int, ...]:
        """Every port the service listens on (``ports``, or just ``port``)."""
        return tuple(self.ports) or (self.port,)


@dataclass(frozen=True)
class StopInfo:
    """How a service ended: exit code (``None`` if killed by a signal we sent),
    ``oom_killed`` when the memory cap killed it, and whether it had died before we stopped it."""

    exit_code: int | None
    oom_killed: bool = False
    died_early: bool = False
    detail: str = ""


@runtime_checkable
class ServiceHandle(Protocol):
    """A running, healthy service instance."""

    name: str
    host: str
    port: int
    #: What the runtime actually enforced, as read back (e.g. ``{"cpus": [1],
    #: "memory_mb": 512, "memory": "enforced (cgroup v1)"}``, or ``"not enforced: why"``).
    enforced: Mapping[str, Any]

    def alive(self) -> bool: ...

    def logs_tail(self, lines: int = 40) -> str: ...

    def stop(self) -> StopInfo: ...

    def resource_samples(self) -> list[dict[str, Any]]:
        """CPU and memory samples taken while the service ran (may be empty)."""
        ...

    def cpu_counter_ns(self) -> int | None:
        """The instance's own cumulative CPU time (ns, every process of the service), read now
        straight from its cgroup (a few µs: an interleaved trial reads it at every slice
        boundary); ``None`` when the instance has no cgroup of its own to read."""
        ...

    def __enter__(self) -> ServiceHandle: ...

    def __exit__(self, *exc: object) -> None: ...


class Runtime(Protocol):
    """Builds and starts services. Implementations: ``local``, ``docker``."""

    name: str

    def check(self) -> None:
        """Raise :class:`~benchlib.core.errors.RuntimeUnavailable` (saying how to fix it) if unusable."""
        ...

    def prepare(self, service: ResolvedService) -> Prepared:
        """Build (or reuse a cached build of) ``service``.

        Raises ToolchainMissing or BuildError (with the build log's tail).
        """
        ...

    def start(self, prepared: Prepared, options: StartOptions) -> ServiceHandle:
        """Start and health-check one instance; raise ServiceStartError with the log tail."""
        ...

    def provenance(self) -> dict[str, Any]:
        """Facts about this runtime for run.json (engine version, cgroup version, ...)."""
        ...


def service_ports(service: ResolvedService, options: StartOptions) -> tuple[int, ...]:
    """The ports one start of ``service`` listens on: ``options.port`` first, then, for a
    multi-process service (``[run] ports = N``), ``options.ports`` when it gives all N, else
    N - 1 more free ones the runtime picks.

    Raises :class:`ServiceStartError` when ``options.ports`` gives another number of ports."""
    if options.ports:
        if len(options.ports) != service.ports or options.ports[0] != options.port:
            raise ServiceStartError(
                f"{service.name}: StartOptions.ports {list(options.ports)} must list its {service.ports} port(s) "
                f"([run] ports), starting with port {options.port}")
        return tuple(options.ports)
    if service.ports == 1:
        return (options.port,)
    extra: list[int] = []
    while len(extra) < service.ports - 1:
        extra = [p for p in free_ports(service.ports - 1) if p != options.port]
    return (options.port, *extra)


def handle_ports(handle: Any) -> tuple[int, ...]:
    """Every port a running service listens on (its ``ports``, else just ``port``)."""
    return tuple(getattr(handle, "ports", None) or ()) or (handle.port,)


def format_placeholders(template: str, values: Mapping[str, str]) -> str:
    """Replace ``{name}`` placeholders (names may contain dots, e.g. ``{dep.db.port}``).

    Unknown placeholders raise ``KeyError`` naming them; ``{{`` and ``}}`` are literal braces.
    """
    import re

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            raise KeyError(f"unknown placeholder {{{key}}}; known: {', '.join('{' + k + '}' for k in sorted(values))}")
        return values[key]

    out = re.sub(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_.-]*)\}(?!\})", sub, template)
    return out.replace("{{", "{").replace("}}", "}")


def placeholder_values(
    service: ResolvedService, *, build_dir: Path | None, port: int | None, host: str = "127.0.0.1",
    deps: Mapping[str, ServiceHandle] | None = None, ports: Sequence[int] = (),
    backend: ServiceHandle | None = None,
) -> dict[str, str]:
    """The placeholder table for ``service`` (see :mod:`benchlib.runtime.manifest`): ``ports`` are all
    its ports (default ``(port,)``), ``backend`` the service a front forwards to."""
    import sys

    values = {
        "service_dir": str(service.manifest.directory),
        "python": sys.executable,
        "host": host,
    }
    if build_dir is not None:
        from benchlib.core.buildcache import cargo_target_dir

        values["build_dir"] = str(build_dir)
        values["cargo_target_dir"] = str(cargo_target_dir())
    if port is not None:
        values["port"] = str(port)
        values["ports"] = ",".join(str(p) for p in (tuple(ports) or (port,)))
    for name, handle in (deps or {}).items():
        values[f"dep.{name}.port"] = str(handle.port)
        values[f"dep.{name}.host"] = handle.host
    if backend is not None:
        values.update(backend_values(backend))
    return values


def run_steps(service: ResolvedService, steps: Sequence[Sequence[str]], values: Mapping[str, str], *,
              kind: str = "post_start", env: Mapping[str, str] | None = None, timeout_s: float = 120.0) -> None:
    """Run a manifest's steps (``post_start``, ``reset``) on this machine, in the service's
    folder, placeholders expanded from ``values``.

    Raises
    ------
    ServiceStartError
        a step exits non-zero (its exit code and output tail are named).
    """
    import subprocess

    for step in steps:
        cmd = expand(step, values)
        out = subprocess.run(cmd, cwd=service.manifest.directory, env=None if env is None else dict(env),
                             capture_output=True, text=True, timeout=timeout_s, check=False)
        if out.returncode != 0:
            raise ServiceStartError(f"{service.name}: {kind} step {cmd!r} failed with exit code "
                                    f"{out.returncode}: {(out.stderr or out.stdout).strip()[-800:]}")


def reset_service(service: ResolvedService, handle: ServiceHandle) -> None:
    """Give a running instance fresh data: its manifest's ``[run] reset`` steps, against the
    address it is reached at (``{host}``, ``{port}``), run on this machine as ``post_start`` is."""
    host = getattr(handle, "reach_host", None) or handle.host
    run_steps(service, service.reset, placeholder_values(service, build_dir=None, port=handle.port, host=host),
              kind="reset")


def backend_values(backend: Any) -> dict[str, str]:
    """``{backend.host}``, ``{backend.port}`` and ``{backend.ports}`` of the service a front
    forwards to (the address it is reached at on the engine's machine)."""
    return {"backend.host": getattr(backend, "reach_host", None) or backend.host,
            "backend.port": str(backend.port),
            "backend.ports": ",".join(str(p) for p in handle_ports(backend))}


def expand(argv: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """Expand placeholders in every argument."""
    return [format_placeholders(a, values) for a in argv]


def health_probe(host: str, port: int, kind: str, path: str, status: int) -> tuple[bool, str]:
    """One health probe (2 s timeout): TCP accept, an HTTP GET answering ``status``, or
    (``grpc``) an HTTP/2 server answering the connection preface with its SETTINGS, as every
    gRPC server does once it serves.

    Returns (healthy, what was seen)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(2.0)
            s.connect((host, port))
            if kind == "tcp":
                return True, "accepting"
            if kind == "grpc":
                from benchlib.loadgen.h2frames import client_start

                s.sendall(client_start())
                head = s.recv(9)
                if len(head) >= 4 and head[3] == 4:  # a SETTINGS frame
                    return True, "HTTP/2 SETTINGS"
                return False, f"no HTTP/2 SETTINGS frame: {head[:40]!r}"
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
            head = s.recv(64)
    except OSError as exc:
        return False, f"{type(exc).__name__}: {exc}"
    parts = head.split(b" ", 2)
    if len(parts) >= 2 and parts[1].isdigit():
        got = int(parts[1])
        return got == status, f"HTTP {got}"
    return False, f"not an HTTP response: {head[:40]!r}"


def wait_healthy(service: ResolvedService, host: str, port: int | Sequence[int],
                 exited: Callable[[], str | None]) -> None:
    """Probe ``host:port`` (every port, when given several) as the manifest's health check says
    until it answers, for at most the service's ``ready_timeout_s`` seconds in all (probes 20 ms
    apart, backing off to 0.5 s).

    ``exited()`` returns why the service is gone (e.g. "exited with code 1"), or ``None`` while
    it runs. Raises :class:`ServiceStartError` if it exits first or never becomes healthy."""
    manifest = service.manifest
    deadline = time.monotonic() + service.ready_timeout_s
    pending = [port] if isinstance(port, int) else list(port)
    last = "no answer yet"
    delay = 0.02
    while time.monotonic() < deadline:
        gone = exited()
        if gone is not None:
            raise ServiceStartError(f"{service.name} ({service.variant}) {gone} before it became healthy")
        while pending:
            ok, last = health_probe(host, pending[0], manifest.health_kind, manifest.health_path,
                                    manifest.health_status)
            if not ok:
                break
            pending.pop(0)
        if not pending:
            return
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
    raise ServiceStartError(f"{service.name} ({service.variant}) did not become healthy within "
                            f"{service.ready_timeout_s:g} s (last probe of {host}:{pending[0]}: {last})")
