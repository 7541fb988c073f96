"""Clean stops on any stop signal: SIGTERM and SIGHUP take the same path as Ctrl-C.

``timeout``, CI runners, schedulers and kernel managers stop a process with SIGTERM; a
closed terminal sends SIGHUP; a user presses Ctrl-C (SIGINT). Whatever the signal, what a
run started must stop with it: load workers and their scratch folder, services (process
groups, cgroups, containers). Three layers:

- :func:`interrupt_on_signals`: while a run executes (:func:`benchlib.run.runner.run_experiment`),
  the first stop signal raises :class:`Interrupted` (a ``KeyboardInterrupt``) in the main
  thread, so every ``finally`` and context manager on the way out runs. Signals that follow
  while that clean-up runs are ignored, so they cannot cut it short (whoever sent them can
  still SIGKILL). A signal whose disposition is "ignore" (``nohup``) stays ignored.
- :func:`deferred`: a short section (a process started, its handle not yet registered)
  during which a stop signal is held back and raised at its end.
- :func:`on_stop`: the runtimes register a callback that stops whatever they still have
  running; a process that receives SIGTERM or SIGHUP outside a run (an idle kernel, a script
  holding a handle) calls the callbacks, then dies of the signal as it would have.

The last line of defence, when even that cannot run (SIGKILL), is the kernel's and the local
services' parent-death signal (:func:`set_parent_death_signal`): a process benchlib starts
gets SIGTERM when the thread that started it dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "Interrupted",
    "STOP_SIGNALS",
    "deferred",
    "interrupt_on_signals",
    "on_stop",
    "parent_death_signal_setter",
    "recorded_signals",
    "run_stop_callbacks",
    "set_parent_death_signal",
    "signal_name",
]

#: The signals that stop a run the way Ctrl-C does.
STOP_SIGNALS: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15, and so on."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class Interrupted(KeyboardInterrupt):
    """A stop signal arrived: the Ctrl-C path, with the signal's number.

    Attributes
    ----------
    signum: the signal (``signal.SIGTERM``, ...).
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal_name(signum)}")
        self.signum = signum

    @property
    def exit_status(self) -> int:
        """The shell's convention for a process ended by this signal: 128 + its number."""
        return 128 + self.signum


# ----------------------------------------------------------------------------- the run guard

class _Guard:
    """State of the active :func:`interrupt_on_signals` (main thread only)."""

    def __init__(self) -> None:
        self.raised: int | None = None  # the signal already raised as Interrupted
        self.pending: int | None = None  # a signal held back by deferred()
        self.defer_depth = 0

    def handler(self, signum: int, frame: Any) -> None:
        if self.raised is not None or self.pending is not None:
            return  # clean-up is under way: a second signal must not cut it short
        if self.defer_depth:
            self.pending = signum
            return
        self.raised = signum
        raise Interrupted(signum)


_GUARD: _Guard | None = None


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def interrupt_on_signals() -> Iterator[None]:
    """While the block runs, SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` (once).

    A no-op outside the main thread (signals are delivered there only) and when already
    active. The previous handlers are restored on exit; SIGTERM and SIGHUP keep the
    :func:`on_stop` handler afterwards.
    """
    global _GUARD
    if _GUARD is not None or not _in_main_thread():
        yield
        return
    _install_last_resort()
    guard = _Guard()
    previous = _handle_stop_signals(guard.handler)
    _GUARD = guard
    try:
        yield
    finally:
        _GUARD = None
        _restore(previous)


def _handle_stop_signals(handler: Callable[[int, Any], None]) -> dict[int, Any]:
    """Point every stop signal not set to "ignore" at ``handler``; the handlers replaced."""
    previous: dict[int, Any] = {}
    for sig in STOP_SIGNALS:
        try:
            if signal.getsignal(sig) is signal.SIG_IGN:
                continue  # nohup, or a background job: the caller chose to ignore it
            previous[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):  # pragma: no cover - not the main interpreter
            continue
    return previous


def _restore(previous: dict[int, Any]) -> None:
    for sig, old in previous.items():
        signal.signal(sig, old if old is not None else signal.SIG_DFL)


@contextlib.contextmanager
def recorded_signals() -> Iterator[list[int]]:
    """While the block runs, SIGINT, SIGTERM and SIGHUP are appended to the yielded list
    instead of acting, for a caller that stops its work itself (``benchlib run`` forwards
    them to its kernel). Main thread only (elsewhere the list stays empty); a signal whose
    disposition is "ignore" stays ignored. The previous handlers are restored on exit."""
    caught: list[int] = []
    if not _in_main_thread():
        yield caught
        return

    def record(signum: int, frame: Any) -> None:
        caught.append(signum)

    previous = _handle_stop_signals(record)
    try:
        yield caught
    finally:
        _restore(previous)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold a stop signal back while the block runs (e.g. between starting a process and
    registering its handle, so it cannot be orphaned); raise it as :class:`Interrupted` at
    the end. Without an active :func:`interrupt_on_signals`, a no-op."""
    guard = _GUARD
    if guard is None or not _in_main_thread():
        yield
        return
    guard.defer_depth += 1
    try:
        yield
    finally:
        guard.defer_depth -= 1
        if guard.defer_depth == 0 and guard.pending is not None and guard.raised is None:
            guard.raised, guard.pending = guard.pending, None
            raise Interrupted(guard.raised)


# ----------------------------------------------------------------------------- stop callbacks

_CALLBACKS: list[Callable[[], None]] = []
_CALLBACKS_LOCK = threading.Lock()
_LAST_RESORT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def on_stop(callback: Callable[[], None]) -> None:
    """Register ``callback`` (stop everything still running; must not raise) to run when this
    process receives SIGTERM or SIGHUP outside :func:`interrupt_on_signals`, before it dies of
    that signal. Registering the same callback twice keeps one."""
    with _CALLBACKS_LOCK:
        if callback not in _CALLBACKS:
            _CALLBACKS.append(callback)
    _install_last_resort()


def run_stop_callbacks() -> None:
    """Run every :func:`on_stop` callback (errors are swallowed: this is the way out)."""
    with _CALLBACKS_LOCK:
        callbacks = list(_CALLBACKS)
    for cb in callbacks:
        try:
            cb()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass


def _last_resort(signum: int, frame: Any) -> None:
    run_stop_callbacks()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_last_resort() -> None:
    """Point SIGTERM and SIGHUP at the stop callbacks where they still have their default
    action (a handler someone else installed, or "ignore", is left alone)."""
    if not _in_main_thread():
        return
    for sig in _LAST_RESORT_SIGNALS:
        try:
            if signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, _last_resort)
        except (ValueError, OSError):  # pragma: no cover - not the main interpreter
            pass


# ----------------------------------------------------------------------------- parent death

_PR_SET_PDEATHSIG = 1


def parent_death_signal_setter(signum: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A function that asks the kernel to send ``signum`` to the calling process when its
    parent dies (``prctl(PR_SET_PDEATHSIG)``), resolved now so that a child may call it
    between ``fork`` and ``exec``; ``None`` where prctl is not available (not Linux).

    "Parent" is the *thread* that forked: call it only in children started from a thread
    that lives as long as they should (the main thread)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int

    def set_it() -> None:
        prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)

    return set_it


def set_parent_death_signal(signum: int = signal.SIGTERM, *, parent_pid: int | None = None) -> bool:
    """Have ``signum`` sent to this process when its parent dies. With ``parent_pid``, a parent
    that is already gone (it died before the call) counts as dead at once: ``signum`` is sent
    now. Returns ``False`` where this is not supported."""
    setter = parent_death_signal_setter(signum)
    if setter is None:
        return False
    setter()
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), signum)
    return True
