"""Paired or unpaired: how one baseline/arm pair's trials are aligned for comparison (pure).

Shared by :func:`benchlib.stats.compare.compare` and :mod:`benchlib.stats.shift`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from benchlib.core.errors import ParameterError

__all__ = ["Pair", "pair_design"]


@dataclass(frozen=True)
class Pair:
    """One baseline/arm pair's trials, aligned for the analysis.

    Attributes
    ----------
    paired: compared block by block (``a`` and ``b`` aligned by block) or not.
    a, b: the baseline's and the arm's trials (summaries rows).
    dropped: trials left out of the paired analysis (a block without a partner).
    """

    paired: bool
    a: pd.DataFrame  # baseline trials (aligned by block when paired)
    b: pd.DataFrame
    dropped: int  # trials left out of the paired analysis (block without a partner)


def pair_design(trials: pd.DataFrame, baseline: str, arm: str, design: str) -> Pair:
    """Decide paired or unpaired for one pair of arms and align the trials.

    ``auto`` pairs by block when every block holds at most one trial of each arm and at
    least two blocks (and half of the trials) are complete; trials in incomplete blocks are
    then left out of the paired analysis (and counted). ``paired`` insists (and raises when
    blocks hold repeated arms); ``unpaired`` never pairs.
    """
    a = trials[trials["arm"] == baseline]
    b = trials[trials["arm"] == arm]
    if design == "unpaired" or "block" not in trials.columns:
        if design == "paired":
            raise ParameterError("design='paired' needs a 'block' column in the summaries")
        return Pair(False, a, b, 0)
    if a["block"].isna().any() or b["block"].isna().any():
        if design == "paired":
            raise ParameterError("design='paired': some trials have no block number")
        return Pair(False, a, b, 0)
    dup = a["block"].duplicated().any() or b["block"].duplicated().any()
    if dup:
        if design == "paired":
            raise ParameterError(
                f"design='paired': some blocks hold more than one trial of {baseline!r} or {arm!r}; "
                "use design='unpaired' (or 'auto')"
            )
        return Pair(False, a, b, 0)
    common = sorted(set(a["block"]) & set(b["block"]))
    complete_enough = len(common) >= 2 and 2 * len(common) >= max(len(a), len(b))
    if design == "auto" and not complete_enough:
        return Pair(False, a, b, 0)
    aa = a.set_index("block", drop=False).loc[common].reset_index(drop=True)
    bb = b.set_index("block", drop=False).loc[common].reset_index(drop=True)
    return Pair(True, aa, bb, len(a) + len(b) - 2 * len(common))
