"""A cross-check's peer tool (wrk, ab, bombardier, ghz, h2load, k6, hey) on a load host of the
cluster, not on the driver's machine: the runner's ``cross_check=`` function for ``cluster=``.

The peer tool is a load generator like benchlib's own, so it runs where the load comes from:
a Ray task in the first load host's bundle of the session's placement group (that bundle is
free between the trial's own load actors, which are killed after each trial), running
:func:`benchlib.loadgen.peers.crosscheck.run_cross_check` there. Its report comes back with the host it ran on
(``load_host``: node id, address, host name). On a local cluster it is pinned to the run's
client CPUs, as on one machine; on other clusters it uses the CPUs its node gives it. A peer
tool missing on that node, or a task that fails or does not answer within the tool's duration
plus :data:`MARGIN_S`, is recorded as ``{"error": ...}`` as on one machine: the trial stands.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from typing import Any

from benchlib.core.model import CrossCheck
from benchlib.loadgen.peers.crosscheck import run_cross_check
from benchlib.run.cluster.session import ClusterSession, require_ray

__all__ = ["ClusterCrossCheck", "MARGIN_S"]

#: Seconds past the peer tool's own duration before its task is given up.
MARGIN_S = 300.0


def _run_here(check: CrossCheck, url: str, cpus: Sequence[int], order: str) -> dict[str, Any]:
    """On the load host (a Ray task): the peer tool's report plus where it ran."""
    import ray
    import ray.util

    out = run_cross_check(check, url, cpus, order=order)
    return {**out, "load_host": {"host": 0, "node_id": str(ray.get_runtime_context().get_node_id()),
                                 "ip": ray.util.get_node_ip_address(), "hostname": socket.gethostname(),
                                 "pid": os.getpid()}}


class ClusterCrossCheck:
    """Runs each cross-check on the session's first load host (see the module docstring)."""

    def __init__(self, session: ClusterSession) -> None:
        self.session = session

    def __call__(self, check: CrossCheck, url: str, cpus: Sequence[int], *, order: str) -> dict[str, Any]:
        ray = require_ray()
        from ray import exceptions as rex
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        pinned = list(cpus) if self.session.local else []
        duration = float(dict(check.options).get("duration_s", 60.0) or 60.0)
        task = ray.remote(_run_here).options(  # type: ignore[attr-defined]
            num_cpus=0, resources=dict(self.session.bundle), max_retries=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(self.session.placement_group,
                                                                 placement_group_bundle_index=0))
        ref = task.remote(check, url, pinned, order)
        try:
            return dict(ray.get(ref, timeout=duration + MARGIN_S))
        except rex.GetTimeoutError:
            ray.cancel(ref, force=True)
            why = f"did not finish within {duration + MARGIN_S:g} s on load host 0 (cancelled)"
        except (rex.RayTaskError, rex.RayError) as exc:
            why = f"failed on load host 0: {str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__}"
        return {"tool": check.tool, "order": order, "error": why}
