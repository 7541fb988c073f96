"""The cluster path for real: a local Ray cluster (two load nodes, the head and one more,
80 MB object stores) sending load to a real server on 127.0.0.1. Every node shares this
machine's CPUs: these tests check what the code decides (rows, shares, hosts, skew measured,
failures), not capacity."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

pytest.importorskip("ray")

from benchlib.core.errors import LoadGenError
from benchlib.core.model import LoadSpec, Target
from benchlib.loadgen.schedule import arrivals_in_window, segments_for
from benchlib.loadgen.testservers import serve
from benchlib.run.cluster import cluster_load
from benchlib.run.cluster.cluster_load import ClusterLoad
from benchlib.run.cluster.session import ClusterSession
from benchlib.runtime.ports import free_port

pytestmark = pytest.mark.cluster


def _procs(marker: bytes) -> dict[int, int]:
    """pid -> parent pid of this user's processes whose command line contains ``marker``."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if marker in cmd:
            out[int(name)] = ppid
    return out


def _load_hosts() -> dict[int, int]:
    return _procs(b"ray::LoadHost")


def _when_both_hosts_run(after_s: float) -> dict[int, int]:
    """Wait until both load hosts' workers are up (the trial is starting), then ``after_s``
    more; returns worker pid -> its load host's pid (empty if that never happened)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        hosts = _load_hosts()
        workers = {p: pp for p, pp in _procs(b"benchlib.loadgen.worker").items() if pp in hosts}
        if len(set(workers.values())) == 2:
            time.sleep(after_s)
            return workers
        time.sleep(0.05)
    return {}


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    with serve("hello") as (host, port):
        yield Target(host, port)


def test_an_open_trial_from_two_hosts_is_exactly_the_single_host_schedule(session: ClusterSession,
                                                                           target: Target) -> None:
    spec = LoadSpec(model="open", rate_rps=200, duration_s=1.0, warmup_s=0.2, connections=4, workers=1)
    r = ClusterLoad(session)(spec, target, seed=3)
    single = arrivals_in_window(segments_for(200, 1.0, [], warmup_s=0.2), arrival="constant")
    assert np.array_equal(np.sort(r.rows["t_intended_ns"]), single)  # every arrival one row, none twice
    assert r.hosts is not None and list(np.bincount(r.hosts)) == [120, 120]
    c = r.meta["cluster"]
    assert len({h["node_id"] for h in c["hosts"]}) == 2  # one actor per node (STRICT_SPREAD)
    assert c["start_skew_ns"] is not None and c["start_skew_ns"] >= 0 and c["start_skew_uncertainty_ns"] > 0
    assert all(h["clock_rtt_ns"] > 0 and h["global_workers"] == [h["host"]] for h in c["hosts"])
    assert not r.meta["failed"] and r.meta["requests"]["total"] == 240
    assert r.meta["errors"].get("connect", 0) == 0
    # each host's guard judged it alone; the trial is valid only if every one was
    assert r.meta["valid"] == (all(h["valid"] for h in c["hosts"]) and not c["start_skew_exceeded"])
    time.sleep(1.0)
    assert not _load_hosts()  # the trial's actors are gone


def test_a_closed_trial_divides_the_connections_across_hosts(session: ClusterSession, target: Target) -> None:
    spec = LoadSpec(model="closed", connections=4, duration_s=0.5, warmup_s=0.1, workers=1)
    r = ClusterLoad(session)(spec, target, seed=1)
    assert r.hosts is not None
    conns = [set(np.unique(r.rows["conn"][r.hosts == h]).tolist()) for h in (0, 1)]
    assert conns == [{0, 2}, {1, 3}]  # 2 + 2 connections, numbered across hosts without overlap


def test_a_host_that_cannot_reach_the_service_fails_fast_in_one_line(session: ClusterSession) -> None:
    spec = LoadSpec(model="closed", connections=2, duration_s=0.5, workers=1)
    t = time.monotonic()
    with pytest.raises(LoadGenError, match=r"cannot reach 127\.0\.0\.1:\d+"):
        ClusterLoad(session)(spec, Target("127.0.0.1", free_port()), seed=1)
    assert time.monotonic() - t < 60


def test_a_killed_load_host_fails_the_trial_and_keeps_the_other_hosts_rows(session: ClusterSession,
                                                                           target: Target) -> None:
    spec = LoadSpec(model="open", rate_rps=100, duration_s=3.0, warmup_s=0.2, connections=4, workers=1)
    killed: dict[str, object] = {}

    def kill_one() -> None:
        workers = _when_both_hosts_run(1.5)
        if workers:
            victim = sorted(set(workers.values()))[0]
            killed["children"] = [p for p, pp in workers.items() if pp == victim]
            os.kill(victim, signal.SIGKILL)

    killer = threading.Thread(target=kill_one, daemon=True)
    killer.start()
    r = ClusterLoad(session)(spec, target, seed=2)
    killer.join(5)
    assert killed, "no load host was seen running"
    assert r.meta["failed"] and not r.meta["valid"]
    dead = [h for h in r.meta["cluster"]["hosts"] if h["failed"]]
    alive = [h for h in r.meta["cluster"]["hosts"] if not h["failed"]]
    assert len(dead) == 1 and len(alive) == 1 and f"load host {dead[0]['host']}" in r.meta["failure"]
    assert r.hosts is not None and set(r.hosts.tolist()) == {alive[0]["host"]}
    assert len(r.rows) == 160  # the surviving host's whole share: every other slot of 320
    time.sleep(2.0)
    assert not set(killed["children"]) & set(_procs(b"benchlib.loadgen.worker"))  # type: ignore[arg-type]


def test_a_stuck_host_is_given_up_at_the_deadline(session: ClusterSession, target: Target,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_load, "DEADLINE_MARGIN_S", 2.0)
    spec = LoadSpec(model="open", rate_rps=50, duration_s=3.0, connections=2, workers=1, timeout_s=1.0)
    stopped: list[int] = []

    def stop_one() -> None:
        workers = _when_both_hosts_run(1.5)
        if workers:
            victim = sorted(set(workers.values()))[0]
            os.kill(victim, signal.SIGSTOP)  # alive but silent: it never reports back
            stopped.append(victim)

    stopper = threading.Thread(target=stop_one, daemon=True)
    stopper.start()
    t = time.monotonic()
    try:
        r = ClusterLoad(session)(spec, target, seed=4)
        took = time.monotonic() - t
        stopper.join(5)
        assert stopped
        gone = time.monotonic() + 30  # Ray kills a worker that does not answer after its own grace time
        while stopped[0] in _load_hosts() and time.monotonic() < gone:
            time.sleep(0.2)
        assert stopped[0] not in _load_hosts()
    finally:
        for pid in stopped:  # never leave a stopped process behind, whatever failed
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
    deadline = ClusterLoad(session).deadline_s(spec)  # warm-up + 3 s + the 1 s response timeout + 2 s
    assert deadline == spec.warmup_s + 6.0
    assert r.meta["failed"] and sum(h["failed"] for h in r.meta["cluster"]["hosts"]) == 1
    assert f"did not finish within {deadline:g} s of the start (killed)" in r.meta["failure"]
    assert took < deadline + 60  # the start, the deadline, the kill: nothing waits longer


def test_a_run_stores_each_requests_host_and_the_hosts_figures(session: ClusterSession, tmp_path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from benchlib.core.model import Arm, Condition, Experiment
    from benchlib.run.runner import run_experiment
    from benchlib.run.testing import FakeRuntime, write_manifest

    d = tmp_path / "services"
    d.mkdir()
    write_manifest(d, "a")
    monkeypatch.setenv("BENCHLIB_SERVICES", str(d))
    spec = LoadSpec(model="open", rate_rps=100, duration_s=0.5, warmup_s=0.1, connections=2, workers=1)
    exp = Experiment("clustered", (Arm("a", "a"),), (Condition("main", spec),), trials=1, seed=1, between_trials_s=0)
    run = run_experiment(exp, out_dir=tmp_path / "runs", progress=False, runtime=FakeRuntime(),
                         load=ClusterLoad(session))
    (trial,) = run.trials
    assert trial.status in ("ok", "invalid"), trial.reason  # invalid: a host that could not keep up (busy machine)
    hosts = trial.hosts()
    assert len(hosts) == len(trial.rows()) == 60 and set(hosts.tolist()) == {0, 1}
    assert trial.load is not None and len(trial.load.extra["cluster"]["hosts"]) == 2
    from benchlib.analysis.tables import load_hosts_table

    table = load_hosts_table(run)  # the report's per-host figures, from the stored run
    assert list(table["host"]) == [0, 1] and list(table["rows"]) == [30, 30]
    assert table["start skew, ms"].notna().all() and table["round trip, ms"].gt(0).all()


def test_ctrl_c_stops_every_host_and_leaves_no_actor_or_worker(session: ClusterSession, target: Target) -> None:
    spec = LoadSpec(model="open", rate_rps=100, duration_s=20.0, connections=2, workers=1)
    seen: dict[int, int] = {}

    def interrupt_when_running() -> None:
        workers = _when_both_hosts_run(1.0)
        if workers:
            seen.update(workers)
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # type: ignore[arg-type]

    t = time.monotonic()
    threading.Thread(target=interrupt_when_running, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        ClusterLoad(session)(spec, target, seed=5)
    assert time.monotonic() - t < 60 and seen  # long before the trial's 20 s would have ended... or its deadline
    time.sleep(3.0)
    assert not _load_hosts()
    assert not set(seen) & set(_procs(b"benchlib.loadgen.worker"))


def test_a_peer_tool_runs_on_a_load_host_and_says_which(session: ClusterSession, target: Target) -> None:
    from benchlib.core.model import CrossCheck
    from benchlib.run.cluster.cluster_peer import ClusterCrossCheck
    from benchlib.run.cluster.session import require_ray

    ray = require_ray()
    load_nodes = {n["NodeID"] for n in ray.nodes() if n.get("Alive") and n["Resources"].get("benchlib_load")}
    check = CrossCheck("wrk", (("threads", 1), ("connections", 2), ("duration_s", 1)))
    out = ClusterCrossCheck(session)(check, f"http://{target.host}:{target.port}/", [0], order="after")
    assert "error" not in out, out
    assert out["tool"] == "wrk" and out["order"] == "after" and out["requests_per_s"] > 0
    host = out["load_host"]
    assert host["node_id"] in load_nodes and host["pid"] != os.getpid()  # a Ray worker on a load node ran it
