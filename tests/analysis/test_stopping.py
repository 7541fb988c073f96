"""Sequential stopping of a study's questions (benchlib.analysis.stopping): the rule on simulated
trials (pure), and stopping_rule (a notebook's ``sequential`` parameter) through the runner's
seams (benchlib.run.testing's FakeRuntime and FakeLoad: no process, the contract check over HTTP)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis.questions import Family, run_family
from benchlib.analysis.stopping import StopWhenSettled, open_questions
from benchlib.core.errors import ParameterError
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
    """What the rule reads of a Run: the experiment, the summaries so far, and the arms that
    could not run."""

    frame: pd.DataFrame
    experiment: _Exp = field(default_factory=lambda: _Exp(12, (_Cond("main"),)))
    unavailable: dict[str, str] = field(default_factory=dict)
    blocks: int = 0

    def summaries(self) -> pd.DataFrame:
        return self.frame[self.frame["block"] < self.blocks]

    def require_experiment(self) -> _Exp:
        return self.experiment


def test_stop_rule_keeps_the_pairs_of_open_questions_only() -> None:
    rule = StopWhenSettled([FAST, SAME], DESIGN)
    res = _Result(_summaries())
    res.blocks = 7
    assert rule(res, 7) is None  # not a look: everything runs
    res.blocks = 8
    assert rule(res, 8) == {("main", "A"), ("main", "C")}
    assert rule.looks[-1].settled == ("b",) and rule.looks[-1].open == ("c",)
    assert "after 8 blocks: settled b" in rule.describe()


def test_a_look_that_cannot_be_computed_stops_nothing_and_says_why() -> None:
    # the analysis compares a column the raw summaries lack (study 05's p50_us): without the
    # study's `prepare` the look fails, every question goes on, and the log says why
    us = Family.against("us", "A", ["B"], conditions=["main"], metrics=("p50_us",))
    rule = StopWhenSettled([us], DESIGN)
    res = _Result(_summaries())
    res.blocks = 8
    assert rule(res, 8) is None and rule.looks[-1].error.startswith("ParameterError")
    assert rule.looks[-1].open == ("us",) and "not computed" in rule.describe()
    assert rule(res, 9) == {("main", "A"), ("main", "B")}  # until the next look
    with_us = StopWhenSettled([us], DESIGN, prepare=lambda df: df.assign(p50_us=df["p50_ms"] * 1000))
    assert with_us(res, 8) == set() and with_us.looks[-1].settled == ("us",)


def test_stop_rule_needs_the_experiments_blocks() -> None:
    res = _Result(_summaries(), experiment=_Exp(10, (_Cond("main"),)))
    with pytest.raises(ParameterError, match="end at 12 blocks, the experiment plans 10"):
        StopWhenSettled([FAST], DESIGN)(res, 8)


# -- stopping_rule: the notebook's `sequential` parameter, through the runner's seams ----------

#: Per service (arm: its name in capitals): a 2 ms; b 3 ms (50% slower: settled at the first
#: look); c a's latency 10% above and below in alternate blocks (no direction, not within 2%:
#: open to the last block).
LATENCY = {"a": [2.0] * 12, "b": [3.0] * 12, "c": [2.0 * (1.1 if k % 2 else 0.9) for k in range(12)]}


def _fake_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arms: tuple[str, ...], families: list[Family],
              sequential: str = "yes") -> tuple[Any, Any]:
    from benchlib.analysis.stopping import stopping_rule
    from benchlib.core.model import Arm, Condition, Experiment, LoadSpec
    from benchlib.run.runner import run_experiment
    from benchlib.run.testing import FakeLoad, FakeRuntime, Outcome, fake_manifests

    monkeypatch.setenv("BENCHLIB_SERVICES", str(fake_manifests(tmp_path / "services", arms)))
    rt = FakeRuntime()
    load = FakeLoad(rt, {s: [Outcome(latency_ms=x) for x in LATENCY[s]] for s in arms})
    exp = Experiment("t-stop", tuple(Arm(s.upper(), s) for s in arms), (Condition("main", LoadSpec(connections=2,
                     duration_s=0.5, warmup_s=0.1)),), trials=12, seed=3, between_trials_s=0)
    stopping = stopping_rule(families, exp.trials, sequential)
    res = run_experiment(exp, out_dir=tmp_path / "runs", progress=False, runtime=rt, load=load, until=stopping.until)
    return res, stopping


def test_a_settled_question_stops_getting_blocks_an_open_one_continues(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    res, stopping = _fake_run(tmp_path, monkeypatch, ("a", "b", "c"), [FAST, SAME])
    assert stopping.on and stopping.design == SequentialDesign.every(12, n_comparisons=1)
    assert stopping.design.looks[0] < 12
    first = stopping.design.looks[0]
    blocks = {arm: sorted(t.block for t in res.store.trials() if t.arm == arm) for arm in ("A", "B", "C")}
    assert blocks["B"] == list(range(first))  # settled at the first look: no block after it
    assert blocks["A"] == blocks["C"] == list(range(12))  # c's question stays open to the last block
    assert [(lk.blocks, lk.settled, lk.open) for lk in stopping.rule.looks] == [
        (n, ("b",), ("c",)) for n in stopping.design.looks[:-1]]
    # the analysis uses the same design: b's verdict holds at the look it stopped at
    summaries = res.summaries()
    fast = run_family(summaries, FAST, sequential=stopping.design).comparison.verdicts[0]
    same = run_family(summaries, SAME, sequential=stopping.design).comparison.verdicts[0]
    assert fast.kind.value == "slower" and fast.stopped_early and fast.blocks_run == first
    assert not same.kind.directional and same.blocks_run == 12 and not same.stopped_early
    text = stopping.markdown(res)
    assert f"look after {first} blocks: settled b; open c" in text
    assert f"stopping saved **{12 - first} of 36 planned trials** (of 12 blocks, B in main after {first})" in text


def test_the_run_ends_when_every_question_is_settled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchlib.analysis.pilot import design_section
    from benchlib.analysis.stopping import saved_trials

    res, stopping = _fake_run(tmp_path, monkeypatch, ("a", "b"), [FAST])
    first = stopping.design.looks[0]
    assert res.record.stopped_after_blocks == first
    assert {t.block for t in res.store.trials()} == set(range(first))
    saved = saved_trials(res)
    assert saved["trials"] == 2 * (12 - first) and saved["planned"] == 24
    assert saved["minutes"] == pytest.approx(saved["trials"] * saved["slot_s"] / 60)
    answer = run_family(res.summaries(), FAST, sequential=stopping.design)
    section = design_section(res, [answer], stopping=stopping)
    assert f"the run stopped after {first} of 12 blocks" in section and "`sequential=yes`" in section


def test_sequential_no_runs_every_block_with_the_fixed_analysis(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    res, stopping = _fake_run(tmp_path, monkeypatch, ("a", "b"), [FAST], sequential="no")
    assert not stopping.on and stopping.design is None and stopping.until is None
    assert {t.block for t in res.store.trials()} == set(range(12))
    assert "off: every planned block runs (12)" in stopping.markdown(res)


def test_auto_is_on_when_the_blocks_leave_two_looks_and_at_full_scale() -> None:
    from benchlib.analysis.stopping import stopping_rule

    on = stopping_rule([FAST, SAME], 12, "auto")
    assert on.on and len(on.design.looks) >= 2 and on.figures["rows"] == 1
    assert on.figures["mde_sd"] > on.figures["mde_fixed_sd"]  # the price of the looks: a larger MDE at the end
    assert on.figures["expected_blocks"][1] < on.figures["expected_blocks"][0] < 12
    big = Family.against("big", "A", [f"B{i}" for i in range(8)], conditions=["main"],
                         metrics=("p50_ms", "p99_ms"))  # 16 rows: first decidable at 10 blocks
    off = stopping_rule([big], 10, "auto")
    assert not off.on and off.design is None and off.figures["looks"] == (10,)
    assert "one look" in off.why
    full = stopping_rule([big], 10, "auto", full=True)
    assert full.on and full.design.looks == (10,)
    assert stopping_rule([big], 10, True).on and not stopping_rule([big], 10, False).on


@pytest.mark.parametrize("bad", ["maybe", "", "on", 3])
def test_a_bad_sequential_value_is_one_error_naming_the_choices(bad: object) -> None:
    from benchlib.analysis.stopping import stopping_rule

    with pytest.raises(ParameterError, match=r"sequential .* is not valid; valid: auto, yes, no"):
        stopping_rule([FAST], 12, bad)  # type: ignore[arg-type]


def test_yes_needs_two_blocks() -> None:
    from benchlib.analysis.stopping import stopping_rule

    with pytest.raises(ParameterError, match="at least 2 planned blocks"):
        stopping_rule([FAST], 1, "yes")
    assert not stopping_rule([FAST], 1, "auto").on


def test_the_progress_line_reads_the_rule_the_runner_stops_on() -> None:
    """Issue 39, item 7: under futility the stopping rule stopped a question whose one row read
    "not decidable within the budget" while the progress line, counting only decided rows,
    read "none settled at the sequential look after 8 blocks"."""
    from benchlib.analysis.questions import decided_questions

    design = SequentialDesign.every(16, first=8, step=4, target_mde=0.03)
    df = simulate_summaries(np.random.default_rng(8), arms={"A": 1.0, "B": 1.0}, trials=16, n_req=2000, phi=0.9,
                            trial_sd=0.2, condition="main")
    df["valid"] = True
    fam = Family.against("q", "A", ["B"], conditions=["main"], metrics=("p50_ms",), title="against A")
    first = df[df["block"] < 8]
    assert open_questions([fam], first, design) == []  # the rule stops it: its row is not decidable
    assert decided_questions([fam], sequential=design)(first) == [
        "against A: 1/1 rows (all) settled at the sequential look after 8 blocks (1 not decidable within the budget)"]
    # between looks the look stands, as the rule has it
    assert decided_questions([fam], sequential=design)(df[df["block"] < 10])[0].startswith("against A: 1/1 rows (all)")
