"""What a run folder already holds, and what is left to run: a resume's checks and the trials
a run holds while it runs.

A run started again with its ``run_id`` goes on where it stopped: :func:`read_stored` reads
``run.json`` and every stored trial in full before anything is written (a damaged file is named
then), and refuses a folder with stored data but no ``run.json`` (its parameters and provenance
are unknown); :func:`check_same_design` refuses another experiment or plan under the same run
id. :class:`HeldTrials` then holds the trials stored before and those the run stores, as a
reader reads them: which planned trials are done (skipped), which are set aside to run again,
and what the stopping rule and the progress line read after each block, without reading the
run folder again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from benchlib.core.design import PlannedTrial
from benchlib.core.errors import ParameterError, StorageError
from benchlib.core.model import Experiment
from benchlib.store.records import Attempt, TrialRecord
from benchlib.store.records.run import RunRecord
from benchlib.store.results import trial_record
from benchlib.store.runstore import RunStore

__all__ = ["HeldTrials", "Stored", "TrialKey", "check_same_design", "experiment_parameters", "read_stored"]

#: A planned trial's place: (condition, arm, block).
TrialKey = tuple[str, str, int]


def experiment_parameters(exp: Experiment) -> dict[str, Any]:
    """The experiment as JSON-able parameters: run.json's ``parameters`` (every field, format 2 of
    :mod:`benchlib.store.records.run`), compared on resume and read back by
    :func:`benchlib.store.results.experiment_from_parameters`."""
    params: dict[str, Any] = json.loads(json.dumps(asdict(exp),
                                                   default=lambda o: o.hex() if isinstance(o, bytes) else str(o)))
    return params


def _design(params: Mapping[str, Any]) -> dict[str, Any]:
    """What must be the same to resume: the parameters, but a peer tool's blocks only when a
    condition has a peer tool (without one they do nothing, and runs stored before
    ``cross_check_blocks`` existed left them out)."""
    p = dict(params)
    if not any(isinstance(c, Mapping) and c.get("cross_check") for c in p.get("conditions") or ()):
        p.pop("cross_check_blocks", None)
    return p


def check_same_design(store: RunStore, stored: RunRecord | None, plan: Sequence[PlannedTrial],
                      params: Mapping[str, Any]) -> None:
    """Refuse to resume a run stored with other parameters or another plan (nothing stored: no check).

    Raises
    ------
    ParameterError  naming the run and the way out (a new run id, or the same parameters).
    """
    if stored is None:
        return
    if _design(stored.parameters) != _design(params) or stored.plan != tuple(plan):
        raise ParameterError(
            f"run {store.run_id!r} of study {store.study!r} exists with different parameters or plan; "
            "use a new run_id (\"\" picks one) or the same parameters to resume it"
        )


@dataclass(frozen=True)
class Stored:
    """What a run folder held when the run started: its run.json (``None``: a new run) and each
    stored trial's record, by place."""

    record: RunRecord | None
    trials: Mapping[TrialKey, TrialRecord] = field(default_factory=dict)


def read_stored(store: RunStore) -> Stored:
    """Everything a resume needs from the run folder, read before anything is written there:
    ``run.json`` and every stored trial, rows included.

    Raises
    ------
    StorageError  a damaged file (naming it), or stored data without ``run.json``.
    """
    record = store.read_run()
    trials = store.trials(verify=True)
    if record is None and store.has_data():
        raise StorageError(
            f"{store.path} holds {len(trials)} stored trial(s) but no run.json (deleted?); without it the run's "
            "parameters, plan and provenance are unknown, so it cannot be resumed: start a new run (run_id \"\" "
            "picks one); the stored files stay where they are"
        )
    return Stored(record, {(t.condition, t.arm, t.block): trial_record(store, t) for t in trials})


class HeldTrials:
    """The trials a run holds while it runs, by place: those stored before it started and
    those it stored since, each as a reader reads it (:func:`benchlib.store.results.trial_record`);
    a trial set aside (run again in its place) leaves it."""

    def __init__(self, store: RunStore, stored: Mapping[TrialKey, TrialRecord]) -> None:
        self.store = store
        self._trials: dict[TrialKey, TrialRecord] = dict(stored)

    def get(self, key: TrialKey) -> TrialRecord | None:
        """The trial held at ``key`` (``None``: none)."""
        return self._trials.get(key)

    def stored(self, record: TrialRecord) -> None:
        """``record`` was stored by this execution (in place of any held at its place)."""
        self._trials[(record.condition, record.arm, record.block)] = record

    def set_aside(self, key: TrialKey) -> TrialRecord | None:
        """Move the trial at ``key`` aside in the run folder (``.failed-N.parquet``: nothing
        measured is lost) and stop holding it; its record, ``None`` when no file was there."""
        record = self._trials.pop(key, None)
        return record if self.store.set_aside(*key) is not None else None

    def set_aside_block(self, block: int, plan: Iterable[PlannedTrial], why: str) -> dict[TrialKey, list[Attempt]]:
        """Set aside every held trial of ``block`` (it runs again in full); each one's attempts,
        itself the last (its reason followed by ``why``), for the trial that replaces it."""
        carried: dict[TrialKey, list[Attempt]] = {}
        for p in plan:
            if p.block != block:
                continue
            key = (p.condition, p.arm, p.block)
            prior = self.set_aside(key)
            if prior is not None:
                reason = f"{prior.reason}; {why}" if prior.reason else why
                carried[key] = [*prior.attempts, Attempt(prior.status, reason, prior.started, prior.finished)]
        return carried

    def records(self) -> list[TrialRecord]:
        """Every trial held, in execution order (``seq``, then file)."""
        return sorted(self._trials.values(), key=lambda t: (t.seq, str(t.path)))

    def __len__(self) -> int:
        return len(self._trials)
