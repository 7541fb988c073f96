"""A Ray cluster for one run: started here (``local:N``) or joined (``auto``, ``ray://``),
its load hosts found and reserved, and everything stopped at the end.

Ray settings this module always applies: usage statistics off (``RAY_USAGE_STATS_ENABLED=0``,
set in this process's environment before Ray starts, so no node reports anywhere), no
dashboard, and, for a local cluster, a small explicit object store per node
(:data:`OBJECT_STORE_BYTES`; Ray's default takes a share of the machine's RAM per node).

The load hosts are reserved with a placement group of one bundle per host, strategy
``STRICT_SPREAD``: every bundle on a different node, so one load actor per host. With
``?service=<resource>`` the node carrying that resource is reserved first, for the services
(:mod:`benchlib.cluster.service`), and sends no load.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType, TracebackType
from typing import Any

from benchlib.cluster.spec import INSTALL_HINT, LOAD_RESOURCE, ClusterSpec, local_host_resource
from benchlib.errors import ParameterError, RuntimeUnavailable
from benchlib.runtime.ports import free_ports

__all__ = ["ClusterSession", "ServiceNode", "require_ray", "OBJECT_STORE_BYTES", "RAY_ENV", "INSTALL_HINT"]

#: Environment every Ray process of ours gets: no usage statistics leave the machine.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}
#: Environment a local cluster's nodes get, unless already set: on a busy machine a node's
#: Python agents may take longer than Ray's default to start, and the raylet then aborts.
#: Ray's own metrics are off too (nothing here reads them; with them on, a raylet also waits
#: for the metrics agent).
LOCAL_RAY_ENV = {"RAY_agent_register_timeout_ms": "180000", "RAY_raylet_start_wait_time_s": "120",
                 "RAY_enable_metrics_collection": "0"}
#: Object store of each local node (bytes): rows come back as Arrow, a few MB per trial.
OBJECT_STORE_BYTES = 80 * 1024 * 1024
#: Attempts to start a local cluster (Ray gives a node 30 s to start; a busy machine may need more than one).
LOCAL_START_ATTEMPTS = 3
#: Seconds to wait for the nodes and the load hosts' reservation.
READY_TIMEOUT_S = 120.0


def require_ray() -> ModuleType:
    """The ``ray`` module, or :class:`~benchlib.errors.ParameterError` with :data:`INSTALL_HINT`."""
    os.environ.update(RAY_ENV)
    try:
        import ray
    except ImportError:
        raise ParameterError(INSTALL_HINT) from None
    return ray


@dataclass(frozen=True)
class ServiceNode:
    """The node reserved for the services under test (``cluster="...?service=<resource>"``).

    Attributes
    ----------
    resource: the custom resource naming it (only this alive node carries it).
    node_id: its Ray node id; address: its address (the services listen there).
    bundle: what its reservation holds (the resource, and its load resource or CPUs if any).
    """

    resource: str
    node_id: str
    address: str
    bundle: Mapping[str, float]


#: Resources Ray gives every node itself (not names a user chose).
_RAY_OWN_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")


def _service_node(nodes: list[dict[str, Any]], resource: str, where: str) -> dict[str, Any]:
    """The one alive node carrying ``resource``; a clear error when none or several do."""
    having = [n for n in nodes if n.get("Resources", {}).get(resource, 0) > 0]
    if len(having) == 1:
        return having[0]
    custom = sorted({k for n in nodes for k in n.get("Resources", {})
                     if k not in _RAY_OWN_RESOURCES and not k.startswith(("node:", "accelerator_type:"))})
    if not having:
        raise ParameterError(f"{where}: no alive node carries the resource {resource!r} (start the service node "
                             f"with --resources='{{\"{resource}\": 1}}'); custom resources of the alive nodes: "
                             f"{', '.join(custom) or 'none'}")
    raise ParameterError(f"{where}: {len(having)} alive nodes carry the resource {resource!r}; the service node is "
                         "named by a resource only it has")


def _proc_table() -> dict[int, tuple[int, str, bytes]]:
    """pid -> (parent pid, state, command line) of every process this user can read."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    out[int(name)] = (int(fields[1]), fields[0], f.read())
            except (OSError, ValueError, IndexError):
                continue
    return out


def _children() -> set[int]:
    """This process's children now."""
    me = os.getpid()
    return {pid for pid, (ppid, _, _) in _proc_table().items() if ppid == me}


def _kill_new_ray_processes(before: set[int]) -> None:
    """Kill the Ray processes this process started since ``before`` (children not in it whose
    command line is Ray's, and their children) and reap them, and any new child that already
    exited: what a node that failed to start leaves."""
    table = _proc_table()
    me = os.getpid()
    new = {pid for pid, (ppid, _, _) in table.items() if ppid == me and pid not in before}
    doomed = {pid for pid in new if b"/ray/" in table[pid][2]}
    doomed |= {pid for pid, (ppid, _, _) in table.items() if ppid in doomed}
    for pid in doomed:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    mine = {pid for pid in new if pid in doomed or table[pid][1] == "Z"}
    deadline = time.monotonic() + 5.0
    while mine and time.monotonic() < deadline:  # reap our own children: no zombies left
        for pid in list(mine):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    mine.discard(pid)
            except ChildProcessError:
                mine.discard(pid)
        time.sleep(0.05)


class ClusterSession:
    """One run's Ray cluster (a context manager).

    Attributes (after entering)
    ---------------------------
    hosts: how many load hosts (one load actor each).
    placement_group: the ``STRICT_SPREAD`` reservation, one bundle per host.
    bundle: the resources of one bundle (each load actor takes one).
    local: whether the nodes are this machine (``local:N``): the runner's client CPUs then
        apply to every host.
    service: the node that runs the services (``?service=``), reserved for the run
        (``service_placement_group``: one bundle); ``None``: they run on this machine.
    setup_s: seconds to start or join the cluster and reserve the hosts.
    """

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        self.local = spec.kind == "local"
        self.hosts = 0
        self.placement_group: Any = None
        self.bundle: dict[str, float] = {}
        self.service: ServiceNode | None = None
        self.service_placement_group: Any = None
        self.setup_s = 0.0
        self._cluster: Any = None
        self._owns_ray = False

    def __enter__(self) -> ClusterSession:
        ray = require_ray()
        t = time.monotonic()
        try:
            self._start(ray)
        except BaseException:
            self.close()
            raise
        self.setup_s = time.monotonic() - t
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _start(self, ray: ModuleType) -> None:
        init = dict(include_dashboard=False, logging_level="WARNING", log_to_driver=False,
                    configure_logging=True)
        if self.local:
            if ray.is_initialized():
                raise ParameterError("cluster='local:N' starts its own Ray cluster, but this process is already "
                                     "connected to one; call ray.shutdown() first, or pass cluster='auto'")
            for key, value in LOCAL_RAY_ENV.items():
                os.environ.setdefault(key, value)
            for attempt in range(LOCAL_START_ATTEMPTS):
                before = _children()
                try:
                    self._start_local()
                    break
                except BaseException:  # Ray's own "node timed out during startup" on a busy machine, Ctrl-C
                    self._stop_local()
                    _kill_new_ray_processes(before)  # a node that failed to start is not the cluster's to stop
                    if attempt + 1 == LOCAL_START_ATTEMPTS:
                        raise
            ray.init(address=self._cluster.address, **init)
            self._owns_ray = True
            self._cluster.wait_for_nodes(timeout=READY_TIMEOUT_S)
        elif not ray.is_initialized():
            try:
                ray.init(address=self.spec.address, **init)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise RuntimeUnavailable(f"cannot join {self.spec.describe()}: {exc}") from exc
            self._owns_ray = True
        self.reserve()

    def reserve(self) -> None:
        """Reserve the service node (``?service=``, first) and the load hosts (one bundle per
        host, ``STRICT_SPREAD``). The service node's bundle takes its load resource (or its CPUs,
        when the load hosts are found by CPU), so no load bundle can land on it."""
        ray = require_ray()
        from ray.util.placement_group import placement_group

        nodes = [n for n in ray.nodes() if n.get("Alive")]
        marked = [n for n in nodes if n.get("Resources", {}).get(LOAD_RESOURCE, 0) >= 1]
        if marked:
            candidates, self.bundle = marked, {LOAD_RESOURCE: 1.0}
        else:
            candidates, self.bundle = [n for n in nodes if n.get("Resources", {}).get("CPU", 0) >= 1], {"CPU": 1.0}
        name = f"{socket.gethostname()}-{os.getpid()}-{id(self):x}"
        if self.spec.service is not None:
            node = _service_node(nodes, self.spec.service, self.spec.describe())
            have = node.get("Resources", {})
            bundle = {self.spec.service: 1.0, **{k: float(have[k]) for k in self.bundle if have.get(k, 0) >= 1}}
            self.service_placement_group = placement_group([bundle], strategy="STRICT_PACK",
                                                           name=f"benchlib-service-{name}")
            if not self.service_placement_group.wait(timeout_seconds=READY_TIMEOUT_S):
                raise RuntimeUnavailable(f"{self.spec.describe()}: the service node (resource {self.spec.service!r}) "
                                        f"could not be reserved within {READY_TIMEOUT_S:g} s (another run using it?)")
            self.service = ServiceNode(resource=self.spec.service, node_id=str(node.get("NodeID", "")),
                                       address=str(node.get("NodeManagerAddress", "")), bundle=bundle)
            candidates = [n for n in candidates if n.get("NodeID") != node.get("NodeID")]
        self.hosts = len(candidates)
        if self.hosts < 1:
            raise RuntimeUnavailable(f"{self.spec.describe()} has no node to send load from (start nodes with "
                                    f"--resources='{{\"{LOAD_RESOURCE}\": 1}}')"
                                    + (" other than the service node" if self.service is not None else ""))
        self.placement_group = placement_group([dict(self.bundle)] * self.hosts, strategy="STRICT_SPREAD",
                                               name=f"benchlib-load-{name}")
        if not self.placement_group.wait(timeout_seconds=READY_TIMEOUT_S):
            raise RuntimeUnavailable(f"{self.spec.describe()}: {self.hosts} load hosts could not be reserved "
                                    f"(one per node, STRICT_SPREAD) within {READY_TIMEOUT_S:g} s")

    def _start_local(self) -> None:
        """The head and the other nodes, each a load node (the load resource and
        ``benchlib_host_<i>``)."""
        from ray.cluster_utils import Cluster

        def node(i: int) -> dict[str, Any]:
            # the agents' ports chosen here: with port 0 the raylet waits only 15 s for an
            # agent to write the port it took, and aborts on a busy machine
            # no CPU resource: the load actors ask for the load resource only, and a node with
            # CPUs prestarts a Python worker per CPU, competing with its agents as it starts
            metrics, export, agent, runtime_env = free_ports(4)
            return dict(num_cpus=0, object_store_memory=OBJECT_STORE_BYTES,
                        resources={LOAD_RESOURCE: 1, local_host_resource(i): 1},
                        metrics_agent_port=metrics, metrics_export_port=export,
                        dashboard_agent_listen_port=agent, runtime_env_agent_port=runtime_env)

        self._cluster = Cluster(initialize_head=False)  # held first: a failed start is still shut down
        self._cluster.add_node(include_dashboard=False, **node(0))  # the first node is the head
        for i in range(1, self.spec.nodes):
            self._cluster.add_node(**node(i))

    def _stop_local(self) -> None:
        if self._cluster is not None:
            self._cluster.shutdown()
            self._cluster = None

    def release(self) -> None:
        """Give back the reservations of :meth:`reserve` (the load hosts', the service node's)."""
        for attr in ("placement_group", "service_placement_group"):
            pg = getattr(self, attr)
            if pg is not None:
                try:
                    from ray.util.placement_group import remove_placement_group

                    remove_placement_group(pg)
                except Exception:  # noqa: BLE001 - the cluster may already be gone
                    pass
                setattr(self, attr, None)
        self.service = None

    def close(self) -> None:
        """Release the reservations, disconnect, and stop a cluster this session started."""
        ray = require_ray()
        self.release()
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False
        self._stop_local()

    def describe(self) -> dict[str, Any]:
        """JSON-able facts for the run's provenance."""
        return {"cluster": self.spec.describe(), "hosts": self.hosts, "bundle": dict(self.bundle),
                "local": self.local, "setup_s": round(self.setup_s, 3),
                "object_store_bytes": OBJECT_STORE_BYTES if self.local else None,
                **({"service_node": {"resource": self.service.resource, "node_id": self.service.node_id,
                                     "address": self.service.address}} if self.service is not None else {})}
