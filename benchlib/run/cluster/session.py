"""A Ray cluster for one run: started here (``local:N``) or joined (``auto``, ``ray://``),
its load hosts found and reserved, and everything stopped at the end.

Ray settings this module always applies: usage statistics off (``RAY_USAGE_STATS_ENABLED=0``,
set in this process's environment before Ray starts, so no node reports anywhere), no
dashboard asked for (Ray still starts its dashboard head in a minimal form, without a web page,
and a dashboard agent with every raylet), Ray's messages about its nodes sent to the run's log
instead of this process's output, and, for a local cluster, a small explicit object store per
node (:data:`OBJECT_STORE_BYTES`; Ray's default takes a share of the machine's RAM per node) and
a health check every second (:data:`LOCAL_RAY_ENV`).

The load hosts are reserved with a placement group of one bundle per host, strategy
``STRICT_SPREAD``: every bundle on a different node, so one load actor per host. With
``?service=<resource>`` the node carrying that resource is reserved first, for the services
(:mod:`benchlib.run.cluster.service`), and sends no load.

Hosts lost mid-run (:meth:`ClusterSession.check`, between trials): a load host whose node died
is dropped and the load hosts are reserved again among the nodes still alive (the old
placement group removed, a new one made: a group Ray is rescheduling is never waited on), as
long as ``min_hosts`` are left (``?min_hosts=N``; default: the hosts reserved at the start);
else, or when the service node is lost, :class:`~benchlib.core.errors.HostLost` stops the run. On a
local cluster the nodes' processes are children of this one: a thread reaps those that die, so
a killed raylet's workers see it gone and exit, as on a machine that is lost.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType, TracebackType
from typing import Any

from benchlib.core.errors import HostLost, ParameterError, RuntimeUnavailable
from benchlib.core.placement import INSTALL_HINT, LOAD_RESOURCE, ClusterSpec, local_host_resource
from benchlib.run.cluster.faults import LOG, node_label
from benchlib.runtime.ports import free_ports

__all__ = ["ClusterSession", "HostNode", "ServiceNode", "require_ray", "OBJECT_STORE_BYTES", "RAY_ENV", "INSTALL_HINT",
           "NODE_FATE_TIMEOUT_S"]

#: Environment every Ray process of ours gets: no usage statistics leave the machine.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}
#: Environment a local cluster's nodes get, unless already set: on a busy machine a node's
#: Python agents may take longer than Ray's default to start, and the raylet then aborts.
#: Ray's own metrics are off too (nothing here reads them; with them on, a raylet also waits
#: for the metrics agent). The health check runs every second instead of every 3 s: a node
#: whose raylet is gone (its port refuses) is marked dead after 5 failed checks, about 5 s; a
#: raylet that is only slow is not (each check waits 10 s for it: a raylet stopped for 30 s
#: stayed alive).
LOCAL_RAY_ENV = {"RAY_agent_register_timeout_ms": "180000", "RAY_raylet_start_wait_time_s": "120",
                 "RAY_enable_metrics_collection": "0", "RAY_health_check_period_ms": "1000"}
#: Object store of each local node (bytes): rows come back as Arrow, a few MB per trial.
OBJECT_STORE_BYTES = 80 * 1024 * 1024
#: Attempts to start a local cluster (Ray gives a node 30 s to start; a busy machine may need more than one).
LOCAL_START_ATTEMPTS = 3
#: Seconds to wait for the nodes and the load hosts' reservation.
READY_TIMEOUT_S = 120.0
#: Seconds :meth:`ClusterSession.node_fate` waits for Ray to say whether a node is alive.
NODE_FATE_TIMEOUT_S = 60.0
#: Seconds between two looks of the thread that reaps a local cluster's dead processes.
REAP_PERIOD_S = 0.5


def require_ray() -> ModuleType:
    """The ``ray`` module, or :class:`~benchlib.core.errors.ParameterError` with :data:`INSTALL_HINT`."""
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


@dataclass(frozen=True)
class HostNode:
    """The node one load host's bundle was placed on: its bundle index, Ray node id, host name,
    address and :func:`~benchlib.run.cluster.faults.node_label` (``Ray node 6793dfde, benchlib_host_2``)."""

    index: int
    node_id: str
    hostname: str
    address: str
    label: str

    def name(self) -> str:
        """``load host 1 (myhost)``: as the trials' records name a host."""
        return f"load host {self.index} ({self.hostname})"


def _here() -> str:
    """A Ray task's node id (the probe of :meth:`ClusterSession.node_fate`)."""
    import ray

    return str(ray.get_runtime_context().get_node_id())


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
    host_nodes: the node of each bundle (:class:`HostNode`), in bundle order.
    min_hosts: fewer load hosts than this left after a loss stop the run (``?min_hosts=``;
        default: the hosts reserved at the start).
    local: whether the nodes are this machine (``local:N``): the runner's client CPUs then
        apply to every host.
    service: the node that runs the services (``?service=``), reserved for the run
        (``service_placement_group``: one bundle); ``None``: they run on this machine.
    service_lost: why the service node counts as lost (set by its actor's handle,
        :class:`benchlib.run.cluster.service.NodeServices`); ``None`` while it is not.
    lost_nodes: node id -> why, for nodes found lost (:meth:`node_fate`).
    setup_s: seconds to start or join the cluster and reserve the hosts.
    """

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        self.local = spec.kind == "local"
        self.hosts = 0
        self.placement_group: Any = None
        self.bundle: dict[str, float] = {}
        self.host_nodes: tuple[HostNode, ...] = ()
        self.min_hosts: int | None = None
        self.service: ServiceNode | None = None
        self.service_placement_group: Any = None
        self.service_lost: str | None = None
        self.lost_nodes: dict[str, str] = {}
        self.setup_s = 0.0
        self._cluster: Any = None
        self._owns_ray = False
        self._reservations = 0
        self._name = f"{socket.gethostname()}-{os.getpid()}-{id(self):x}"
        self._reaper: tuple[threading.Thread, threading.Event] | None = None
        self._ray_print: Any = None

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
                    self._start_reaper()
                    ray.init(address=self._cluster.address, **init)
                    self._owns_ray = True
                    # a node that died while starting never registers: this times out, and the
                    # cluster is started again (seen once in a cold CI run, load 1.5)
                    self._cluster.wait_for_nodes(timeout=READY_TIMEOUT_S)
                    break
                except BaseException:  # Ray's own "node timed out during startup" on a busy machine, Ctrl-C
                    if self._owns_ray:
                        ray.shutdown()
                        self._owns_ray = False
                    self._stop_local()
                    _kill_new_ray_processes(before)  # a node that failed to start is not the cluster's to stop
                    if attempt + 1 == LOCAL_START_ATTEMPTS:
                        raise
        elif not ray.is_initialized():
            try:
                ray.init(address=self.spec.address, **init)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise RuntimeUnavailable(f"cannot join {self.spec.describe()}: {exc}") from exc
            self._owns_ray = True
        self._ray_print = _route_ray_messages()
        self.reserve()

    def _load_candidates(self, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The alive nodes that can be load hosts (those with the load resource, else those with
        a CPU); sets :attr:`bundle` to what one host's bundle takes."""
        marked = [n for n in nodes if n.get("Resources", {}).get(LOAD_RESOURCE, 0) >= 1]
        if marked:
            self.bundle = {LOAD_RESOURCE: 1.0}
            return marked
        self.bundle = {"CPU": 1.0}
        return [n for n in nodes if n.get("Resources", {}).get("CPU", 0) >= 1]

    def reserve(self) -> None:
        """Reserve the service node (``?service=``, first) and the load hosts (one bundle per
        host, ``STRICT_SPREAD``). The service node's bundle takes its load resource (or its CPUs,
        when the load hosts are found by CPU), so no load bundle can land on it."""
        ray = require_ray()
        from ray.util.placement_group import placement_group

        nodes = [n for n in ray.nodes() if n.get("Alive")]
        candidates = self._load_candidates(nodes)
        if self.spec.service is not None:
            node = _service_node(nodes, self.spec.service, self.spec.describe())
            have = node.get("Resources", {})
            bundle = {self.spec.service: 1.0, **{k: float(have[k]) for k in self.bundle if have.get(k, 0) >= 1}}
            self.service_placement_group = placement_group([bundle], strategy="STRICT_PACK",
                                                           name=f"benchlib-service-{self._name}")
            if not self.service_placement_group.wait(timeout_seconds=READY_TIMEOUT_S):
                raise RuntimeUnavailable(f"{self.spec.describe()}: the service node (resource {self.spec.service!r}) "
                                        f"could not be reserved within {READY_TIMEOUT_S:g} s (another run using it?)")
            self.service = ServiceNode(resource=self.spec.service, node_id=str(node.get("NodeID", "")),
                                       address=str(node.get("NodeManagerAddress", "")), bundle=bundle)
            candidates = [n for n in candidates if n.get("NodeID") != node.get("NodeID")]
        if self.spec.min_hosts is not None and len(candidates) < self.spec.min_hosts:
            raise RuntimeUnavailable(f"{self.spec.describe()} has {len(candidates)} load host(s) alive, fewer than "
                                     f"min_hosts={self.spec.min_hosts}")
        self._reserve_load(candidates)
        if self.min_hosts is None:
            self.min_hosts = self.spec.min_hosts or self.hosts

    def _reserve_load(self, candidates: list[dict[str, Any]]) -> None:
        """One ``STRICT_SPREAD`` bundle on each of ``candidates``; :attr:`host_nodes` says where each went."""
        from ray.util.placement_group import placement_group, placement_group_table

        self.hosts = len(candidates)
        if self.hosts < 1:
            raise RuntimeUnavailable(f"{self.spec.describe()} has no node to send load from (start nodes with "
                                    f"--resources='{{\"{LOAD_RESOURCE}\": 1}}')"
                                    + (" other than the service node" if self.service is not None else ""))
        self._reservations += 1
        self.placement_group = placement_group([dict(self.bundle)] * self.hosts, strategy="STRICT_SPREAD",
                                               name=f"benchlib-load-{self._name}-{self._reservations}")
        if not self.placement_group.wait(timeout_seconds=READY_TIMEOUT_S):
            raise RuntimeUnavailable(f"{self.spec.describe()}: {self.hosts} load hosts could not be reserved "
                                    f"(one per node, STRICT_SPREAD) within {READY_TIMEOUT_S:g} s")
        by_id = {str(n.get("NodeID")): n for n in candidates}
        placed = placement_group_table(self.placement_group).get("bundles_to_node_id") or {}
        hosts = []
        for i in range(self.hosts):
            nid = str(placed.get(i, ""))
            n = by_id.get(nid, {})
            hosts.append(HostNode(i, nid, str(n.get("NodeManagerHostname", "?")), str(n.get("NodeManagerAddress", "")),
                                  node_label(nid, n.get("Resources"))))
        self.host_nodes = tuple(hosts)

    # -- hosts lost mid-run -----------------------------------------------------------------
    def _alive_nodes(self) -> dict[str, dict[str, Any]]:
        ray = require_ray()
        return {str(n.get("NodeID")): n for n in ray.nodes() if n.get("Alive")}

    def _label(self, node_id: str) -> str:
        known = [h.label for h in self.host_nodes if h.node_id == node_id]
        if self.service is not None and self.service.node_id == node_id:
            known.append(node_label(node_id, {self.service.resource: 1.0}))
        return known[0] if known else node_label(node_id)

    def lost_hosts(self) -> list[tuple[HostNode, str]]:
        """The load hosts whose node is lost, each with why: Ray marked it dead, its bundle left
        it (Ray is rescheduling the group), or :meth:`node_fate` found it lost."""
        from ray.util.placement_group import placement_group_table

        if self.placement_group is None:
            return []
        alive = self._alive_nodes()
        placed = placement_group_table(self.placement_group).get("bundles_to_node_id") or {}
        out = []
        for h in self.host_nodes:
            why = self.lost_nodes.get(h.node_id)
            if why is None and h.node_id not in alive:
                why = f"its node died ({h.label})"
            if why is None and str(placed.get(h.index, "")) != h.node_id:
                why = f"its bundle left its node: Ray is placing it again ({h.label})"
            if why is not None:
                out.append((h, why))
        return out

    def node_fate(self, node_id: str, timeout_s: float = NODE_FATE_TIMEOUT_S) -> str | None:
        """Whether a node whose actor stopped answering is alive: ``None`` once a probe task ran
        there; else why it counts as lost (``its node died (...)``: Ray marked it dead;
        ``its node did not answer within 60 s (...)``), remembered in :attr:`lost_nodes`."""
        if node_id in self.lost_nodes:
            return self.lost_nodes[node_id]
        ray = require_ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        label = self._label(node_id)
        probe = ray.remote(_here).options(  # type: ignore[attr-defined]
            num_cpus=0, max_retries=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote()
        deadline = time.monotonic() + timeout_s
        why: str | None = None
        while why is None:
            if node_id not in self._alive_nodes():
                why = f"its node died ({label})"
                break
            done, _ = ray.wait([probe], timeout=0.5)
            if done:
                try:
                    ray.get(probe)
                    return None
                except Exception as exc:  # noqa: BLE001 - its node died meanwhile, or it runs no task
                    LOG.info("probe of %s failed: %s", label, exc)
                    why = f"its node died ({label})" if node_id not in self._alive_nodes() else \
                        f"its node runs no task ({label})"
            elif time.monotonic() > deadline:
                why = f"its node did not answer within {timeout_s:g} s ({label})"
        try:
            ray.cancel(probe, force=True)
        except Exception:  # noqa: BLE001 - done, or its node gone
            pass
        self.lost_nodes[node_id] = why
        LOG.info("%s: %s", label, why)
        return why

    def check(self) -> str | None:
        """Between trials: ``None`` when the hosts are as before. After a load host's node was
        lost, the load hosts reserved again among the nodes still alive (the old group removed,
        a new one made) and one line saying so.

        Raises
        ------
        benchlib.core.errors.HostLost
            the service node is lost, or fewer than :attr:`min_hosts` load hosts are left (one line).
        """
        alive = self._alive_nodes()
        if self.service is not None:
            why = self.service_lost or (None if self.service.node_id in alive
                                        else f"its node died ({self._label(self.service.node_id)})")
            if why is not None:
                raise HostLost(f"the service node ({self.service.resource}, {self.service.address}) lost: {why}")
        lost = self.lost_hosts()
        if not lost:
            return None
        said = "; ".join(f"{h.name()} lost: {why}" for h, why in lost)
        gone = {h.node_id for h, _ in lost} | set(self.lost_nodes)
        service_id = self.service.node_id if self.service is not None else None
        left = [n for n in self._load_candidates(list(alive.values()))
                if str(n.get("NodeID")) not in gone and n.get("NodeID") != service_id]
        need = self.min_hosts or 1
        if len(left) < need:
            raise HostLost(f"{said}; {len(left)} load host(s) left, fewer than min_hosts={need}")
        self._remove("placement_group")
        self._reserve_load(left)
        LOG.info("%s; load hosts now: %s", said, [h.label for h in self.host_nodes])
        return (f"{said}; the load hosts reserved again among the nodes still alive: {self.hosts} "
                f"({'; '.join(h.label for h in self.host_nodes)})")

    # -- a local cluster's processes --------------------------------------------------------
    def _start_reaper(self) -> None:
        """A thread that polls the local nodes' processes (Ray's ``Popen`` objects), so one that
        died (a killed raylet) is reaped: its workers watch it and exit once it is gone."""
        stop = threading.Event()

        def reap() -> None:
            while not stop.wait(REAP_PERIOD_S):
                cluster = self._cluster
                try:
                    for node in cluster.list_all_nodes() if cluster is not None else ():
                        for infos in list(node.all_processes.values()):
                            for info in list(infos):
                                info.process.poll()
                except Exception:  # noqa: BLE001 - Ray changed its internals: nothing reaped, nothing broken
                    pass

        thread = threading.Thread(target=reap, name="benchlib-ray-reaper", daemon=True)
        thread.start()
        self._reaper = (thread, stop)

    def _stop_reaper(self) -> None:
        if self._reaper is not None:
            thread, stop = self._reaper
            stop.set()
            thread.join(5.0)
            self._reaper = None

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
        self._stop_reaper()
        if self._cluster is not None:
            self._cluster.shutdown()
            self._cluster = None

    def _remove(self, attr: str) -> None:
        pg = getattr(self, attr)
        if pg is not None:
            try:
                from ray.util.placement_group import remove_placement_group

                remove_placement_group(pg)
            except Exception:  # noqa: BLE001 - the cluster may already be gone
                pass
            setattr(self, attr, None)

    def release(self) -> None:
        """Give back the reservations of :meth:`reserve` (the load hosts', the service node's)."""
        for attr in ("placement_group", "service_placement_group"):
            self._remove(attr)
        self.service = None

    def close(self) -> None:
        """Release the reservations, disconnect, and stop a cluster this session started."""
        ray = require_ray()
        self.release()
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False
        _restore_ray_messages(self._ray_print)
        self._ray_print = None
        self._stop_local()

    def describe(self) -> dict[str, Any]:
        """JSON-able facts for the run's provenance."""
        return {"cluster": self.spec.describe(), "hosts": self.hosts, "bundle": dict(self.bundle),
                "local": self.local, "setup_s": round(self.setup_s, 3), "min_hosts": self.min_hosts,
                "load_hosts": [h.label for h in self.host_nodes],
                "object_store_bytes": OBJECT_STORE_BYTES if self.local else None,
                **({"service_node": {"resource": self.service.resource, "node_id": self.service.node_id,
                                     "address": self.service.address}} if self.service is not None else {})}


def _route_ray_messages() -> Any:
    """Send the messages Ray prints on the driver for its raylets (a node marked dead, a raylet's
    last log lines) to the run's log instead of this process's output; returns what to restore
    (``None``: nothing changed)."""
    try:
        from ray._private import worker
    except ImportError:
        return None
    original = getattr(worker, "print_to_stdstream", None)
    if original is None:
        return None

    def routed(data: dict[str, Any], ignore_prefix: bool) -> None:
        if data.get("pid") == "raylet":
            LOG.info("Ray says:\n%s", "\n".join(str(x) for x in data.get("lines") or ()))
        else:
            original(data, ignore_prefix)

    worker.print_to_stdstream = routed
    return original


def _restore_ray_messages(original: Any) -> None:
    if original is not None:
        from ray._private import worker

        worker.print_to_stdstream = original
