"""benchlib.core.signals: SIGTERM and SIGHUP take the Ctrl-C path while a run executes, once; a
held-back section; ``nohup``'s "ignore" respected; the stop callbacks of an idle process; the
parent-death signal. (End to end through ``benchlib run``: tests/test_stop_signals.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchlib.core.signals import Interrupted, deferred, interrupt_on_signals, recorded_signals


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_stop_signal_raises_interrupted_once_and_the_cleanup_runs_to_its_end(sig: int) -> None:
    before = signal.getsignal(sig)
    cleaned = []
    with pytest.raises(Interrupted) as err:
        with interrupt_on_signals():
            try:
                os.kill(os.getpid(), sig)
                time.sleep(5)  # interrupted at once
            finally:
                os.kill(os.getpid(), sig)  # a second signal during the clean-up is ignored
                time.sleep(0.05)
                cleaned.append(True)
    assert err.value.signum == sig and err.value.exit_status == 128 + sig
    assert isinstance(err.value, KeyboardInterrupt) and signal.Signals(sig).name in str(err.value)
    assert cleaned == [True]
    if sig == signal.SIGINT:
        assert signal.getsignal(sig) is before  # restored; SIGTERM/SIGHUP keep the stop callbacks


def test_a_signal_in_a_deferred_section_is_raised_at_its_end() -> None:
    steps = []
    with pytest.raises(Interrupted):
        with interrupt_on_signals():
            with deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
                steps.append("registered")  # e.g. a started process's handle
            steps.append("not reached")
    assert steps == ["registered"]


def test_an_ignored_signal_stays_ignored() -> None:
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup
    try:
        with interrupt_on_signals():
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.05)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, old)


def test_recorded_signals_only_record() -> None:
    with recorded_signals() as caught:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.05)
    assert caught == [signal.SIGTERM, signal.SIGHUP]


_IDLE_CHILD = """\
import sys, time
from pathlib import Path
from benchlib.core import signals
signals.on_stop(lambda: Path(sys.argv[1]).write_text("stopped"))
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_outside_a_run_the_stop_callbacks_run_and_the_process_dies_of_the_signal(sig: int, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    proc = subprocess.Popen([sys.executable, "-c", _IDLE_CHILD, str(marker)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    assert proc.returncode == -sig and marker.read_text() == "stopped"


_ORPHAN_PARENT = """\
import subprocess, sys, time
from benchlib.core.signals import parent_death_signal_setter
tie = parent_death_signal_setter()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], preexec_fn=tie)
print(child.pid, flush=True)
time.sleep(60)
"""


def test_the_parent_death_signal_ends_a_child_whose_parent_was_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _ORPHAN_PARENT], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.kill()  # SIGKILL: no handler, no atexit
    parent.communicate()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not _gone(child):
        time.sleep(0.05)
    assert _gone(child)


def _gone(pid: int) -> bool:
    """No such process, or a zombie (dead, not yet reaped by its new parent)."""
    try:
        return "State:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
