"""Which CPUs the service, the load generator and dependencies get.

Every measurement pins the load generator and the service to separate CPUs. By default the
service gets the last ``server_count`` CPUs this process may use, the client the CPUs
before them, and dependencies (a database) share the service's CPUs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from benchlib.core.errors import ParameterError
from benchlib.core.placement import CpuPlan

__all__ = ["CpuPlan", "available_cpus", "plan_cpus"]


def available_cpus() -> tuple[int, ...]:
    """The CPU ids this process may run on, ascending."""
    return tuple(sorted(os.sched_getaffinity(0)))


def plan_cpus(
    server: Sequence[int] | None = None,
    client: Sequence[int] | None = None,
    dependencies: Sequence[int] | None = None,
    *,
    server_count: int = 1,
) -> CpuPlan:
    """Assign CPUs; explicit lists win, the rest are derived.

    Raises
    ------
    ParameterError
        when fewer than two CPUs are available, a CPU is not available, or server and client
        overlap (the load generator must not share the service's CPUs).
    """
    cpus = available_cpus()
    if len(cpus) < 2:
        raise ParameterError(
            f"benchlib needs at least 2 CPUs to keep the load generator off the service's CPU; "
            f"this process may use only {list(cpus)}"
        )
    for label, given in (("server", server), ("client", client), ("dependencies", dependencies)):
        if given is not None:
            bad = sorted(set(given) - set(cpus))
            if bad or not given:
                raise ParameterError(f"{label} CPUs {list(given)} are not all available; valid: {list(cpus)}")
    if server is None:
        used = set(client or ())
        free = [c for c in cpus if c not in used]
        if len(free) < 1:
            raise ParameterError(f"no CPU left for the server; client uses {sorted(used)} of {list(cpus)}")
        server = free[-min(server_count, len(free)) :]
    if client is None:
        client = [c for c in cpus if c not in set(server)]
        if not client:
            raise ParameterError(f"no CPU left for the load generator; server uses {list(server)} of {list(cpus)}")
    overlap = sorted(set(server) & set(client))
    if overlap:
        raise ParameterError(f"server and client CPUs overlap on {overlap}; give them separate CPUs")
    return CpuPlan(server=tuple(server), client=tuple(client),
                   dependencies=tuple(dependencies) if dependencies is not None else tuple(server))
