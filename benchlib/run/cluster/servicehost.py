"""The service actor: one per run on the service node (``cluster="...?service=<resource>"``).

It builds, starts, health-checks, pins and stops the services under test on its node with the
runtime it is given (:mod:`benchlib.runtime.local`, listening on the node's address), keeps
their handles, and sends back what the driver's handle needs
(:class:`benchlib.run.cluster.service.NodeHandle`): records, log tails, resource samples, the stop
information and, at the stop, the log file itself.

A plain class: :mod:`benchlib.run.cluster.service` makes it a Ray actor with
``max_concurrency=1``, so its methods run in the worker's main thread and the services it
starts carry the parent-death signal: when the actor dies (killed, or with its node's raylet)
the kernel sends them SIGTERM. A normal end stops every service first (:meth:`ServiceHost.stop_all`).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchlib.core.errors import BenchlibError, ParameterError
from benchlib.runtime.base import Prepared, Runtime, ServiceHandle, StartOptions, StopInfo, handle_ports
from benchlib.runtime.manifest import ResolvedService

__all__ = ["Address", "NodeInfo", "Raised", "ServiceHost", "Started", "Stopped", "boot_id", "net_namespace", "node_cpus"]


@dataclass(frozen=True)
class Address:
    """A running service as the placeholders of another one see it (``{dep.NAME.port}``,
    ``{backend.host}``): what is sent to the node instead of the driver's handle."""

    name: str
    host: str
    port: int
    ports: tuple[int, ...]


@dataclass(frozen=True)
class NodeInfo:
    """Who the service node is.

    Attributes
    ----------
    node_id, hostname, address: its Ray node id, host name and the address the services listen on.
    pid: the actor's process id there; benchlib: the version it runs.
    cpus: the CPU ids the actor may use (``server_cpus=all`` pins to these).
    boot_id: the kernel's boot id (equal to the driver's: the same machine and monotonic clock).
    wall_minus_monotonic_ns: its ``time.time_ns() - time.monotonic_ns()`` when asked.
    main_thread: whether the actor's methods run in its main thread (parent-death signal set).
    """

    node_id: str
    hostname: str
    address: str
    pid: int
    benchlib: str
    cpus: tuple[int, ...]
    boot_id: str
    wall_minus_monotonic_ns: int
    main_thread: bool


@dataclass(frozen=True)
class Started:
    """A service started and healthy on the node: its key there and what its handle shows."""

    key: int
    name: str
    host: str
    port: int
    ports: tuple[int, ...]
    pid: int | None
    enforced: Mapping[str, Any]


@dataclass(frozen=True)
class Stopped:
    """A service stopped on the node: how it ended, its log counts and tail, its last resource
    samples and enforced read-back, and its log file's bytes (``None``: it kept none)."""

    stop: StopInfo
    log_lines: int | None
    log_bytes: int | None
    tail: str
    samples: tuple[dict[str, Any], ...]
    enforced: Mapping[str, Any]
    log: bytes | None = None


@dataclass(frozen=True)
class Raised:
    """A benchlib error raised on the node, sent back as data (some errors' constructors take
    other arguments than their message, so they do not survive pickling as exceptions)."""

    cls: type[BenchlibError]
    args: tuple[Any, ...]
    state: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, exc: BenchlibError) -> Raised:
        return cls(type(exc), tuple(exc.args), dict(vars(exc)))

    def rebuild(self) -> BenchlibError:
        """The error again, its message, attributes and notes (``add_note``) intact."""
        exc = self.cls.__new__(self.cls, *self.args)
        exc.args = self.args
        exc.__dict__.update(self.state)
        return exc


def boot_id() -> str:
    """The kernel's boot id ('' where it cannot be read): equal on two processes of one machine."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def net_namespace() -> str:
    """This process's network namespace (``net:[<inode>]``; '' where it cannot be read): two
    processes of one machine reach each other on ``127.0.0.1`` only when it is equal."""
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return ""


def node_cpus(choice: int | str | None, requested: tuple[int, ...], available: tuple[int, ...]) -> tuple[int, ...]:
    """The CPUs a service is pinned to on its node: ``requested`` (the run's plan) for
    ``None``, every one of ``available`` for ``"all"``, the last ``n`` of them for ``n``.

    Raises :class:`~benchlib.core.errors.ParameterError` when the node has fewer CPUs than asked for
    or the plan's CPUs are not the node's."""
    if choice is None:
        bad = sorted(set(requested) - set(available))
        if bad:
            raise ParameterError(f"the run's server CPUs {list(requested)} are not all on the service node "
                                 f"(it has {list(available)}); choose server_cpus=all or a count")
        return tuple(requested)
    if choice == "all":
        return tuple(available)
    n = int(choice)
    if n > len(available):
        raise ParameterError(f"server_cpus={n}, but the service node has {len(available)} CPU(s) "
                             f"({list(available)}); valid: all or 1..{len(available)}")
    return tuple(available[-n:])


class ServiceHost:
    """The services of one run on one node (see the module docstring).

    Parameters
    ----------
    address: the node's address, where the services listen (the load hosts send there).
    server_cpus: ``"all"``, a count, or ``None`` (pin to what the driver asks; see :func:`node_cpus`).
    driver_boot_id, driver_net_ns: the driver's :func:`boot_id` and :func:`net_namespace`: a
        node on the driver's machine and in its network namespace (a local cluster) serves on
        ``127.0.0.1`` instead, as the local runtime does; a node in a network namespace of its
        own serves on its address there.
    """

    def __init__(self, address: str, server_cpus: int | str | None, driver_boot_id: str = "",
                 driver_net_ns: str = "") -> None:
        here = bool(driver_boot_id) and driver_boot_id == boot_id() and driver_net_ns == net_namespace()
        self.address = "127.0.0.1" if here else address
        self.server_cpus = server_cpus
        self.runtimes: dict[str, Runtime] = {}
        self.handles: dict[int, ServiceHandle] = {}
        self.logs: dict[int, Path] = {}
        self._next = 0
        self._dir = Path(tempfile.mkdtemp(prefix="benchlib-service-node-"))

    # -- who and when ---------------------------------------------------------------------
    def info(self) -> NodeInfo:
        from benchlib.core.version import VERSION
        from benchlib.run.cpus import available_cpus

        node_id = ""
        try:
            import ray

            node_id = ray.get_runtime_context().get_node_id()
        except Exception:  # noqa: BLE001 - outside Ray (a direct test)
            pass
        return NodeInfo(node_id=str(node_id), hostname=socket.gethostname(), address=self.address, pid=os.getpid(),
                        benchlib=VERSION, cpus=available_cpus(),
                        boot_id=boot_id(), wall_minus_monotonic_ns=time.time_ns() - time.monotonic_ns(),
                        main_thread=threading.current_thread() is threading.main_thread())

    def clock(self) -> int:
        """This node's wall clock (``time.time_ns()``)."""
        return time.time_ns()

    # -- runtimes and builds --------------------------------------------------------------
    def use(self, name: str, runtime: Runtime) -> dict[str, Any] | Raised:
        """Take ``runtime`` for the name ``name`` (a local runtime listens on the node's address),
        check it here; its provenance on this node."""
        from benchlib.runtime.local import LocalRuntime

        if isinstance(runtime, LocalRuntime):
            runtime = LocalRuntime(host=self.address)
        try:
            runtime.check()
        except BenchlibError as exc:
            return Raised.of(exc)
        self.runtimes[name] = runtime
        return dict(runtime.provenance())

    def prepare(self, name: str, service: ResolvedService) -> Prepared | Raised:
        """Build ``service`` on this node (or reuse its build there)."""
        try:
            return self.runtimes[name].prepare(service)
        except BenchlibError as exc:
            return Raised.of(exc)

    # -- services -------------------------------------------------------------------------
    def start(self, name: str, prepared: Prepared, options: StartOptions) -> Started | Raised:
        """Start one service pinned to this node's CPUs (:func:`node_cpus`), its log kept here
        until it stops; returns once it is healthy."""
        from benchlib.run.cpus import available_cpus
        from benchlib.runtime.ports import free_port, port_in_use

        key = self._next
        self._next += 1
        log = self._dir / f"{key}.log" if options.log_path is not None or options.log_sink == "file" else None
        if port_in_use(self.address, options.port):  # the driver chose it as free on its own machine
            options = replace(options, port=free_port(self.address), ports=())
        try:
            cpus = node_cpus(self.server_cpus, tuple(options.cpus), available_cpus())
            handle = self.runtimes[name].start(prepared, replace(options, cpus=cpus, log_path=log))
        except BenchlibError as exc:
            return Raised.of(exc)
        self.handles[key] = handle
        if log is not None:
            self.logs[key] = log
        proc = getattr(handle, "proc", None)
        return Started(key=key, name=handle.name, host=handle.host, port=handle.port, ports=handle_ports(handle),
                       pid=getattr(proc, "pid", None), enforced=dict(handle.enforced))

    def alive(self, key: int) -> bool:
        h = self.handles.get(key)
        return h is not None and h.alive()

    def logs_tail(self, key: int, lines: int) -> str:
        h = self.handles.get(key)
        return h.logs_tail(lines) if h is not None else ""

    def sample_now(self, key: int) -> bool:
        h = self.handles.get(key)
        sample = getattr(h, "sample_now", None)
        return bool(sample()) if sample is not None else False

    def resource_samples(self, key: int) -> list[dict[str, Any]]:
        h = self.handles.get(key)
        return list(h.resource_samples()) if h is not None else []

    def stop(self, key: int) -> Stopped | None:
        """Stop one service; ``None`` if this node has no such service (already stopped)."""
        h = self.handles.pop(key, None)
        if h is None:
            return None
        info = h.stop()
        path = self.logs.pop(key, None)
        data = None
        if path is not None and path.exists():
            data = path.read_bytes()
            path.unlink()
        return Stopped(stop=info, log_lines=getattr(h, "log_lines", None), log_bytes=getattr(h, "log_bytes", None),
                       tail=h.logs_tail(200), samples=tuple(h.resource_samples()), enforced=dict(h.enforced),
                       log=data)

    def stop_all(self) -> int:
        """Stop every service still running here (the run's end); how many there were."""
        keys = sorted(self.handles, reverse=True)  # the latest first: a front before its service
        for key in keys:
            try:
                self.handles.pop(key).stop()
            except Exception:  # noqa: BLE001 - the others still get stopped
                pass
        shutil.rmtree(self._dir, ignore_errors=True)
        return len(keys)
