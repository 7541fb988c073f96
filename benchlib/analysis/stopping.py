"""Sequential stopping for a study's questions: which questions still need blocks.

* :func:`open_questions` (``decided(questions, results so far)``): each question (a
  :class:`~benchlib.analysis.questions.Family`) is compared with ``sequential=design``
  (:mod:`benchlib.stats.sequential`) on the summaries so far; the ones not settled come back;
* :class:`StopWhenSettled`: the same as the runner's stopping rule
  (``run_experiment(..., until=StopWhenSettled(families, design))``): at each planned look it
  returns the ``(condition, arm)`` pairs that an open question still needs (and the same
  pairs until the next look), and keeps a log of its looks (:attr:`StopWhenSettled.looks`)
  for the report;
* :func:`stopping_rule`: the one way a study notebook turns stopping on, from its
  ``sequential`` parameter (:data:`SEQUENTIAL_CHOICES`): a :class:`Stopping` with the rule
  for ``run_experiment(until=...)``, the design the analysis must use
  (``run_family(..., sequential=stopping.design)``), and the report's paragraph (the looks,
  what stopping saved) for :func:`benchlib.analysis.pilot.design_section`.

A question stops at a planned look when every row of its family is settled ("faster" /
"slower", "equivalent", or with a target MDE "not decidable within the budget"; see
:func:`benchlib.stats.sequential.status`); its verdicts are
then read with the same design (``run_family(..., sequential=design)``), whose sequential
p-values and repeated intervals hold whatever look it stopped at.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchlib.analysis.questions import Family, sequential_look
from benchlib.core.errors import ParameterError
from benchlib.core.model import Experiment
from benchlib.stats.sequential import SequentialDesign
from benchlib.store.results import Run

__all__ = ["SEQUENTIAL_CHOICES", "Look", "StopWhenSettled", "Stopping", "analysis_design", "blocks_per_arm",
           "blocks_text", "open_questions", "row_families", "saved_trials", "stopping_rule"]


def _settled(family: Family, summaries: Any, design: SequentialDesign, unavailable: Mapping[str, str],
             **compare_kwargs: Any) -> bool:
    """Whether the question may stop at this look (:func:`~benchlib.analysis.questions.sequential_look`,
    which the progress lines read too)."""
    _, look = sequential_look(family, summaries, design, unavailable=unavailable, **compare_kwargs)
    return look is not None and look.stop


def open_questions(families: Sequence[Family], summaries: Any, design: SequentialDesign, *,
                   unavailable: Mapping[str, str] | None = None, **compare_kwargs: Any) -> list[Family]:
    """The questions that need more blocks: those whose family, compared sequentially on
    ``summaries`` (the trials so far), is not settled at a planned look (``compare_kwargs``
    go to :func:`benchlib.stats.compare`). A question with nothing comparable yet stays open."""
    return [f for f in families if not _settled(f, summaries, design, dict(unavailable or {}), **compare_kwargs)]


@dataclass(frozen=True)
class Look:
    """One look of :class:`StopWhenSettled`: blocks done and the questions still open."""

    blocks: int
    open: tuple[str, ...]
    settled: tuple[str, ...]
    error: str = ""  # the look could not be computed (every question continued): why


@dataclass
class StopWhenSettled:
    """The runner's stopping rule for a study's questions (``run_experiment(..., until=...)``).

    Attributes
    ----------
    families: the study's questions (each one Holm family).
    design: the planned looks; its maximum must equal the experiment's blocks (``trials``).
    compare_kwargs: passed to ``compare`` (margin, alpha...), as the report will use them.
    prepare: what the analysis does to the summaries before comparing them (e.g. a study's
        metric in other units, ``grpc_json.with_microseconds``), done at each look too.
    looks: what each look decided (filled as the run goes). A look that cannot be computed
        (an error in the comparison) keeps every question open and says why: the run goes on
        to the planned maximum, whose analysis stays valid.
    """

    families: Sequence[Family]
    design: SequentialDesign
    compare_kwargs: Mapping[str, Any] = field(default_factory=dict)
    looks: list[Look] = field(default_factory=list)
    prepare: Callable[[Any], Any] | None = None

    def __call__(self, run: Run, blocks_done: int) -> set[tuple[str, str]] | None:
        """At a look, the pairs still needed; between looks, those of the last look before
        ``blocks_done`` (a settled question stays settled: decisions never revert), and
        ``None`` (run everything) before the first look."""
        exp = run.require_experiment()
        if exp.trials != self.design.max_blocks:
            raise ParameterError(f"the sequential design's looks {list(self.design.looks)} end at "
                                 f"{self.design.max_blocks} blocks, the experiment plans {exp.trials}; make them equal")
        if not self.design.is_look(blocks_done):
            before = [lk for lk in self.looks if lk.blocks < blocks_done]
            return self._need(exp, before[-1].open) if before else None
        self.looks = [lk for lk in self.looks if lk.blocks != blocks_done]  # a resumed run looks again
        try:
            summaries = run.summaries()
            if self.prepare is not None:
                summaries = self.prepare(summaries)
            still = open_questions(self.families, summaries, self.design, unavailable=run.unavailable,
                                   **self.compare_kwargs)
        except Exception as exc:  # noqa: BLE001 - a look that fails stops nothing; the report says why
            self.looks.append(Look(blocks_done, tuple(f.key for f in self.families), (),
                                   f"{type(exc).__name__}: {exc}"))
            return None
        keys = tuple(f.key for f in still)
        self.looks.append(Look(blocks_done, keys, tuple(f.key for f in self.families if f.key not in keys)))
        return self._need(exp, keys)

    def _need(self, exp: Experiment, open_keys: Sequence[str]) -> set[tuple[str, str]]:
        """The ``(condition, arm)`` pairs of the questions ``open_keys``."""
        conds = [c.name for c in exp.conditions]
        need: set[tuple[str, str]] = set()
        for f in self.families:
            if f.key not in open_keys:
                continue
            for c in Family(f.key, f.contrasts, f.metrics, conditions=f.conditions or tuple(conds)).rows():
                need |= {(str(c.condition), c.baseline), (str(c.condition), c.arm)}
        return need

    def describe(self) -> str:
        """The looks in words (for the report)."""
        if not self.looks:
            return f"{self.design.describe()}; no look reached"
        parts = [f"after {lk.blocks} blocks: " + (f"not computed ({lk.error}), every question continues" if lk.error
                                                    else f"settled {', '.join(lk.settled)}" if lk.settled
                                                    else "none settled")
                 for lk in self.looks]
        return f"{self.design.describe()}; " + "; ".join(parts)


# -- the one way a study notebook turns stopping on ----------------------------------------------

#: The values of a study notebook's ``sequential`` parameter.
SEQUENTIAL_CHOICES: tuple[str, ...] = ("auto", "yes", "no")


@dataclass
class Stopping:
    """A study run's sequential stopping, on or off (made by :func:`stopping_rule`).

    Attributes
    ----------
    choice: the ``sequential`` parameter as given (``auto``, ``yes`` or ``no``).
    on: whether the run stops questions early.
    design: the :class:`~benchlib.stats.sequential.SequentialDesign` the run and its analysis
        use (``None`` when off: the fixed analysis). Pass it to every family's analysis,
        ``run_family(..., sequential=stopping.design)``, so its verdicts and intervals hold
        at whatever look the run stopped.
    rule: the runner's stopping rule (``run_experiment(..., until=stopping.until)``), ``None``
        when off.
    why: why it is on or off, with the design's figures (one sentence).
    figures: the design's figures: ``looks``, ``rows`` (the largest family's), ``row_alpha``,
        ``mde_fixed_sd`` and ``mde_sd`` (the MDE at 80% power of the fixed test at the maximum
        and of the sequential test over its looks, in SDs of the within-block log ratio),
        ``expected_blocks`` (mean blocks run by a one-row question whose true effect is the fixed
        design's MDE, and twice it).
    """

    choice: str
    on: bool
    design: SequentialDesign | None
    rule: StopWhenSettled | None
    why: str
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def until(self) -> StopWhenSettled | None:
        """What ``run_experiment(until=...)`` takes."""
        return self.rule

    def describe(self) -> str:
        """One line: on or off, and why."""
        return ("on: " if self.on else "off: ") + self.why

    def markdown(self, run: Run) -> str:
        """The design section's paragraph on stopping (Markdown): on or off and why, the looks
        (blocks done, questions settled and open at each), and the blocks, trials and minutes
        stopping saved in ``run`` (the minutes at the median seconds
        between its trials' starts)."""
        rec = run
        head = f"**Sequential stopping** (`sequential={self.choice}`): {self.describe()}"
        if not self.on or self.rule is None or self.design is None:
            return head
        lines = [head, ""]
        for lk in self.rule.looks:
            lines.append(f"- look after {lk.blocks} blocks: not computed ({lk.error}); every question continued"
                         if lk.error else
                         f"- look after {lk.blocks} blocks: settled {', '.join(lk.settled) or 'none'}; "
                         f"open {', '.join(lk.open) or 'none'}" + ("" if lk.open else ": the run stopped"))
        if rec.record.stopped_after_blocks is None:
            lines.append(f"- the last look, after {self.design.max_blocks} blocks, is the analysis below"
                         if not self.rule.looks or self.rule.looks[-1].blocks < self.design.max_blocks else "")
        saved = saved_trials(rec)
        if saved["trials"]:
            mins = (f", about {saved['minutes']:.1f} min at this run's median {saved['slot_s']:.1f} s per trial"
                    if math.isfinite(saved["minutes"]) else "")
            lines.append(f"- stopping saved **{saved['trials']} of {saved['planned']} planned trials** "
                         f"({saved['blocks_text']}){mins}")
        else:
            lines.append(f"- stopping saved nothing: every planned trial ran ({saved['planned']})")
        lines.append("- blocks per arm: " + blocks_text(rec))
        return "\n".join(x for x in lines if x != "")


def blocks_per_arm(run: Run) -> Any:
    """One row per (condition, arm) of the plan: ``blocks_run`` (its trials stored),
    ``blocks_planned``, and ``stopped`` (fewer run than planned: its questions were settled,
    decided or not decidable within the budget, before the last block; an arm that could not
    run is left out)."""
    import pandas as pd

    rec = run
    planned = rec.record.planned_per_arm()
    ran: dict[tuple[str, str], int] = {}
    for t in rec.trials:
        k = (str(t.condition), str(t.arm))
        ran[k] = ran.get(k, 0) + 1
    rows = [{"condition": c, "arm": a, "blocks_run": ran.get((c, a), 0), "blocks_planned": n,
             "stopped": ran.get((c, a), 0) < n} for (c, a), n in planned.items()]
    return pd.DataFrame(rows, columns=["condition", "arm", "blocks_run", "blocks_planned", "stopped"])


def blocks_text(run: Run) -> str:
    """The blocks each arm ran, in words: ``main/a 8 of 8, main/b 4 of 8 (stopped)``."""
    t = blocks_per_arm(run)
    return ", ".join(f"{r.condition}/{r.arm} {r.blocks_run} of {r.blocks_planned}" + (" (stopped)" if r.stopped else "")
                     for r in t.itertuples()) or "none planned"


def saved_trials(run: Run) -> dict[str, Any]:
    """What stopping saved in a stored run: ``planned`` trials, ``trials`` not run because
    their questions were settled (planned, not stored, not of an arm that could not run),
    ``blocks_text`` (the blocks the run stopped after, or each arm that stopped before the
    last), ``slot_s`` (median seconds from one trial's start to the next's) and ``minutes``
    (``trials x slot_s / 60``)."""
    import numpy as np

    from benchlib.analysis.pilot import trial_costs
    rec = run
    plan = rec.record.plan
    stored = {(t.condition, t.arm, t.block) for t in rec.trials}
    skipped = [p for p in plan if (p.condition, p.arm, p.block) not in stored and p.arm not in rec.unavailable]
    costs = trial_costs(rec)
    slot = math.nan
    if len(costs) > 1:
        gaps = (costs["next_started"] - costs["started"]).dt.total_seconds().dropna()
        slot = float(np.median(gaps)) if len(gaps) else math.nan
    stopped = rec.record.stopped_after_blocks
    blocks = rec.experiment.trials if rec.experiment is not None else 0
    per: dict[tuple[str, str], int] = {}
    for t in rec.trials:
        per[(t.condition, t.arm)] = max(per.get((t.condition, t.arm), 0), int(t.block) + 1)
    early = [f"{a} in {c} after {n}" for (c, a), n in per.items() if n < blocks]
    text = (f"the run stopped after {stopped} of {blocks} blocks" if stopped is not None else
            f"of {blocks} blocks, " + ", ".join(early) if early else "no block")
    return {"planned": len(plan), "trials": len(skipped), "blocks_text": text, "slot_s": slot,
            "minutes": len(skipped) * slot / 60.0 if math.isfinite(slot) else math.nan}


def _family_rows(family: Family, requests: Mapping[str, float] | None) -> int:
    """Rows of a family (a quantile metric counted only where ``requests`` support it)."""
    if requests is not None:
        from benchlib.analysis.questions import planned_rows

        return planned_rows(family, requests)
    return len(family.rows()) * len(family.metrics)


def _mde_sd(design: SequentialDesign, level: float, power: float = 0.8) -> float:
    """MDE of one row at ``level`` over the design's looks, in SDs of the within-block log ratio."""
    return math.log1p(design.mde(1.0, alpha=level, power=power))


def _choice(sequential: str | bool) -> str:
    """A ``sequential`` parameter as one of :data:`SEQUENTIAL_CHOICES` (or the error naming them)."""
    choice = ("yes" if sequential else "no") if isinstance(sequential, bool) else str(sequential).strip().lower()
    if choice in ("true", "1"):
        choice = "yes"
    elif choice in ("false", "0"):
        choice = "no"
    if choice not in SEQUENTIAL_CHOICES:
        raise ParameterError(f"sequential {sequential!r} is not valid; valid: {', '.join(SEQUENTIAL_CHOICES)} "
                             "(auto: on at full scale and when the planned blocks leave room for two looks)")
    return choice


def _looks(blocks: int, rows: int, *, alpha: float, step: int, target_mde: float | None) -> SequentialDesign:
    """The looks every ``step`` blocks up to ``blocks`` for a largest family of ``rows`` rows."""
    return SequentialDesign.every(int(blocks), step=step, n_comparisons=rows, alpha=alpha, target_mde=target_mde)


def analysis_design(families: Sequence[Family], blocks: int, sequential: str | bool = "auto", *, full: bool = False,
                    requests: Mapping[str, float] | None = None, alpha: float = 0.05, step: int = 2,
                    target_mde: float | None = None) -> SequentialDesign | None:
    """The sequential design :func:`stopping_rule` gives a run of ``blocks`` planned blocks
    (the same arguments), without its figures: ``None`` when stopping is off (the fixed
    analysis). What the budget planner predicts the verdicts' MDEs with
    (:func:`~benchlib.stats.planning.budget.plan_within_budget`'s ``looks``)."""
    choice, blocks = _choice(sequential), int(blocks)
    if choice == "no" or blocks < 2:
        return None
    rows = max((_family_rows(f, requests) for f in families), default=1) or 1
    design = _looks(blocks, rows, alpha=alpha, step=step, target_mde=target_mde)
    return None if len(design.looks) < 2 and choice == "auto" and not full else design


def row_families(families: Sequence[Family], requests: Mapping[str, float] | None = None) -> dict[tuple[str, str, str, str], int]:
    """Each row's Holm family size by ``(condition, baseline, arm, metric)`` (stored names;
    the largest when a row is in several questions): the level ``alpha / size`` its verdict is
    decided at, for the planner (:func:`~benchlib.stats.planning.design_plan.plan_design`'s ``families``)."""
    out: dict[tuple[str, str, str, str], int] = {}
    for f in families:
        size = _family_rows(f, requests) or 1
        for c in f.rows():
            for m in f.metrics:
                key = (str(c.condition), str(c.baseline), str(c.arm), str(m))
                out[key] = max(out.get(key, 0), size)
    return out


def stopping_rule(families: Sequence[Family], blocks: int, sequential: str | bool = "auto", *, full: bool = False,
                  requests: Mapping[str, float] | None = None, alpha: float = 0.05, step: int = 2,
                  prepare: Callable[[Any], Any] | None = None, target_mde: float | None = None,
                  **compare_kwargs: Any) -> Stopping:
    """The one way a study notebook turns on sequential stopping.

    Parameters
    ----------
    families: the study's questions (each one Holm family), as the analysis will compare them.
    blocks: the experiment's planned blocks (``trials``): the last look.
    sequential: ``"yes"`` (stop each question at the first planned look where it is settled),
        ``"no"`` (run every block; the fixed analysis), or ``"auto"``: on at full scale
        (``full``) and whenever the planned blocks leave room for at least two looks, off
        otherwise (with a single look the sequential test is the fixed test and stopping
        could save nothing). ``True``/``False`` are ``yes``/``no``.
    full: the notebook runs at full scale.
    requests: successful requests per trial by condition (a quantile metric only counts in a
        family where they support it); default: every metric counts.
    alpha: the family-wise error rate of each question.
    step: blocks between looks.
    prepare: what the analysis does to the summaries before its families compare them (a
        metric of the study's own, other units), so each look compares the same columns.
    target_mde: futility (relative, 0.05 = 5%; ``None``: none): at each look a row that cannot
        reach this MDE by the last look is "not decidable within the budget" and settled, so an
        arm whose questions are all settled stops spending blocks
        (:class:`~benchlib.stats.sequential.SequentialDesign`'s ``target_mde``).
    compare_kwargs: what the analysis passes to ``compare`` (``seed``, ``margin``...), so the
        looks decide as the report will.

    The looks (:meth:`SequentialDesign.every`) are every ``step`` blocks up to ``blocks``, from
    the first at which the largest family (``m`` rows, Holm) can reach significance at all.

    Returns
    -------
    Stopping: ``.until`` for ``run_experiment``, ``.design`` for ``run_family(...,
    sequential=...)``, ``.markdown(result)`` for the design section.

    Raises
    ------
    ParameterError
        ``sequential`` not one of :data:`SEQUENTIAL_CHOICES`, or ``blocks`` below 2 with stopping on.
    """
    from benchlib.stats.power import planning_alpha

    choice = _choice(sequential)
    blocks = int(blocks)
    if choice == "no":
        return Stopping(choice, False, None, None, f"every planned block runs ({blocks}); the fixed analysis")
    if blocks < 2:
        if choice == "yes":
            raise ParameterError(f"sequential stopping needs at least 2 planned blocks, got trials={blocks}; "
                                 "valid: trials >= 2, or sequential='no'")
        return Stopping(choice, False, None, None, f"{blocks} planned block(s) leave no look")
    rows = max((_family_rows(f, requests) for f in families), default=1) or 1
    design = _looks(blocks, rows, alpha=alpha, step=step, target_mde=target_mde)
    level = planning_alpha(alpha, rows, "holm")
    mde_fixed = _mde_sd(SequentialDesign((blocks,)), level)
    mde_seq = _mde_sd(design, level)
    expected = tuple(design.expected_blocks(math.expm1(k * mde_fixed), 1.0, alpha=level)
                     if math.isfinite(mde_fixed) and len(design.looks) > 1 else float(blocks) for k in (1, 2))
    figures = {"looks": design.looks, "rows": rows, "row_alpha": level, "mde_fixed_sd": mde_fixed,
               "mde_sd": mde_seq, "expected_blocks": expected}
    looks = ", ".join(map(str, design.looks))
    rule = StopWhenSettled(families, design, dict(compare_kwargs), prepare=prepare)
    if len(design.looks) < 2:
        why = (f"the largest question ({rows} rows, each row at α = {level:.2g}) can first be decided after "
               f"{design.looks[0]} of the {blocks} planned blocks: one look, which is the fixed analysis, so "
               "stopping could save no block")
        if choice == "auto" and not full:
            return Stopping(choice, False, None, None, why, figures)
        return Stopping(choice, True, design, rule, why + (" (on as asked" if choice == "yes" else " (on at full scale")
                        + "; with one look the analysis is the fixed one)", figures)
    price = (f"{mde_seq:.2f} within-block SDs of the log ratio against {mde_fixed:.2f} for the fixed "
             f"{blocks}-block test; a row whose true effect is that fixed MDE stops after {expected[0]:.1f} blocks "
             f"on average, one with twice that effect after {expected[1]:.1f}"
             if math.isfinite(mde_seq) and math.isfinite(mde_fixed) else "not reachable at this size")
    why = (f"looks after {looks} blocks ({design.describe().split('(')[-1].rstrip(')')}); the largest question "
           f"has {rows} rows (each row at α = {level:.2g}). MDE at 80% power {price}")
    return Stopping(choice, True, design, rule, why, figures)
