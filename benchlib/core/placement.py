"""Where a study's load and services run: the CPUs of each role on this machine
(:class:`CpuPlan`), and the ``cluster=`` parameter, parsed (pure, no Ray).

* ``None``: this machine, as always (no Ray);
* ``"local:N"``: a Ray cluster of ``N`` nodes started on this machine for the run (the head
  and ``N - 1`` more), each a load node with the custom resource ``benchlib_load``
  and one naming it (``benchlib_host_<i>``); for trying the cluster path and for tests (every
  node shares this machine's CPUs: it shows correctness, not capacity);
* ``"auto"``: the Ray cluster this machine belongs to (``ray start`` ran here, or
  ``RAY_ADDRESS`` is set);
* ``"ray://<host>:<port>"``: a Ray cluster reached through its Ray Client server.

On an existing cluster the load hosts are the nodes with the resource ``benchlib_load``
(``ray start --resources='{"benchlib_load": 1}'``), else every alive node with a CPU.

Options after a ``?`` put the services under test on a node of their own
(:mod:`benchlib.run.cluster.service`), e.g. ``"local:3?service=benchlib_host_0"`` or
``"auto?service=server_box&server_cpus=all"``:

* ``service=<resource>``: the node carrying this custom resource (and no other alive node)
  runs the services (built, started, health-checked, pinned and stopped there by a Ray actor);
  the load comes from the other load nodes only. On ``local:N`` the nodes are
  ``benchlib_host_0`` .. ``benchlib_host_<N-1>`` (``N`` >= 2);
* ``server_cpus=all`` (every CPU of the service node) or ``server_cpus=<n>`` (its last ``n``
  CPUs): where the services are pinned. Default: on ``local:N`` the run's server CPUs (the
  nodes share this machine's CPUs, so the load keeps its own), elsewhere ``all``.

One more option, with or without a service node:

* ``min_hosts=<n>``: the fewest load hosts the run goes on with when hosts are lost mid-run
  (the load hosts are then reserved again among the nodes still alive, and a block that lost a
  host runs again in full); below it the run stops, its stored trials kept for a resume.
  Default: the load hosts reserved at the start (any loss stops the run).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from benchlib.core.errors import ParameterError

__all__ = ["ClusterSpec", "CpuPlan", "parse_cluster", "LOAD_RESOURCE", "MAX_LOCAL_NODES", "CLUSTER_CHOICES", "INSTALL_HINT",
           "OPTION_CHOICES", "OPTIONS", "local_host_resource", "ray_installed"]

@dataclass(frozen=True)
class CpuPlan:
    """CPU ids for each role (:func:`benchlib.run.cpus.plan_cpus` makes one). ``server`` and
    ``client`` never overlap; ``dependencies`` (a database) share the server's by default."""

    server: tuple[int, ...]
    client: tuple[int, ...]
    dependencies: tuple[int, ...]

    def to_dict(self) -> dict[str, list[int]]:
        """The stored form (run.json's and each trial's ``cpus``)."""
        return {"server": list(self.server), "client": list(self.client), "dependencies": list(self.dependencies)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Sequence[int] | None]) -> CpuPlan:
        """The mirror of :meth:`to_dict` (a role not stored reads as no CPU)."""
        return cls(*(tuple(int(c) for c in d.get(role) or ()) for role in ("server", "client", "dependencies")))


#: The custom resource marking a node as a load host (one unit per node).
LOAD_RESOURCE = "benchlib_load"
#: Most load nodes ``local:N`` starts (each is a raylet and a few Ray processes).
MAX_LOCAL_NODES = 8
#: The valid forms, for error messages.
CLUSTER_CHOICES = ('None (this machine), "local:N" (N = 1..8 nodes on this machine), "auto", "ray://host:port"; '
                   'each may add "?service=<node resource>" (the services on that node) and '
                   '"min_hosts=<n>" (the fewest load hosts to go on with)')

#: The options after ``?``, for error messages.
OPTION_CHOICES = ("service=<node resource>, server_cpus=all|<n> and min_hosts=<n> "
                  "(e.g. 'local:3?service=benchlib_host_0&min_hosts=1')")
#: The option names after ``?``.
OPTIONS = ("service", "server_cpus", "min_hosts")

#: The one line a user without Ray gets when asking for a cluster.
INSTALL_HINT = "cluster= needs Ray, an optional extra: pip install 'benchlib[cluster]'"

_RAY_URL = re.compile(r"^ray://[A-Za-z0-9._\-\[\]:]+:\d{1,5}$")
_RESOURCE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def local_host_resource(i: int) -> str:
    """The custom resource naming node ``i`` of a ``local:N`` cluster."""
    return f"benchlib_host_{i}"


@dataclass(frozen=True)
class ClusterSpec:
    """A parsed ``cluster=`` value.

    Attributes
    ----------
    kind: ``"local"`` (start one here), or ``"address"`` (connect to one).
    nodes: nodes to start, each a load node (``local``); 0 for an existing cluster.
    address: what :func:`ray.init` is given (``"auto"``, ``"ray://..."``); ``None`` for local.
    service: the custom resource naming the node that runs the services (``None``: this machine).
    server_cpus: where the services are pinned on that node: ``"all"``, a count of its last
        CPUs, or ``None`` (the default: see the module docstring).
    min_hosts: the fewest load hosts a run goes on with after losing some (``None``: those
        reserved at its start).
    """

    kind: str
    nodes: int = 0
    address: str | None = None
    service: str | None = None
    server_cpus: int | str | None = None
    min_hosts: int | None = None

    def describe(self) -> str:
        """One line, e.g. ``a local Ray cluster of 2 nodes`` (``, the services on benchlib_host_0``)."""
        if self.kind == "local":
            where = f"a local Ray cluster of {self.nodes} node{'s' if self.nodes != 1 else ''}"
        else:
            where = f"the Ray cluster at {self.address}"
        return (where + (f", the services on the node with {self.service}" if self.service else "")
                + (f", at least {self.min_hosts} load host{'s' if self.min_hosts != 1 else ''}"
                   if self.min_hosts is not None else ""))


def parse_cluster(value: object) -> ClusterSpec | None:
    """``cluster=`` as a :class:`ClusterSpec` (``None`` for this machine).

    Raises
    ------
    benchlib.core.errors.ParameterError
        For anything else, naming the valid forms.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise ParameterError(f"cluster must be one of {CLUSTER_CHOICES}; got {value!r}")
    text, _, query = value.strip().partition("?")
    m = re.fullmatch(r"local:(\d+)", text)
    if m:
        n = int(m.group(1))
        if not 1 <= n <= MAX_LOCAL_NODES:
            raise ParameterError(f"cluster {value!r}: a local cluster has 1..{MAX_LOCAL_NODES} load nodes; got {n}")
        spec = ClusterSpec("local", nodes=n)
    elif text == "auto" or _RAY_URL.match(text):
        spec = ClusterSpec("address", address=text)
    else:
        raise ParameterError(f"cluster must be one of {CLUSTER_CHOICES}; got {value!r}")
    return _with_options(spec, query, value) if query or value.strip().endswith("?") else spec


def _with_options(spec: ClusterSpec, query: str, value: str) -> ClusterSpec:
    """``spec`` with the options after ``?`` (``service=...&server_cpus=...&min_hosts=...``)."""
    options: dict[str, str] = {}
    for part in query.split("&"):
        key, eq, v = part.partition("=")
        if not eq or key not in OPTIONS or not v or key in options:
            raise ParameterError(f"cluster {value!r}: options after '?' are {OPTION_CHOICES}; got {part!r}")
        options[key] = v
    service = options.get("service")
    if service is None and "server_cpus" in options:
        raise ParameterError(f"cluster {value!r}: server_cpus needs a service node; options are {OPTION_CHOICES}")
    if service is not None and not _RESOURCE.match(service):
        raise ParameterError(f"cluster {value!r}: service={service!r} is not a Ray resource name "
                             "(letters, digits, '_', '.', '-')")
    if spec.kind == "local" and service is not None:
        names = [local_host_resource(i) for i in range(spec.nodes)]
        if spec.nodes < 2:
            raise ParameterError(f"cluster {value!r}: a service node leaves no node to send load from; "
                                 "use local:2 or more")
        if service not in names:
            raise ParameterError(f"cluster {value!r}: service={service!r} is not a node of local:{spec.nodes}; "
                                 f"valid: {', '.join(names)}")
    cpus: int | str | None = options.get("server_cpus")
    if cpus is not None and cpus != "all":
        if not str(cpus).isdigit() or int(cpus) < 1:
            raise ParameterError(f"cluster {value!r}: server_cpus must be 'all' or a positive number of CPUs; "
                                 f"got {cpus!r}")
        cpus = int(cpus)
    least: int | None = None
    if "min_hosts" in options:
        text = options["min_hosts"]
        load_nodes = spec.nodes - (1 if service is not None else 0) if spec.kind == "local" else None
        valid = f"1..{load_nodes}" if load_nodes is not None else "a positive number"
        if not text.isdigit() or int(text) < 1 or (load_nodes is not None and int(text) > load_nodes):
            where = f" (local:{spec.nodes} has {load_nodes} load node(s))" if load_nodes is not None else ""
            raise ParameterError(f"cluster {value!r}: min_hosts must be {valid}{where}; got {text!r}")
        least = int(text)
    return ClusterSpec(spec.kind, nodes=spec.nodes, address=spec.address, service=service, server_cpus=cpus,
                       min_hosts=least)


def ray_installed() -> bool:
    """Whether the ``ray`` package can be imported here (it is not imported)."""
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):  # ``sys.modules["ray"] = None``, or a module without a spec
        return False
