"""Experimental design: the order in which trials run.

Trials run in **randomized complete blocks**: every block runs every arm once. Orders are
counterbalanced, so each arm runs in each position equally often:

* two arms: ``AB BA AB BA ...`` (ABBA), the first order drawn from the seed;
* more arms: the rows of a Williams design (a balanced Latin square; for an odd number of
  arms, the square and its mirror), with arm labels and row order shuffled by the seed.

Analysis is paired by block (statistics.md sections 3.2 and 6.2: blocked order with a
paired test keeps the A/A size under a 10% drift, AAAA/BBBB does not). Pure: no I/O.
"""

from __future__ import annotations

import math
import numbers
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from benchlib.core.errors import ParameterError

__all__ = ["DEFAULT_CROSS_CHECK_BLOCKS", "PlannedTrial", "check_cross_check_blocks", "cross_check_blocks", "plan_trials",
           "williams_rows"]


@dataclass(frozen=True)
class PlannedTrial:
    """One trial of the plan.

    Attributes
    ----------
    seq: position in the whole run (0-based): the order trials execute in.
    condition: the load condition (endpoint, rate, ...) this trial belongs to.
    block: block number (0-based) within the condition.
    position: the arm's position within its block (0-based).
    arm: the arm's name.
    """

    seq: int
    condition: str
    block: int
    position: int
    arm: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def williams_rows(k: int) -> list[list[int]]:
    """The rows of a Williams design for ``k`` treatments (``k`` rows if even, ``2k`` if odd).

    Each treatment appears once per row, equally often in each position, and (for even
    ``k``) follows every other treatment equally often.
    """
    if k < 1:
        raise ParameterError("a design needs at least one arm")
    if k == 1:
        return [[0]]
    base = [0]
    lo, hi = 1, k - 1
    for j in range(1, k):
        if j % 2 == 1:
            base.append(lo)
            lo += 1
        else:
            base.append(hi)
            hi -= 1
    rows = [[(x + i) % k for x in base] for i in range(k)]
    if k % 2 == 1:
        rows += [list(reversed(r)) for r in rows]
    return rows


def plan_trials(arms: Sequence[str], blocks: int, *, seed: int = 0,
                conditions: Sequence[str] = ("main",)) -> list[PlannedTrial]:
    """The execution order of every trial: ``blocks`` blocks of all ``arms`` per condition.

    Blocks of all conditions are interleaved (block 0 of every condition, then block 1, ...)
    so that drift spreads over conditions as well as arms.

    Raises
    ------
    ParameterError
        for fewer than one block, duplicate arm names or no arms.
    """
    if not isinstance(blocks, int) or blocks < 1:
        raise ParameterError(f"trials (blocks) must be an integer >= 1, got {blocks!r}")
    if not arms:
        raise ParameterError("an experiment needs at least one arm")
    if len(set(arms)) != len(arms):
        raise ParameterError(f"arm names must be unique, got {list(arms)}")
    if not conditions or len(set(conditions)) != len(conditions):
        raise ParameterError(f"conditions must be unique and non-empty, got {list(conditions)}")
    rng = random.Random(seed)
    k = len(arms)
    plan: list[PlannedTrial] = []
    orders_by_condition: dict[str, list[list[str]]] = {}
    for cond in conditions:
        labels = list(arms)
        rng.shuffle(labels)
        rows = williams_rows(k)
        orders: list[list[str]] = []
        while len(orders) < blocks:
            cycle = list(rows)
            if k > 2:
                rng.shuffle(cycle)
            orders.extend([[labels[i] for i in row] for row in cycle])
        orders_by_condition[cond] = orders[:blocks]
    seq = 0
    for b in range(blocks):
        for cond in conditions:
            for pos, arm in enumerate(orders_by_condition[cond][b]):
                plan.append(PlannedTrial(seq=seq, condition=cond, block=b, position=pos, arm=arm))
                seq += 1
    return plan


#: Blocks a peer tool (:class:`~benchlib.core.model.CrossCheck`) runs in by default: 3, spread over
#: the run (first, middle, last), so its figures come with a spread (a median and a range of
#: 3 trials per arm) and it runs both before and after benchlib's load; ``"all"`` at full scale.
DEFAULT_CROSS_CHECK_BLOCKS = 3

_CROSS_CHECK_CHOICES = "'all', a number of blocks >= 1 (e.g. 3) or a fraction of the blocks in (0, 1] (e.g. 0.3)"


def check_cross_check_blocks(value: Any, owner: str = "Experiment.cross_check_blocks") -> int | float | str:
    """``value`` if it is a valid choice of peer-tool blocks (``"all"``, an int >= 1, a float
    fraction in (0, 1]); a number written as text (``"3"``, ``"0.3"``, from a notebook
    parameter) is converted. Anything else: one :class:`ParameterError` line naming the
    valid choices."""
    v = value
    if isinstance(v, str) and v.strip() != "all":
        try:
            v = int(v) if v.strip().lstrip("+").isdigit() else float(v)
        except ValueError:
            pass
    if v == "all" and isinstance(v, str):
        return "all"
    if isinstance(v, numbers.Integral) and not isinstance(v, bool) and int(v) >= 1:
        return int(v)
    if (isinstance(v, numbers.Real) and not isinstance(v, (bool, numbers.Integral)) and math.isfinite(float(v))
            and 0 < float(v) <= 1):
        return float(v)
    raise ParameterError(f"{owner} {value!r} is not valid; valid: {_CROSS_CHECK_CHOICES}")


def cross_check_blocks(blocks: int, which: int | float | str = DEFAULT_CROSS_CHECK_BLOCKS) -> tuple[int, ...]:
    """The blocks (0-based, ascending) in which a peer tool runs, out of ``blocks``.

    ``which``: ``"all"``; ``n`` blocks; or a fraction of the blocks (rounded up). ``n``
    blocks are spread evenly over the run, the first and the last included (3 of 10: 0, 5,
    9), so the peer sees the start and the end of the run's drift. The peer runs before
    benchlib's load in the 2nd, 4th, ... of these blocks and after it in the others (with
    ``"all"``: first in odd blocks, as before).
    """
    which = check_cross_check_blocks(which)
    if which == "all":
        return tuple(range(blocks))
    n = int(which) if isinstance(which, int) else max(1, math.ceil(float(which) * blocks - 1e-9))
    if n >= blocks:
        return tuple(range(blocks))
    if n == 1:
        return (0,)
    return tuple(sorted({int(i * (blocks - 1) / (n - 1) + 0.5) for i in range(n)}))
