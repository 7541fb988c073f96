"""Block designs: counterbalanced, seeded, reproducible (statistics.md 5.11 item 6)."""

from __future__ import annotations

import collections

import pytest

from benchlib.core.design import plan_trials, williams_rows
from benchlib.core.errors import ParameterError


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6])
def test_williams_rows_are_latin_and_position_balanced(k: int) -> None:
    rows = williams_rows(k)
    assert len(rows) == (k if k % 2 == 0 or k == 1 else 2 * k)
    for row in rows:
        assert sorted(row) == list(range(k))
    for pos in range(k):
        counts = collections.Counter(row[pos] for row in rows)
        assert len(set(counts.values())) == 1 and len(counts) == k


@pytest.mark.parametrize("k", [2, 4, 6])
def test_williams_rows_balance_first_order_carryover_for_even_k(k: int) -> None:
    pairs = collections.Counter((r[i], r[i + 1]) for r in williams_rows(k) for i in range(k - 1))
    assert len(pairs) == k * (k - 1) and set(pairs.values()) == {1}


def test_two_arms_alternate_abba_and_each_arm_leads_half_the_blocks() -> None:
    plan = plan_trials(["A", "B"], 10, seed=3)
    firsts = [t.arm for t in plan if t.position == 0]
    assert collections.Counter(firsts) == {"A": 5, "B": 5}
    assert all(firsts[i] != firsts[i + 1] for i in range(len(firsts) - 1))
    assert [t.seq for t in plan] == list(range(20))


def test_plan_is_reproducible_for_a_seed_and_differs_across_seeds() -> None:
    a = plan_trials(["x", "y", "z"], 6, seed=11)
    assert a == plan_trials(["x", "y", "z"], 6, seed=11)
    assert any(plan_trials(["x", "y", "z"], 6, seed=s) != a for s in range(12, 20))


def test_every_block_runs_every_arm_once_per_condition_and_blocks_interleave() -> None:
    plan = plan_trials(["a", "b", "c"], 4, seed=0, conditions=("c1", "c2"))
    for cond in ("c1", "c2"):
        for b in range(4):
            assert sorted(t.arm for t in plan if t.condition == cond and t.block == b) == ["a", "b", "c"]
    blocks_in_order = [t.block for t in plan]
    assert blocks_in_order == sorted(blocks_in_order)


@pytest.mark.parametrize("arms,blocks,match", [
    ([], 3, "at least one arm"),
    (["a", "a"], 3, "unique"),
    (["a", "b"], 0, "integer >= 1"),
])
def test_bad_plans_are_refused(arms: list[str], blocks: int, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        plan_trials(arms, blocks)


@pytest.mark.parametrize(("blocks", "which", "chosen"), [
    (10, 3, (0, 5, 9)), (9, 3, (0, 4, 8)), (10, "all", tuple(range(10))), (2, 3, (0, 1)), (10, 1, (0,)),
    (10, 0.3, (0, 5, 9)), (10, 1.0, tuple(range(10))), (10, "5", (0, 2, 5, 7, 9)), (10, "0.2", (0, 9)),
])
def test_the_peer_tool_runs_in_blocks_spread_over_the_run(blocks: int, which: object, chosen: tuple) -> None:
    from benchlib.core.design import cross_check_blocks

    assert cross_check_blocks(blocks, which) == chosen  # type: ignore[arg-type]


def test_by_default_the_peer_tool_runs_in_three_blocks_both_before_and_after() -> None:
    from benchlib.core.design import DEFAULT_CROSS_CHECK_BLOCKS, cross_check_blocks

    assert DEFAULT_CROSS_CHECK_BLOCKS == 3 and cross_check_blocks(10) == (0, 5, 9)
