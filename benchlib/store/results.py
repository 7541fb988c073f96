"""A stored run, read: :func:`open_run` gives a typed :class:`Run`, the one read model the
reports, the analysis tables and the studies take.

A :class:`Run` holds run.json's facts (parameters as the :class:`~benchlib.core.model.Experiment`
they describe, provenance, CPUs, the runtime, arms that could not run), every stored trial as a
:class:`~benchlib.store.records.TrialRecord`, and reads what is derived from them: the per-trial
summaries (:meth:`Run.summaries`, one row per trial, :func:`trial_summary`, cached in
``derived/summaries.parquet`` under :data:`SUMMARY_VERSION`) and the latencies for plots
(:meth:`Run.latencies`). It is a snapshot: the runner returns one when a run ends, and hands a
fresh one to a stopping rule after each block. No verdicts are stored with a run yet; the
studies compute them from :meth:`Run.summaries`.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchlib.core.errors import BenchlibError, ParameterError, StorageError
from benchlib.core.model import (
    NAME_PATTERN,
    Arm,
    Condition,
    CrossCheck,
    Experiment,
    Interleave,
    Limits,
    LoadSpec,
    Stage,
)
from benchlib.core.placement import CpuPlan
from benchlib.store.records import PeerReport, TrialRecord
from benchlib.store.records import rows as R
from benchlib.store.records.plan import PlanRecord
from benchlib.store.records.run import Provenance, RunRecord
from benchlib.store.runstore import RunStore, StoredTrial, default_runs_root

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SUMMARY_VERSION", "Run", "RunStart", "TrialSummaries", "cross_check_summary", "experiment_from_parameters",
           "open_run", "parse_utc", "run_from", "runs_started_between", "trial_record", "trial_summary"]

#: Version of :func:`trial_summary`'s columns (keys the summaries cache of a stored run).
SUMMARY_VERSION = "4: the client's busiest CPU per trial (client_cpu)"


# -- per-trial summaries --------------------------------------------------------------------------

def cross_check_summary(peer: PeerReport | None) -> dict[str, Any]:
    """The cross-check's headline figures for the summaries table: ``xcheck_tool``,
    ``xcheck_order``, ``xcheck_rps``, ``xcheck_p50_ms``, ``xcheck_p99_ms``, ``xcheck_error``
    (NaN where the tool does not report a figure; ``{}`` when no cross-check ran)."""
    if peer is None:
        return {}
    if not peer.ok:
        return {"xcheck_tool": peer.tool, "xcheck_error": peer.failure}
    return {"xcheck_tool": peer.tool, "xcheck_order": peer.raw.get("order"), "xcheck_rps": peer.requests_per_s,
            "xcheck_p50_ms": peer.figure("p50"), "xcheck_p99_ms": peer.figure("p99"), "xcheck_error": None}


def trial_summary(trial: TrialRecord) -> dict[str, Any]:
    """One row of the summaries table: design columns, status, the stats module's per-trial
    summary of the measured phase (:func:`benchlib.stats.summarize_trial`), the server's CPU
    time per request over that phase (``server_cpu_us_per_req``, µs, service and front;
    ``front_cpu_us_per_req``; and ``server_cpu_frac``, CPUs busy; see
    :meth:`benchlib.store.records.TrialRecord.server_cpu`), how busy the client's busiest CPU was
    (``client_cpu``, share of one CPU; NaN without a measure) and the cross-check's headline
    figures (:func:`cross_check_summary`). Reads the trial's rows from its file."""
    from benchlib.stats import summarize_trial

    load = trial.load
    row: dict[str, Any] = {
        "condition": trial.condition, "arm": trial.arm, "block": trial.block, "position": trial.position,
        "seq": trial.seq, "status": trial.status, "valid": trial.valid, "reason": trial.reason,
        "service": trial.service, "variant": trial.variant or None,
        "load_model": load.loadspec.get("model") if load is not None else None,
        "offered_rps": load.offered_rps if load is not None else None,
        "client_cpu": trial.client_cpu,
    }
    rows = trial.rows()
    if len(R.measured(rows)):  # a failed trial may hold only warm-up rows
        duration = load.measured_duration_s if load is not None and math.isfinite(load.measured_duration_s) else None
        row.update(summarize_trial(rows, duration_s=duration))
    cpu = trial.server_cpu(rows)
    if cpu is not None:
        row["server_cpu_us_per_req"] = cpu.per_request_us
        row["server_cpu_frac"] = cpu.fraction
        if trial.front is not None:
            row["front_cpu_us_per_req"] = cpu.front_per_request_us
    row.update(cross_check_summary(trial.peer))
    return row


def trial_record(store: RunStore, t: StoredTrial) -> TrialRecord:
    """The typed record of a stored trial of ``store``, with its file and its service's log."""
    return TrialRecord.from_meta(t.meta, path=t.path, log_path=store.log_path(t.condition, t.arm, t.block))


def _summary_of(t: StoredTrial) -> dict[str, Any]:
    return trial_summary(TrialRecord.from_meta(t.meta, path=t.path))


class TrialSummaries:
    """Per-trial summaries (:func:`trial_summary`) kept in memory, each trial summarized once:
    what a runner holds while it runs, for its stopping rule and its progress line (a trial run
    again in its place is a new record, summarized again)."""

    def __init__(self) -> None:
        self._rows: dict[int, tuple[TrialRecord, dict[str, Any]]] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def rows(self, trials: Iterable[TrialRecord]) -> list[dict[str, Any]]:
        """The summary of each of ``trials``, in their order (computed for those not seen yet)."""
        out = []
        for t in trials:
            got = self._rows.get(id(t))
            if got is None or got[0] is not t:
                got = self._rows[id(t)] = (t, trial_summary(t))
            out.append(got[1])
        return out

    def frame(self, trials: Iterable[TrialRecord]) -> pd.DataFrame:
        """The summaries of ``trials`` (one row each, in their order), as :meth:`Run.summaries`."""
        import pandas as pd

        return pd.DataFrame(self.rows(trials))

    def save(self, store: RunStore, trials: Sequence[TrialRecord]) -> None:
        """Write ``store``'s summaries cache (``derived/summaries.parquet``, as :meth:`Run.summaries`
        keeps it) from the summaries of ``trials``, its stored trials as read (a stored trial
        not among them is summarized from its file)."""
        by_path = {t.path: row for t, row in zip(trials, self.rows(trials))}
        store.summaries(lambda s: by_path[s.path] if s.path in by_path else _summary_of(s), version=SUMMARY_VERSION)


# -- the experiment run.json describes ----------------------------------------------------------

def _pairs(v: Any) -> tuple[tuple[Any, ...], ...]:
    return tuple(tuple(p) for p in v or ())


def _limits(d: Mapping[str, Any] | None) -> Limits | None:
    return None if d is None else Limits(cpus=d.get("cpus"), memory_mb=d.get("memory_mb"))


def _load(d: Mapping[str, Any]) -> LoadSpec:
    d = dict(d)
    d["stages"] = tuple(Stage(**s) for s in d.get("stages") or ())
    d["headers"] = _pairs(d.get("headers"))
    d["body"] = bytes.fromhex(d.get("body") or "")
    return LoadSpec(**d)


def _cross_check(x: Mapping[str, Any]) -> CrossCheck:
    return CrossCheck(x["tool"], _pairs(x.get("options")), None if x.get("arms") is None else tuple(x["arms"]))


def _condition(d: Mapping[str, Any]) -> Condition:
    x = d["cross_check"]
    check = None if x is None else tuple(_cross_check(c) for c in x) if isinstance(x, list) else _cross_check(x)
    return Condition(d["name"], _load(d["load"]), d["endpoint"], check)


def _arm(d: Mapping[str, Any]) -> Arm:
    d = dict(d)
    d["env"] = _pairs(d.get("env"))
    d["limits"] = _limits(d.get("limits"))
    return Arm(**d)


def experiment_from_parameters(params: Mapping[str, Any]) -> Experiment:
    """The :class:`~benchlib.core.model.Experiment` whose run.json ``parameters`` these are (the
    inverse of :func:`benchlib.run.runner.experiment_parameters`), as :class:`RunRecord` reads
    them: complete (older formats are brought up to date as run.json is read,
    :mod:`benchlib.store.records.run`).

    Raises
    ------
    ParameterError  when the parameters do not describe an experiment (naming what is wrong).
    """
    p = dict(params)
    try:
        return Experiment(
            study=p["study"], arms=tuple(_arm(a) for a in p["arms"]),
            conditions=tuple(_condition(c) for c in p["conditions"]), trials=p["trials"], seed=p["seed"],
            runtime=p["runtime"], limits=_limits(p["limits"]) or Limits(), baseline=p["baseline"],
            between_trials_s=p["between_trials_s"], retry_failed=p["retry_failed"], repeat_invalid=p["repeat_invalid"],
            repeat_disturbed=p["repeat_disturbed"], cross_check_blocks=p["cross_check_blocks"],
            dependencies=p["dependencies"], budget_min=p["budget_min"], target_mde=p["target_mde"],
            cluster=p["cluster"], service_starts=p["service_starts"],
            interleave=None if p.get("interleave") is None else Interleave(**p["interleave"]))
    except (KeyError, TypeError, ValueError, BenchlibError) as exc:
        raise ParameterError(f"run.json's parameters do not describe an experiment ({type(exc).__name__}: "
                             f"{exc})") from None


# -- the run ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    """One stored run, read (a snapshot).

    Attributes
    ----------
    study, run_id, path: which run, and where it is stored.
    experiment: the :class:`~benchlib.core.model.Experiment` it ran (``None`` when run.json's
        parameters do not describe one: a folder written by hand, or without run.json).
    trials: every stored trial (set-aside attempts excluded), in execution order.
    unavailable: arms that did not run, with why.
    arms, conditions: names in the experiment's order.
    record: run.json, typed (:class:`~benchlib.store.records.run.RunRecord`: parameters,
        notebook parameters, plan, CPUs, builds, runtime, provenance, how the run ended);
        ``parameters`` is the experiment that ran (with a budget: the planned blocks, measured
        and warm-up seconds), ``notebook_parameters`` what the notebook was asked (with a
        budget: the parameters that plan again, e.g. the pilot's trial length).
    ran, skipped: trials this execution ran and found stored (a run the runner returns; 0
        for a run read from disk).
    summarized: the summaries a runner holds for the trials it holds (``None``: read and cached
        on disk, :meth:`summaries`).
    """

    study: str
    run_id: str
    path: Path
    trials: tuple[TrialRecord, ...] = ()
    experiment: Experiment | None = None
    unavailable: Mapping[str, str] = field(default_factory=dict)
    arms: tuple[str, ...] = ()
    conditions: tuple[str, ...] = ()
    record: RunRecord = field(default_factory=RunRecord)
    ran: int = 0
    skipped: int = 0
    summarized: TrialSummaries | None = field(default=None, compare=False, repr=False)

    @property
    def store(self) -> RunStore:
        """The run's folder (:class:`~benchlib.store.runstore.RunStore`)."""
        return RunStore(self.path)

    @property
    def status(self) -> str:
        """``running``, ``complete`` or ``stopped`` as run.json says ("" when it has none)."""
        return self.record.status

    @property
    def parameters(self) -> Mapping[str, Any]:
        """run.json's ``parameters``: the experiment as stored (:attr:`experiment`, typed)."""
        return self.record.parameters

    @property
    def notebook_parameters(self) -> Mapping[str, Any]:
        """What the notebook that made the run was asked (run.json's ``notebook_parameters``)."""
        return self.record.notebook_parameters

    @property
    def cpus(self) -> CpuPlan:
        """The CPUs of each role (no CPU when not recorded)."""
        return self.record.cpus or CpuPlan((), (), ())

    @property
    def provenance(self) -> Provenance:
        """The machine and software at the run's first start."""
        return self.record.provenance

    @property
    def plan(self) -> PlanRecord | None:
        """The design a pilot planned for this run within a budget (run.json's ``pilot``:
        :class:`~benchlib.store.records.plan.PlanRecord`), ``None`` for a run without a budget (or
        one whose main run has not finished)."""
        return self.record.pilot

    @property
    def baseline(self) -> str:
        """The arm the others are compared against (the experiment's, else the first arm)."""
        if self.experiment is not None:
            return self.experiment.baseline_arm
        return str(self.parameters.get("baseline") or (self.arms[0] if self.arms else ""))

    def require_experiment(self) -> Experiment:
        """:attr:`experiment`, or :class:`~benchlib.core.errors.StorageError` saying why there is none."""
        if self.experiment is None:
            raise StorageError(f"{self.path}: run.json's parameters do not describe an experiment (a run folder "
                               "written by hand, or without run.json); this needs the experiment's arms and loads")
        return self.experiment

    def arm_order(self, names: Iterable[Any]) -> list[str]:
        """``names`` in the experiment's arm order (unknown names last, sorted)."""
        listed = list(dict.fromkeys(str(n) for n in names))
        known = [a for a in self.arms if a in listed]
        return known + sorted(set(listed) - set(known))

    def summaries(self) -> pd.DataFrame:
        """Per-trial summaries (one row per stored trial, :func:`trial_summary`), cached in
        ``derived/summaries.parquet`` (keyed by the trial files and :data:`SUMMARY_VERSION`);
        for a run a runner holds, those of its :attr:`trials` it keeps in memory."""
        if self.summarized is not None:
            return self.summarized.frame(self.trials)
        return self.store.summaries(_summary_of, version=SUMMARY_VERSION)

    def latencies(self, *, max_per_arm: int | None = 200_000, seed: int = 0) -> pd.DataFrame:
        """Latencies of the successful measured requests (:func:`benchlib.store.records.rows.ok_measured`)
        of the valid trials, pooled per condition and arm, for plots only (uniformly subsampled
        to about ``max_per_arm`` rows per arm, taken evenly from its trials; ``None`` keeps
        all). Columns: condition, arm, block, latency_ms (from the due time), service_ms (from
        the send time). Reads one trial at a time, so memory stays bounded."""
        import pandas as pd

        rng = np.random.default_rng(seed)
        trials = [t for t in self.trials if t.valid]
        per_arm: dict[tuple[str, str], int] = {}
        for t in trials:
            per_arm[(t.condition, t.arm)] = per_arm.get((t.condition, t.arm), 0) + 1
        frames = []
        for t in trials:
            ok = R.ok_measured(t.rows())
            if max_per_arm is not None:
                quota = max(1, max_per_arm // per_arm[(t.condition, t.arm)])
                if len(ok) > quota:
                    ok = ok[np.sort(rng.choice(len(ok), quota, replace=False))]
            frames.append(pd.DataFrame({
                "condition": t.condition, "arm": t.arm, "block": t.block,
                "latency_ms": R.latency_ms(ok, "intended"), "service_ms": R.latency_ms(ok, "sent"),
            }))
        if not frames:
            return pd.DataFrame(columns=["condition", "arm", "block", "latency_ms", "service_ms"])
        return pd.concat(frames, ignore_index=True)

    def not_run_table(self) -> pd.DataFrame:
        """Arms that did not run, with the reason, as a DataFrame (empty if all ran)."""
        import pandas as pd

        return pd.DataFrame([{"arm": a, "status": f"not run: {why}"} for a, why in self.unavailable.items()],
                            columns=["arm", "status"])


def _is_run_folder(p: Path) -> bool:
    return p.is_dir() and ((p / "run.json").is_file() or (p / "trials").is_dir())


def _stored_runs(root: Path) -> list[Path]:
    """Every run folder under ``root`` (``<study>/<run_id>``), newest run id last."""
    if not root.is_dir():
        return []
    return sorted((p for s in root.iterdir() if s.is_dir() for p in s.iterdir() if _is_run_folder(p)),
                  key=lambda p: (p.name, p.parent.name))


def _listing(runs: list[Path], root: Path) -> str:
    if not runs:
        return f"no runs are stored under {root}"
    shown = [f"{p.parent.name}/{p.name}" for p in runs[-12:]]
    more = f" (the newest 12 of {len(runs)})" if len(runs) > 12 else ""
    return f"runs stored under {root}{more}: " + ", ".join(shown)


def _find(path_or_id: str | Path, root: Path | None) -> Path:
    """The run folder ``path_or_id`` names (see :func:`open_run`)."""
    p = Path(path_or_id)
    if _is_run_folder(p):
        return p
    base = Path(root) if root is not None else default_runs_root()
    text = str(path_or_id)
    if re.fullmatch(rf"{NAME_PATTERN}/{NAME_PATTERN}", text) and _is_run_folder(base / text):
        return base / text
    if p.exists():
        raise StorageError(f"{p} is not a run folder (no run.json, no trials/); {_listing(_stored_runs(base), base)}")
    if not re.fullmatch(NAME_PATTERN, text):
        raise StorageError(f"no run folder at {text}; {_listing(_stored_runs(base), base)}")
    runs = _stored_runs(base)
    found = [r for r in runs if r.name == text]
    if not found:
        raise StorageError(f"no run {text!r}; {_listing(runs, base)}")
    if len(found) > 1:
        raise StorageError(f"run id {text!r} is stored in several studies ({', '.join(r.parent.name for r in found)}); "
                           f"name one: " + ", ".join(f"{r.parent.name}/{r.name}" for r in found))
    return found[0]


def run_from(store: RunStore, record: RunRecord, trials: Iterable[TrialRecord], *,
             experiment: Experiment | None = None, unavailable: Mapping[str, str] | None = None,
             summarized: TrialSummaries | None = None) -> Run:
    """The :class:`Run` of ``store`` with its run.json ``record`` and the ``trials`` given
    (sorted in execution order): :func:`open_run` reads them from disk, a runner gives those
    it holds. ``experiment``: the experiment as run (default: the one ``record``'s parameters
    describe, ``None`` when they do not); ``unavailable``: the arms that did not run (default:
    the record's); ``summarized``: the summaries the caller keeps (:attr:`Run.summarized`)."""
    if experiment is None and record.parameters:
        try:
            experiment = experiment_from_parameters(record.parameters)
        except ParameterError:
            experiment = None  # a folder written by hand: its names still read from the parameters
    if experiment is not None:
        arms = tuple(a.name for a in experiment.arms)
        conds = tuple(c.name for c in experiment.conditions)
    else:
        arms, conds = record.arm_names(), record.condition_names()
    ordered = tuple(sorted(trials, key=lambda t: (t.seq, str(t.path))))
    return Run(study=store.study, run_id=store.run_id, path=store.path, trials=ordered, experiment=experiment,
               unavailable=dict(unavailable if unavailable is not None else record.unavailable), arms=arms,
               conditions=conds, record=record, summarized=summarized)


def open_run(path_or_id: str | Path | RunStore, *, root: str | Path | None = None,
             experiment: Experiment | None = None, unavailable: Mapping[str, str] | None = None) -> Run:
    """The stored run ``path_or_id`` names, read.

    Parameters
    ----------
    path_or_id: a run folder (``data/runs/<study>/<run_id>``), a :class:`~benchlib.store.runstore.RunStore`,
        ``<study>/<run_id>`` or a run id alone, looked up under ``root``.
    root: where run ids are looked up (default ``data/runs`` of the project, or ``$BENCHLIB_DATA``).
    experiment: the experiment as run (the runner passes it); default: the one run.json's
        parameters describe (``None`` when they do not).
    unavailable: arms that did not run, with why (default: run.json's).

    Raises
    ------
    StorageError  no such run (the message lists the runs stored), a run id stored in several
        studies (naming them), a folder that is not a run, an unreadable run.json or trial file.
    """
    if isinstance(path_or_id, RunStore):
        path = path_or_id.path
    else:
        path = _find(path_or_id, Path(root) if root is not None else None)
    store = RunStore(path)
    record = store.read_run() or RunRecord()
    return run_from(store, record, [trial_record(store, t) for t in store.trials()], experiment=experiment,
                    unavailable=unavailable)


# -- runs by the time they started ------------------------------------------------------------

def parse_utc(text: str) -> _dt.datetime:
    """An ISO 8601 time (``Z`` or an offset; none reads as UTC) as an aware datetime."""
    t = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=_dt.UTC)


@dataclass(frozen=True)
class RunStart:
    """A stored run's folder and the facts of its start that run.json's provenance records.

    Attributes
    ----------
    store: the run folder (``<root>/<study>/<run_id>``; its ``study``, ``run_id``, ``path``).
    collected_utc: when its provenance was collected (the run's first start; a resumed run
        keeps it).
    loadavg_1min: the 1-min load average then (``None`` when not recorded).
    settle_wait_s: seconds the run waited for a quiet machine before it (``--settle``; run.json's
        ``settle``), 0 when it did not wait: time the notebook took that is not the run's cost.
    """

    store: RunStore
    collected_utc: _dt.datetime
    loadavg_1min: float | None
    settle_wait_s: float = 0.0


def runs_started_between(runs_root: str | Path, start: _dt.datetime, end: _dt.datetime) -> list[RunStart]:
    """Every run under ``runs_root`` (``<study>/<run_id>/run.json``) whose provenance was
    collected between ``start`` and ``end`` (aware datetimes, both included), in folder order.
    Folders without a readable run.json or provenance time are left out."""
    found = []
    for run_json in sorted(Path(runs_root).glob("*/*/run.json")):
        store = RunStore(run_json.parent)
        try:
            record = store.read_run()
        except StorageError:
            continue
        when = record.provenance.started if record is not None else None
        if record is None or when is None or not start <= when <= end:
            continue
        waited = record.settle.waited_s if record.settle is not None else 0.0
        found.append(RunStart(store, when, record.provenance.loadavg_1min, waited if math.isfinite(waited) else 0.0))
    return found
