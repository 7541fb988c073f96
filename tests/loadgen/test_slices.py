"""Arms side by side: the slice plan (pure) and an interleaved trial against two real test
servers on 127.0.0.1 (benchlib.loadgen.slices, benchlib.loadgen.launch.run_interleaved)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from benchlib.core.errors import LoadSpecError
from benchlib.core.model import LoadSpec, Stage, Target
from benchlib.core.schema import PHASE_CODES
from benchlib.core.slicing import de_bruijn_pairs, plan_slices, slice_order
from benchlib.loadgen.engine import EngineConfig
from benchlib.loadgen.launch import run_interleaved
from benchlib.loadgen.slices import SlicedEngine
from benchlib.loadgen.testservers import serve

from .conftest import client_cpus, server_cpus


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_every_ordered_pair_of_arms_is_adjacent_once_per_cycle(n: int) -> None:
    seq = de_bruijn_pairs(n)
    pairs = collections.Counter(zip(seq, seq[1:] + seq[:1]))
    assert len(seq) == n * n
    assert set(pairs.values()) == {1} and len(pairs) == n * n


def test_two_arms_alternate_abba_and_the_phase_follows_the_seed() -> None:
    assert de_bruijn_pairs(2) == [0, 0, 1, 1]
    orders = {tuple(slice_order(2, s)) for s in range(20)}
    assert orders <= {(0, 0, 1, 1), (0, 1, 1, 0), (1, 1, 0, 0), (1, 0, 0, 1)} and len(orders) > 1


def test_a_plan_gives_every_arm_the_same_measured_slices_after_a_whole_warm_up_cycle() -> None:
    plan = plan_slices(3, warmup_s=0.3, measured_s=1.0, slice_ms=50, gap_ms=5, seed=7)
    measured = [plan.measured_s(i) for i in range(3)]
    assert measured[0] == pytest.approx(measured[1]) == pytest.approx(measured[2])
    assert measured[0] == pytest.approx(1.05, abs=0.16)  # whole cycles of 3 slices per arm
    assert plan.warmup_s >= 0.3 * 3 and plan.total_s > plan.warmup_s + 3 * measured[0]
    starts = np.sort(np.concatenate([w[:, 0] for w in plan.windows]))
    assert np.all(np.diff(starts) == 55_000_000)  # slice + gap, no overlap
    assert plan.owner_at(int(plan.windows[2][0, 0]) + 52_000_000) == 2  # in the gap after its slice


def test_an_interleaved_trial_refuses_a_count_bound_or_http2_load_in_one_line() -> None:
    plan = plan_slices(2, warmup_s=0.1, measured_s=0.2, slice_ms=50, gap_ms=5, seed=0)
    t = Target("127.0.0.1", 9)
    with pytest.raises(LoadSpecError, match="bounded by time"):
        run_interleaved([(LoadSpec(requests=100, duration_s=None), t)] * 2, plan)
    with pytest.raises(LoadSpecError, match="HTTP/1.1 loads only"):
        run_interleaved([(LoadSpec(protocol="h2c"), t)] * 2, plan)
    staged = LoadSpec(model="open", stages=(Stage(100, 1.0), Stage(200, 1.0)), duration_s=None)
    with pytest.raises(LoadSpecError, match="not in stages"):
        run_interleaved([(staged, t)] * 2, plan)


@pytest.mark.parametrize("arrival", ["constant", "poisson"])
def test_an_open_arm_gets_its_rate_times_its_slices_seconds_wherever_its_slices_fall(arrival: str) -> None:
    # study 01's /users/1 at full scale: 6 arms, 10 requests/s, 10 s each; a slice of 50 ms holds
    # half an arrival, so the old rule (one schedule for the trial, filtered by the arm's slices)
    # gave an arm 79-116 where 100 were due, with the phase of its slices
    counts = []
    for seed in range(8):
        plan = plan_slices(6, warmup_s=1.0, measured_s=10.0, slice_ms=50, gap_ms=5, seed=seed)
        assert plan.measured_s(0) >= 10.0  # whole cycles, rounded up
        for arm in range(6):
            cfg = EngineConfig(host="127.0.0.1", port=9, model="open", connections=2, rate_rps=10.0,
                               duration_s=plan.total_s - plan.warmup_s, warmup_s=plan.warmup_s, arrival=arrival,
                               seed=seed * 10 + arm)
            eng = SlicedEngine(cfg, 0, plan.windows[arm])
            due = np.concatenate(list(eng._schedule_blocks()))
            win = plan.windows[arm]
            k = np.searchsorted(win[:, 0], due, side="right") - 1
            assert (k >= 0).all() and (due < win[k, 1]).all()  # each one inside one of its slices
            assert (np.diff(due) >= 0).all()
            measured = int(np.count_nonzero(due >= round(plan.warmup_s * 1e9)))
            if arrival == "constant":
                assert measured == round(10 * plan.measured_s(arm))
            counts.append(measured)
    if arrival == "poisson":  # its number drawn at the rate over the arm's own seconds
        assert np.mean(counts) == pytest.approx(10 * plan.measured_s(0), rel=0.1)


@pytest.mark.integration
@pytest.mark.parametrize("model", ["closed", "open"])
def test_each_arm_sends_only_in_its_own_slices(model: str) -> None:
    plan = plan_slices(2, warmup_s=0.2, measured_s=0.6, slice_ms=50, gap_ms=5, seed=3)
    spec = (LoadSpec(model="closed", connections=4, duration_s=1.0) if model == "closed" else
            LoadSpec(model="open", rate_rps=400, connections=8, duration_s=1.0))
    with serve("hello", cpus=server_cpus()) as a, serve("hello", cpus=server_cpus()) as b:
        results = run_interleaved([(spec, Target(*a)), (spec, Target(*b))], plan, client_cpus=client_cpus(), seed=1)
    for i, r in enumerate(results):
        rows = r.rows
        win = plan.windows[i]
        k = np.searchsorted(win[:, 0], rows["t_intended_ns"], side="right") - 1
        inside = (k >= 0) & (rows["t_intended_ns"] < win[np.clip(k, 0, None), 1] + 2_000_000)  # timer slack
        assert inside.all(), f"arm {i}: {np.count_nonzero(~inside)} of {len(rows)} requests outside its slices"
        measured = rows[rows["phase"] == PHASE_CODES["measure"]]
        assert len(measured) > 0 and (measured["error"] == 0).all()
        assert r.meta["measured_duration_s"] == pytest.approx(plan.measured_s(i))
        assert r.meta["interleave"]["slice_ms"] == 50 and r.meta["interleave"]["arms"] == 2
        if model == "open":  # a constant schedule on the arm's own clock: exactly rate x its measured seconds
            assert len(measured) == round(400 * plan.measured_s(i))


def test_carry_over_is_an_arms_cpu_in_the_others_slices_beyond_its_idle_rate() -> None:
    from benchlib.core.slicing import slice_cpu

    plan = plan_slices(2, warmup_s=0.0, measured_s=0.2, slice_ms=50, gap_ms=0, seed=0)
    times = plan.boundaries_ns()
    # arm 0 burns 40 ms per own slice and 2 ms in each of arm 1's (1 ms of it idle);
    # arm 1 burns 10 ms per own slice and nothing else
    c0 = c1 = 0
    counters = [[0, 0]]
    for a, b in zip(times, times[1:]):
        owner = plan.owner_at((a + b) // 2)
        c0 += 40_000_000 if owner == 0 else 2_000_000
        c1 += 10_000_000 if owner == 1 else 0
        counters.append([c0, c1])
    cpu = slice_cpu(plan, times, counters, idle_cpu_per_s=[0.02, 0.0])
    assert cpu[0] is not None and cpu[1] is not None
    assert cpu[0].carry_pct == pytest.approx(100 * (2 - 1) / 40)
    assert cpu[1].carry_pct == pytest.approx(0.0)
    # as a share of the CPU: 1 ms beyond idle per 50 ms slice of its own (what arm 1 loses to it);
    # its leftover work is its own requests' CPU (4 slices x 1 ms)
    assert cpu[0].carry_cpu_pct == pytest.approx(100 * 1 / 50)
    assert cpu[0].leftover_s == pytest.approx(0.004) and cpu[1].leftover_s == 0.0
    assert cpu[0].own_period_s == pytest.approx(plan.measured_s(0))
    assert slice_cpu(plan, times, [[None, 1]] * len(times), [0, 0])[0] is None
