"""What happened to a host of the cluster, read from Ray's errors where they arise: one line
for a trial's record and the progress, Ray's full text for the run's log (logger
``benchlib.run.cluster``; :func:`benchlib.run.runlog.run_log` writes it to the run folder's
``logs/run.log`` while a run executes).

A :class:`HostFault` has a kind:

* ``node``: its node died (Ray says so: "its node has died");
* ``actor``: its actor died and Ray knows why (its worker process exited, it was killed): its
  node's raylet reported it, so the node is alive;
* ``unreachable``: its actor stopped answering (``ActorUnavailableError``: its socket closed)
  and Ray does not know why yet. On a node whose raylet died this is what the driver sees
  until Ray's health check marks the node dead; :meth:`benchlib.run.cluster.session.ClusterSession.node_fate`
  settles it;
* ``error``: a method raised (e.g. the host cannot reach the service): not a loss.

Pure but for the logger: no Ray import (the exceptions are told apart by their class names).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["HostFault", "fault_of", "log_fault", "node_label", "one_line", "LOG"]

#: The logger of the cluster's faults (Ray's full text); the run's log collects it.
LOG = logging.getLogger("benchlib.run.cluster")

#: Resources Ray gives every node itself, and benchlib's load marker: not names of a node.
_NOT_NAMES = ("CPU", "GPU", "memory", "object_store_memory", "benchlib_load")


@dataclass(frozen=True)
class HostFault:
    """What happened to a host: ``kind`` (``node``, ``actor``, ``unreachable``, ``error``: see
    the module docstring) and ``line``, one line in words (``its node died``, ...)."""

    kind: str
    line: str

    @property
    def lost(self) -> bool:
        """Whether the host may be gone (not a method's own error)."""
        return self.kind != "error"


def one_line(exc: BaseException) -> str:
    """An error in one line: its type and the last line of its message (a Ray task's error:
    the exception raised in it)."""
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip().splitlines()
    last = next((ln.strip() for ln in reversed(text) if ln.strip()), "")
    return f"{type(cause).__name__}: {last}" if last else type(cause).__name__


def _names(cls: type) -> set[str]:
    return {c.__name__ for c in cls.__mro__}


def fault_of(exc: BaseException) -> HostFault:
    """The :class:`HostFault` a Ray error says (any other exception: ``error``, in one line)."""
    names = _names(type(exc))
    text = str(exc)
    if "ActorDiedError" in names or ("RayActorError" in names and "ActorUnavailableError" not in names):
        if "node has died" in text or "node was terminated" in text:
            return HostFault("node", "its node died" + (" (preempted)" if getattr(exc, "preempted", False) else ""))
        cause = re.search(r"The actor (?:is dead|died) because ([^.\n]*)", text)
        exit_type = re.search(r"Worker exit type: (\w+)", text)
        why = ", ".join(x for x in (cause.group(1).strip() if cause else "",
                                    exit_type.group(1) if exit_type else "") if x)
        if "never ran" in text:
            why = ", ".join(x for x in (why, "it never started") if x)
        return HostFault("actor", f"its actor died ({why})" if why else "its actor died")
    if "ActorUnavailableError" in names:
        return HostFault("unreachable", "its actor stopped answering")
    if "GetTimeoutError" in names:
        return HostFault("unreachable", "it did not answer in time")
    return HostFault("error", one_line(exc))


def log_fault(who: str, exc: BaseException, fault: HostFault | None = None) -> None:
    """Ray's full text of ``exc`` into the run's log, under ``who`` (e.g. ``load host 1``)."""
    fault = fault or fault_of(exc)
    LOG.info("%s: %s; Ray's error in full:\n%s: %s", who, fault.line, type(exc).__name__, exc)


def node_label(node_id: str, resources: Mapping[str, float] | None = None) -> str:
    """A node in words: ``Ray node 6793dfde`` and the custom resources naming it, e.g.
    ``Ray node 6793dfde, benchlib_host_2`` on a local cluster."""
    names = sorted(k for k in (resources or {}) if k not in _NOT_NAMES
                   and not k.startswith(("node:", "accelerator_type:")))
    return ", ".join([f"Ray node {node_id[:8]}", *names])
