"""Hosts lost mid-run, for real (issue 36): each fault on a local Ray cluster of its own
(``local:3``, started and stopped by the run, as a user's run does): node 0 is the head and a
load host, node 1 runs the service (``?service=benchlib_host_1``, a real aiohttp service), node 2
is the other load host. Node 0 is never killed (the head); a node is lost by killing its raylet
with SIGKILL, as when a host reboots. Each case checks the one-line reason, the rows kept, and
that no process of the run is left. Every node shares this machine's CPUs: these tests check
what the code decides (which trial fails, what is set aside and run again, when the run stops),
not timing; a kill lands mid-trial with seconds to spare.

(a) a load node lost between trials, ``min_hosts=1``: its block runs again in full on the host left;
(b) a load node's raylet killed mid-trial: that trial fails naming the host, the other host's
    rows are kept, the block runs again on the host left;
(c) a load actor killed mid-trial: that trial fails naming the host, the run goes on with both;
(d) fewer hosts left than ``min_hosts`` (the default: all): one line, a clean stop, then a resume
    on a new cluster completes the run;
(e) the service node killed mid-run: one line, a clean stop.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray")

from benchlib.core.errors import HostLost
from benchlib.core.model import Arm, Condition, Experiment, LoadSpec
from benchlib.run.cluster.session import _proc_table, require_ray
from benchlib.run.events import Note, Progress, TrialEvent
from benchlib.run.runner import run_experiment

pytestmark = pytest.mark.cluster

SERVICE = "python-aiohttp-hello"
CLUSTER = "local:3?service=benchlib_host_1"
#: A node as the lines name it: ``Ray node 6793dfde, benchlib_host_2``.
NODE2 = r"Ray node [0-9a-f]{8}, benchlib_host_2"
#: The load host on node 2 as the lines name it (its bundle index is Ray's choice).
HOST = r"load host [01] \([^)]+\)"


@pytest.fixture(autouse=True)
def _no_ray_connection() -> Iterator[None]:
    """Each run here starts its own local cluster: this process must not be connected to one."""
    ray = require_ray()
    if ray.is_initialized():
        pytest.skip("this test process is connected to another Ray cluster (a local:N run starts its own)")
    yield


def _exp(study: str, *, arms: int = 1, trials: int = 2, duration_s: float = 0.5, options: str = "") -> Experiment:
    spec = LoadSpec(model="open", rate_rps=100, duration_s=duration_s, warmup_s=0.2, connections=2, workers=1)
    return Experiment(study, tuple(Arm(n, SERVICE) for n in ("a", "b")[:arms]), (Condition("main", spec),),
                      trials=trials, seed=1, between_trials_s=0, repeat_disturbed=0, cluster=CLUSTER + options)


def _tree() -> set[int]:
    """This process's descendants now (the cluster's processes, its workers, the services)."""
    table = _proc_table()
    mine, grew = {os.getpid()}, True
    while grew:
        more = {pid for pid, (ppid, _, _) in table.items() if ppid in mine} - mine
        mine |= more
        grew = bool(more)
    return mine - {os.getpid()}


def _raylet(node: int) -> int:
    """The pid of this process's raylet of ``benchlib_host_<node>``."""
    me = os.getpid()
    marker = f"benchlib_host_{node}".encode()
    (pid,) = [p for p, (ppid, _, cmd) in _proc_table().items()
              if ppid == me and b"raylet/raylet" in cmd and marker in cmd]
    return pid


def _under(parent: int, marker: bytes) -> list[int]:
    """The processes whose parent is ``parent`` and whose command line holds ``marker``."""
    return [p for p, (ppid, _, cmd) in _proc_table().items() if ppid == parent and marker in cmd]


def _marked_dead(node: int, within_s: float = 60.0) -> bool:
    """Wait until Ray marks ``benchlib_host_<node>`` dead."""
    ray = require_ray()
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not any(n.get("Alive") and n.get("Resources", {}).get(f"benchlib_host_{node}") for n in ray.nodes()):
            return True
        time.sleep(0.2)
    return False


def _when_loaded(node: int, after_s: float) -> bool:
    """Wait until the load host on ``benchlib_host_<node>`` runs its workers, then ``after_s`` more."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            actors = _under(_raylet(node), b"ray::LoadHost")
        except ValueError:
            actors = []
        if any(_under(a, b"benchlib.loadgen.worker") for a in actors):
            time.sleep(after_s)
            return True
        time.sleep(0.05)
    return False


class _Watch:
    """The run's progress events, and the processes of the run seen when the fault was made."""

    def __init__(self) -> None:
        self.events: list[Progress] = []
        self.before = _tree()
        self.seen: set[int] = set()
        self.hook: Callable[[Progress], None] | None = None

    def __call__(self, ev: Progress) -> None:
        self.events.append(ev)
        if self.hook is not None:
            self.hook(ev)

    def snapshot(self) -> None:
        self.seen |= _tree() - self.before

    def notes(self) -> list[str]:
        return [e.event.text for e in self.events if isinstance(e.event, Note)]

    def trials(self) -> list[TrialEvent]:
        return [e.event for e in self.events if isinstance(e.event, TrialEvent) and e.kind == "trial"]

    def left(self, within_s: float = 30.0) -> set[int]:
        """The run's processes still alive (waiting up to ``within_s`` for them to end)."""
        deadline = time.monotonic() + within_s
        while True:
            table = _proc_table()
            alive = {p for p in (self.seen | _tree()) - self.before if p in table and table[p][1] != "Z"}
            if not alive or time.monotonic() > deadline:
                return alive
            time.sleep(0.2)


def _first_trial_of_block(block: int, act: Callable[[], None]) -> Callable[[Progress], None]:
    """A progress hook that calls ``act`` once, after the first trial of ``block`` is stored."""
    done: list[bool] = []

    def hook(ev: Progress) -> None:
        if isinstance(ev.event, TrialEvent) and ev.kind == "trial" and ev.event.block == block and not done:
            done.append(True)
            act()
    return hook


def _kill_mid_trial(watch: _Watch, victim: Callable[[], int], node: int, *, after_block: int | None = None) -> list[int]:
    """In a thread: once the load host on ``node`` runs (in a block after ``after_block``),
    SIGKILL ``victim()``; the killed pids."""
    killed: list[int] = []
    go = threading.Event()
    if after_block is None:
        go.set()
    else:
        watch.hook = _first_trial_of_block(after_block, go.set)

    def kill() -> None:
        if go.wait(300) and _when_loaded(node, 0.5):
            watch.snapshot()
            pid = victim()
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    threading.Thread(target=kill, daemon=True).start()
    return killed


def _set_aside(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "trials").glob("*/*/b*.failed-*.parquet"))


def _rows_and_hosts(path: Path) -> tuple[int, set[int]]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    return table.num_rows, set(table.column("host").to_pylist()) if "host" in table.column_names else {0}


def test_a_load_node_lost_between_trials_runs_its_block_again_on_the_host_left(tmp_path: Path) -> None:
    watch = _Watch()

    def lose_node_2() -> None:
        watch.snapshot()
        os.kill(_raylet(2), signal.SIGKILL)
        assert _marked_dead(2)  # Ray knows before the next trial: the check between trials finds it

    watch.hook = _first_trial_of_block(1, lose_node_2)
    run = run_experiment(_exp("host-lost-between", arms=2, options="&min_hosts=1"), out_dir=tmp_path / "runs",
                         progress=watch)
    (note,) = watch.notes()
    assert re.fullmatch(rf"{HOST} lost: its node died \({NODE2}\); the load hosts reserved again among the nodes "
                        r"still alive: 1 \(Ray node [0-9a-f]{8}, benchlib_host_0\); block b1 runs again in full on "
                        r"them \(1 trial\(s\) set aside\)", note), note
    data = run.store.read_run()
    assert data.status == "complete" and [x.line for x in data.host_losses] == [note]
    # blocks never mix host sets: b0 from both load hosts, b1 (all of it) from the one left
    assert sorted((t.block, len(t.load.extra["cluster"]["hosts"])) for t in run.trials) == [(0, 2), (0, 2), (1, 1), (1, 1)]
    assert all(t.status in ("ok", "invalid") for t in run.trials), [t.reason for t in run.trials]
    (aside,) = _set_aside(run.store.path)  # the b1 trial stored before the loss, kept beside the run
    rows, hosts = _rows_and_hosts(aside)
    assert aside.name == "b001.failed-1.parquet" and rows > 0 and hosts == {0, 1}
    rerun = next(t for t in run.trials if t.block == 1 and t.arm == aside.parent.name)
    (attempt,) = rerun.attempts  # the trial set aside, as its record says
    assert str(attempt.reason).endswith("set aside: block b1 ran again in full on the load hosts left after a loss")
    from benchlib.analysis.hosts import host_sets, load_hosts_section

    assert [(s.blocks, len(s.nodes)) for s in host_sets(run)] == [((0,), 2), ((1,), 1)]
    section = load_hosts_section(run).markdown
    assert "b0: 2 hosts (" in section and "b1: 1 host (" in section and f"Lost mid-run: {note}." in section
    assert not watch.left()


def test_a_load_nodes_raylet_killed_mid_trial_fails_that_trial_and_its_block_runs_again(tmp_path: Path) -> None:
    watch = _Watch()
    killed = _kill_mid_trial(watch, lambda: _raylet(2), 2)
    run = run_experiment(_exp("host-lost-mid", trials=1, duration_s=5.0, options="&min_hosts=1"),
                         out_dir=tmp_path / "runs", progress=watch)
    assert killed, "the load host on node 2 was never seen running"
    first, again = watch.trials()
    assert first.status == "failed"
    assert re.fullmatch(rf"LoadGenError: {HOST} failed: its node died \({NODE2}\)", first.reason), first.reason
    (aside,) = _set_aside(run.store.path)  # the failed trial, with the other host's rows
    rows, hosts = _rows_and_hosts(aside)
    assert rows > 0 and len(hosts) == 1
    (note,) = watch.notes()
    assert note.startswith(first.reason.removeprefix("LoadGenError: ").replace(" failed: ", " lost: "))
    assert note.endswith("block b0 runs again in full on them (1 trial(s) set aside)")
    (trial,) = run.trials
    assert again.status == trial.status and len(trial.load.extra["cluster"]["hosts"]) == 1
    assert [a.status for a in trial.attempts] == ["failed"] and first.reason in str(trial.attempts[0].reason)
    assert not watch.left()


def test_a_load_actor_killed_mid_trial_fails_that_trial_and_the_run_goes_on(tmp_path: Path) -> None:
    watch = _Watch()
    killed = _kill_mid_trial(watch, lambda: _under(_raylet(2), b"ray::LoadHost")[0], 2)
    run = run_experiment(_exp("actor-killed", duration_s=2.0), out_dir=tmp_path / "runs", progress=watch)
    assert killed, "the load host on node 2 was never seen running"
    b0, b1 = sorted(run.trials, key=lambda t: t.block)
    assert b0.status == "failed"
    assert re.fullmatch(rf"LoadGenError: {HOST} failed: its actor died \(.+\)", b0.reason or ""), b0.reason
    hosts = b0.load.extra["cluster"]["hosts"]
    assert [h["failed"] for h in hosts].count(True) == 1
    kept = next(h for h in hosts if not h["failed"])
    assert len(b0.rows()) == kept["rows"] > 0 and set(b0.hosts().tolist()) == {kept["host"]}
    # its node lives: the same two hosts send the next block's load, nothing set aside, no loss
    assert b1.status in ("ok", "invalid") and len(b1.load.extra["cluster"]["hosts"]) == 2, b1.reason
    assert not watch.notes() and not _set_aside(run.store.path) and not run.store.read_run().host_losses
    assert not watch.left()


def test_fewer_hosts_than_min_hosts_stop_the_run_in_one_line_and_a_resume_completes_it(tmp_path: Path) -> None:
    watch = _Watch()

    def lose_node_2() -> None:  # the next trial starts before Ray knows: its actors never start
        watch.snapshot()
        os.kill(_raylet(2), signal.SIGKILL)

    watch.hook = _first_trial_of_block(0, lose_node_2)
    exp = _exp("host-lost-stop")
    with pytest.raises(HostLost) as info:
        run_experiment(exp, run_id="r1", out_dir=tmp_path / "runs", progress=watch)
    line = str(info.value)
    assert "\n" not in line and re.fullmatch(
        rf"{HOST} lost: its node died \({NODE2}\); 1 load host\(s\) left, fewer than min_hosts=2: the run stops; "
        r"1 stored trial\(s\) kept \(block b1's 1 set aside: it runs again in full on resume\); "
        r"resume with run_id 'r1' on a repaired cluster", line), line
    hit = watch.trials()[-1]
    assert hit.block == 1 and hit.status == "failed"
    assert re.fullmatch(rf"HostLost: {HOST} lost before its load started: its node died \({NODE2}\)",
                        hit.reason), hit.reason
    assert watch.notes()[-1] == line
    run_dir = tmp_path / "runs" / "host-lost-stop" / "r1"
    from benchlib.store.results import open_run

    stopped = open_run(run_dir)
    assert stopped.status == "stopped" and [t.block for t in stopped.trials] == [0]
    assert [p.name for p in _set_aside(run_dir)] == ["b001.failed-1.parquet"]
    assert "Ray's error in full" in (run_dir / "logs" / "run.log").read_text()  # Ray's text, in the run's log
    assert not watch.left()

    resumed = _Watch()
    run = run_experiment(exp, run_id="r1", out_dir=tmp_path / "runs", progress=resumed)  # a new cluster
    assert run.status == "complete" and run.skipped == 1 and run.ran == 1
    assert sorted(t.block for t in run.trials) == [0, 1]
    assert all(t.status in ("ok", "invalid") for t in run.trials), [(t.block, t.status, t.reason) for t in run.trials]
    b1 = next(t for t in run.trials if t.block == 1)
    assert len(b1.load.extra["cluster"]["hosts"]) == 2  # block b1 in full on the new cluster's two load hosts
    assert [p.name for p in _set_aside(run_dir)] == ["b001.failed-1.parquet"]  # the hit trial, still kept
    assert not resumed.left()


def test_the_service_node_lost_mid_run_stops_the_run_in_one_line(tmp_path: Path) -> None:
    watch = _Watch()
    killed = _kill_mid_trial(watch, lambda: _raylet(1), 2, after_block=0)
    with pytest.raises(HostLost) as info:
        run_experiment(_exp("service-lost", duration_s=5.0), run_id="r1", out_dir=tmp_path / "runs", progress=watch)
    assert killed, "the block b1 trial was never seen running"
    service = r"the service node \(benchlib_host_1, [0-9.]+\) lost: its node died \(Ray node [0-9a-f]{8}, benchlib_host_1\)"
    line = str(info.value)
    assert "\n" not in line and re.fullmatch(
        rf"{service}: the run stops; 1 stored trial\(s\) kept \(block b1's 1 set aside: it runs again in full on "
        r"resume\); resume with run_id 'r1' on a repaired cluster", line), line
    hit = watch.trials()[-1]
    assert hit.block == 1 and hit.status == "failed"
    assert re.fullmatch(rf"service died during the trial \({service}\)", hit.reason), hit.reason
    run_dir = tmp_path / "runs" / "service-lost" / "r1"
    (aside,) = _set_aside(run_dir)
    rows, hosts = _rows_and_hosts(aside)  # the hit trial's rows (its errors after the loss included), kept
    assert rows > 0 and hosts == {0, 1}
    from benchlib.store.results import open_run

    assert [t.block for t in open_run(run_dir).trials] == [0]
    assert not watch.left()
