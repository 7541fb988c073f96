"""The load actor: one per load host and trial, running :func:`benchlib.loadgen.run_load` on
its share of the load and sending its rows back as Arrow.

A plain class: :mod:`benchlib.run.cluster.cluster_load` makes it a Ray actor (``ray.remote``, threaded:
``max_concurrency`` lets the driver read the host's clock and give the start signal while
``run`` waits for it). ``run`` readies the host's worker processes, then waits for
:meth:`LoadHost.go` (the common start instant, wall clock) and converts it to this host's
monotonic clock.

Around its load each host measures what other processes took from its load CPUs
(:func:`host_cpu`, stored as the host's ``foreign_cpu``): their busy time (``/proc/stat``)
less this actor's own CPU time and its workers', and less Ray's own daemons on the machine
(raylet, GCS, agents: the cluster's, not foreign work). Reported per host, not judged.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from benchlib.core.errors import LoadGenError
from benchlib.core.model import LoadSpec, Target
from benchlib.loadgen.launch import run_load
from benchlib.loadgen.shares import HostShare
from benchlib.run.cluster.merge import HostInfo
from benchlib.run.sampler import DisturbanceSampler

__all__ = ["LoadHost", "rows_to_arrow", "arrow_to_rows", "ray_daemons_cpu_s", "host_cpu", "REACH_TIMEOUT_S"]

#: Seconds a host may take to open one TCP connection to the service before the trial fails.
REACH_TIMEOUT_S = 3.0


def rows_to_arrow(rows: Any) -> bytes:
    """Rows (:data:`benchlib.core.schema.ROW_DTYPE`) as an Arrow IPC stream (the store's columns)."""
    import pyarrow as pa

    from benchlib.store.runstore import rows_to_table

    sink = pa.BufferOutputStream()
    table = rows_to_table(rows)
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def arrow_to_rows(data: bytes) -> Any:
    """Back from :func:`rows_to_arrow` to a ROW_DTYPE array."""
    import pyarrow as pa

    from benchlib.store.runstore import table_to_rows

    return table_to_rows(pa.ipc.open_stream(pa.py_buffer(data)).read_all())


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def ray_daemons_cpu_s() -> float:
    """CPU seconds (user + system, since they started) of Ray's own daemons on this machine:
    the processes of this user whose command line runs a file of the ``ray`` package
    (raylet, GCS server, agents), not Ray's worker processes (``ray::...``, e.g. the load actors)."""
    total = 0.0
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read()
            if b"/ray/" not in cmd or cmd.startswith(b"ray::"):
                continue
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime
        except (OSError, ValueError, IndexError):
            continue
    return total


def host_cpu(sampler: DisturbanceSampler, ray_before_s: float) -> dict[str, Any]:
    """The host's load CPUs over its load (``sampler`` started before it, ``ray_before_s``
    :func:`ray_daemons_cpu_s` then), stored as the host's ``foreign_cpu``: ``cpus``,
    ``window_s`` (s), ``busy_s``, ``own_s`` (this actor and its workers), ``ray_s`` (Ray's
    daemons), ``foreign_s`` (CPU s: busy less both, at least 0) and ``foreign`` (that share of
    the CPUs' capacity over the window, 0..1; ``None`` when not measurable)."""
    d = sampler.stop()
    ray_s = max(ray_daemons_cpu_s() - ray_before_s, 0.0)
    cpu = replace(d.client, own_s=d.client.own_s + ray_s)
    share = cpu.share(cpu.foreign_s, d.window_s)

    def r(x: float) -> float | None:
        return round(float(x), 4) if math.isfinite(x) else None

    return {"cpus": list(cpu.cpus), "window_s": r(d.window_s), "busy_s": r(cpu.busy_s), "own_s": r(d.client.own_s),
            "ray_s": r(ray_s), "foreign_s": r(cpu.foreign_s), "foreign": r(share)}


class LoadHost:
    """One host's load for one trial (see the module docstring)."""

    def __init__(self, host: int) -> None:
        self.host = host
        self._ready = threading.Event()
        self._go = threading.Event()
        self._start_wall_ns: int | None = None

    def info(self) -> HostInfo:
        """Who this host is (node id, name, address, pid, benchlib version)."""
        from benchlib.core.version import VERSION

        node_id, ip = "", ""
        try:
            import ray

            node_id = ray.get_runtime_context().get_node_id()
            ip = ray.util.get_node_ip_address()
        except Exception:  # noqa: BLE001 - outside Ray (a direct test)
            pass
        return HostInfo(host=self.host, node_id=str(node_id), hostname=socket.gethostname(), ip=str(ip),
                        pid=os.getpid(), benchlib=VERSION)

    def clock(self) -> int:
        """This host's wall clock (``time.time_ns()``)."""
        return time.time_ns()

    def wait_ready(self, timeout_s: float) -> bool:
        """Whether the host's workers are ready (waits up to ``timeout_s``)."""
        return self._ready.wait(timeout_s)

    def go(self, start_wall_ns: int | None) -> None:
        """Start at ``start_wall_ns`` (wall clock); ``None``: abandon the trial."""
        self._start_wall_ns = start_wall_ns
        self._go.set()

    def run(self, spec: LoadSpec, target: Target, share: HostShare, seed: int,
            client_cpus: Sequence[int] | None, start_timeout_s: float) -> tuple[bytes, dict[str, Any]]:
        """Run this host's share; returns its rows (Arrow IPC) and its meta."""
        try:
            socket.create_connection((target.host, target.port), timeout=REACH_TIMEOUT_S).close()
        except OSError as exc:
            raise LoadGenError(f"load host {self.host} ({socket.gethostname()}) cannot reach "
                               f"{target.host}:{target.port}: {exc}") from None

        def gate() -> int:
            self._ready.set()
            if not self._go.wait(start_timeout_s) or self._start_wall_ns is None:
                raise LoadGenError(f"load host {self.host}: no start signal within {start_timeout_s:g} s")
            return self._start_wall_ns

        cpus = list(client_cpus) if client_cpus is not None else sorted(os.sched_getaffinity(0))
        ray_before = ray_daemons_cpu_s()
        sampler = DisturbanceSampler((), cpus, canary=False).start()
        result = run_load(spec, target, client_cpus=client_cpus, seed=seed, share=share, start_wall_ns=gate)
        return rows_to_arrow(result.rows), {**result.meta, "foreign_cpu": host_cpu(sampler, ray_before)}
