"""Sequential stopping of a study's questions (benchlib.analysis.stopping; pure, simulated trials)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis.questions import Family, run_family
from benchlib.analysis.stopping import StopWhenSettled, open_questions
from benchlib.errors import ParameterError
from benchlib.stats.sequential import SequentialDesign
from benchlib.stats.simulate import simulate_summaries

DESIGN = SequentialDesign.every(12, first=8, step=2)


def _summaries(seed: int = 1) -> pd.DataFrame:
    """Arms A, B (25% slower: settles at the first look) and C (same as A: stays open)."""
    df = simulate_summaries(np.random.default_rng(seed), arms={"A": 1.0, "B": 1.25, "C": 1.0}, trials=12,
                            n_req=2000, phi=0.9, trial_sd=0.03, condition="main")
    df["valid"] = True
    return df


FAST = Family.against("b", "A", ["B"], conditions=["main"], metrics=("p50_ms",))
SAME = Family.against("c", "A", ["C"], conditions=["main"], metrics=("p50_ms",))


def test_open_questions_returns_the_undecided_ones() -> None:
    df = _summaries()
    first = df[df["block"] < 8]
    assert [f.key for f in open_questions([FAST, SAME], first, DESIGN)] == ["c"]
    ans = run_family(first, FAST, sequential=DESIGN, shift=False)
    v = ans.comparison.verdicts[0]
    assert v.kind.directional and v.stopped_early and v.blocks_run == 8


@dataclass
class _Exp:
    trials: int
    conditions: tuple[Any, ...] = ()


@dataclass
class _Cond:
    name: str


@dataclass
class _Result:
    """What the rule reads of an ExperimentResult: the experiment, the summaries so far, and
    the arms that could not run."""

    frame: pd.DataFrame
    experiment: _Exp = field(default_factory=lambda: _Exp(12, (_Cond("main"),)))
    unavailable: dict[str, str] = field(default_factory=dict)
    blocks: int = 0

    def summaries(self) -> pd.DataFrame:
        return self.frame[self.frame["block"] < self.blocks]


def test_stop_rule_keeps_the_pairs_of_open_questions_only() -> None:
    rule = StopWhenSettled([FAST, SAME], DESIGN)
    res = _Result(_summaries())
    res.blocks = 7
    assert rule(res, 7) is None  # not a look: everything runs
    res.blocks = 8
    assert rule(res, 8) == {("main", "A"), ("main", "C")}
    assert rule.looks[-1].settled == ("b",) and rule.looks[-1].open == ("c",)
    assert "after 8 blocks: settled b" in rule.describe()


def test_stop_rule_needs_the_experiments_blocks() -> None:
    res = _Result(_summaries(), experiment=_Exp(10, (_Cond("main"),)))
    with pytest.raises(ParameterError, match="end at 12 blocks, the experiment plans 10"):
        StopWhenSettled([FAST], DESIGN)(res, 8)
