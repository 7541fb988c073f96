"""Clean stops on any signal, end to end: ``benchlib run`` of a tiny study notebook
(``tests/notebooks/stop_probe.ipynb``: one arm, many short trials) is stopped while a trial is
under way (a trial stored, the next one's load running), and then nothing it started may be
left: no process (by pid and start time, and by the service's port), no load scratch folder
(``/dev/shm/benchlib-load-*``), no cgroup of the run, no container; and the trials stored
before the signal read back intact.

Signals: SIGTERM (``timeout``, CI, schedulers) and SIGHUP (a closed terminal), through the
local and the Docker runtime; SIGKILL of ``benchlib run`` itself (the kernel is tied to it);
and a kernel that does not finish its clean-up in the grace period (it is killed, and what it
started is swept).

The command runs in a mount namespace of its own with a private ``/dev/shm`` (a folder of
this test), so the scratch folders of other benchlib processes on the machine cannot be
mistaken for its own.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from benchlib.runtime import cgroups
from benchlib.store.runstore import RunStore

pytestmark = [pytest.mark.integration, pytest.mark.notebook]

REPO = Path(__file__).resolve().parent.parent
PROBE = REPO / "tests" / "notebooks" / "stop_probe.ipynb"
START_TIMEOUT_S = 300.0  # kernel start, build check, first trial: generous on a busy machine
EXIT_TIMEOUT_S = 120.0  # the clean stop is bounded by the grace period (60 s)


def _private_shm_prefix(shm: Path) -> list[str]:
    """A command prefix running the rest in a new mount namespace whose /dev/shm is ``shm``."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) for a private /dev/shm")
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind {shm} /dev/shm"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace here: {probe.stderr.decode(errors='replace').strip()}")
    return ["unshare", "-m", "sh", "-c", f'mount --bind {shm} /dev/shm && exec "$@"', "sh"]


def _stat(pid: int) -> tuple[int, str, str] | None:
    """(ppid, state, start time in ticks) of ``pid``, or ``None`` when it does not exist."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), fields[0], fields[19]


def _descendants(root: int) -> dict[tuple[int, str], str]:
    """Every live descendant of ``root``: (pid, start time) -> command line."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                children.setdefault(st[0], []).append(int(entry.name))
    out: dict[tuple[int, str], str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        st = _stat(pid)
        if st is None:
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out[(pid, st[2])] = cmd
        todo.extend(children.get(pid, []))
    return out


def _alive(pid: int, start: str) -> bool:
    st = _stat(pid)
    return st is not None and st[2] == start and st[1] != "Z"


def _listening_ports(pid: int) -> set[int]:
    """TCP ports process ``pid`` listens on (from its socket inodes and /proc/net/tcp{,6})."""
    try:
        inodes = {os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] for fd in os.listdir(f"/proc/{pid}/fd")
                  if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:[")}
    except OSError:
        return set()
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # LISTEN
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _run_cgroups(run_id: str) -> list[Path]:
    """This run's cgroup folders (they are named ``<run_id>-<service>-<port>.p<pid>``)."""
    bases = cgroups._base_dirs(cgroups.detect())
    return [d for b in bases.values() if b.is_dir() for d in b.iterdir() if d.name.startswith(run_id + "-")]


def _containers(run_id: str) -> list[Any]:
    from benchlib.runtime.docker import iter_benchlib_containers, shared_client

    # the run's own stop may remove a container between the engine's list and its inspect
    return list(iter_benchlib_containers(shared_client(), run_id))


def _start(tmp_path: Path, run_id: str, runtime: str, env: dict[str, str] | None = None
           ) -> tuple[subprocess.Popen[str], Path, Path]:
    shm = tmp_path / "shm"
    shm.mkdir()
    runs = tmp_path / "runs"
    argv = [*_private_shm_prefix(shm), sys.executable, "-m", "benchlib.cli", "run", str(PROBE),
            "-p", "runtime", runtime, "-p", "out_dir", str(runs), "-p", "run_id", run_id,
            "-p", "duration_s", "1.0", "-p", "trials", "40", "--reports-dir", str(tmp_path / "reports"), "--no-html"]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, start_new_session=True)
    return proc, shm, runs / "stop_probe" / run_id


def _wait_for_trial_under_way(proc: subprocess.Popen[str], shm: Path, run_dir: Path, runtime: str,
                              run_id: str) -> dict[str, Any]:
    """Poll until one trial is stored and the next one's load is running; what was seen."""
    seen: dict[str, Any] = {"procs": {}, "ports": set(), "cgroups": set(), "containers": set()}
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"benchlib run ended early (status {proc.returncode}):\n{out}\n{err}")
        procs = _descendants(proc.pid)
        seen["procs"].update(procs)
        for (pid, _), cmd in procs.items():
            if "server.py" in cmd:
                seen["ports"] |= _listening_ports(pid)
        seen["cgroups"] |= {d.name for d in _run_cgroups(run_id)}
        if runtime == "docker":
            seen["containers"] |= {c.name for c in _containers(run_id)}
        stored = list((run_dir / "trials").glob("*/*/b*.parquet"))
        load_running = any(p.name.startswith("benchlib-load-") for p in shm.iterdir())
        service_up = seen["ports"] if runtime == "local" else seen["containers"]
        if len(stored) >= 1 and load_running and service_up and any("loadgen.worker" in c for c in procs.values()):
            seen["stored"] = len(stored)
            return seen
        time.sleep(0.05)
    proc.kill()
    out, err = proc.communicate()
    pytest.fail(f"no trial under way within {START_TIMEOUT_S:g} s:\n{out}\n{err}")


def _assert_nothing_left(seen: dict[str, Any], shm: Path | None, run_dir: Path, run_id: str, runtime: str) -> None:
    deadline = time.monotonic() + 30  # processes the Linux kernel signals on their parent's death
    while time.monotonic() < deadline and any(_alive(pid, start) for pid, start in seen["procs"]):
        time.sleep(0.1)
    left = {f"{pid}: {cmd}" for (pid, start), cmd in seen["procs"].items() if _alive(pid, start)}
    assert not left, f"processes left: {left}"
    assert len(seen["procs"]) >= 3  # the kernel, a load worker, the service (local) ...
    assert not [p for p in seen["ports"] if _accepts(p)], f"a service port still answers: {seen['ports']}"
    if shm is not None:
        assert [p.name for p in shm.iterdir()] == [], "load scratch folders left in /dev/shm"
    assert _run_cgroups(run_id) == []
    if runtime == "docker":
        assert seen["containers"] and _containers(run_id) == []
    elif any(os.access(b.parent, os.W_OK) for b in cgroups._base_dirs(cgroups.detect()).values()):
        assert seen["cgroups"], "the services ran in cgroups of this run"
    assert [p.name for p in run_dir.rglob("*.tmp")] == []
    store = RunStore(run_dir)
    assert store.read_run().status == "running"
    trials = store.trials(verify=True)  # every stored trial reads back in full
    assert len(trials) >= seen["stored"] and all(len(t.rows()) > 0 for t in trials)
    assert all(t.meta["status"] == "ok" for t in trials)


def _stop_mid_trial(tmp_path: Path, run_id: str, runtime: str, sig: int, env: dict[str, str] | None = None
                    ) -> tuple[subprocess.Popen[str], str, dict[str, Any], Path, Path, float]:
    """Start the probe, send ``sig`` to ``benchlib run`` while a trial is under way, wait for
    the command to end; (process, stderr, what was seen, private /dev/shm, run folder, seconds
    from the signal to the end)."""
    proc, shm, run_dir = _start(tmp_path, run_id, runtime, env)
    try:
        seen = _wait_for_trial_under_way(proc, shm, run_dir, runtime, run_id)
        t0 = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=EXIT_TIMEOUT_S)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return proc, err, seen, shm, run_dir, took


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_mid_trial_leaves_nothing_running_and_keeps_the_stored_trials(
        sig: int, tmp_path: Path) -> None:
    run_id = f"stop-{signal.Signals(sig).name.lower()}-{os.getpid()}"
    proc, err, seen, shm, run_dir, took = _stop_mid_trial(tmp_path, run_id, "local", sig)
    assert proc.returncode == 128 + sig, err
    assert err.strip().splitlines()[-1].startswith(f"benchlib: interrupted by {signal.Signals(sig).name}"), err
    assert took < EXIT_TIMEOUT_S
    _assert_nothing_left(seen, shm, run_dir, run_id, "local")


def test_killing_benchlib_run_stops_its_kernel_and_services(tmp_path: Path) -> None:
    """SIGKILL leaves the command no chance; its kernel gets SIGTERM from the Linux kernel
    (parent-death signal) and stops the run itself."""
    run_id = f"stop-sigkill-{os.getpid()}"
    proc, _, seen, shm, run_dir, _ = _stop_mid_trial(tmp_path, run_id, "local", signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    # the private /dev/shm lives as long as a process of the namespace does: checked after
    _assert_nothing_left(seen, shm, run_dir, run_id, "local")


def test_a_kernel_that_does_not_stop_in_time_is_killed_and_its_services_swept(tmp_path: Path) -> None:
    """With no grace period the kernel is killed at once (its clean-up cannot run): the
    command then kills what the kernel's cgroups hold, and the services' parent-death signal
    stops the rest. (The load scratch folder of a SIGKILLed kernel is the load generator's to
    sweep; not asserted here.)"""
    run_id = f"stop-nograce-{os.getpid()}"
    proc, err, seen, _, run_dir, _ = _stop_mid_trial(tmp_path, run_id, "local", signal.SIGTERM,
                                                      env={"BENCHLIB_STOP_GRACE_S": "0"})
    assert proc.returncode == 128 + signal.SIGTERM, err
    _assert_nothing_left(seen, None, run_dir, run_id, "local")


@pytest.mark.docker
def test_sigterm_mid_trial_through_the_docker_runtime_leaves_no_container(tmp_path: Path) -> None:
    run_id = f"stop-docker-{os.getpid()}"
    proc, err, seen, shm, run_dir, _ = _stop_mid_trial(tmp_path, run_id, "docker", signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM, err
    _assert_nothing_left(seen, shm, run_dir, run_id, "docker")
