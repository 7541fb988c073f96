"""The Jupyter kernel that ``benchlib run`` / ``benchlib report`` start: ipykernel, tied to its
parent so that a run never outlives whoever started it.

``python -m benchlib.kernel -f CONNECTION_FILE`` asks the Linux kernel to send this process
SIGTERM when its parent (the thread of ``benchlib run`` that started it) dies, whatever
killed that parent (SIGKILL included). A run in progress turns that SIGTERM into the Ctrl-C
path (:mod:`benchlib.signals`): its load stops and its services are stopped. ipykernel's own
parent poller, which ends the kernel with ``os._exit`` when the parent is gone (no clean-up
at all, in the middle of a trial), is replaced by one that sends this process SIGTERM every
second once the parent is gone: ignored while a run's clean-up is under way, it ends the
kernel (after the runtimes' stop callbacks) as soon as that is done.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from benchlib.signals import set_parent_death_signal


def _watch_parent(parent: int, interval_s: float = 1.0) -> None:
    """Once ``parent`` is no longer this process's parent, send SIGTERM to this process every
    ``interval_s`` seconds (a daemon thread; the main thread handles the signal)."""

    def loop() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=loop, name="benchlib-parent-watch", daemon=True).start()


def main() -> None:
    """Tie this process to its parent, then run ipykernel with the given arguments."""
    from ipykernel.kernelapp import IPKernelApp

    parent_env = os.environ.get("JPY_PARENT_PID", "")
    parent = int(parent_env) if parent_env.isdigit() else os.getppid()

    class BenchlibKernelApp(IPKernelApp):  # type: ignore[misc]
        """ipykernel with a parent watch that stops cleanly instead of ``os._exit``."""

        def init_poller(self) -> None:
            self.poller = None
            _watch_parent(parent)

    set_parent_death_signal(parent_pid=parent)
    sys.argv[0] = "benchlib.kernel"
    if not any(a.startswith("--log-level") or a.startswith("--log_level") for a in sys.argv):
        # the kernel's own log (start-up chatter) would interleave with benchlib run's lines;
        # errors still show; the notebook's outputs are not affected
        sys.argv.append("--log-level=ERROR")
    BenchlibKernelApp.launch_instance()


if __name__ == "__main__":
    main()
