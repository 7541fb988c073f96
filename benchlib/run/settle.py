"""Wait for a quiet machine before a run's first trial (``benchlib report --settle LOAD``).

A reference run is only worth citing when the machine was quiet as it started: each run
stores the 1-min load average at its start (``provenance.loadavg_at_start``), and the study
pages say whether it was below 0.3. Between the studies of one ``benchlib report`` the
previous study's own load is still in that average (it decays with a 1-min time constant),
so a series run back to back starts every study after the first on a "busy" machine; and a
run's own builds and kernel start come just before its first trial.
:func:`wait_for_quiet` polls the 1-min load average until it falls below a threshold, for at
most ``max_wait_s``; when it does not get there, the run starts anyway and says so (its
stored load average tells the reader). The runner calls it after its builds, just before it
records its provenance and runs its first trial, when ``BENCHLIB_SETTLE`` is set;
:func:`settle_env` sets it for the notebooks ``benchlib run/report --settle`` execute.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator

from benchlib.core import settings
from benchlib.core.errors import ParameterError
from benchlib.store.records.run import Settled

__all__ = ["Settled", "check_settle", "loadavg_1min", "settle_as_asked", "settle_env", "wait_for_quiet"]


def loadavg_1min() -> float:
    """The machine's 1-min load average (``os.getloadavg``; NaN where the OS has none)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def check_settle(threshold: float | None, max_wait_s: float) -> None:
    """Refuse a threshold that is not a positive load average or a negative wait."""
    if threshold is not None and not threshold > 0:
        raise ParameterError(f"--settle {threshold!r}: a 1-min load average above 0 is needed (e.g. 0.3)")
    if not max_wait_s >= 0:
        raise ParameterError(f"--settle-max {max_wait_s!r}: seconds, 0 or more (e.g. 600)")


def wait_for_quiet(threshold: float, *, max_wait_s: float = 600.0, poll_s: float = 5.0,
                   read: Callable[[], float] = loadavg_1min, sleep: Callable[[float], None] = time.sleep,
                   clock: Callable[[], float] = time.monotonic) -> Settled:
    """Poll the 1-min load average every ``poll_s`` seconds until it is below ``threshold``
    or ``max_wait_s`` seconds have passed; returns what it found (never raises for a busy
    machine). Without a load average (NaN), it does not wait."""
    check_settle(threshold, max_wait_s)
    start = clock()
    load = read()
    while load == load and load >= threshold and clock() - start < max_wait_s:
        sleep(min(poll_s, max(0.0, max_wait_s - (clock() - start))))
        load = read()
    return Settled(threshold=threshold, loadavg=load, waited_s=clock() - start, quiet=load == load and load < threshold)


def settle_as_asked(note: Callable[[str], None]) -> Settled | None:
    """Wait for the load average ``BENCHLIB_SETTLE`` asks for (at most ``BENCHLIB_SETTLE_MAX_S``),
    saying how it went through ``note``; returns what it found (run.json's ``settle``: the
    seconds waited are not the run's cost); nothing when unset."""
    threshold = settings.SETTLE.get()
    if threshold is None:
        return None
    got = wait_for_quiet(threshold, max_wait_s=settings.SETTLE_MAX_S.value())
    note(got.line())
    return got


@contextlib.contextmanager
def settle_env(threshold: float | None, max_wait_s: float) -> Iterator[None]:
    """Within the block, ``BENCHLIB_SETTLE`` and ``BENCHLIB_SETTLE_MAX_S`` are set for the
    kernels started (nothing when ``threshold`` is ``None``); the previous values come back after."""
    if threshold is None:
        yield
        return
    check_settle(threshold, max_wait_s)
    names = (settings.SETTLE.name, settings.SETTLE_MAX_S.name)
    old = {k: os.environ.get(k) for k in names}
    os.environ.update(zip(names, (repr(float(threshold)), repr(float(max_wait_s)))))
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
