"""The services on a node of their own (``cluster="...?service=<resource>"``) for real: the
local cluster of ``conftest.py`` (two nodes), its own reservation set aside, each run below
joining it with the service on ``benchlib_host_0`` (a real aiohttp service, started by the
service actor there) and the load from ``benchlib_host_1``. Every node shares this machine's
CPUs: these tests check what the code decides (where things run, what is stored, faults,
clean-up), not capacity."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray")

from benchlib.core.errors import ParameterError
from benchlib.core.model import Arm, Condition, Experiment, LoadSpec
from benchlib.run.cluster.session import ClusterSession, _proc_table, require_ray
from benchlib.run.runner import run_experiment

pytestmark = pytest.mark.cluster

SERVICE = b"python-aiohttp-hello/server.py"


@pytest.fixture(scope="module")
def free_cluster(session: ClusterSession) -> Iterator[ClusterSession]:
    """The shared cluster with its two load hosts' reservation released (each run here makes
    its own: the service node, and the other node as the one load host); restored after."""
    session.release()
    try:
        yield session
    finally:
        session.reserve()


def _exp(duration_s: float, options: str = "") -> Experiment:
    spec = LoadSpec(model="open", rate_rps=100, duration_s=duration_s, warmup_s=0.2, connections=2, workers=1)
    return Experiment("service-node", (Arm("a", "python-aiohttp-hello"),), (Condition("main", spec),), trials=1,
                      seed=1, between_trials_s=0, repeat_disturbed=0, cluster="auto?service=benchlib_host_0" + options)


def _node_ids() -> dict[str, str]:
    """benchlib_host_<i> -> its Ray node id."""
    ray = require_ray()
    return {k: n["NodeID"] for n in ray.nodes() if n.get("Alive") for k in n.get("Resources", {})
            if k.startswith("benchlib_host_")}


def _under(parent_marker: bytes, marker: bytes) -> dict[int, int]:
    """pid -> parent pid of the processes whose command line holds ``marker`` and whose parent's
    holds ``parent_marker``."""
    table = _proc_table()
    return {pid: ppid for pid, (ppid, _, cmd) in table.items()
            if marker in cmd and parent_marker in table.get(ppid, (0, "", b""))[2]}


def _when_serving_under_load(after_s: float) -> int | None:
    """Wait until the service runs under the service actor and a load host's worker sends to
    it, then ``after_s`` more; the service's pid (``None`` if that never happened)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        services = _under(b"ray::ServiceHost", SERVICE)
        if services and _under(b"ray::LoadHost", b"benchlib.loadgen.worker"):
            time.sleep(after_s)
            return next(iter(services))
        time.sleep(0.05)
    return None


def _gone(pids: set[int], within_s: float = 20.0) -> bool:
    """Whether none of ``pids`` and no service actor is left (waiting up to ``within_s``)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        table = _proc_table()
        if not (pids & set(table)) and not any(b"ray::ServiceHost" in cmd for _, _, cmd in table.values()):
            return True
        time.sleep(0.2)
    return False


def test_a_trial_with_the_service_on_one_node_and_the_load_from_the_other(free_cluster: ClusterSession,
                                                                          tmp_path: Path) -> None:
    nodes = _node_ids()
    seen: list[int] = []
    watcher = threading.Thread(target=lambda: seen.append(_when_serving_under_load(0.0) or 0), daemon=True)
    watcher.start()
    run = run_experiment(_exp(1.0, "&server_cpus=1"), out_dir=tmp_path / "runs", progress=False)
    watcher.join(5)
    (trial,) = run.trials
    assert trial.status in ("ok", "invalid"), trial.reason  # invalid: the busy machine's guard
    assert trial.load is not None
    (host,) = trial.load.extra["cluster"]["hosts"]  # one load host: the other node
    assert host["node_id"] == nodes["benchlib_host_1"]
    assert len(trial.rows()) == 120 and set(trial.hosts().tolist()) == {0}  # every row from that host
    meta = trial.meta
    node = meta["enforced"]["service_node"]
    assert node["node_id"] == nodes["benchlib_host_0"] and node["resource"] == "benchlib_host_0"
    assert node["same_machine"] and node["parent_death_signal"]  # the actor's main thread started it
    assert meta["enforced"]["cpus_read_back"] == node["cpus"][-1:]  # server_cpus=1: the node's last CPU
    stop = meta["stop"]  # the stop record from the service actor (aiohttp exits 0 on SIGTERM)
    assert stop["detail"] == "stopped by benchlib" and not stop["died_early"] and stop["exit_code"] in (0, None)
    assert seen and seen[0], "the service never ran under the service actor"
    assert (run.store.path / "logs").is_dir() and any((run.store.path / "logs").iterdir())  # its log, back
    assert run.store.read_run().runtime.raw["service_node"]["resource"] == "benchlib_host_0"
    assert _gone({seen[0]})


def test_a_service_node_no_node_carries_is_refused_naming_the_resources(free_cluster: ClusterSession,
                                                                         tmp_path: Path) -> None:
    exp = Experiment("service-node", _exp(1.0).arms, _exp(1.0).conditions, cluster="auto?service=nowhere")
    with pytest.raises(ParameterError, match=r"no alive node carries the resource 'nowhere'.*benchlib_host_0, "
                                             r"benchlib_host_1, benchlib_load"):
        run_experiment(exp, out_dir=tmp_path / "runs", progress=False)


def test_a_remote_service_killed_mid_trial_fails_the_trial_with_the_reason(free_cluster: ClusterSession,
                                                                           tmp_path: Path) -> None:
    killed: list[int] = []

    def kill() -> None:
        pid = _when_serving_under_load(1.0)
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    run = run_experiment(_exp(4.0), out_dir=tmp_path / "runs", progress=False)
    killer.join(5)
    assert killed, "the service never ran under load"
    (trial,) = run.trials
    assert trial.status == "failed"
    # as with the local runtime: mid-measurement, or before the load host's connections opened
    assert re.fullmatch(r"service died (during the trial|before the load connected) "
                        r"\(exited on its own with code -9\)", trial.reason or ""), trial.reason
    assert trial.meta["stop"]["died_early"] and trial.meta["stop"]["exit_code"] == -9
    assert _gone(set(killed))


def test_sigterm_stops_the_remote_service_and_leaves_no_actor_or_process(free_cluster: ClusterSession,
                                                                         tmp_path: Path) -> None:
    seen: list[int] = []

    def terminate() -> None:
        pid = _when_serving_under_load(1.0)
        if pid is not None:
            seen.append(pid)
            os.kill(os.getpid(), signal.SIGTERM)  # as a scheduler or `timeout` stops a run

    t = time.monotonic()
    threading.Thread(target=terminate, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        run_experiment(_exp(30.0), out_dir=tmp_path / "runs", progress=False)
    assert seen and time.monotonic() - t < 120  # long before the 30 s trial's deadline
    assert _gone(set(seen))  # the service stopped on its node, the actor gone
