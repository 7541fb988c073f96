"""The Jupyter kernel ``benchlib``: ipykernel, tied to its parent so that a run never outlives
whoever started it.

One kernel, one command (:func:`spec`): ``<the environment's python> -m benchlib.publish.kernel``.
``scripts/setup.sh`` registers it in the project's environment as ``benchlib``
(``python -m benchlib.publish.kernel install``: ``<sys.prefix>/share/jupyter/kernels/benchlib``, where
``jupyter lab`` and papermill of that environment look), the study notebooks name it in their
metadata, and ``benchlib run`` / ``benchlib report`` run a kernelspec of the same name and
command for the interpreter that runs them (found first while they execute, so a kernel named
``benchlib`` that another environment registered is never used; :func:`this_python_kernel`).

``python -m benchlib.publish.kernel -f CONNECTION_FILE`` asks the Linux kernel to send this process
SIGTERM when its parent (the thread of ``benchlib run`` that started it) dies, whatever
killed that parent (SIGKILL included). A run in progress turns that SIGTERM into the Ctrl-C
path (:mod:`benchlib.core.signals`): its load stops and its services are stopped. ipykernel's own
parent poller, which ends the kernel with ``os._exit`` when the parent is gone (no clean-up
at all, in the middle of a trial), is replaced by one that sends this process SIGTERM every
second once the parent is gone: ignored while a run's clean-up is under way, it ends the
kernel (after the runtimes' stop callbacks) as soon as that is done.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchlib.core.signals import set_parent_death_signal

__all__ = ["NAME", "install", "main", "spec", "this_python_kernel"]

#: The kernelspec's name (the notebooks' metadata name it).
NAME = "benchlib"


def spec() -> dict[str, object]:
    """The kernelspec (``kernel.json``) of the kernel that runs this interpreter."""
    return {"argv": [sys.executable, "-m", "benchlib.publish.kernel", "-f", "{connection_file}"],
            "display_name": f"benchlib (Python {sys.version.split()[0]})", "language": "python",
            "metadata": {"debugger": True}}


def install(data_dir: str | Path | None = None) -> Path:
    """Write :func:`spec` as the kernelspec :data:`NAME` under ``data_dir`` (a Jupyter data
    folder; default ``<sys.prefix>/share/jupyter``, as ``jupyter kernelspec install
    --sys-prefix``); returns the kernelspec's folder. Idempotent."""
    folder = Path(data_dir or Path(sys.prefix) / "share" / "jupyter") / "kernels" / NAME
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "kernel.json"
    text = json.dumps(spec(), indent=1) + "\n"
    if not path.exists() or path.read_text() != text:
        tmp = folder / ".kernel.json.tmp"
        tmp.write_text(text)
        tmp.replace(path)
    return folder


@contextmanager
def this_python_kernel() -> Iterator[str]:
    """The kernel :data:`NAME` for *this* interpreter, found first on
    ``JUPYTER_PATH`` while the context lasts; yields its name. The same name and command as the
    kernel ``scripts/setup.sh`` registers in the project's environment, so a notebook executes
    in the environment that runs benchlib, whatever kernel another environment registered."""
    with tempfile.TemporaryDirectory(prefix="benchlib-kernel-") as tmp:
        install(tmp)
        saved = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = tmp + (os.pathsep + saved if saved else "")
        try:
            yield NAME
        finally:
            if saved is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = saved


def _watch_parent(parent: int, interval_s: float = 1.0) -> None:
    """Once ``parent`` is no longer this process's parent, send SIGTERM to this process every
    ``interval_s`` seconds (a daemon thread; the main thread handles the signal)."""

    def loop() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=loop, name="benchlib-parent-watch", daemon=True).start()


def _drop_shutdown_interrupt(record: logging.LogRecord) -> bool:
    """Drop ipykernel's "KeyboardInterrupt caught in kernel" error line. jupyter_client interrupts
    a kernel (SIGINT) before every shutdown; when that lands while the kernel is still finishing
    the last message (a busy machine), ipykernel logs this at ERROR level, on the stderr of
    ``benchlib run``, though nothing went wrong. An interrupt of a running cell still shows
    in the cell's output as a ``KeyboardInterrupt``."""
    return not record.getMessage().startswith("KeyboardInterrupt caught in kernel")


def main() -> None:
    """Tie this process to its parent, then run ipykernel with the given arguments;
    ``python -m benchlib.publish.kernel install`` registers the kernel instead (:func:`install`)."""
    if sys.argv[1:2] == ["install"]:
        if len(sys.argv) > 2:
            sys.exit(f"usage: python -m benchlib.publish.kernel install (no arguments; got {sys.argv[2:]})")
        print(f"{NAME} -> {install()}")
        return
    from ipykernel.kernelapp import IPKernelApp

    parent_env = os.environ.get("JPY_PARENT_PID", "")
    parent = int(parent_env) if parent_env.isdigit() else os.getppid()

    class BenchlibKernelApp(IPKernelApp):  # type: ignore[misc]
        """ipykernel with a parent watch that stops cleanly instead of ``os._exit``."""

        def init_poller(self) -> None:
            self.poller = None
            _watch_parent(parent)

        def initialize(self, argv: list[str] | None = None) -> None:
            super().initialize(argv)
            self.log.addFilter(_drop_shutdown_interrupt)

    set_parent_death_signal(parent_pid=parent)
    sys.argv[0] = "benchlib.publish.kernel"
    if not any(a.startswith("--log-level") or a.startswith("--log_level") for a in sys.argv):
        # the kernel's own log (start-up chatter) would interleave with benchlib run's lines;
        # errors still show; the notebook's outputs are not affected
        sys.argv.append("--log-level=ERROR")
    BenchlibKernelApp.launch_instance()


if __name__ == "__main__":
    main()
