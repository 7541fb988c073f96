"""Arms side by side in the runner (``Experiment(interleave=...)``).

Orchestration through the runner's seams (:mod:`benchlib.run.testing`: fake services that
answer HTTP on 127.0.0.1, the fake load's ``interleaved``): every arm of a block in one trial,
stored as one trial per arm with the trial's slices and each arm's CPU in them; an invalid
trial run again in full; a block stored in part run again in full on resume; a condition
whose instances' CPU cannot be read moved to the sequential design, said in one line and in
run.json; what the model refuses. End to end (``integration``): an A/A pair of real services
and the real load generator, interleaved.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from benchlib.core.errors import ParameterError, ServiceStartError
from benchlib.core.model import Arm, Condition, Experiment, Interleave, LoadSpec
from benchlib.core.schema import NO_SLICE
from benchlib.run.events import Note
from benchlib.run.runner import run_experiment
from benchlib.run.testing import FakeCrossCheck, FakeLoad, FakeRuntime, write_manifest
from benchlib.store.runstore import RunStore

SERVICES = Path(__file__).resolve().parent.parent / "services"
TINY = LoadSpec(connections=2, duration_s=0.2, warmup_s=0.05)
SIDE = Interleave(slice_ms=20, gap_ms=2)


@pytest.fixture()
def fake_services(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "services"
    for name in ("a", "b", "c"):
        write_manifest(d, name)
    monkeypatch.setenv("BENCHLIB_SERVICES", str(d))
    return d


def _exp(trials: int = 2, **kw: object) -> Experiment:
    return Experiment("side", (Arm("a", "a"), Arm("b", "b"), Arm("c", "c")), (Condition("main", TINY),),
                      trials=trials, seed=3, between_trials_s=0, interleave=kw.pop("interleave", SIDE), **kw)


def _run(exp: Experiment, tmp_path: Path, runtime: FakeRuntime, load: FakeLoad, **kw: object):
    return run_experiment(exp, out_dir=tmp_path / "runs", progress=kw.pop("progress", False), runtime=runtime,
                          load=load, cross_check=FakeCrossCheck(), **kw)


def test_every_arm_of_a_block_runs_in_one_trial_stored_as_one_trial_each(fake_services: Path,
                                                                          tmp_path: Path) -> None:
    rt = FakeRuntime(cpu_per_s=0.5)
    load = FakeLoad(rt)
    run = _run(_exp(), tmp_path, rt, load)
    assert len(load.calls) == 6 and all(c.get("interleaved") for c in load.calls)
    assert [t.status for t in run.trials] == ["ok"] * 6
    for t in run.trials:
        il = t.interleave
        assert il is not None and set(il.arms) == {"a", "b", "c"} and il.slice_ms == 20 and len(il.order) == 9
        assert il.cpu is not None and abs(il.cpu.carry_pct) < 5  # a fake service's CPU runs at one rate
        assert t.disturbance is not None
        slices = RunStore(run.store.path).trials()[0].slices()
        assert (slices != NO_SLICE).any()
    # the three arms of a block started before the load, stopped after it: one trial, not three
    starts = [e for e in rt.events if e[0] == "start"]
    assert len(starts) == 6
    summaries = run.summaries()
    assert set(summaries["arm"]) == {"a", "b", "c"} and summaries["server_cpu_us_per_req"].notna().all()


def test_an_invalid_trial_runs_again_in_full(fake_services: Path, tmp_path: Path) -> None:
    rt = FakeRuntime()
    load = FakeLoad(rt, outcomes={"b": ["invalid", "ok"]})
    run = _run(_exp(trials=1, repeat_invalid=1), tmp_path, rt, load)
    assert [t.status for t in run.trials] == ["ok"] * 3
    assert all(len(t.attempts) == 1 and t.attempts[0].reason.startswith("b: ") for t in run.trials)
    assert len(load.calls) == 6


def test_a_block_stored_in_part_runs_again_in_full_on_resume(fake_services: Path, tmp_path: Path) -> None:
    rt = FakeRuntime()
    first = _run(_exp(trials=1), tmp_path, rt, FakeLoad(rt))
    store = RunStore(first.store.path)
    lost = next(t for t in store.trials() if t.arm == "b")
    lost.path.unlink()  # as if the run had stopped between storing a and b
    load = FakeLoad(rt)
    again = _run(_exp(trials=1), tmp_path, rt, load, run_id=first.run_id)
    assert (again.ran, again.skipped) == (3, 0) and len(load.calls) == 3
    assert {t.arm: len(t.attempts) for t in again.trials} == {"a": 1, "b": 0, "c": 1}


def test_an_instance_whose_cpu_cannot_be_read_moves_the_condition_to_the_sequential_design(
        fake_services: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchlib.run.testing import FakeHandle

    monkeypatch.setattr(FakeHandle, "cpu_counter_ns", lambda self: None)
    rt = FakeRuntime()
    load = FakeLoad(rt)
    notes: list[str] = []
    run = _run(_exp(trials=2), tmp_path, rt, load,
               progress=lambda ev: notes.append(ev.event.text) if isinstance(ev.event, Note) else None)
    assert [c.get("interleaved", False) for c in load.calls] == [True] * 3 + [False] * 6
    assert all(t.interleave is None and t.status == "ok" for t in run.trials) and len(run.trials) == 6
    (change,) = run.record.design_changes
    assert change.condition == "main" and change.block == 0 and "sequential design" in change.line
    assert any("could not be read" in n for n in notes)


@pytest.mark.parametrize(("kw", "words"), [
    (dict(cluster="local:2"), "on this machine"),
    (dict(conditions=(Condition("c", LoadSpec(requests=100, duration_s=None)),)), "bounded by time"),
    (dict(conditions=(Condition("c", LoadSpec(protocol="h2c")),)), "HTTP/1.1 loads only"),
    (dict(service_starts="cell"), "afresh per trial"),
])
def test_an_interleaved_design_refuses_what_it_cannot_run_in_one_line(kw: dict, words: str) -> None:
    base = dict(study="s", arms=(Arm("a", "a"),), conditions=(Condition("c", TINY),), interleave=Interleave())
    with pytest.raises(ParameterError, match=words) as err:
        Experiment(**{**base, **kw})
    assert "interleave=None" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ParameterError, match="slice_ms must be a number from 5 to 2000"):
        Interleave(slice_ms=1)


@pytest.mark.integration
def test_an_aa_pair_of_real_services_side_by_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHLIB_SERVICES", str(SERVICES))
    exp = Experiment("aa", (Arm("x", "go-nethttp-hello"), Arm("y", "go-nethttp-hello")),
                     (Condition("c", LoadSpec(connections=4, duration_s=0.5, warmup_s=0.2)),), trials=2, seed=1,
                     between_trials_s=0, interleave=Interleave())
    run = run_experiment(exp, out_dir=tmp_path / "runs", progress=False)
    assert [t.status for t in run.trials].count("failed") == 0
    by = {(t.arm, t.block): t for t in run.trials}
    for t in by.values():
        il = t.interleave
        assert il is not None and il.arms in (("x", "y"), ("y", "x")) and il.order and il.slices > 0
        assert t.load is not None and t.load.measured_duration_s == pytest.approx(il.measured_s)
        rows = t.rows()
        assert len(rows) > 0
    s = run.summaries()
    assert (s["throughput_rps"] > 0).all() and s["server_cpu_us_per_req"].notna().any()
    stored = {(x.arm, x.block): x for x in RunStore(run.store.path).trials()}
    assert all((stored[k].slices() != NO_SLICE).mean() > 0.9 for k in stored)
    assert np.isfinite(s["p50_ms"]).all()


def test_the_design_section_says_which_design_ran_and_its_spread(fake_services: Path, tmp_path: Path) -> None:
    from benchlib.analysis.interleaved import design_kind_markdown

    rt = FakeRuntime()
    side = _run(_exp(trials=3), tmp_path, rt, FakeLoad(rt))
    text = design_kind_markdown(side)
    assert "arms side by side" in text and "3 arms per trial in slices of 20 ms with a 2 ms gap" in text
    assert "carry-over" in text and "per-block SD of the log ratio against a" in text
    alone = _run(_exp(trials=3, interleave=None), tmp_path, rt, FakeLoad(rt))
    assert "one arm per trial (the sequential design)" in design_kind_markdown(alone)


def test_a_peer_tool_runs_beside_the_interleaved_load_on_each_arms_instance(fake_services: Path,
                                                                            tmp_path: Path) -> None:
    from benchlib.core.model import CrossCheck

    rt = FakeRuntime()
    exp = Experiment("side", (Arm("a", "a"), Arm("b", "b")),
                     (Condition("main", TINY, cross_check=CrossCheck("wrk", arms=("a",))),), trials=2, seed=3,
                     between_trials_s=0, interleave=SIDE, cross_check_blocks="all")
    peer = FakeCrossCheck()
    run = run_experiment(exp, out_dir=tmp_path / "runs", progress=False, runtime=rt, load=FakeLoad(rt),
                         cross_check=peer)
    assert sorted(order for _, _, order in peer.calls) == ["after", "before"]
    assert {t.block: t.peer is not None for t in run.trials if t.arm == "a"} == {0: True, 1: True}
    assert all(t.peer is None for t in run.trials if t.arm == "b")


@pytest.mark.parametrize(("own_s", "leftover_s", "moves"), [
    (0.0036, 0.00042, False),  # study 01's go-faithful at 35 requests/s: 11.7% of its CPU, 0.2% of the CPU
    (0.19, 0.018, True),  # study 04's actix-debug-pipe, saturated: 9.5% of its CPU, 9% of the CPU
])
def test_the_carry_over_bound_is_a_share_of_the_service_cpu(fake_services: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch, own_s: float,
                                                             leftover_s: float, moves: bool) -> None:
    """What an arm's leftover work costs the arms after it is its share of the CPU in their slices,
    not its share of its own CPU: an arm that barely uses the CPU keeps the design (run
    20261207-124337-15c0 moved study 01 to the sequential design on 11.7% of 0.018 CPU s/s); its
    leftover counts in its CPU per request."""
    from benchlib.core.slicing import SliceCpu
    from benchlib.run import executor

    def crafted(plan, times, counters, idle):  # type: ignore[no-untyped-def]
        t = plan.measured_s(0)
        return [SliceCpu(own_s, leftover_s, t, 2 * t, 0.0, 100 * leftover_s / own_s) for _ in plan.windows]

    monkeypatch.setattr(executor, "slice_cpu", crafted)
    rt = FakeRuntime()
    run = _run(_exp(trials=2), tmp_path, rt, FakeLoad(rt))
    assert len(run.record.design_changes) == int(moves)
    if moves:
        assert "of the CPU above 2%" in run.record.design_changes[0].line
    else:
        side = [t for t in run.trials if t.interleave is not None]
        assert len(side) == 6 and all(t.interleave.carry_cpu_pct < 2 < t.interleave.carry_pct for t in side)
        s = run.summaries()
        own_only = own_s / s["n_ok"] * 1e6  # µs per request from its own slices alone
        assert (s["server_cpu_us_per_req"] > own_only * 1.1).all()


def test_an_arm_that_leaves_work_behind_runs_alone_and_the_others_stay_side_by_side(
        fake_services: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One arm above the carry-over bound (study 02's python-random at 3.0% of the CPU, run
    20261207-133357-2ea4) leaves the interleaved trial: it runs one per trial, its condition's
    other arms stay side by side, the first block runs again in that design, and a resume keeps it."""
    from benchlib.analysis.interleaved import design_kind_markdown
    from benchlib.core.slicing import SliceCpu
    from benchlib.run import executor

    def crafted(plan, times, counters, idle):  # type: ignore[no-untyped-def]
        t = plan.measured_s(0)  # the first arm of each interleaved trial leaves 5% of the CPU behind
        return [SliceCpu(0.2, 0.05 * t if k == 0 else 0.0, t, 2 * t, 0.0, 0.0) for k in range(len(plan.windows))]

    monkeypatch.setattr(executor, "slice_cpu", crafted)
    rt = FakeRuntime()
    load = FakeLoad(rt)
    notes: list[str] = []
    run = _run(_exp(trials=2), tmp_path, rt, load,
               progress=lambda ev: notes.append(ev.event.text) if isinstance(ev.event, Note) else None)
    (change,) = run.record.design_changes
    (arm,) = change.arms
    assert change.block == 0 and re.fullmatch(
        rf"condition 'main': {arm} runs one arm per trial from block b0 on, its other 2 arms side by side: "
        rf"{arm}: carry-over 5\.0% of the CPU above 2%", change.line), change.line
    assert notes == [change.line]
    # b0 interleaved with 3 arms (set aside), then per block: the other two side by side, the arm alone
    assert [c.get("interleaved", False) for c in load.calls].count(False) == 2 and len(load.calls) == 3 + 2 * 3
    assert len(run.trials) == 6 and all(t.status == "ok" for t in run.trials)
    for t in run.trials:
        assert (t.interleave is None) == (t.arm == arm)
        if t.interleave is not None:
            assert arm not in t.interleave.arms and len(t.interleave.arms) == 2
    text = design_kind_markdown(run)
    assert "2 arms per trial" in text and change.line in text
    # a resume reads the change: nothing runs again, the arm stays alone
    again = _run(_exp(trials=2), tmp_path, rt, FakeLoad(rt), run_id=run.run_id)
    assert (again.ran, again.skipped) == (0, 6) and again.record.design_changes == run.record.design_changes


def test_an_arm_that_fails_its_interleaved_trial_costs_the_block_its_own_trial_only(fake_services: Path,
                                                                                     tmp_path: Path) -> None:
    rt = FakeRuntime(start_errors={"b": ServiceStartError("b would not start")})
    load = FakeLoad(rt)
    notes: list[str] = []
    run = _run(_exp(trials=2), tmp_path, rt, load,
               progress=lambda ev: notes.append(ev.event.text) if isinstance(ev.event, Note) else None)
    by_arm = {(t.arm, t.block): t for t in run.trials}
    for block in (0, 1):
        failed = by_arm[("b", block)]
        assert failed.status == "failed" and failed.reason is not None and failed.reason.startswith("b: ServiceStartError")
        for arm in ("a", "c"):
            t = by_arm[(arm, block)]
            assert t.status == "ok" and t.interleave is not None and set(t.interleave.arms) == {"a", "c"}
            assert [(x.status, (x.reason or "")[:3]) for x in t.attempts] == [("failed", "b: ")]
    # the load ran only in the trials without b: two arms, two blocks
    assert len(load.calls) == 4 and all(c.get("interleaved") for c in load.calls)
    assert sum("b failed it" in n and "ran again side by side without it: ok" in n for n in notes) == 2
    summaries = run.summaries()
    assert set(summaries[summaries["valid"]]["arm"]) == {"a", "c"} and len(summaries) == 6
