"""The label sweep: remove what a killed run left behind (``benchlib cleanup``).

Every container benchlib starts carries the labels ``benchlib.run_id``,
``benchlib.service``, ``benchlib.role`` and ``benchlib.owner`` (host, boot, pid and start
time of the process that started it). A run that ends normally removes its containers
itself; one killed hard (SIGKILL, a crashed kernel, a closed laptop) leaves them running.
:func:`sweep` removes them:

- ``sweep(run_id)``: every container of that run;
- ``sweep()``: containers started on this machine (owner host and boot id) whose owner
  process is gone; never those of a benchlib process still running, so two benchlib sessions
  sharing an engine do not remove each other's services (not even one that just died and is
  about to be inspected by its owner), and never those another machine (or an earlier boot)
  started: on a shared engine, this machine cannot tell whether that run is still going;
- ``sweep(all_owners=True)``: every benchlib container.

The containers go through :func:`benchlib.runtime.docker.leftovers.sweep_containers` (the Docker
runtime runs that alone before its first start). :func:`sweep` also removes empty
``benchlib/<name>`` cgroups left by killed local runs, and with ``kill_orphans`` first kills
the services still running in cgroups whose benchlib process is gone
(:func:`benchlib.runtime.cgroups.sweep`); ``benchlib cleanup`` runs it with ``kill_orphans``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from benchlib.core.errors import RuntimeUnavailable
from benchlib.runtime import cgroups
from benchlib.runtime.docker.connection import shared_client
from benchlib.runtime.docker.leftovers import ContainerSweep, sweep_containers

__all__ = ["SweepResult", "sweep"]


@dataclass
class SweepResult(ContainerSweep):
    """What :func:`sweep` did: the containers (``removed``, ``kept``; see
    :class:`~benchlib.runtime.docker.leftovers.ContainerSweep`), ``cgroups_removed`` (empty
    leftover cgroup directories removed) and ``errors`` (what could not be done, e.g. no
    engine answers, one line each)."""

    cgroups_removed: list[str] = field(default_factory=list)
    scratch_removed: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"removed {len(self.removed)} container{'s' if len(self.removed) != 1 else ''}"
                 + (f", kept {len(self.kept)}" if self.kept else "")
                 + (f", removed {len(self.cgroups_removed)} empty cgroup(s)" if self.cgroups_removed else "")
                 + (f", removed {len(self.scratch_removed)} load scratch folder(s)" if self.scratch_removed else "")]
        lines += [f"  removed {c['name']} (run {c['run_id']}, {c['service']}, was {c['status']}: {c['why']})"
                  for c in self.removed]
        lines += [f"  kept {c['name']} (run {c['run_id']}: {c['why']})" for c in self.kept]
        lines += [f"  note: {e}" for e in self.errors]
        return "\n".join(lines)

    def __iter__(self) -> Iterator[str]:
        """One line per removed object (containers, then cgroups)."""
        for c in self.removed:
            yield f"container {c['name']} (run {c['run_id']}, {c['service']}, was {c['status']}: {c['why']})"
        for d in self.cgroups_removed:
            yield f"cgroup {d}"
        for d in self.scratch_removed:
            yield f"scratch {d}"

    def __len__(self) -> int:
        return len(self.removed) + len(self.cgroups_removed) + len(self.scratch_removed)

    def to_dict(self) -> dict[str, Any]:
        return {"removed": self.removed, "kept": self.kept, "cgroups_removed": self.cgroups_removed,
                "scratch_removed": self.scratch_removed, "errors": self.errors}


def sweep(run_id: str | None = None, *, client: Any | None = None, all_owners: bool = False,
          include_cgroups: bool = True, kill_orphans: bool = False) -> SweepResult:
    """Remove containers (and empty cgroups) left by benchlib runs.

    Parameters
    ----------
    run_id: remove every container of this run; ``None``: those whose owner process is gone.
    client: a ``docker.DockerClient`` (default: connect from the environment; when no engine
        answers, only cgroups are swept and the reason is in ``errors``).
    all_owners: with ``run_id=None``, remove every benchlib container, live runs' and other
        machines' included.
    include_cgroups: also remove empty leftover ``benchlib`` cgroups of this machine, and the
        load generator's scratch folders whose owner process is gone
        (:func:`benchlib.loadgen.launch.sweep_scratch`).
    kill_orphans: first kill the processes in ``benchlib`` cgroups whose creating process is
        gone (local services that outlived a killed run), then remove those cgroups too.

    Returns
    -------
    SweepResult
        ``str(result)`` is a summary to print, one line per container.
    """
    result = SweepResult()
    if client is None:
        try:
            client = shared_client()
        except RuntimeUnavailable as exc:
            result.errors.append(f"docker: {exc}")
    if client is not None:
        done = sweep_containers(client, run_id, all_owners=all_owners)
        result.removed, result.kept, result.errors = done.removed, done.kept, result.errors + done.errors
    if include_cgroups:
        try:
            result.cgroups_removed = cgroups.sweep(kill_orphans=kill_orphans)
        except OSError as exc:
            result.errors.append(f"cgroups: {exc}")
        # the load workers' scratch folders of killed runs (owner gone) go with the cgroups
        from benchlib.loadgen.launch import sweep_scratch

        result.scratch_removed = sweep_scratch()
    return result
