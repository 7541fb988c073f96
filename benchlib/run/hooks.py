"""What the runner asks and tells outside itself as a run goes: its hooks.

* the stopping rule (``run_experiment(until=...)``, :data:`StopRule`): after each complete
  block, which ``(condition, arm)`` pairs still need blocks;
* the ``decided`` hook (:data:`DecidedHook`): after each block, the questions already decided,
  in words, for the progress line;
* the load hosts (:class:`HostCheck`, a Ray cluster's session): after every trial, whether they
  are as before;
* the list of run folders a ``benchlib run`` / ``report`` reads its summary from
  (``$BENCHLIB_RUNS_FILE``: :func:`record_run_folder`).

:class:`RunHooks` asks the first two with the run as the runner holds it (:meth:`RunHooks.run`:
the trials it read at its start and those it stored since, each summarized once, in memory):
the run folder is not read again after a block.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from benchlib.core import settings
from benchlib.core.model import Experiment
from benchlib.run.resume import HeldTrials
from benchlib.store.records.run import RunRecord
from benchlib.store.results import Run, TrialSummaries, run_from
from benchlib.store.runstore import RunStore

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DecidedHook", "HostCheck", "RunHooks", "StopRule", "record_run_folder"]

#: A stopping rule: ``rule(run, blocks_done)`` -> the ``(condition, arm)`` pairs that still
#: need blocks (``None``: all); see :func:`benchlib.run.runner.run_experiment`'s ``until``.
StopRule = Callable[[Run, int], "Collection[tuple[str, str]] | None"]

#: The ``decided`` hook: the per-trial summaries so far (:meth:`Run.summaries`) -> the
#: questions already decided, in words (e.g. :func:`benchlib.analysis.questions.decided_questions`).
DecidedHook = Callable[["pd.DataFrame"], Sequence[str]]


class HostCheck(Protocol):
    """The hosts a run's load comes from, when they can be lost mid-run (a Ray cluster's:
    :meth:`benchlib.run.cluster.session.ClusterSession.check`), asked after every trial."""

    def check(self) -> str | None:
        """``None`` when the hosts are as before; after hosts were lost and the rest reserved
        again, one line saying so (the trial's block then runs again in full). Raises
        :class:`~benchlib.core.errors.HostLost` (one line) when the run cannot go on."""
        ...


def record_run_folder(store: RunStore) -> None:
    """Append the run's folder to ``$BENCHLIB_RUNS_FILE`` when set (``benchlib run`` / ``report``
    read the runs' not-run arms from there for their summary)."""
    path = settings.RUNS_FILE.get()
    if path is not None:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{store.path.resolve()}\n")


class RunHooks:
    """The stopping rule and the ``decided`` hook of one run, asked with what the runner holds.

    Attributes
    ----------
    store, experiment, unavailable: the run. held: its trials (:class:`~benchlib.run.resume.HeldTrials`).
    record: its run.json as last written (the runner keeps it current).
    until, decided: the hooks (``None``: not asked).
    summaries: each held trial's summary, computed once (:class:`~benchlib.store.results.TrialSummaries`).
    """

    def __init__(self, store: RunStore, experiment: Experiment, unavailable: Mapping[str, str], held: HeldTrials,
                 record: RunRecord, until: StopRule | None, decided: DecidedHook | None) -> None:
        self.store = store
        self.experiment = experiment
        self.unavailable = dict(unavailable)
        self.held = held
        self.record = record
        self.until = until
        self.decided = decided
        self.summaries = TrialSummaries()

    def run(self) -> Run:
        """The run as the runner holds it now (a snapshot; its summaries from memory)."""
        return run_from(self.store, self.record, self.held.records(), experiment=self.experiment,
                        unavailable=self.unavailable, summarized=self.summaries)

    def needed(self, blocks_done: int) -> set[tuple[str, str]] | None:
        """The stopping rule's answer after ``blocks_done`` complete blocks: the pairs that still
        need blocks (``None``: all, also without a rule)."""
        if self.until is None:
            return None
        wanted = self.until(self.run(), blocks_done)
        return None if wanted is None else {(str(c), str(a)) for c, a in wanted}

    def decided_words(self) -> tuple[str, ...] | None:
        """The ``decided`` hook's words on the trials so far (``None`` without the hook). An
        interim look for the progress display never stops a run: an error is its words."""
        if self.decided is None:
            return None
        try:
            return tuple(self.decided(self.run().summaries()))
        except Exception as exc:  # noqa: BLE001 - an interim look for the progress display never stops a run
            return (f"(not computed: {type(exc).__name__}: {exc})",)

    def save_summaries(self) -> None:
        """Write the run's summaries cache from the summaries held (when a hook made any), so
        that a reader of the run does not summarize its trials again."""
        if self.summaries:
            self.summaries.save(self.store, self.held.records())
