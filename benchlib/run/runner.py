"""Executes an :class:`~benchlib.core.model.Experiment`: the plan of trials, one by one.

For each planned trial, in the order of the randomized blocks (:mod:`benchlib.core.design`),
:mod:`benchlib.run.executor` runs one trial: the arm's dependencies, service and front start
fresh (:mod:`benchlib.run.services`), the endpoint's contract is checked, the load runs from
the client's CPUs, everything stops and the trial is stored atomically with its record.

Arms whose toolchain is missing, or whose build fails, are not run; they stay in the results
as "not run: <why>". A trial that fails (the service dies, breaks its contract) is stored with
its reason and whatever was measured; the run goes on. A trial the load generator's guard or
the disturbance rule invalidates runs again in its place (``repeat_invalid``,
``repeat_disturbed``); one still disturbed when its repeats ran out gets a make-up pass at the
end of the run. An interleaved trial that one arm failed by itself runs again once without it.
A re-run with the same ``run_id`` skips stored trials (:mod:`benchlib.run.resume`:
it first reads ``run.json`` and every stored trial, and refuses a run folder whose ``run.json``
is gone). ``run.json`` is a :class:`~benchlib.store.records.run.RunRecord`, written before the
first trial and kept current as the run goes.

After each block the stopping rule and the ``decided`` hook read the run as the runner holds it
(:mod:`benchlib.run.hooks`). On a cluster (``Experiment(cluster=...)``) the hosts are asked after
every trial whether they are as before (:class:`~benchlib.run.hooks.HostCheck`): after a host was
lost, the block it was lost in runs again in full on the hosts left (its stored trials set
aside), or the run stops with :class:`~benchlib.core.errors.HostLost` (``docs/cluster.md``,
"Faults"). The full text behind such one-line notes goes to the run's log, ``logs/run.log``
(:mod:`benchlib.run.runlog`).

SIGTERM and SIGHUP stop a run as Ctrl-C does (:func:`benchlib.core.signals.interrupt_on_signals`):
the trial under way is abandoned, its load and services stopped, and the trials stored before
it are kept for a resume.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from benchlib.core import provenance as _provenance
from benchlib.core import settings
from benchlib.core.design import PlannedTrial, plan_trials
from benchlib.core.errors import HostLost, ParameterError
from benchlib.core.model import Experiment
from benchlib.core.placement import CpuPlan, parse_cluster
from benchlib.core.signals import interrupt_on_signals
from benchlib.loadgen.launch import run_load
from benchlib.loadgen.peers.crosscheck import run_cross_check
from benchlib.run.cluster.cluster_load import ClusterLoad
from benchlib.run.cluster.cluster_peer import ClusterCrossCheck
from benchlib.run.cluster.service import on_service_node
from benchlib.run.cluster.session import ClusterSession
from benchlib.run.cpus import plan_cpus
from benchlib.run.events import BlockDone, Event, Note, PlanSlot, RunDone, RunStarted, TrialEvent
from benchlib.run.executor import CrossCheckFunction, LoadFunction, TrialExecutor, cross_check_for, request_for
from benchlib.run.hooks import DecidedHook, HostCheck, RunHooks, StopRule, record_run_folder
from benchlib.run.progress import ProgressCallback, make_progress
from benchlib.run.resume import HeldTrials, TrialKey, check_same_design, experiment_parameters, read_stored
from benchlib.run.runlog import run_log
from benchlib.run.services import RunServices, RuntimeChoice, runtime_lookup
from benchlib.run.settle import settle_as_asked
from benchlib.runtime import Runtime, toolchains
from benchlib.store.records import Attempt, TrialRecord
from benchlib.store.records.disturbance import is_disturbed
from benchlib.store.records.run import DesignChange, HostLoss, Provenance, RunRecord
from benchlib.store.records.trial import utc_now, utc_stamp
from benchlib.store.results import Run, run_from
from benchlib.store.runstore import RunStore

__all__ = ["CrossCheckFunction", "ExperimentResult", "HostCheck", "LoadFunction", "RuntimeChoice", "StopRule",
           "cross_check_for", "experiment_parameters", "request_for", "run_cross_check", "run_experiment"]

#: Where the runner's own one-line notes go in full (the run's log, :mod:`benchlib.run.runlog`).
LOG = logging.getLogger("benchlib.run.runner")

#: What :func:`run_experiment` returns: the run, read (:class:`benchlib.store.results.Run`; the
#: name older imports use).
ExperimentResult = Run


@contextlib.contextmanager
def _pinned_to(cpus: Sequence[int]) -> Iterator[None]:
    """Keep this (orchestrating) process off the server's CPUs while trials run."""
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, set(cpus))
        yield
    finally:
        os.sched_setaffinity(0, before)


class _Execution:
    """One execution of a run: the plan's trials in order (skipping those stored, those the
    stopping rule no longer needs), each invalid one run again in its place, the make-up pass,
    the blocks a lost load host sends back, and run.json kept current."""

    def __init__(self, experiment: Experiment, store: RunStore, plan: list[PlannedTrial], record: RunRecord,
                 held: HeldTrials, executor: TrialExecutor, hooks: RunHooks, show: Callable[[Event], None],
                 hosts: HostCheck | None) -> None:
        self.exp = experiment
        self.store = store
        self.plan = plan
        self.record = record
        self.held = held
        self.executor = executor
        self.hooks = hooks
        self.show = show
        self.hosts = hosts
        self.conditions = {c.name: c for c in experiment.conditions}
        self.ran = self.skipped = 0
        self.queue = list(range(len(plan)))  # the plan's trials still to run, by index, in order
        self.current: PlannedTrial | None = None  # the last trial run
        self.still: list[tuple[PlannedTrial, TrialRecord, list[Attempt]]] = []  # disturbed when their repeats ran out
        self.carried: dict[TrialKey, list[Attempt]] = {}  # attempts set aside when their block ran again
        self.stopped_after: int | None = None
        #: interleaved trials still disturbed when their repeats ran out (the make-up pass)
        self.still_groups: list[tuple[list[PlannedTrial], dict[str, list[Attempt]]]] = []
        #: conditions the run measures side by side (``Experiment.interleave``), less those moved
        #: to the sequential design (run.json's ``design_changes``)
        moved = {c.condition for c in record.design_changes if not c.arms}
        self.side_by_side = ({c.name for c in experiment.conditions} - moved) if experiment.interleave else set()
        #: arms of a side-by-side condition that run one per trial (their carry-over above the
        #: bound): the condition's other arms stay side by side
        self.alone: dict[str, set[str]] = {}
        for change in record.design_changes:
            self.alone.setdefault(change.condition, set()).update(change.arms)
        #: conditions whose first interleaved trial passed the carry-over check (this execution's, or
        #: a resumed run's: a condition with a stored interleaved trial keeps its design)
        self.checked: set[str] = {r.condition for r in held.records() if r.interleave is not None}

    def update(self, **changes: Any) -> None:
        """Change run.json's record (and the one the hooks read)."""
        self.record = self.hooks.record = self.store.write_run(replace(self.record, **changes))

    def note(self, text: str, *, undone: int = 0) -> None:
        """Say one line (and put it in the run's log)."""
        LOG.info(text)
        self.show(Note(self.exp.study, text, undone))

    def trial(self, planned: PlannedTrial, attempts: list[Attempt]) -> TrialRecord:
        """Run ``planned`` once, stored and held."""
        self.current = planned
        rec = self.executor.run_trial(planned, self.conditions[planned.condition], attempts)
        self.held.stored(rec)
        return rec

    def again(self, planned: PlannedTrial, rec: TrialRecord, attempts: list[Attempt],
              cap: Callable[[TrialRecord], int]) -> TrialRecord:
        """Run an invalid trial again in its place while the attempts added here are fewer than
        ``cap(rec)``, each attempt set aside and listed in ``attempts``; the last record."""
        base = len(attempts)
        while rec.status == "invalid" and len(attempts) - base < cap(rec):
            attempts.append(Attempt(rec.status, rec.reason, rec.started, rec.finished))
            self.held.set_aside((planned.condition, planned.arm, planned.block))
            if self.exp.between_trials_s:
                time.sleep(self.exp.between_trials_s)
            rec = self.trial(planned, attempts)
        return rec

    def repeats(self, rec: TrialRecord) -> int:
        """How often a trial like ``rec`` runs again in its place: disturbed, or invalid otherwise."""
        return self.exp.repeat_disturbed if is_disturbed(rec.reason) else self.exp.repeat_invalid

    def after_trial(self, planned: PlannedTrial) -> None:
        """Ask the hosts whether they are as before (:meth:`HostCheck.check`, which raises
        :class:`~benchlib.core.errors.HostLost` when the run cannot go on); after a re-reservation,
        ``planned``'s block runs again in full, and make-up trials of blocks run on the hosts
        before are dropped."""
        note = self.hosts.check() if self.hosts is not None else None
        if note is None:
            return
        block = planned.block
        idx = [j for j, p in enumerate(self.plan) if p.block == block]
        undone = sum(j not in self.queue for j in idx)  # counted as done by the progress so far
        aside = self.set_aside_block(block)
        self.queue = idx + [j for j in self.queue if self.plan[j].block != block]
        dropped = len(self.still)
        self.still.clear()
        text = (f"{note}; block b{block} runs again in full on them ({aside} trial(s) set aside)"
                + (f"; {dropped} make-up trial(s) dropped (their blocks ran on the hosts before)" if dropped else ""))
        self.update(host_losses=(*self.record.host_losses, HostLoss(utc_stamp(utc_now()), block, text)))
        self.note(text, undone=undone)

    def set_aside_block(self, block: int) -> int:
        """Move every held trial of ``block`` aside (a host was lost in it: it runs again in
        full, on one host set); each one's record goes to the attempts of the trial that
        replaces it. How many were set aside."""
        carried = self.held.set_aside_block(
            block, self.plan, f"set aside: block b{block} ran again in full on the load hosts left after a loss")
        self.carried.update(carried)
        return len(carried)

    def planned_trial(self, planned: PlannedTrial, needed: set[tuple[str, str]] | None) -> None:
        """Run ``planned`` unless it is stored or not needed, then ask the hosts."""
        total, study = len(self.plan), self.exp.study
        if needed is not None and (planned.condition, planned.arm) not in needed:
            self.show(TrialEvent.of("settled", study, total, planned))
            return
        key = (planned.condition, planned.arm, planned.block)
        old = self.held.get(key)
        if old is not None:
            if not (self.exp.retry_failed and old.status == "failed"):
                self.skipped += 1
                self.show(TrialEvent.of("skip", study, total, planned))
                return
            self.held.set_aside(key)
        t_trial = time.monotonic()
        attempts: list[Attempt] = self.carried.pop(key, [])
        carried_n = len(attempts)
        # the client could not keep the load, or the machine disturbed the trial: run it again, in its place
        rec = self.again(planned, self.trial(planned, attempts), attempts, self.repeats)
        self.ran += 1
        if rec.status == "invalid" and is_disturbed(rec.reason) and self.exp.repeat_disturbed:
            self.still.append((planned, rec, attempts))
        if self.exp.between_trials_s:
            time.sleep(self.exp.between_trials_s)
        achieved = rec.load.achieved_rps if rec.load is not None else None
        self.show(TrialEvent.of("trial", study, total, planned, status=rec.status, reason=rec.reason,
                                repeated=len(attempts) - carried_n,
                                achieved_rps=achieved if achieved is not None and achieved == achieved else None,
                                seconds=time.monotonic() - t_trial))
        self.after_trial(planned)

    def make_up(self) -> None:
        """A make-up pass at the end of the run, in plan order: a disturbance (a steal episode,
        a neighbour) that outlasted a slot's repeats has often passed by now. The slot's whole
        block runs again, every arm of its condition in a fresh random order (their trials so
        far set aside), so that the block's pairs stay contemporaneous (a make-up paired with
        its block's earlier trials would carry the run's drift from start to end into that
        pair, on the arm the rule flagged); the same rule and cap for every slot, whatever its
        arm."""
        planned, _rec, _attempts = self.still.pop(0)
        condition, block = planned.condition, planned.block
        self.still = [x for x in self.still if (x[0].condition, x[0].block) != (condition, block)]
        slots = [p for p in self.plan if p.condition == condition and p.block == block
                 and self.held.get((p.condition, p.arm, p.block)) is not None
                 and not self.side_by_side_arm(p)]  # arms side by side keep their interleaved trial
        random.Random(self.exp.seed * 7919 + block * 31 + len(self.plan)).shuffle(slots)
        t_trial = time.monotonic()
        attempts: dict[str, list[Attempt]] = {}
        for p in slots:
            old = self.held.get((p.condition, p.arm, p.block))
            attempts[p.arm] = list(old.attempts) if old is not None else []
            if old is not None:
                attempts[p.arm].append(Attempt(old.status, "set aside: its block ran again in the make-up pass"
                                               if old.status == "ok" else old.reason, old.started, old.finished))
                self.held.set_aside((p.condition, p.arm, p.block))
        recs = []
        for p in slots:
            self.current = p
            rec = self.trial(p, attempts[p.arm])
            recs.append(self.again(p, rec, attempts[p.arm],
                                   lambda r: self.exp.repeat_disturbed if is_disturbed(r.reason) else 0))
            self.after_trial(p)
        bad = [f"{p.arm} {r.status}" + (f" ({r.reason})" if r.reason else "") for p, r in zip(slots, recs)
               if r.status != "ok"]
        self.show(Note(self.exp.study, f"make-up block {condition} b{block} (a trial was disturbed when its repeats "
                       f"ran out): {len(slots)} arm(s) again in a fresh order, "
                       + ("all ok" if not bad else "; ".join(bad)) + f", {time.monotonic() - t_trial:.1f} s"))

    # -- arms side by side ------------------------------------------------------------------------
    def group_of(self, planned: PlannedTrial, needed: set[tuple[str, str]] | None) -> list[PlannedTrial]:
        """The trials of ``planned``'s condition and block still queued (taken off the queue), in
        the block's order; those the stopping rule no longer needs are reported settled."""
        idx = [j for j in self.queue if self.plan[j].condition == planned.condition
               and self.plan[j].block == planned.block and self.side_by_side_arm(self.plan[j])]
        self.queue = [j for j in self.queue if j not in idx]
        group = [planned, *(self.plan[j] for j in idx)]
        wanted = []
        for p in group:
            if needed is not None and (p.condition, p.arm) not in needed:
                self.show(TrialEvent.of("settled", self.exp.study, len(self.plan), p))
            else:
                wanted.append(p)
        return wanted

    def planned_group(self, planned: PlannedTrial, needed: set[tuple[str, str]] | None) -> None:
        """Run ``planned``'s condition and block as one interleaved trial, unless every arm of it
        is stored; an arm stored without the others (an interrupted run) is set aside and the
        trial runs again in full, so that the arms of a block are always measured together."""
        group = self.group_of(planned, needed)
        if not group:
            return
        total, study = len(self.plan), self.exp.study
        keys = [(p.condition, p.arm, p.block) for p in group]
        old = [self.held.get(k) for k in keys]
        if all(o is not None for o in old) and not (self.exp.retry_failed and any(o.status == "failed" for o in old
                                                                                   if o is not None)):
            self.skipped += len(group)
            for p in group:
                self.show(TrialEvent.of("skip", study, total, p))
            return
        attempts: dict[str, list[Attempt]] = {}
        for p, k, o in zip(group, keys, old):
            attempts[p.arm] = self.carried.pop(k, [])
            if o is not None:
                attempts[p.arm].append(Attempt(o.status, "set aside: the other arms of its interleaved trial were "
                                               "not stored", o.started, o.finished))
                self.held.set_aside(k)
        t_trial = time.monotonic()
        before = {a: len(v) for a, v in attempts.items()}
        recs = self.again_group(group, self.group_trial(group, attempts), attempts, self.repeats)
        recs = self.without_failed_arms(group, recs, attempts)
        if self.moved_to_sequential(group, recs):
            return
        self.ran += len(group)
        live = [p for p, r in zip(group, recs) if r.status != "failed"]
        if any(r.status == "invalid" and is_disturbed(r.reason) for r in recs) and self.exp.repeat_disturbed:
            self.still_groups.append((live, attempts))
        if self.exp.between_trials_s:
            time.sleep(self.exp.between_trials_s)
        seconds = time.monotonic() - t_trial
        for p, rec in zip(group, recs):
            achieved = rec.load.achieved_rps if rec.load is not None else None
            self.show(TrialEvent.of("trial", study, total, p, status=rec.status, reason=rec.reason,
                                    repeated=len(attempts[p.arm]) - before[p.arm],
                                    achieved_rps=achieved if achieved is not None and achieved == achieved else None,
                                    seconds=seconds / len(group)))

    def group_trial(self, group: list[PlannedTrial], attempts: Mapping[str, list[Attempt]]) -> list[TrialRecord]:
        """Run ``group`` once as one interleaved trial, stored and held."""
        self.current = group[0]
        recs = self.executor.run_interleaved(group, self.conditions[group[0].condition], attempts)
        for rec in recs:
            self.held.stored(rec)
        return recs

    def again_group(self, group: list[PlannedTrial], recs: list[TrialRecord], attempts: dict[str, list[Attempt]],
                    cap: Callable[[TrialRecord], int]) -> list[TrialRecord]:
        """Run an invalid interleaved trial again in full (every arm) while the attempts added
        here are fewer than ``cap`` of its first invalid record; the last records."""
        base = len(attempts[group[0].arm])
        while True:
            bad = next((r for r in recs if r.status == "invalid"), None)
            if bad is None or len(attempts[group[0].arm]) - base >= cap(bad):
                return recs
            for p, rec in zip(group, recs):
                attempts[p.arm].append(Attempt(rec.status, rec.reason, rec.started, rec.finished))
                self.held.set_aside((p.condition, p.arm, p.block))
            if self.exp.between_trials_s:
                time.sleep(self.exp.between_trials_s)
            recs = self.group_trial(group, attempts)

    def without_failed_arms(self, group: list[PlannedTrial], recs: list[TrialRecord],
                            attempts: dict[str, list[Attempt]]) -> list[TrialRecord]:
        """An interleaved trial that some of its arms failed by themselves (one did not start,
        broke its contract or died: :attr:`~benchlib.run.executor.TrialExecutor.failed_arms`)
        runs again once in its place without them, so that one arm's failure costs the block
        that arm's trial only, as in the sequential design, not every arm's. The failing arms
        keep their failed records; the others' are set aside into their attempts. Nothing
        changes when fewer than two arms would be left. The records in ``group``'s order."""
        bad = set(self.executor.failed_arms)
        rest = [p for p in group if p.arm not in bad]
        if not bad or recs[0].status != "failed" or len(rest) < 2 or len(rest) == len(group):
            return recs
        for p, rec in zip(group, recs):
            if p.arm not in bad:
                attempts[p.arm].append(Attempt(rec.status, rec.reason, rec.started, rec.finished))
                self.held.set_aside((p.condition, p.arm, p.block))
        if self.exp.between_trials_s:
            time.sleep(self.exp.between_trials_s)
        names = ", ".join(p.arm for p in group if p.arm in bad)
        again = dict(zip((p.arm for p in rest), self.again_group(rest, self.group_trial(rest, attempts), attempts,
                                                                 self.repeats)))
        self.note(f"interleaved trial {group[0].condition} b{group[0].block}: {names} failed it "
                  f"({recs[0].reason}); its other {len(rest)} arms ran again side by side without "
                  f"{'it' if len(bad) == 1 else 'them'}: {next(iter(again.values())).status}")
        return [again.get(p.arm, rec) for p, rec in zip(group, recs)]

    def make_up_group(self) -> None:
        """The make-up pass of an interleaved trial still disturbed when its repeats ran out:
        the whole trial again (every arm), under the same rule and cap."""
        group, attempts = self.still_groups.pop(0)
        t_trial = time.monotonic()
        recs = [r for r in (self.held.get((p.condition, p.arm, p.block)) for p in group) if r is not None]
        if len(recs) != len(group):
            return
        recs = self.again_group(group, recs, attempts,
                                lambda r: self.exp.repeat_disturbed if is_disturbed(r.reason) else 0)
        self.show(Note(self.exp.study, f"make-up trial {group[0].condition} b{group[0].block} (interleaved, "
                       f"{len(group)} arms; disturbed when its repeats ran out): {recs[0].status}"
                       + (f" ({recs[0].reason})" if recs[0].status != "ok" else "")
                       + f", {time.monotonic() - t_trial:.1f} s"))

    def side_by_side_arm(self, planned: PlannedTrial) -> bool:
        """Whether ``planned`` is measured in its block's interleaved trial."""
        return planned.condition in self.side_by_side and planned.arm not in self.alone.get(planned.condition, ())

    def moved_to_sequential(self, group: list[PlannedTrial], recs: list[TrialRecord]) -> bool:
        """The condition's first interleaved trial: an arm whose CPU could not be read, or whose
        carry-over exceeds ``Interleave.carry_over_pct``, runs one per trial from then on, the
        condition's other arms side by side without it; when fewer than two arms would be left
        side by side, the whole condition moves to the sequential design. Either way the trial's
        records are set aside, its block queued again, the change is in run.json's
        ``design_changes`` and said in one line; ``True`` then."""
        condition = group[0].condition
        if condition in self.checked or self.exp.interleave is None:
            return False
        if any(r.status != "ok" for r in recs):
            return False  # judged on a trial that ran cleanly
        self.checked.add(condition)
        bound = self.exp.interleave.carry_over_pct
        why: dict[str, str] = {}
        for r in recs:
            il = r.interleave
            if il is None or not il.readable:
                why[r.arm] = f"{r.arm}: its CPU could not be read from a cgroup of its own"
            elif il.cpu is not None and il.cpu.carry_cpu_pct > bound:
                why[r.arm] = f"{r.arm}: carry-over {il.cpu.carry_cpu_pct:.1f}% of the CPU above {bound:g}%"
        if not why:
            return False
        block = group[0].block
        for p in group:
            self.held.set_aside((p.condition, p.arm, p.block))
        idx = [j for j, p in enumerate(self.plan) if p.condition == condition and p.block == block]
        self.queue = idx + [j for j in self.queue if j not in idx]
        left = [p.arm for p in group if p.arm not in why]
        if len(left) >= 2:  # the others stay side by side, without the arms that leave work behind
            arms = tuple(why)
            self.alone.setdefault(condition, set()).update(arms)
            line = (f"condition {condition!r}: {', '.join(arms)} run{'s' if len(arms) == 1 else ''} one arm per "
                    f"trial from block b{block} on, its other {len(left)} arms side by side: " + "; ".join(why.values()))
        else:
            arms = ()
            self.side_by_side.discard(condition)
            line = (f"condition {condition!r} runs in the sequential design from block b{block} on (one arm per "
                    "trial): " + "; ".join(why.values()))
        self.update(design_changes=(*self.record.design_changes, DesignChange(condition, block, line, arms)))
        self.note(line)
        return True

    def block_done(self, block: int) -> None:
        self.show(BlockDone(self.exp.study, len(self.plan), block, self.hooks.decided_words()))

    def run(self) -> None:
        """Every planned trial, then the make-up pass."""
        prev: PlannedTrial | None = None  # the last trial taken from the queue
        needed: set[tuple[str, str]] | None = None  # (condition, arm) pairs the stopping rule still wants
        try:
            while True:
                while self.queue:
                    planned = self.plan[self.queue.pop(0)]
                    new_block = prev is not None and planned.block > prev.block
                    if new_block and prev is not None:  # every condition's trials of the previous block are stored
                        self.executor.services.end_block()
                        self.block_done(prev.block)
                        needed = self.hooks.needed(planned.block)
                        if needed is not None and not needed:
                            self.stopped_after = planned.block
                            self.show(TrialEvent.of("settled", self.exp.study, len(self.plan), planned,
                                                    stopped_after=planned.block))
                            break
                    prev = planned
                    if self.side_by_side_arm(planned):
                        self.planned_group(planned, needed)
                    else:
                        self.planned_trial(planned, needed)
                if not self.plan or self.stopped_after is not None or not (self.still or self.still_groups):
                    break
                if self.still_groups:
                    self.make_up_group()
                else:
                    self.make_up()
        except HostLost as exc:
            self.stop(exc)
        if self.plan and self.stopped_after is None:
            self.block_done(self.plan[-1].block)

    def finish(self) -> None:
        """run.json says the run is complete (and where a stopping rule ended it)."""
        self.update(status="complete", finished_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    stopped_after_blocks=self.stopped_after)

    def stop(self, exc: HostLost) -> None:
        """The run cannot go on: the block under way lost a host (it runs again in full on
        resume); every other stored trial is kept. Raises :class:`HostLost` (one line)."""
        block = self.current.block if self.current is not None else None
        aside = self.set_aside_block(block) if block is not None else 0
        line = (f"{exc}: the run stops; {len(self.held)} stored trial(s) kept"
                + (f" (block b{block}'s {aside} set aside: it runs again in full on resume)" if aside else "")
                + f"; resume with run_id {self.store.run_id!r} on a repaired cluster")
        self.update(status="stopped",
                    host_losses=(*self.record.host_losses, HostLoss(utc_stamp(utc_now()), block, line, stopped=True)))
        self.note(line)
        raise HostLost(line) from None


def _run(experiment: Experiment, run_id: str | None, out_dir: str | os.PathLike[str] | None, cpus: CpuPlan,
         progress: bool | ProgressCallback, notebook_parameters: Mapping[str, Any] | None,
         runtimes: Callable[[str], Runtime], load: LoadFunction, cross_check: CrossCheckFunction,
         until: StopRule | None = None, decided: DecidedHook | None = None, hosts: HostCheck | None = None) -> Run:
    longest = settings.MAX_BETWEEN_TRIALS_S.get()  # $BENCHLIB_MAX_BETWEEN_TRIALS_S: the pause used is the one stored
    if longest is not None and experiment.between_trials_s > longest:
        experiment = replace(experiment, between_trials_s=longest)
    runtime = runtimes(experiment.runtime)
    runtime.check()  # before the run folder is made
    store = RunStore.open(experiment.study, run_id, root=out_dir)
    stored = read_stored(store)
    show = make_progress(progress)
    services = RunServices(experiment, runtimes, cpus, store, runtimes={experiment.runtime: runtime})
    services.prepare_all()
    runnable = [a.name for a in experiment.arms if a.name not in services.unavailable]
    plan = plan_trials(runnable, experiment.trials, seed=experiment.seed,
                       conditions=[c.name for c in experiment.conditions]) if runnable else []
    params = experiment_parameters(experiment)
    check_same_design(store, stored.record, plan, params)
    record = stored.record
    if record is None:
        settled = settle_as_asked(lambda text: show(Note(experiment.study, text)))  # a quiet machine first
        facts = services.runtime_facts()
        record = RunRecord(
            study=experiment.study, run_id=store.run_id, status="running", parameters=params,
            notebook_parameters=dict(notebook_parameters or {}), plan=tuple(plan), cpus=cpus,
            unavailable=dict(services.unavailable), builds=services.builds(), runtime=facts[experiment.runtime],
            runtimes=facts if len(facts) > 1 else {}, settle=settled,
            provenance=Provenance.from_json(_provenance.collect(toolchains.versions(services.toolchains()))))
        record = store.write_run(record)
    record_run_folder(store)
    if experiment.interleave is not None:
        _check_side_by_side(experiment, services)
    executor = TrialExecutor(experiment, services, load, cross_check, getattr(load, "interleaved", None))
    held = HeldTrials(store, stored.trials)
    hooks = RunHooks(store, experiment, services.unavailable, held, record, until, decided)
    execution = _Execution(experiment, store, plan, record, held, executor, hooks, show, hosts)
    conditions = execution.conditions
    show(RunStarted(experiment.study, store.run_id, len(plan), experiment.trials if plan else 0,
                    tuple(PlanSlot(p.condition, p.arm, executor.cross_check_in(p, conditions[p.condition]) is not None)
                          for p in plan), dict(services.unavailable)))
    with _pinned_to(cpus.client), contextlib.ExitStack() as running:
        running.enter_context(run_log(store.path))  # the full text behind one-line notes (logs/run.log)
        running.callback(services.close)  # what still runs (kept or shared services), also on an interrupt
        execution.run()
    execution.finish()
    show(RunDone(experiment.study, store.run_id, execution.ran, execution.skipped))
    hooks.save_summaries()
    return replace(run_from(store, execution.record, held.records(), experiment=experiment,
                            unavailable=services.unavailable), ran=execution.ran, skipped=execution.skipped)


def _check_side_by_side(experiment: Experiment, services: RunServices) -> None:
    """An interleaved experiment's endpoints must speak HTTP/1.1 (a gRPC or h2c endpoint makes
    its load HTTP/2, which the sliced engine does not run): refused before anything runs."""
    bad = []
    for c in experiment.conditions:
        for a in experiment.arms:
            if a.name in services.unavailable:
                continue
            ep = services.resolve(a).endpoint(c.endpoint or a.endpoint)
            if ep.protocol != "http1":
                bad.append(f"{a.name} ({ep.name}: {ep.protocol})")
    if bad:
        raise ParameterError("an interleaved design runs HTTP/1.1 endpoints only; these are not: " + ", ".join(bad)
                             + "; use Experiment(interleave=None), the sequential design")


@contextlib.contextmanager
def _cluster_seams(experiment: Experiment, runtime: RuntimeChoice, cross_check: CrossCheckFunction | None,
                   hosts: HostCheck | None) -> Iterator[tuple[Callable[[str], Runtime], LoadFunction, CrossCheckFunction,
                                                               HostCheck]]:
    """The runtimes, load, cross-check and hosts of a run on ``experiment.cluster``: the cluster
    started (a local one) or joined for the run and stopped or left whatever happens; the load
    from its load hosts (:class:`~benchlib.run.cluster.cluster_load.ClusterLoad`); with
    ``?service=`` the services on that node (each runtime wrapped), stopped there at the end."""
    spec = parse_cluster(experiment.cluster)
    assert spec is not None
    with ClusterSession(spec) as session, on_service_node(session, runtime_lookup(runtime)) as runtimes:
        yield runtimes, ClusterLoad(session), cross_check or ClusterCrossCheck(session), hosts or session


def run_experiment(
    experiment: Experiment,
    *,
    run_id: str | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    cpus: CpuPlan | None = None,
    progress: bool | ProgressCallback = True,
    notebook_parameters: Mapping[str, Any] | None = None,
    runtime: RuntimeChoice = None,
    load: LoadFunction | None = None,
    cross_check: CrossCheckFunction | None = None,
    until: StopRule | None = None,
    decided: DecidedHook | None = None,
    hosts: HostCheck | None = None,
) -> Run:
    """Run (or resume) ``experiment`` and return the run, read (:class:`benchlib.store.results.Run`:
    its trials, summaries, provenance; ``ran`` and ``skipped`` count this execution's trials).

    Parameters
    ----------
    experiment: arms, conditions, trials, seed, runtime and limits.
    run_id: ``None`` or ``""`` for a new run; an existing id resumes that run (same parameters).
    out_dir: root of the run folders (default ``data/runs`` of the project, or ``$BENCHLIB_DATA``).
    cpus: CPU assignment (default: :func:`benchlib.run.cpus.plan_cpus`).
    progress: ``True`` (automatic renderer), ``False``, or a callback taking each event with the
        run's counts and times (:class:`benchlib.run.events.Progress`).
    notebook_parameters: the calling notebook's parameters, stored in run.json.
    runtime: the runtime(s) to start services with instead of the ones the experiment and its
        arms name (:func:`benchlib.runtime.get_runtime`): one :class:`~benchlib.runtime.Runtime`
        for every name, or a mapping from names to runtimes (other names by name). Each trial
        stores the name of the runtime that ran it.
    load: the function that runs a trial's load (default :func:`benchlib.loadgen.run_load`, or
        with ``experiment.cluster`` :class:`benchlib.run.cluster.cluster_load.ClusterLoad` on the cluster
        started or joined for this run and stopped or left when it ends; a cluster with
        ``?service=<resource>`` also runs the services on that node:
        :mod:`benchlib.run.cluster.service`).
    cross_check: the function that runs a cross-check's peer tool (default :func:`run_cross_check`).
    until: a stopping rule (e.g. :class:`benchlib.analysis.stopping.StopWhenSettled`), called
        after each complete block as ``until(run, blocks_done)`` (``run``: the trials so far,
        a :class:`~benchlib.store.results.Run` as the runner holds it); it returns the
        ``(condition, arm)`` pairs that still need blocks (``None``: all). Later trials of the
        other pairs are not run (a ``settled`` progress event each); when none is left the
        run ends, and run.json records ``stopped_after_blocks``.
    decided: called once each block completes with the per-trial summaries of the trials so
        far (a DataFrame, as :meth:`benchlib.store.results.Run.summaries`); returns the questions already
        decided, in words, for the progress line of that block (e.g.
        :func:`benchlib.analysis.questions.decided_questions`). Each trial is summarized once.
    hosts: asked after every trial whether the load's hosts are as before (:class:`HostCheck`;
        default: none, or with ``experiment.cluster`` the run's
        :class:`~benchlib.run.cluster.session.ClusterSession`): after a re-reservation the block
        runs again in full; :class:`~benchlib.core.errors.HostLost` from it stops the run.

    Raises
    ------
    benchlib.core.signals.Interrupted
        SIGINT, SIGTERM or SIGHUP arrived (a ``KeyboardInterrupt``): the trial under way was
        abandoned, its load and services stopped; stored trials are kept.
    benchlib.core.errors.HostLost
        a cluster run (``experiment.cluster``) cannot go on: fewer load hosts left than its
        ``min_hosts``, or its service node lost (one line); the block under way was set aside,
        the other stored trials are kept for a resume on a repaired cluster. A run that can go
        on reserves the load hosts again and runs the block that lost a host again in full.
    benchlib.core.errors.StorageError
        resuming a run whose folder has no ``run.json``, or whose stored data is unreadable
        (the file is named); nothing was written then.
    """
    with interrupt_on_signals():
        if load is None and experiment.cluster is not None:
            with _cluster_seams(experiment, runtime, cross_check, hosts) as (runtimes, on_hosts, peer, watch):
                return _run(experiment, run_id, out_dir, cpus or plan_cpus(), progress, notebook_parameters,
                            runtimes, on_hosts, peer, until, decided, hosts=watch)
        return _run(experiment, run_id, out_dir, cpus or plan_cpus(), progress, notebook_parameters,
                    runtime_lookup(runtime), load or run_load, cross_check or run_cross_check, until, decided,
                    hosts=hosts)
