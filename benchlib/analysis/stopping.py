"""Sequential stopping for a study's questions: which questions still need blocks.

* :func:`open_questions` (``decided(questions, results so far)``): each question (a
  :class:`~benchlib.analysis.questions.Family`) is compared with ``sequential=design``
  (:mod:`benchlib.stats.sequential`) on the summaries so far; the ones not settled come back;
* :class:`StopWhenSettled`: the same as the runner's stopping rule
  (``run_experiment(..., until=StopWhenSettled(families, design))``): at each planned look it
  returns the ``(condition, arm)`` pairs that an open question still needs, and keeps a log
  of its looks (:attr:`StopWhenSettled.looks`) for the report.

A question stops at a planned look when every row of its family is settled ("faster" /
"slower" or "equivalent"; see :func:`benchlib.stats.sequential.status`); its verdicts are
then read with the same design (``run_family(..., sequential=design)``), whose sequential
p-values and repeated intervals hold whatever look it stopped at.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchlib.analysis.questions import Family, run_family
from benchlib.errors import ParameterError
from benchlib.stats.sequential import SequentialDesign, status

__all__ = ["Look", "StopWhenSettled", "open_questions"]


def _settled(family: Family, summaries: Any, design: SequentialDesign, unavailable: Mapping[str, str],
             **compare_kwargs: Any) -> bool:
    answer = run_family(summaries, family, unavailable=unavailable, sequential=design, shift=False,
                        **compare_kwargs)
    if answer.comparison is None:
        return False
    return status(answer.comparison).stop


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


@dataclass
class StopWhenSettled:
    """The runner's stopping rule for a study's questions (``run_experiment(..., until=...)``).

    Attributes
    ----------
    families: the study's questions (each one Holm family).
    design: the planned looks; its maximum must equal the experiment's blocks (``trials``).
    compare_kwargs: passed to ``compare`` (margin, alpha...), as the report will use them.
    looks: what each look decided (filled as the run goes).
    """

    families: Sequence[Family]
    design: SequentialDesign
    compare_kwargs: Mapping[str, Any] = field(default_factory=dict)
    looks: list[Look] = field(default_factory=list)

    def __call__(self, result: Any, blocks_done: int) -> set[tuple[str, str]] | None:
        """``None`` (run everything) between looks; at a look, the pairs still needed."""
        exp = result.experiment
        if exp.trials != self.design.max_blocks:
            raise ParameterError(f"the sequential design's looks {list(self.design.looks)} end at "
                                 f"{self.design.max_blocks} blocks, the experiment plans {exp.trials}; make them equal")
        if not self.design.is_look(blocks_done):
            return None
        summaries = result.summaries()
        still = open_questions(self.families, summaries, self.design, unavailable=result.unavailable,
                               **self.compare_kwargs)
        keys = tuple(f.key for f in still)
        self.looks.append(Look(blocks_done, keys, tuple(f.key for f in self.families if f.key not in keys)))
        conds = [c.name for c in exp.conditions]
        need: set[tuple[str, str]] = set()
        for f in still:
            for c in Family(f.key, f.contrasts, f.metrics, conditions=f.conditions or tuple(conds)).rows():
                need |= {(str(c.condition), c.baseline), (str(c.condition), c.arm)}
        return need

    def describe(self) -> str:
        """The looks in words (for the report)."""
        if not self.looks:
            return f"{self.design.describe()}; no look reached"
        parts = [f"after {lk.blocks} blocks: " + (f"settled {', '.join(lk.settled)}" if lk.settled else "none settled")
                 for lk in self.looks]
        return f"{self.design.describe()}; " + "; ".join(parts)
