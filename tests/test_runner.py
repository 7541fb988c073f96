"""The runner.

Orchestration, through the runner's seams (``run_experiment(runtime=, load=, cross_check=)``
with :mod:`benchlib.run.testing`: no service process, no load engine; the contract check still
talks HTTP to each fake service on 127.0.0.1): the blocked plan executed and stored in its
order, start and stop order (dependencies, service, front), resume, ``retry_failed``,
``repeat_invalid``, a block that lost a load host run again in full or the run stopped (a
scripted ``HostCheck``), failed and invalid trials recorded with their reason and what was
measured, arms that cannot run kept with the reason, the cross-check's alternating order, and
a stop signal mid-trial leaving the stored trials intact and nothing running.

End to end (marked ``integration``: real services on 127.0.0.1 and the real load generator):
a run with a service that works, one that dies and one whose toolchain is missing, resumed;
and a load worker killed mid-trial, its rows stored.
"""

from __future__ import annotations

import shutil
import struct
import textwrap
from pathlib import Path

import numpy as np
import pytest

from benchlib.analysis import status_table
from benchlib.core.errors import (
    BuildError,
    HostLost,
    ParameterError,
    RuntimeUnavailable,
    ServiceStartError,
    StorageError,
    ToolchainMissing,
)
from benchlib.core.model import Arm, Condition, CrossCheck, Experiment, LoadSpec
from benchlib.core.signals import Interrupted
from benchlib.run.events import BlockDone, Note, PlanSlot, Progress, RunStarted, TrialEvent
from benchlib.run.runner import run_experiment
from benchlib.run.testing import FakeCrossCheck, FakeLoad, FakeRuntime, Outcome, write_manifest
from benchlib.store.records import TrialRecord
from benchlib.store.runstore import RunStore

SERVICES = Path(__file__).resolve().parent.parent / "services"
TINY = LoadSpec(connections=2, duration_s=0.6, warmup_s=0.2)


def _service(d: Path, name: str, *, role: str = "service", requires: tuple[str, ...] = (), extra: str = "") -> None:
    write_manifest(d, name, role=role, requires=requires, extra=extra)


@pytest.fixture()
def fake_services(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Manifests only (the fake runtime starts nothing): a, b, c; web (needs db); db; proxy (a front)."""
    d = tmp_path / "services"
    d.mkdir()
    for name in ("a", "b", "c", "db"):
        _service(d, name)
    _service(d, "web", requires=("db",))
    _service(d, "proxy", role="front")
    monkeypatch.setenv("BENCHLIB_SERVICES", str(d))
    return d


def _run(exp: Experiment, tmp_path: Path, runtime: FakeRuntime | None = None, load: FakeLoad | None = None,
         **kw: object):
    runtime = runtime or FakeRuntime()
    load = load or FakeLoad(runtime)
    return run_experiment(exp, out_dir=tmp_path / "runs", progress=False, runtime=runtime, load=load, **kw)


def _exp(name: str, arms: tuple[Arm, ...], *, trials: int = 1, conditions: tuple[Condition, ...] | None = None,
         **kw: object) -> Experiment:
    return Experiment(name, arms, conditions or (Condition("main", TINY),), trials=trials, seed=3,
                      between_trials_s=0, **kw)


def _written_as_read(res) -> None:
    """Every stored trial is its typed record's ``to_meta()``: read back and written again, the
    same dictionary; and ``from_meta`` mirrors ``to_meta``."""
    for t in res.trials:
        assert t.to_meta() == t.meta and TrialRecord.from_meta(t.to_meta()) == t


# -- orchestration, through the seams ----------------------------------------------------------

def test_the_plan_runs_in_its_order_dependencies_first_front_last_and_everything_is_stopped(
        fake_services: Path, tmp_path: Path) -> None:
    rt = FakeRuntime(cpu_per_s=0.5)
    load = FakeLoad(rt)
    exp = _exp("t-plan", (Arm("direct", "a"), Arm("db-backed", "web"), Arm("fronted", "b", front="proxy")),
               trials=2, conditions=(Condition("c1", TINY), Condition("c2", TINY.with_(connections=4))))
    res = _run(exp, tmp_path, rt, load, run_id="r1")
    trials = res.trials
    run = res.store.read_run()
    assert res.ran == len(trials) == 12 and run.status == "complete" and run == res.record
    assert [(p.condition, p.arm, p.block) for p in run.plan] == [(t.condition, t.arm, t.block) for t in trials]
    assert [t.meta["seq"] for t in trials] == list(range(12)) and all(t.meta["status"] == "ok" for t in trials)
    assert run.runtime.raw == {"runtime": "fake", "fake": True} and {t.meta["runtime"] for t in trials} == {"fake"}
    # per trial: the dependency before the service, the front after it; the front stops first
    starts = [e for e in rt.events if e[0] in ("start", "stop")]
    for arm, expected in (("db-backed", ["db", "web"]), ("fronted", ["b", "proxy"]), ("direct", ["a"])):
        service = {"db-backed": "web", "fronted": "b", "direct": "a"}[arm]
        first = next(i for i, e in enumerate(starts) if e[0] == "start" and e[1] == expected[0])
        assert [e[1] for e in starts[first:first + len(expected)]] == expected
        if arm == "fronted":
            assert [e[1] for e in starts[first + 2:first + 4]] == ["proxy", "b"]  # stop: front first
        assert service in rt.started()
    assert not any(h.alive() for h in rt.handles) and len(rt.handles) == sum(1 for e in rt.events if e[0] == "stop")
    # the load went to the front for the fronted arm, with the experiment's seed per trial
    by_service = {c["service"] for c in load.calls}
    assert by_service == {"a", "web", "b"} and len({c["seed"] for c in load.calls}) == 12
    # the stored trials read back through the records, the front and the server CPU included
    recs = {(t.arm, t.condition, t.block): t for t in res.trials}
    fronted = recs[("fronted", "c1", 0)]
    assert fronted.front is not None and fronted.front.service == "proxy" and fronted.front.stop
    assert fronted.load.worker_stats[0].runqueue_wait_s == 0.0 and fronted.load.t0_monotonic_ns is not None
    cpu = fronted.server_cpu()
    assert cpu is not None and cpu.fraction == pytest.approx(1.0, rel=1e-6)  # service 0.5 + front 0.5 CPU
    assert recs[("direct", "c1", 0)].front is None and recs[("direct", "c1", 0)].server_cpu().fraction == \
        pytest.approx(0.5, rel=1e-6)
    s = res.summaries()
    assert len(s) == 12 and s["valid"].all() and (s["n"] == 200).all()
    assert s["server_cpu_frac"].to_numpy() == pytest.approx([1.0 if a == "fronted" else 0.5 for a in s["arm"]],
                                                             rel=1e-6)
    assert s.loc[s["arm"] == "fronted", "front_cpu_us_per_req"].notna().all()
    lat = res.latencies()
    assert len(lat) == 12 * 200 and set(lat["arm"]) == {"direct", "db-backed", "fronted"}
    assert (lat["latency_ms"] >= 2.0).all() and (lat["service_ms"] < lat["latency_ms"]).all()
    _written_as_read(res)  # fronts, dependencies


def test_a_stopping_rule_ends_blocks_for_settled_pairs_and_then_the_run(fake_services: Path, tmp_path: Path) -> None:
    """``until``: after block 1 only arm a is still wanted, after block 2 nothing: block 1 runs
    a alone, block 2 is not run, run.json says where it stopped."""
    exp = _exp("t-until", (Arm("a", "a"), Arm("b", "b")), trials=3)
    asked: list[tuple[int, int]] = []

    def rule(result, blocks_done):
        asked.append((blocks_done, len(result.trials)))
        return {("main", "a")} if blocks_done == 1 else set()

    events: list[Progress] = []
    rt = FakeRuntime()
    res = run_experiment(exp, out_dir=tmp_path / "runs", progress=events.append, runtime=rt, load=FakeLoad(rt),
                         run_id="u1", until=rule)
    assert asked == [(1, 2), (2, 3)]  # called after each complete block, with what is stored
    assert sorted((t.block, t.arm) for t in res.trials) == [(0, "a"), (0, "b"), (1, "a")]
    settled = [e.event for e in events if isinstance(e.event, TrialEvent) and e.kind == "settled"]
    assert [(e.arm, e.block, e.stopped_after) for e in settled][0] == ("b", 1, None)
    assert [(e.block, e.stopped_after) for e in settled][1:] == [(2, 2)]  # the run ends at block 2's first trial
    assert res.store.read_run().stopped_after_blocks == 2


def test_a_resume_skips_stored_trials_and_refuses_other_parameters(fake_services: Path, tmp_path: Path) -> None:
    exp = _exp("t-resume", (Arm("a", "a"), Arm("b", "b")), trials=2)
    assert _run(exp, tmp_path, run_id="r1").ran == 4
    rt = FakeRuntime()
    again = _run(exp, tmp_path, rt, run_id="r1")
    assert (again.ran, again.skipped) == (0, 4) and rt.started() == []
    with pytest.raises(ParameterError, match="different parameters"):
        _run(_exp("t-resume", exp.arms, trials=3), tmp_path, run_id="r1")


def test_the_pause_between_trials_is_at_most_the_settings_bound_and_the_run_records_it(
        fake_services: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def exp(pause: float) -> Experiment:
        return Experiment("t-pause", (Arm("a", "a"),), (Condition("main", TINY),), trials=2, between_trials_s=pause)

    monkeypatch.setenv("BENCHLIB_MAX_BETWEEN_TRIALS_S", "0.05")
    res = _run(exp(0.5), tmp_path, run_id="p1")
    assert res.store.read_run().parameters["between_trials_s"] == 0.05
    assert res.require_experiment().between_trials_s == 0.05
    assert _run(exp(0.5), tmp_path, run_id="p1").skipped == 2  # the same bound: the same run, resumed
    assert _run(exp(0.01), tmp_path, run_id="p2").record.parameters["between_trials_s"] == 0.01
    monkeypatch.setenv("BENCHLIB_MAX_BETWEEN_TRIALS_S", "soon")
    with pytest.raises(ParameterError, match="BENCHLIB_MAX_BETWEEN_TRIALS_S='soon' is not valid: not a number; "
                                             "valid: seconds from 0 to 3600"):
        _run(exp(0.5), tmp_path, run_id="p3")


def test_retry_failed_runs_failed_trials_again_and_keeps_the_failed_files(fake_services: Path, tmp_path: Path) -> None:
    exp = _exp("t-retry", (Arm("a", "a"), Arm("b", "b")), trials=2, retry_failed=True)
    rt = FakeRuntime()
    first = _run(exp, tmp_path, rt, FakeLoad(rt, {"b": ["failed"]}), run_id="r1")
    status = {(t.arm, t.block): t.meta["status"] for t in first.trials}
    assert sorted(status.values()) == ["failed", "ok", "ok", "ok"]
    (arm, block), = [k for k, v in status.items() if v == "failed"]
    again = _run(exp, tmp_path, run_id="r1")  # the failed trial runs again, in its place
    assert (again.ran, again.skipped) == (1, 3)
    assert {t.meta["status"] for t in again.trials} == {"ok"}
    kept = again.store.path / "trials" / "main" / arm / f"b{block:03d}.failed-1.parquet"
    assert kept.is_file()  # what the failed attempt measured is kept aside
    without = _exp("t-retry", exp.arms, trials=2)
    with pytest.raises(ParameterError, match="different parameters"):  # retry_failed is stored with the run
        _run(without, tmp_path, run_id="r1")


def test_an_invalid_trial_is_repeated_in_place_and_its_attempts_are_kept(fake_services: Path, tmp_path: Path) -> None:
    exp = _exp("t-invalid", (Arm("a", "a"), Arm("b", "b")), repeat_invalid=2)
    rt = FakeRuntime()
    events: list[Progress] = []
    res = run_experiment(exp, run_id="r4", out_dir=tmp_path / "runs", progress=events.append, runtime=rt,
                         load=FakeLoad(rt, {"b": ["invalid", "invalid", "ok"], "a": ["invalid"] * 3}))
    by_arm = {t.arm: t.meta for t in res.trials}
    assert res.ran == 2 and by_arm["b"]["status"] == "ok" and by_arm["a"]["status"] == "invalid"
    for arm in ("a", "b"):
        attempts = by_arm[arm]["previous_attempts"]
        assert [a["status"] for a in attempts] == ["invalid", "invalid"] and "busy 97%" in attempts[0]["reason"]
        folder = res.store.path / "trials" / "main" / arm
        assert sorted(p.name for p in folder.glob("b000.failed-*.parquet")) == ["b000.failed-1.parquet",
                                                                               "b000.failed-2.parquet"]
    assert by_arm["a"]["reason"] == "client CPU 0 was busy 97% of the traffic (fake)"
    assert [e.event.repeated for e in events if isinstance(e.event, TrialEvent) and e.kind == "trial"] == [2, 2]
    recs = {t.arm: t for t in res.trials}
    assert recs["b"].repeated and len(recs["b"].attempts) == 2 and not recs["a"].valid
    s = res.summaries().set_index("arm")
    assert bool(s.loc["b", "valid"]) and not bool(s.loc["a", "valid"])
    assert res.store.read_run().parameters["repeat_invalid"] == 2
    _written_as_read(res)  # previous attempts
    with pytest.raises(ParameterError, match="repeat_invalid"):
        Experiment("x", exp.arms, exp.conditions, repeat_invalid=-1)


class _Hosts:
    """A scripted :class:`benchlib.run.runner.HostCheck`: after the ``at``-th trial, a re-reservation
    note (``stop`` False) or :class:`~benchlib.core.errors.HostLost` (``stop`` True)."""

    def __init__(self, at: int, *, stop: bool = False) -> None:
        self.at, self.stop, self.calls = at, stop, 0

    def check(self) -> str | None:
        self.calls += 1
        if self.calls != self.at:
            return None
        if self.stop:
            raise HostLost("load host 1 (h) lost: its node died (Ray node 6793dfde); 1 load host(s) left, "
                           "fewer than min_hosts=2")
        return "load host 1 (h) lost: its node died (Ray node 6793dfde); the load hosts reserved again: 1 (n0)"


def test_a_block_that_lost_a_host_runs_again_in_full_after_the_hosts_are_reserved_again(
        fake_services: Path, tmp_path: Path) -> None:
    exp = _exp("t-hosts", (Arm("a", "a"), Arm("b", "b")), trials=2)
    rt = FakeRuntime()
    events: list[Progress] = []
    res = run_experiment(exp, out_dir=tmp_path / "runs", progress=events.append, runtime=rt, load=FakeLoad(rt),
                         hosts=_Hosts(3))  # after block b1's first trial
    (note,) = [e.event for e in events if isinstance(e.event, Note)]
    assert note.text.endswith("reserved again: 1 (n0); block b1 runs again in full on them (1 trial(s) set aside)")
    assert note.undone == 1 and events[-1].trials_done == 4  # the progress counts the block once
    trials = [(e.event.block, e.event.arm) for e in events if isinstance(e.event, TrialEvent) and e.kind == "trial"]
    b1 = [(p.block, p.arm) for p in res.store.read_run().plan if p.block == 1]
    assert len(trials) == 5 and trials[2:3] == b1[:1] and trials[3:] == b1  # b1 again, in full, in its order
    assert res.ran == 5 and len(res.trials) == 4
    (aside,) = (res.store.path / "trials").glob("*/*/b001.failed-1.parquet")
    redone = next(t for t in res.trials if t.block == 1 and t.arm == aside.parent.name)
    assert [a.reason for a in redone.attempts] == ["set aside: block b1 ran again in full on the load hosts left "
                                                   "after a loss"]
    assert [x.line for x in res.store.read_run().host_losses] == [note.text]
    assert res.store.read_run().status == "complete"


def test_a_run_that_cannot_go_on_stops_in_one_line_keeping_its_other_trials(fake_services: Path,
                                                                             tmp_path: Path) -> None:
    exp = _exp("t-hosts-stop", (Arm("a", "a"), Arm("b", "b")), trials=2)
    rt = FakeRuntime()
    with pytest.raises(HostLost) as info:
        _run(exp, tmp_path, rt, FakeLoad(rt), run_id="r1", hosts=_Hosts(3, stop=True))
    assert str(info.value) == ("load host 1 (h) lost: its node died (Ray node 6793dfde); 1 load host(s) left, fewer "
                               "than min_hosts=2: the run stops; 2 stored trial(s) kept (block b1's 1 set aside: it "
                               "runs again in full on resume); resume with run_id 'r1' on a repaired cluster")
    store = RunStore(tmp_path / "runs" / "t-hosts-stop" / "r1")
    assert [t.block for t in store.trials()] == [0, 0] and store.read_run().status == "stopped"
    (loss,) = store.read_run().host_losses
    assert loss.stopped and loss.block == 1 and loss.line == str(info.value)
    again = _run(exp, tmp_path, rt, FakeLoad(rt), run_id="r1")  # the resume runs block b1 in full
    assert (again.ran, again.skipped) == (2, 2) and again.store.read_run().status == "complete"


def test_failures_are_stored_with_their_reason_and_what_was_measured(fake_services: Path, tmp_path: Path) -> None:
    arms = (Arm("lg-fails", "a"), Arm("dies", "b"), Arm("refused", "c"), Arm("no-start", "web"))
    rt = FakeRuntime(start_errors={"web": ServiceStartError("web: exited with code 1 before it was healthy")})
    load = FakeLoad(rt, {"a": ["failed"], "b": ["dies"], "c": ["raise"]})
    res = _run(_exp("t-fail", arms), tmp_path, rt, load)
    meta = {t.arm: t.meta for t in res.trials}
    rows = {t.arm: t.rows() for t in res.trials}
    assert {m["status"] for m in meta.values()} == {"failed"} and res.ran == 4
    # the load generator failed mid-trial: its rows so far are stored, as evidence
    assert meta["lg-fails"]["reason"].startswith("LoadGenError: load worker 1 failed")
    assert len(rows["lg-fails"]) == 20 + 100 and meta["lg-fails"]["load"]["failed"] is True
    # the service died during the load
    assert meta["dies"]["reason"] == "service died during the trial (exited with code 7 during the load (fake))"
    assert meta["dies"]["stop"]["died_early"] and "fake service log" in meta["dies"]["log_tail"]
    assert len(rows["dies"]) == 220
    # the load generator refused before traffic: no rows, the traceback kept
    assert meta["refused"]["reason"].startswith("LoadGenError: fake load: refused") and len(rows["refused"]) == 0
    assert "Traceback" in meta["refused"]["traceback"]
    # the service never got healthy; its dependency was stopped again
    assert meta["no-start"]["reason"].startswith("ServiceStartError: web: exited with code 1")
    assert not any(h.alive() for h in rt.handles) and rt.started("dependency") == ["db"]
    s = res.summaries().set_index("arm")
    assert not s["valid"].any() and s.loc["lg-fails", "n"] == 100 and s.loc["dies", "n"] == 200
    assert np.isnan(s.loc["refused"].get("n", np.nan))
    _written_as_read(res)  # failures at every stage: log tails, tracebacks, no service
    # a service that breaks its contract: failed before any load
    bad = FakeRuntime(status=500)
    broken = _run(_exp("t-contract", (Arm("a", "a"),)), tmp_path, bad, FakeLoad(bad))
    (t,) = broken.trials
    assert t.meta["status"] == "failed" and t.meta["reason"].startswith("ContractError") and "500" in t.meta["reason"]
    assert not any(h.alive() for h in bad.handles)


def test_arms_that_cannot_run_are_kept_with_the_reason(fake_services: Path, tmp_path: Path) -> None:
    rt = FakeRuntime(build_errors={"b": ToolchainMissing("dotnet", "b", "install the .NET 8 SDK"),
                                   "c": BuildError("c: build failed with exit code 2")})
    docker = FakeRuntime("docker", unavailable="no Docker engine answers")
    arms = (Arm("a", "a"), Arm("b", "b"), Arm("c", "c"), Arm("in-docker", "a", runtime="docker"))
    res = run_experiment(_exp("t-notrun", arms, trials=2), out_dir=tmp_path / "runs", progress=False,
                         runtime={"local": rt, "docker": docker}, load=FakeLoad(rt))
    assert res.unavailable == {"b": "no dotnet toolchain (install the .NET 8 SDK)",
                               "c": "build failed: c: build failed with exit code 2",
                               "in-docker": "runtime 'docker' unavailable: no Docker engine answers"}
    assert {t.arm for t in res.trials} == {"a"} and res.ran == 2
    assert [p.arm for p in res.store.read_run().plan] == ["a", "a"]
    assert res.store.read_run().unavailable == res.unavailable
    reasons = " ".join(status_table(res)["reasons"])
    assert "not run: no dotnet toolchain" in reasons and "not run: build failed" in reasons
    # the experiment's own runtime unavailable: refused before the run folder is made
    with pytest.raises(RuntimeUnavailable, match="no Docker engine answers"):
        run_experiment(_exp("t-nort", (Arm("a", "a"),)), out_dir=tmp_path / "none", progress=False, runtime=docker,
                       load=FakeLoad(docker))
    assert not (tmp_path / "none").exists()


def test_the_cross_check_runs_on_the_same_instance_before_the_load_in_odd_blocks(
        fake_services: Path, tmp_path: Path) -> None:
    rt = FakeRuntime()
    log: list[str] = []
    load, peer = FakeLoad(rt), FakeCrossCheck(requests_per_s=1234.0)

    def logged_load(*args, **kw):
        log.append("load")
        return load(*args, **kw)

    def logged_peer(check, url, cpus, *, order):
        log.append(f"peer {order}")
        return peer(check, url, cpus, order=order)

    check = CrossCheck("wrk", (("threads", 1), ("connections", 2), ("duration_s", 1)), arms=("a",))
    exp = _exp("t-xcheck", (Arm("a", "a", front="proxy"), Arm("plain", "b")), trials=4,
               conditions=(Condition("main", TINY, cross_check=check),), cross_check_blocks="all")
    res = run_experiment(exp, out_dir=tmp_path / "runs", progress=False, runtime=rt, load=logged_load,
                         cross_check=logged_peer)
    trials = res.trials
    checked = [t for t in trials if t.arm == "a"]
    assert [t.meta["cross_check"]["order"] for t in checked] == ["after", "before", "after", "before"]
    assert all("cross_check" not in t.meta for t in trials if t.arm == "plain")
    # in the trial itself: odd blocks run the peer first, even blocks after benchlib's load
    steps = iter(log)
    for t in trials:
        got = [next(steps)] if t.arm == "plain" else [next(steps), next(steps)]
        want = ["load"] if t.arm == "plain" else (["peer before", "load"] if t.block % 2 else ["load", "peer after"])
        assert got == want, (t.arm, t.block)
    # the peer loaded the same instance as benchlib: the front, where the load went
    fronts = [h.port for h in rt.handles if h.role == "front"]
    assert [url for _, url, _ in peer.calls] == [f"http://127.0.0.1:{p}/" for p in fronts]
    assert [c["target"].port for c in load.calls if c["service"] == "a"] == fronts
    s = res.summaries()
    s = s[s["arm"] == "a"]
    assert (s["xcheck_tool"] == "wrk").all() and (s["xcheck_rps"] == 1234.0).all() and (s["xcheck_p50_ms"] == 1.0).all()
    _written_as_read(res)  # cross-checks


def test_a_stop_signal_mid_trial_keeps_the_stored_trials_and_stops_everything(
        fake_services: Path, tmp_path: Path) -> None:
    exp = _exp("t-signal", (Arm("a", "a"), Arm("db-backed", "web")), trials=3)
    rt = FakeRuntime()
    with pytest.raises(Interrupted, match="SIGTERM"):
        _run(exp, tmp_path, rt, FakeLoad(rt, ["ok", "ok", "interrupt"]), run_id="r1")
    store = tmp_path / "runs" / "t-signal" / "r1"
    kept = RunStore(store).trials(verify=True)  # read in full: intact
    assert [t.meta["seq"] for t in kept] == [0, 1] and all(len(t.rows()) == 220 for t in kept)
    assert RunStore(store).read_run().status == "running"
    assert rt.handles and not any(h.alive() for h in rt.handles)  # the interrupted trial's services stopped too
    assert len(rt.handles) == sum(1 for e in rt.events if e[0] == "stop")
    # the resume runs the rest only
    rt2 = FakeRuntime()
    res = _run(exp, tmp_path, rt2, run_id="r1")
    assert (res.ran, res.skipped) == (4, 2) and [t.meta["seq"] for t in res.trials] == list(range(6))
    assert res.store.read_run().status == "complete"


def test_a_resume_reads_everything_before_it_writes_and_refuses_what_it_cannot_trust(
        fake_services: Path, tmp_path: Path) -> None:
    exp = _exp("t-resume2", (Arm("a", "a"),), trials=2)
    res = _run(exp, tmp_path, run_id="r5")
    first = res.trials[0].path

    # a damaged trial file: named, and nothing in the run folder changes (run.json included)
    data = bytearray(first.read_bytes())
    end = len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]  # before the footer
    for i in range((4 + end) // 2, (4 + end) // 2 + 64):
        data[i] ^= 0x5A
    first.write_bytes(bytes(data))
    before = _snapshot(res.store.path)
    with pytest.raises(StorageError, match="unreadable trial file") as err:
        _run(exp, tmp_path, run_id="r5")
    assert str(first) in str(err.value)
    assert _snapshot(res.store.path) == before

    # run.json deleted: its provenance cannot be invented anew
    first.unlink()
    (res.store.path / "run.json").unlink()
    before = _snapshot(res.store.path)
    with pytest.raises(StorageError, match="no run.json .*cannot be resumed: start a new run"):
        _run(exp, tmp_path, run_id="r5")
    assert _snapshot(res.store.path) == before and not (res.store.path / "run.json").exists()


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_names_that_would_leave_the_run_folder_are_refused(fake_services: Path, tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="run id '..' must match"):
        _run(_exp("t-names", (Arm("a", "a"),)), tmp_path, run_id="..")
    with pytest.raises(ParameterError, match=r"service \(a folder under services/\) '\.\./a' must"):
        Arm("a", "../a")
    assert not (tmp_path / "runs").exists()


def test_the_fake_load_refuses_an_unknown_outcome() -> None:
    with pytest.raises(ValueError, match="unknown outcome 'late'; valid: ok, invalid, failed, dies, raise, interrupt"):
        Outcome("late")


# -- end to end: real services, the real load generator -----------------------------------------

@pytest.fixture()
def services(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "services"
    d.mkdir()
    (d / "python-aiohttp-hello").symlink_to(SERVICES / "python-aiohttp-hello")
    write_manifest(d, "needs-dotnet", toolchains=["dotnet"], command=["dotnet", "run"])
    write_manifest(d, "dies-soon", toolchains=["python"], command=["{python}", "{service_dir}/server.py"])
    (d / "dies-soon" / "server.py").write_text(textwrap.dedent("""
        import os, threading, http.server
        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def do_GET(self):
                self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
                self.wfile.write(b"ok")
            def log_message(self, *a): pass
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H)
        threading.Timer(0.5, lambda: os._exit(7)).start()
        srv.serve_forever()
    """))
    monkeypatch.setenv("BENCHLIB_SERVICES", str(d))
    return d


@pytest.mark.integration
def test_a_real_run_stores_its_plan_keeps_unrunnable_arms_records_a_dying_service_and_resumes(
        services: Path, tmp_path: Path) -> None:
    if shutil.which("dotnet"):
        pytest.skip("dotnet is installed here")
    exp = Experiment("t-runner", (Arm("a", "python-aiohttp-hello"), Arm("b", "python-aiohttp-hello"),
                                  Arm("dotnet", "needs-dotnet"), Arm("dies", "dies-soon")),
                     (Condition("main", LoadSpec(connections=2, duration_s=0.8, warmup_s=0.1, timeout_s=1)),),
                     trials=2, seed=5, between_trials_s=0)  # dies-soon exits 0.5 s after its start: mid-load
    res = run_experiment(exp, run_id="r1", out_dir=tmp_path / "runs", progress=False)
    assert "dotnet" in res.unavailable and "install the .NET 8 SDK" in res.unavailable["dotnet"]
    trials = res.trials
    run = res.store.read_run()
    assert res.ran == 6 and [t.meta["seq"] for t in trials] == list(range(6)) and run.status == "complete"
    assert [p.arm for p in run.plan] == [t.arm for t in trials]
    status = {(t.arm, t.block): t.meta for t in trials}
    assert all(status[(a, b)]["status"] == "ok" for a in ("a", "b") for b in (0, 1))
    for b in (0, 1):
        dies = status[("dies", b)]
        assert dies["status"] == "failed" and ("died" in dies["reason"] or "ServiceStartError" in dies["reason"])
    summaries = res.summaries().set_index(["arm", "block"])
    assert (summaries.loc[["a", "b"], "n"] > 0).all() and summaries.loc[["a", "b"], "valid"].all()
    assert (summaries.loc[["a", "b"], "server_cpu_us_per_req"] > 0).all()
    assert "not run: no dotnet toolchain" in " ".join(status_table(res)["reasons"])
    lat = res.latencies()
    assert set(lat["arm"]) == {"a", "b"} and (lat["latency_ms"] > 0).all()
    again = run_experiment(exp, run_id="r1", out_dir=tmp_path / "runs", progress=False)
    assert again.ran == 0 and again.skipped == 6


@pytest.mark.integration
def test_a_load_generator_failure_stores_what_was_measured(services: Path, tmp_path: Path) -> None:
    """One of two load workers is killed mid-trial: the trial is stored as failed, with the
    reason and the other worker's rows (it was lost whole, before)."""
    from tests.loadgen.test_failure import kill_a_worker_in_traffic

    spec = LoadSpec(connections=4, duration_s=2.0, warmup_s=0.2, workers=2)
    exp = Experiment("t-runner5", (Arm("a", "python-aiohttp-hello"),), (Condition("main", spec),), trials=1,
                     seed=1, between_trials_s=0)
    state: dict = {}
    watcher = kill_a_worker_in_traffic(0.5, state)
    res = run_experiment(exp, out_dir=tmp_path / "runs", progress=False)
    watcher.join()
    assert "killed" in state
    (trial,) = res.trials
    meta = trial.meta
    assert meta["status"] == "failed" and "LoadGenError" in meta["reason"] and "died" in meta["reason"]
    rows = trial.rows()
    assert len(rows) > 100 and len(np.unique(rows["worker"])) == 1
    assert meta["load"]["failed"] is True and meta["load"]["requests"]["total"] == len(rows)
    (rec,) = res.trials
    assert rec.load.failed and rec.load.failure.startswith("load worker ") and len(rec.load.worker_errors) == 1
    summaries = res.summaries()
    assert len(summaries) == 1 and not summaries["valid"].iloc[0] and summaries["n"].iloc[0] > 0


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("wrk") is None, reason="needs wrk (apt-get install wrk)")
def test_the_peer_runs_in_the_chosen_blocks_and_the_progress_counts_blocks_and_time(services: Path,
                                                                                    tmp_path: Path) -> None:
    from benchlib.analysis import Family, decided_questions
    from benchlib.analysis.peers import peer_beside, peer_summary

    check = CrossCheck("wrk", (("threads", 1), ("connections", 2), ("duration_s", 1)), arms=("a",))
    exp = Experiment("t-runner6", (Arm("a", "python-aiohttp-hello"), Arm("b", "python-aiohttp-hello")),
                     (Condition("main", TINY.with_(duration_s=0.3, warmup_s=0.1), cross_check=check),), trials=4,
                     seed=1, between_trials_s=0, cross_check_blocks=2)
    events: list[Progress] = []
    looked: list[int] = []

    def decided(summaries):  # the hook sees the trials stored so far, once per block
        looked.append(len(summaries))
        return decided_questions([Family.against("ab", "a", ["b"], conditions=["main"], metrics=["p50_ms"])])(summaries)

    res = run_experiment(exp, out_dir=tmp_path / "runs", progress=events.append, decided=decided)
    peer = {t.block: t.meta["cross_check"]["order"] for t in res.trials if t.meta.get("cross_check")}
    assert peer == {0: "after", 3: "before"}  # 2 of 4 blocks, first and last, the order alternating
    assert all(t.arm == "a" for t in res.trials if t.meta.get("cross_check"))
    assert looked == [2, 4, 6, 8]
    blocks = [e for e in events if isinstance(e.event, BlockDone)]
    assert [(e.event.block, e.blocks_done, e.trials_done) for e in blocks] == [(0, 1, 2), (1, 2, 4), (2, 3, 6),
                                                                               (3, 4, 8)]
    assert all(isinstance(e.event.decided, tuple) for e in blocks)
    trials = [e for e in events if isinstance(e.event, TrialEvent) and e.kind == "trial"]
    assert all(e.event.seconds > 0 and e.left_s >= 0 for e in trials) and trials[-1].left_s == 0
    assert isinstance(events[0].event, RunStarted)
    assert events[0].event.plan == tuple(PlanSlot(t.condition, t.arm, t.block in (0, 3) and t.arm == "a")
                                         for t in sorted(res.trials, key=lambda t: t.seq))
    summary = peer_summary(peer_beside(res, summaries=res.summaries()))
    assert list(summary["peer_blocks"]) == ["2 of 4"]
    assert res.store.read_run().parameters["cross_check_blocks"] == 2


_KV = """
import os, sys, http.server
hits = 0
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        global hits
        if self.path == "/reset":
            print(f"reset after {hits} hits", flush=True)
            hits = 0
        else:
            hits += 1
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a): pass
print(f"kv started, pid {os.getpid()}", flush=True)
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
"""
_WEB = """
import os, http.server, urllib.request
KV = os.environ["KV"]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        urllib.request.urlopen(KV + "/hit", timeout=5).read()
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
"""


@pytest.mark.integration
def test_a_dependency_shared_by_a_block_starts_once_per_block_and_is_reset_before_each_later_trial(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Experiment(dependencies="block") with real processes: a key-value dependency counts the
    requests the service under test sends it; its [run] reset step logs and clears the count.
    Each block starts one instance (one port, one log), every later trial of the block resets
    it first (after traffic of the trial before), and nothing is left running."""
    d = tmp_path / "services"
    d.mkdir()
    _service(d, "kv", extra='reset = [["{python}", "-c", "import urllib.request as u; '
                            'u.urlopen(\'http://{host}:{port}/reset\', timeout=5).read()"]]')
    _service(d, "web", requires=("kv",), extra='env = { KV = "http://{dep.kv.host}:{dep.kv.port}" }')
    (d / "kv" / "server.py").write_text(_KV)
    (d / "web" / "server.py").write_text(_WEB)
    _service(d, "plain-db")
    _service(d, "plain-web", requires=("plain-db",))
    monkeypatch.setenv("BENCHLIB_SERVICES", str(d))
    spec = LoadSpec(connections=1, duration_s=0.4, warmup_s=0.1)
    exp = Experiment("t-shared", (Arm("x", "web"), Arm("y", "web")), (Condition("c1", spec), Condition("c2", spec)),
                     trials=2, seed=1, between_trials_s=0, dependencies="block")
    res = run_experiment(exp, out_dir=tmp_path / "runs", progress=False)
    trials = sorted(res.trials, key=lambda t: t.meta["seq"])
    assert len(trials) == 8 and all(t.meta["status"] == "ok" for t in trials)
    for block in (0, 1):
        in_block = [t.meta["dependencies"]["kv"] for t in trials if t.block == block]
        assert len({m["port"] for m in in_block}) == 1 and all(m["shared"] == "block" for m in in_block)
        assert in_block[0]["reset_s"] is None and all(m["reset_s"] > 0 for m in in_block[1:])
        log = (res.store.path / "logs" / f"b{block:03d}.kv.log").read_text()
        assert log.count("kv started") == 1
        hits = [int(line.split()[2]) for line in log.splitlines() if line.startswith("reset after")]
        assert len(hits) == 3 and all(h > 0 for h in hits)  # the trial before each reset reached this instance
    ports = {t.meta["dependencies"]["kv"]["port"] for t in trials}
    assert len(ports) == 2 and res.store.read_run().parameters["dependencies"] == "block"
    _written_as_read(res)  # shared dependencies
    from benchlib.runtime.ports import port_in_use
    assert not any(port_in_use("127.0.0.1", p) for p in ports)  # each block's instance was stopped
    # a dependency that cannot be reset is refused before anything runs
    with pytest.raises(ParameterError, match="'plain-db' declares no \\[run\\] reset steps"):
        run_experiment(Experiment("t-shared2", (Arm("p", "plain-web"),), (Condition("c1", spec),), trials=1,
                                  dependencies="block"), out_dir=tmp_path / "runs", progress=False)


def test_an_unknown_dependency_scope_is_one_clear_error() -> None:
    with pytest.raises(ParameterError, match=r"unknown Experiment.dependencies 'run'; valid: trial, block"):
        Experiment("t-scope", (Arm("a", "a"),), (Condition("main", TINY),), dependencies="run")


def test_service_starts_cell_starts_each_cells_services_once_and_stops_them_at_the_end(
        fake_services: Path, tmp_path: Path) -> None:
    """``service_starts="cell"`` (the variance measurement's, not a comparison's): each
    (condition, arm) starts its dependency, service and front once, keeps them for its trials
    (their records say so) and stops them all when the run ends, the front first."""
    rt = FakeRuntime()
    exp = _exp("t-kept", (Arm("db-backed", "web"), Arm("fronted", "b", front="proxy")), trials=3,
               conditions=(Condition("c1", TINY), Condition("c2", TINY.with_(connections=4))), service_starts="cell")
    res = _run(exp, tmp_path, rt, run_id="k1")
    assert res.ran == 12 and all(t.status == "ok" for t in res.trials)
    starts = [e[1] for e in rt.events if e[0] == "start"]
    assert sorted(starts) == sorted(["db", "web", "b", "proxy"] * 2)  # once per cell, not per trial
    assert all("kept running" in t.stop["detail"] for t in res.trials)
    assert not any(h.alive() for h in rt.handles)  # all stopped when the run ended
    stops = [e[1] for e in rt.events if e[0] == "stop"]
    assert stops.index("proxy") < stops.index("b")
    assert res.store.read_run().parameters["service_starts"] == "cell" and res.experiment.service_starts == "cell"
