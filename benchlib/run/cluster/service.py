"""The services under test on a node of their own: ``cluster="...?service=<resource>"``.

The session (:class:`~benchlib.run.cluster.session.ClusterSession`) reserves the node carrying the
resource before the load hosts, so no load actor lands there. This module gives the runner a
runtime for that node (:class:`NodeRuntime`): each call goes to one Ray actor per run on the
node (:class:`benchlib.run.cluster.servicehost.ServiceHost`, placed in the node's reservation), which
builds, starts, health-checks, pins and stops the services there with the local runtime; the
runner gets a :class:`NodeHandle` (the :class:`~benchlib.runtime.base.ServiceHandle` protocol)
and does not otherwise know the difference. The load hosts send to the node's address.

Pinning (``server_cpus``): on ``local:N`` the run's server CPUs by default (the nodes share this
machine's CPUs), elsewhere every CPU of the node; ``server_cpus=all`` or a count chooses.

Logs, stop information and resource samples come back from the actor (the log file at the
stop, into the run folder). A node whose clock is not this machine's (another kernel) has its
samples' times converted to this machine's monotonic clock through the measured clock offset
(within ± half a round trip).

Faults: a service that dies mid-trial reads as dead (``alive()``) and its stop says how it
ended, as with the local runtime; an actor that is gone (killed, its node lost) makes every
service of it dead, its stop saying ``the service node (<resource>, <address>) lost: its node
died (...)`` (or ``its service actor died (...)``; Ray's full text in the run's log), and the
session's :meth:`~benchlib.run.cluster.session.ClusterSession.check` then stops the run. At the run's end, an error or
Ctrl-C, the actor stops every service it still runs and is killed; if it cannot answer, its
services get SIGTERM from the kernel when it dies (their parent-death signal).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from benchlib.core.errors import RuntimeUnavailable, ServiceStartError
from benchlib.run.cluster.clock import ClockOffset, ClockSample, estimate_offset
from benchlib.run.cluster.cluster_load import CLOCK_ROUND_TRIPS
from benchlib.run.cluster.faults import fault_of, log_fault, one_line
from benchlib.run.cluster.servicehost import (
    Address,
    NodeInfo,
    Raised,
    ServiceHost,
    Started,
    Stopped,
    boot_id,
    net_namespace,
    node_cpus,
)
from benchlib.run.cluster.session import ClusterSession, require_ray
from benchlib.runtime.base import Prepared, Runtime, ServiceHandle, StartOptions, StopInfo, handle_ports
from benchlib.runtime.manifest import ResolvedService

__all__ = ["NodeHandle", "NodeRuntime", "NodeServices", "on_service_node", "CALL_TIMEOUT_S", "BUILD_TIMEOUT_S",
           "START_MARGIN_S", "CLOSE_TIMEOUT_S", "ACTOR_READY_TIMEOUT_S"]

#: Seconds a short call to the service actor may take (alive, logs, samples, stop).
CALL_TIMEOUT_S = 60.0
#: Seconds a build on the service node may take.
BUILD_TIMEOUT_S = 3600.0
#: Seconds a start may take beyond the service's ``ready_timeout_s`` (post-start steps, the call).
START_MARGIN_S = 180.0
#: Seconds the actor gets to stop its services at the run's end before it is killed.
CLOSE_TIMEOUT_S = 30.0
#: Seconds the actor may take to start on its node.
ACTOR_READY_TIMEOUT_S = 120.0


class NodeServices:
    """The run's service actor on ``session``'s service node: started at first use, its
    services stopped and the actor killed by :meth:`close`.

    Attributes (once started)
    -------------------------
    info: who the node is (:class:`~benchlib.run.cluster.servicehost.NodeInfo`).
    offset: its clock's offset from this machine's (``None`` on the same machine).
    shift_ns: added to the node's monotonic times to read them on this machine's clock.
    server_cpus: the pinning choice the actor applies (``"all"``, a count, ``None``: the run's plan).
    """

    def __init__(self, session: ClusterSession) -> None:
        if session.service is None:
            raise ValueError("NodeServices needs a session with a service node (cluster='...?service=<resource>')")
        self.session = session
        self.node = session.service
        spec_cpus = session.spec.server_cpus
        self.server_cpus: int | str | None = spec_cpus if spec_cpus is not None else (None if session.local else "all")
        self.info: NodeInfo | None = None
        self.offset: ClockOffset | None = None
        self.shift_ns = 0
        #: why the node counts as lost (its node died, its actor did); then no call is tried
        self.lost: str | None = None
        self._actor: Any = None

    # -- the actor --------------------------------------------------------------------------
    def actor(self) -> Any:
        """The actor (started and checked on first use)."""
        if self._actor is not None:
            return self._actor
        ray = require_ray()
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from benchlib.core.version import VERSION

        self._actor = ray.remote(ServiceHost).options(  # type: ignore[attr-defined]
            num_cpus=0, max_concurrency=1, max_restarts=0, resources={self.node.resource: 1.0},
            scheduling_strategy=PlacementGroupSchedulingStrategy(self.session.service_placement_group,
                                                                 placement_group_bundle_index=0),
        ).remote(self.node.address, self.server_cpus, boot_id(), net_namespace())
        info: NodeInfo = self.call("info", timeout=ACTOR_READY_TIMEOUT_S)
        mine = VERSION
        if info.benchlib != mine:
            raise RuntimeUnavailable(f"the service node {info.hostname} ({info.address}) runs benchlib {info.benchlib}, "
                                     f"this machine {mine}: every node needs the same version")
        if self.server_cpus is not None:
            node_cpus(self.server_cpus, (), info.cpus)  # a count beyond the node's CPUs is refused now
        if info.boot_id and info.boot_id == boot_id():
            self.offset, self.shift_ns = None, 0  # the same kernel: one monotonic clock
        else:
            samples = []
            for _ in range(CLOCK_ROUND_TRIPS):
                t1 = time.time_ns()
                remote = int(self.call("clock"))
                samples.append(ClockSample(t1, remote, time.time_ns()))
            self.offset = estimate_offset(samples)
            self.shift_ns = info.wall_minus_monotonic_ns - self.offset.offset_ns - (time.time_ns() - time.monotonic_ns())
        self.info = info
        return self._actor

    def call(self, method: str, *args: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
        """``method(*args)`` on the actor. A benchlib error raised there is raised here;
        an actor that is gone, does not answer within ``timeout`` s or fails otherwise raises
        :class:`~benchlib.core.errors.RuntimeUnavailable` in one line."""
        ray = require_ray()
        from ray import exceptions as rex

        where = f"the service node ({self.node.resource}, {self.node.address})"
        if self.lost is not None:
            raise RuntimeUnavailable(f"{where} lost: {self.lost}")
        try:
            out = ray.get(getattr(self.actor(), method).remote(*args), timeout=timeout)
        except rex.GetTimeoutError:
            raise RuntimeUnavailable(f"{where} did not answer {method} within {timeout:g} s") from None
        except rex.RayActorError as exc:
            raise RuntimeUnavailable(f"{where} lost: {self._lose(where, exc)}") from None
        except rex.RayTaskError as exc:
            raise RuntimeUnavailable(f"{where}: {method} failed: {one_line(exc)}") from None
        if isinstance(out, Raised):
            raise out.rebuild()
        return out

    def _lose(self, where: str, exc: BaseException) -> str:
        """Why the node counts as lost after its actor's call raised ``exc`` (Ray's full text into
        the run's log; an actor that stopped answering settled by its node's fate), remembered
        here and in the session (whose check then stops the run)."""
        from benchlib.run.cluster.faults import node_label

        fault = fault_of(exc)
        log_fault(where, exc, fault)
        why = None
        if fault.kind in ("unreachable", "node"):
            why = self.session.node_fate(self.node.node_id) if fault.kind == "unreachable" else \
                f"its node died ({node_label(self.node.node_id, {self.node.resource: 1.0})})"
        self.lost = why or fault.line.replace("its actor", "its service actor", 1)
        self.session.service_lost = self.lost
        return self.lost

    def to_driver_clock(self, sample: dict[str, Any]) -> dict[str, Any]:
        """A resource sample with its ``t_monotonic_ns`` on this machine's monotonic clock."""
        t = sample.get("t_monotonic_ns")
        return sample if t is None or not self.shift_ns else {**sample, "t_monotonic_ns": int(t) + self.shift_ns}

    def describe(self) -> dict[str, Any]:
        """JSON-able facts about the node (for the runtime's provenance and each handle's ``enforced``)."""
        info = self.info
        return {"resource": self.node.resource, "node_id": self.node.node_id, "address": self.node.address,
                "server_cpus": self.server_cpus,
                **({"hostname": info.hostname, "listen_address": info.address, "actor_pid": info.pid,
                    "cpus": list(info.cpus),
                    "same_machine": self.offset is None, "parent_death_signal": info.main_thread}
                   if info is not None else {}),
                **({"clock_offset_ns": self.offset.offset_ns, "clock_rtt_ns": self.offset.rtt_ns}
                   if self.offset is not None else {})}

    def close(self) -> None:
        """Stop every service the actor still runs (it gets :data:`CLOSE_TIMEOUT_S`), then kill it."""
        actor, self._actor = self._actor, None
        if actor is None:
            return
        ray = require_ray()
        try:
            ray.get(actor.stop_all.remote(), timeout=CLOSE_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - gone or stuck: the kill below, and the services' parent-death signal
            pass
        finally:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already dead
                pass


class NodeRuntime:
    """A runtime (:class:`~benchlib.runtime.base.Runtime`) whose services run on the service
    node: ``runtime`` (the local runtime, or another that can be sent there) is sent to the
    actor once and used there. Its ``name`` is ``runtime``'s: trials store that."""

    def __init__(self, node: NodeServices, runtime: Runtime) -> None:
        self.name = runtime.name
        self.runtime = runtime
        self.node = node
        self._provenance: dict[str, Any] | None = None

    def check(self) -> None:
        """Refuse the Docker runtime (its engine is where ``DOCKER_HOST`` says); start the
        actor and check the runtime on the node."""
        if self.name == "docker":
            raise RuntimeUnavailable("the services run on the cluster's service node (cluster='...?service=...'), "
                                     "started there with runtime='local'; the docker runtime runs them on its "
                                     "engine (DOCKER_HOST): leave out ?service= for it")
        if self._provenance is None:
            self._provenance = dict(self.node.call("use", self.name, self.runtime))

    def provenance(self) -> dict[str, Any]:
        self.check()
        return {**(self._provenance or {}), "service_node": self.node.describe()}

    def prepare(self, service: ResolvedService) -> Prepared:
        """Build ``service`` on the node (or reuse its build there)."""
        self.check()
        prepared: Prepared = self.node.call("prepare", self.name, service, timeout=BUILD_TIMEOUT_S)
        return prepared

    def start(self, prepared: Prepared, options: StartOptions) -> NodeHandle:
        """Start one instance on the node and wait until it is healthy there."""
        self.check()
        sent = replace(options, deps={k: _address(h) for k, h in options.deps.items()},  # type: ignore[misc]
                       backend=_address(options.backend) if options.backend is not None else None)
        timeout = float(prepared.service.ready_timeout_s) + START_MARGIN_S
        try:
            started: Started = self.node.call("start", self.name, prepared, sent, timeout=timeout)
        except RuntimeUnavailable as exc:
            raise ServiceStartError(f"{prepared.service.name}: {exc}") from None
        return NodeHandle(self.node, started, options)


class NodeHandle:
    """A service running on the service node (:class:`~benchlib.runtime.base.ServiceHandle`).

    Attributes
    ----------
    pid: its process id on its node; ``enforced``: the node's read-back, with ``service_node``.
    log_lines, log_bytes: its log's counts, once stopped (as the local runtime's handle).
    """

    def __init__(self, node: NodeServices, started: Started, options: StartOptions) -> None:
        self.name = started.name
        self.host = started.host
        self.port = started.port
        self.ports: tuple[int, ...] = tuple(started.ports)
        self.pid = started.pid
        self.enforced: dict[str, Any] = {**started.enforced, "service_node": node.describe()}
        self.log_lines: int | None = None
        self.log_bytes: int | None = None
        self._node = node
        self._key = started.key
        self._log_path = options.log_path
        self._stopped: Stopped | None = None
        self._stop: StopInfo | None = None

    def alive(self) -> bool:
        if self._stop is not None:
            return False
        try:
            return bool(self._node.call("alive", self._key))
        except RuntimeUnavailable:
            return False

    def logs_tail(self, lines: int = 40) -> str:
        if self._stopped is not None:
            return "\n".join(self._stopped.tail.splitlines()[-lines:])
        try:
            return str(self._node.call("logs_tail", self._key, lines))
        except RuntimeUnavailable as exc:
            return f"(log not available: {exc})"

    def sample_now(self) -> bool:
        """One resource sample on the node now; ``False`` once the service (or its node) is gone."""
        if self._stop is not None:
            return False
        try:
            return bool(self._node.call("sample_now", self._key))
        except RuntimeUnavailable:
            return False

    def cpu_counter_ns(self) -> int | None:
        """``None``: the instance runs on another node, whose cgroup files this machine cannot
        read at slice boundaries (an interleaved trial needs the services here)."""
        return None

    def resource_samples(self) -> list[dict[str, Any]]:
        """CPU and memory samples taken on the node, their times on this machine's monotonic clock."""
        if self._stopped is not None:
            samples = list(self._stopped.samples)
        elif self._stop is not None:
            samples = []
        else:
            try:
                samples = list(self._node.call("resource_samples", self._key))
            except RuntimeUnavailable:
                samples = []
        return [self._node.to_driver_clock(s) for s in samples]

    def stop(self) -> StopInfo:
        """Stop it on its node; its log comes back into the run folder."""
        if self._stop is not None:
            return self._stop
        try:
            got: Stopped | None = self._node.call("stop", self._key)
        except RuntimeUnavailable as exc:
            self._stop = StopInfo(exit_code=None, died_early=True, detail=str(exc))
            return self._stop
        if got is None:
            self._stop = StopInfo(exit_code=None, died_early=True, detail="no longer running on the service node")
            return self._stop
        self._stopped = got
        self.log_lines, self.log_bytes = got.log_lines, got.log_bytes
        self.enforced.update({k: v for k, v in got.enforced.items() if k not in self.enforced})
        if got.log is not None and self._log_path is not None:
            self._log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_path.write_bytes(got.log)
        self._stop = got.stop
        return self._stop

    def __enter__(self) -> NodeHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<NodeHandle {self.name} pid={self.pid} {self.host}:{self.port} on {self._node.node.resource}>"


def _address(handle: ServiceHandle) -> Address:
    """What the node needs of a running service to fill another's placeholders."""
    return Address(name=handle.name, host=getattr(handle, "reach_host", None) or handle.host, port=handle.port,
                   ports=handle_ports(handle))


@contextlib.contextmanager
def on_service_node(session: ClusterSession, runtimes: Callable[[str], Runtime]) -> Iterator[Callable[[str], Runtime]]:
    """The runner's runtime lookup for ``session``: ``runtimes`` itself when the session has no
    service node; else each runtime wrapped in a :class:`NodeRuntime` (one actor for all),
    the actor's services stopped and the actor killed when the block ends, whatever happened."""
    if session.service is None:
        yield runtimes
        return
    node = NodeServices(session)
    wrapped: dict[str, NodeRuntime] = {}

    def lookup(name: str) -> Runtime:
        if name not in wrapped:
            wrapped[name] = NodeRuntime(node, runtimes(name))
        return wrapped[name]

    try:
        yield lookup
    finally:
        node.close()
