"""A notebook's execution stopped by a stop signal: SIGINT (Ctrl-C), SIGTERM and SIGHUP sent
to the calling process all take one path.

The kernel gets SIGTERM, which its run turns into the Ctrl-C path (:mod:`benchlib.core.signals`:
load stopped, services stopped, stored trials kept); the kernel is then shut down and
:class:`~benchlib.core.signals.Interrupted` is raised. A kernel that has not finished within
``stop_grace_s`` seconds is killed with its process group, and what it started is swept (its
cgroups' processes killed, its load scratch folders and its containers removed). The kernel
itself gets SIGTERM if the calling process dies without that (:mod:`benchlib.publish.kernel`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from jupyter_client.manager import AsyncKernelManager

from benchlib.core.signals import Interrupted, recorded_signals, signal_name
from benchlib.loadgen.launch import sweep_scratch
from benchlib.runtime import cgroups
from benchlib.runtime.cleanup import sweep
from benchlib.runtime.docker.connection import connect

__all__ = ["execute_stoppably"]


def _recording_kernel_manager(started: list[Any]) -> type:
    """nbclient's kernel manager class, recording every manager whose kernel has started."""

    class RecordingKernelManager(AsyncKernelManager):  # type: ignore[misc]
        async def start_kernel(self, **kw: Any) -> None:
            await super().start_kernel(**kw)
            started.append(self)

    return RecordingKernelManager


def _kernel_pid(km: Any) -> int | None:
    pid = getattr(getattr(km, "provisioner", None), "pid", None)
    return int(pid) if pid else None


def execute_stoppably(execute: Callable[[type], None], grace_s: float,
                       show: Callable[[str], None] | None) -> None:
    """Run ``execute(kernel_manager_class)`` (papermill) in a thread; on a stop signal, stop
    the kernel it started (see the module docstring) and raise :class:`Interrupted`."""
    started: list[Any] = []
    outcome: dict[str, BaseException] = {}

    def target() -> None:
        try:
            execute(_recording_kernel_manager(started))
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            outcome["error"] = exc
        finally:
            _close_thread_loop()

    worker = threading.Thread(target=target, name="benchlib-notebook", daemon=True)
    with recorded_signals() as caught:
        worker.start()
        while worker.is_alive() and not caught:
            worker.join(0.2)
        if caught:
            if show is not None:
                show(f"benchlib: {signal_name(caught[0])}: stopping the notebook's load and services "
                     f"(at most {grace_s:g} s)")
            _stop_kernels(started, worker, grace_s)
            raise Interrupted(caught[0])
    if "error" in outcome:
        raise outcome["error"]


def _close_thread_loop() -> None:
    """Close the event loop papermill's client made for this thread (it would be left open)."""
    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        return
    if not loop.is_closed() and not loop.is_running():
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
    asyncio.set_event_loop(None)


def _stop_kernels(started: list[Any], worker: threading.Thread, grace_s: float) -> None:
    """SIGTERM to each kernel (its run stops cleanly); after ``grace_s`` seconds, SIGKILL to
    the kernels' process groups and a sweep of what they started."""
    deadline = time.monotonic() + grace_s
    signalled: set[int] = set()
    while worker.is_alive():
        for km in list(started):
            pid = _kernel_pid(km)
            if pid is not None and pid not in signalled:
                signalled.add(pid)
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        if time.monotonic() >= deadline:
            break
        worker.join(0.1)
    if not worker.is_alive():
        return
    for km in list(started):  # the clean stop took too long: the kernel and its load workers
        pid = _kernel_pid(km)
        if pid is not None:
            signalled.add(pid)
            try:
                os.killpg(pid, signal.SIGKILL)  # the kernel leads its own session
            except (ProcessLookupError, PermissionError):
                pass
    worker.join(15)
    _sweep_after_kill(signalled)


def _sweep_after_kill(kernel_pids: set[int]) -> None:
    """What killed kernels left: processes in their cgroups, load scratch folders, containers of
    dead owners."""
    for pid in kernel_pids:
        try:
            cgroups.kill_owned_by(pid)
        except OSError:
            pass
    sweep_scratch()  # the killed kernels' load scratch folders in /dev/shm
    try:
        client = connect(timeout_s=5.0)
    except Exception:  # noqa: BLE001 - no Docker here: nothing to sweep
        return
    try:
        sweep(client=client, include_cgroups=False)
    except Exception:  # noqa: BLE001 - best effort on the way out
        pass
    finally:
        client.close()
