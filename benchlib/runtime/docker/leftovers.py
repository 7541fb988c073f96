"""The container half of the label sweep: remove the containers a killed run left behind.

Every container benchlib starts carries the labels ``benchlib.run_id``, ``benchlib.service``,
``benchlib.role`` and ``benchlib.owner`` (host, boot, pid and start time of the process that
started it; :func:`benchlib.runtime.docker.connection.owner_label`). :func:`sweep_containers`
removes those of one run, those whose owner process is gone, or all of them. The Docker
runtime runs it before its first start; :func:`benchlib.runtime.cleanup.sweep` (``benchlib cleanup``)
runs it together with the sweep of leftover cgroups.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchlib.runtime.docker.connection import iter_benchlib_containers, owner_alive

__all__ = ["ContainerSweep", "sweep_containers"]


@dataclass
class ContainerSweep:
    """What :func:`sweep_containers` did.

    Attributes
    ----------
    removed: one dict per removed container: ``name``, ``id``, ``run_id``, ``service``,
        ``status`` (before removal), ``why``.
    kept: containers left alone (``name``, ``run_id``, ``why``).
    errors: what could not be done, one line each.
    """

    removed: list[dict[str, Any]] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def sweep_containers(client: Any, run_id: str | None = None, *, all_owners: bool = False) -> ContainerSweep:
    """Remove benchlib's leftover containers from the engine ``client`` talks to.

    Parameters
    ----------
    client: a ``docker.DockerClient``.
    run_id: remove every container of this run; ``None``: those started on this machine
        (owner host and boot id) whose owner process is gone, never those of a benchlib
        process still running, nor those another machine (or an earlier boot) started.
    all_owners: with ``run_id=None``, remove every benchlib container.
    """
    import docker.errors

    result = ContainerSweep()
    try:
        containers = list(iter_benchlib_containers(client, run_id))
    except Exception as exc:  # noqa: BLE001 - engine went away
        result.errors.append(f"docker: listing containers failed: {exc}")
        return result
    for c in containers:
        labels = c.labels or {}
        entry = {"name": c.name, "id": c.short_id, "run_id": labels.get("benchlib.run_id"),
                 "service": labels.get("benchlib.service"), "status": c.status}
        alive = owner_alive(labels.get("benchlib.owner", ""))
        if run_id is not None:
            why = f"run {run_id} swept"
        elif all_owners:
            why = "all benchlib containers swept"
        elif alive is False:
            why = "its benchlib process is gone"
        else:
            result.kept.append({**entry, "why": "its benchlib process is still running" if alive
                                else "started from another machine or an earlier boot (use all_owners=True, "
                                     "`benchlib cleanup --all`)"})
            continue
        try:
            c.remove(force=True, v=True)
            result.removed.append({**entry, "why": why})
        except docker.errors.NotFound:  # removed meanwhile (its own run's stop): nothing left
            continue
        except Exception as exc:  # noqa: BLE001 - the engine refused
            result.errors.append(f"docker: removing {c.name} failed: {exc}")
    return result
