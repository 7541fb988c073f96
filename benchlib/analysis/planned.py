"""A study's run as designed: the fixed design, or a pilot and then the design it chose within
a budget, planned on this machine, now.

:class:`StudyDesign` is what a study runs with one set of parameters (its experiment and
questions); :func:`run_design` runs it, with the fixed design's looks or within a budget by
:func:`run_planned` (issue 23, items 3 and 5):

1. **pilot**: the experiment's arms and conditions for ``pilot_blocks`` blocks (at least
   :data:`~benchlib.stats.planning.budget.MIN_PILOT_BLOCKS`; no peer tool), stored as its own run under
   the study ``<study>-pilot`` (run id ``<run_id>-pilot``): its trials count in the budget and
   stay out of the study's analysis, which reads only the main run;
2. **plan**: the pilot's variance components (:func:`~benchlib.analysis.pilot.components_from_run`,
   optionally pooled with ``components=`` of an earlier run on the same machine) and trial
   costs give the blocks, measured seconds and warm-up for the target MDE within what the pilot
   left of the budget (:func:`~benchlib.stats.planning.budget.plan_within_budget`);
3. **main run**: the planned experiment with sequential looks whose futility target is the
   target MDE (:func:`~benchlib.analysis.stopping.stopping_rule`): at each look a question
   settled (decided, or not decidable within the budget) stops, and an arm that serves only
   settled questions stops running (the runner's ``until=``); the report counts blocks per arm.

Resuming with the same ``run_id`` reuses the stored pilot (the plan is computed again from the
same stored trials, so the main run's parameters match and it resumes).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.analysis.display import show
from benchlib.analysis.interleaved import side_by_side_refusal
from benchlib.analysis.pilot import PilotComponents, components_from_run, pilot_windows, trial_costs
from benchlib.analysis.questions import Family
from benchlib.analysis.stopping import Stopping, analysis_design, blocks_text, row_families, stopping_rule
from benchlib.core.errors import ParameterError
from benchlib.core.model import Condition, CrossCheck, Experiment, Interleave
from benchlib.run.cpus import CpuPlan
from benchlib.stats.planning.budget import MIN_PILOT_BLOCKS, BudgetPlan, plan_within_budget, request_floor, warmup_check
from benchlib.stats.planning.cost import cost_model
from benchlib.stats.variance import pool_components
from benchlib.store.records.plan import PlanRecord
from benchlib.store.results import Run

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["DesignRun", "PILOT_SUFFIX", "PILOT_WINDOWS", "PlannedRun", "StudyDesign", "design_metrics", "pilot_experiment",
           "planned_experiment", "run_design", "run_planned", "side_by_side"]

#: The pilot's study folder and run id end in this.
PILOT_SUFFIX = "-pilot"


@dataclass(frozen=True)
class PlannedRun:
    """What :func:`run_planned` returns.

    Attributes
    ----------
    run: the main run (what the analysis reads).
    pilot: the pilot run (kept out of the analysis).
    plan: the design chosen (:class:`~benchlib.stats.planning.budget.BudgetPlan`).
    stopping: the main run's sequential stopping (its ``design`` for ``run_family(...,
        sequential=...)``).
    components: the variance components the plan rests on (the pilot's, pooled with a seed's
        when one was given), for the design section's predicted MDE
        (:func:`~benchlib.analysis.pilot.design_section`), so it shows the MDE planned on;
        ``None``: the pilot's own.
    """

    run: Run
    pilot: Run
    plan: BudgetPlan
    stopping: Stopping
    components: PilotComponents | None = None

    def markdown(self, answers: Sequence[Any] = (), *, blocks: bool = True) -> str:
        """The design section's paragraph: the pilot's estimate, the plan, the MDE achieved
        against the target (the largest ratio MDE per metric of ``answers``' verdicts, those
        not decidable within the budget included) and (``blocks``) the blocks each arm ran."""
        achieved: dict[str, float] = {}
        for ans in answers:
            comp = getattr(ans, "comparison", ans)
            for v in getattr(comp, "verdicts", ()) or ():
                if v.effect == "ratio" and not v.directional and v.kind.value != "equivalent" \
                        and not v.kind.without_figures and not math.isnan(v.mde):
                    achieved[v.metric] = max(achieved.get(v.metric, 0.0), float(v.mde))
        return self.plan.markdown(achieved or None) + (f"\n\nBlocks per arm: {blocks_text(self.run)}." if blocks else "")


#: A pilot trial's measured phase holds at least this many windows' worth of the requests its
#: quantile metrics need: the within-trial variance comes from splitting it in two or more.
PILOT_WINDOWS = 2


def _open_requests(c: Condition) -> float | None:
    """Requests a trial of ``c`` is offered when its load is open-model and bounded by time
    (rate x measured seconds); ``None`` for any other load."""
    ld = c.load
    if ld.model == "open" and ld.rate_rps and ld.duration_s is not None and ld.requests is None and not ld.stages:
        return float(ld.rate_rps) * float(ld.duration_s)
    return None


def _pilot_load(c: Condition, metrics: Sequence[str]) -> Condition:
    """``c`` without its peer tool and, for an open-model load bounded by time, with measured
    seconds long enough that each of :data:`PILOT_WINDOWS` windows holds the successful requests
    the quantile metrics among ``metrics`` need at the offered rate
    (:func:`~benchlib.stats.planning.budget.request_floor`); a closed-model load (no known rate) or one
    bounded by a request count keeps its length."""
    ld = c.load
    if _open_requests(c) is not None:
        floor = request_floor(metrics, {c.name: float(ld.rate_rps or 0.0)})
        if floor is not None and PILOT_WINDOWS * floor.duration_s > ld.duration_s:
            return replace(c, cross_check=None, load=replace(ld, duration_s=PILOT_WINDOWS * floor.duration_s))
    return replace(c, cross_check=None)


def design_metrics(experiment: Experiment, metrics: Sequence[str]) -> tuple[str, ...]:
    """The metrics among ``metrics`` that ``experiment``'s own trials can report: a latency
    quantile is left out when a load bounded by a request count, or an open-model load bounded
    by time, offers fewer requests per trial than it needs (``50 / (1 - q)``; e.g. p99 at 100
    requests: the analysis omits it too).
    What a budget plans for: planning a metric the design cannot report would force its trials
    to that metric's length (p99 at 100 requests/s: 50 s and more)."""
    from benchlib.stats.quantiles import quantile_of
    from benchlib.stats.summary import required_requests

    offered = [float(c.load.requests) if c.load.requests is not None else _open_requests(c)
               for c in experiment.conditions]
    least = min((x for x in offered if x is not None), default=math.inf)
    return tuple(m for m in dict.fromkeys(metrics)
                 if (q := quantile_of(m)) is None or required_requests(q) <= least)


def pilot_experiment(experiment: Experiment, blocks: int, metrics: Sequence[str] = ()) -> Experiment:
    """The pilot of ``experiment``: ``blocks`` blocks of the same arms and loads, under the
    study ``<study>-pilot``, without peer tools and without a budget of its own. An open-model
    trial too short to split into windows for ``metrics``' quantiles (e.g. 100 requests for a
    p50) is lengthened (:func:`_pilot_load`): the plan needs its within-trial variance, and
    plans every length from it."""
    if int(blocks) < MIN_PILOT_BLOCKS:
        raise ParameterError(f"pilot_blocks must be at least {MIN_PILOT_BLOCKS} (2 df for each row's between-trial "
                             f"variance); got {blocks!r}")
    return replace(experiment, study=experiment.study + PILOT_SUFFIX, trials=int(blocks), budget_min=None,
                   target_mde=None, conditions=tuple(_pilot_load(c, metrics) for c in experiment.conditions))


def _follow(check: CrossCheck, duration_s: float) -> CrossCheck:
    """``check`` whose ``duration_s`` option (if any) is ``duration_s``: whole seconds, at least
    1, where it was whole seconds (an ``int``: wrk takes no fractions)."""
    opts = tuple((k, (max(1, round(duration_s)) if isinstance(v, int) and not isinstance(v, bool) else float(duration_s))
                  if k == "duration_s" else v) for k, v in check.options)
    return replace(check, options=opts)


def planned_experiment(experiment: Experiment, plan: BudgetPlan) -> Experiment:
    """``experiment`` with the plan's blocks, and its measured seconds and warm-up on every
    condition bounded by time (a condition bounded by a request count keeps its load); a peer
    tool's ``duration_s`` on such a condition follows the planned seconds, so it measures as
    long as benchlib's load beside it (whole seconds where it took whole seconds)."""
    def planned(c: Condition) -> Condition:
        if c.load.duration_s is None or c.load.requests is not None or c.load.stages:
            return c
        check = c.cross_check
        if isinstance(check, CrossCheck):
            check = _follow(check, plan.duration_s)
        elif check is not None:
            check = tuple(_follow(x, plan.duration_s) for x in check)
        return replace(c, load=replace(c.load, duration_s=plan.duration_s, warmup_s=plan.warmup_s), cross_check=check)

    return replace(experiment, trials=plan.trials, conditions=tuple(planned(c) for c in experiment.conditions))


def _minutes(run: Run) -> float:
    """Wall minutes from the run's first trial start to its last trial's end (stored times)."""
    costs = trial_costs(run)
    if not len(costs):
        return 0.0
    span = (costs["finished"].max() - costs["started"].min()).total_seconds()
    return max(0.0, float(span) / 60.0) if span == span else 0.0


def _rates(run: Run) -> dict[str, float]:
    """``condition/arm`` -> median successful requests per measured second over the run's valid
    trials (from the per-trial summaries' ``n_ok`` and ``duration_s``): what sets how short a
    trial can be for a quantile metric (:func:`~benchlib.stats.planning.budget.request_floor`)."""
    s = run.summaries()
    if not len(s) or not {"condition", "arm", "n_ok", "duration_s"} <= set(s.columns):
        return {}
    if "valid" in s.columns:
        s = s[s["valid"].astype(bool)]
    s = s[(s["duration_s"] > 0) & s["n_ok"].notna()]
    rate = (s["n_ok"] / s["duration_s"]).groupby(s["condition"].astype(str) + "/" + s["arm"].astype(str)).median()
    return {str(k): float(v) for k, v in rate.items() if math.isfinite(v) and v > 0}


def run_planned(experiment: Experiment, families: Sequence[Family], *, budget_min: float | None = None,
                target_mde: float | None = None, components: PilotComponents | None = None,
                pilot_blocks: int = MIN_PILOT_BLOCKS, metrics: Sequence[str] | None = None,
                sequential: str | bool = "yes", full: bool = False, requests: Mapping[str, float] | None = None,
                prepare: Callable[[Any], Any] | None = None, compare_kwargs: Mapping[str, Any] | None = None,
                run_id: str | None = None, max_blocks: int = 60, **run_kwargs: Any) -> PlannedRun:
    """Pilot, plan and run ``experiment`` for ``families`` (module docstring).

    Parameters
    ----------
    budget_min, target_mde: minutes (pilot included) and percent (5 = 5%); default the
        experiment's ``budget_min`` / ``target_mde``; one of them missing is an error.
    components: stored components of an earlier run on the same machine
        (:func:`~benchlib.analysis.pilot.components_from_run`), pooled with the pilot's.
    pilot_blocks: the pilot's blocks (at least 3).
    metrics: the metrics planned for (default: those of ``families`` that the experiment's trials
        can report, :func:`design_metrics`).
    sequential, full, requests, prepare, compare_kwargs: as :func:`stopping_rule` (looks, the
        analysis's ``compare`` arguments); the futility target is ``target_mde``.
    run_id: the main run's id (the pilot's is ``<run_id>-pilot``); given and stored, resumed.
    max_blocks: the most blocks the plan may choose.
    run_kwargs: passed to :func:`benchlib.run.runner.run_experiment` (``out_dir``, ``runtime``,
        ``load``, ``progress``...), for the pilot and the main run alike.
    """
    from benchlib.run.runner import run_experiment
    from benchlib.store.runstore import new_run_id

    started = time.monotonic()
    budget = budget_min if budget_min is not None else experiment.budget_min
    target = target_mde if target_mde is not None else experiment.target_mde
    if budget is None or target is None:
        raise ParameterError("run_planned needs a budget and a target: budget_min (minutes) and target_mde "
                             "(percent), as arguments or on the Experiment")
    target_rel = float(target) / 100.0
    rid = run_id or new_run_id()
    for k in ("until",):
        if k in run_kwargs:
            raise ParameterError(f"run_planned sets {k}= itself (its sequential looks); leave it out")
    mets = tuple(metrics) if metrics is not None else design_metrics(
        experiment, tuple(dict.fromkeys(m for f in families for m in f.metrics)))
    pilot_exp = pilot_experiment(experiment, pilot_blocks, mets)
    pilot = run_experiment(pilot_exp, run_id=rid + PILOT_SUFFIX, **run_kwargs)
    pairs = list(dict.fromkeys((c.baseline, c.arm) for f in families for c in f.contrasts))
    own = components_from_run(pilot, metrics=mets, pairs=pairs)
    comps = own.components
    source = f"the pilot's {pilot_blocks} blocks (run `{pilot.run_id}`)"
    if components is not None:
        comps = pool_components(comps, components.components)
        source += f", pooled with {components.source}"
    costs = trial_costs(pilot)
    if not len(costs):
        raise ParameterError(f"the pilot `{pilot.run_id}` stored no trial: nothing to plan from")
    costs = costs.assign(arm=costs["condition"].astype(str) + "/" + costs["arm"].astype(str))
    loads = [c.load for c in experiment.conditions]
    pilot_loads = [c.load for c in pilot_exp.conditions]
    d0 = max((ld.duration_s or 0.0) for ld in pilot_loads) or float(costs["duration_s"].median())
    w0 = max(ld.warmup_s for ld in pilot_loads)
    warm = warmup_check(pilot_windows(pilot, quantiles=(0.5,)), pilot_warmup_s=w0, pilot_duration_s=d0,
                        target_mde=target_rel)
    # each row at alpha / its Holm family, and the analysis the run gets (its sequential looks):
    # the plan's MDEs are the verdicts' (stats.variance.predicted_mde)
    fams = row_families(families, requests)
    n_rows = max(fams.values(), default=1)

    def looks(n: int) -> Any:
        return analysis_design(families, n, sequential, full=full, requests=requests, target_mde=target_rel)

    # a load bounded by a request count keeps its length: only the blocks (and warm-up) are planned
    # (and no request floor applies: its requests per trial are fixed)
    by_count = any(ld.duration_s is None or ld.requests is not None or ld.stages for ld in loads)
    if by_count:  # no request floor: the components' rates would set one (the slowest arm's seconds)
        comps = [replace(c, rate_rps=math.nan) for c in comps]
    durations = ((float(costs["duration_s"].median()),) if by_count else None)
    # the budget counts wall time: what the pilot took from the start (builds, services' preparation,
    # its analysis) and, for the main run, what the pilot spent outside its trials again (its start and
    # the looks), which the cost model (trial timestamps) does not see
    elapsed, span = (time.monotonic() - started) / 60.0, _minutes(pilot)
    plan = plan_within_budget(comps, cost_model(costs), budget_min=float(budget), target_mde=target_rel,
                              pilot_minutes=max(elapsed, span), outside_minutes=max(0.0, elapsed - span),
                              pilot_blocks=pilot_blocks, source=source, warmup=warm,
                              n_comparisons=n_rows, max_blocks=max_blocks, metrics=mets,
                              rates=({} if by_count else _rates(pilot)), looks=looks, families=fams,
                              **({"durations": durations} if durations else {}))
    exp = planned_experiment(replace(experiment, budget_min=float(budget), target_mde=float(target)), plan)
    stopping = stopping_rule(families, exp.trials, sequential, full=full, requests=requests, prepare=prepare,
                             target_mde=target_rel, **dict(compare_kwargs or {}))
    record = PlanRecord.from_json({"study": pilot.study, "run_id": pilot.run_id, **plan.to_dict()})
    show(plan.forecast())  # before the main run starts: what the plan will take against the budget
    try:
        run = run_experiment(exp, run_id=rid, until=stopping.until, **run_kwargs)
    finally:
        # the design that ran, beside what was asked (run.json's notebook_parameters), also when
        # the main run was interrupted: read back as Run.plan (benchlib.store.records.plan.PlanRecord)
        from benchlib.store.runstore import RunStore, default_runs_root

        main = RunStore(Path(run_kwargs.get("out_dir") or default_runs_root()) / exp.study / rid)
        if (main.path / "run.json").is_file():
            main.update_run(pilot=record)
    run = replace(run, record=main.read_run() or run.record)
    return PlannedRun(run, pilot, plan, stopping, PilotComponents(tuple(comps), source, own.cost))


@dataclass(frozen=True, kw_only=True)
class StudyDesign:
    """What a study runs with one set of parameters: its study module's ``design(parameters)``
    builds it (:mod:`benchlib.analysis.studies.registry`), :func:`run_design` runs it, and a
    study module adds the facts its report needs to a subclass of its own (``Design``).

    Attributes
    ----------
    experiment: the arms, conditions and blocks (a budget's plan replaces the blocks and seconds).
    families: the study's questions, one Holm family each.
    sequential: the notebook's ``sequential`` (``auto``, ``yes``, ``no``); ``None`` for a study
        without it: the fixed design without a budget, sequential looks within one.
    requests: measured requests per trial by condition, for a load bounded by a request count
        (which quantiles its trials support: the looks' rows and the blocks Holm needs).
    prepare: what the analysis does to the per-trial summaries before comparing them (a
        metric in other units), at each look and in the report.
    cpus: where the server, the client and the dependencies run (``None``: the default plan).
    reasons: why arms did not run, shortened for verdict rows (``None``: as the runtime said).
    one_table: the study's one question is stored as ``derived/comparison.json`` and shown
        without a heading; otherwise each as ``derived/comparison-<key>.json`` under its title.
    group_headings: group -> its heading: each question's table is shown split by group,
        under these headings (``None``: one table per question).
    """

    experiment: Experiment
    families: tuple[Family, ...]
    sequential: str | None = None
    requests: Mapping[str, float] | None = None
    prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    cpus: CpuPlan | None = None
    reasons: Callable[[Mapping[str, str]], dict[str, str]] | None = None
    one_table: bool = False
    group_headings: Mapping[str, str] | None = None


@dataclass(frozen=True)
class DesignRun:
    """What :func:`run_design` returns: the run the analysis reads, its stopping (its ``design``
    for ``run_family(..., sequential=...)``, ``None`` when off) and, with a budget, the pilot and
    plan (:class:`PlannedRun`; ``None`` without)."""

    run: Run
    stopping: Stopping
    planned: PlannedRun | None = None


def side_by_side(experiment: Experiment, asked: str = "auto") -> Experiment:
    """``experiment`` with its arms side by side or one per trial, as a study's ``side_by_side``
    parameter asks (:data:`benchlib.analysis.params.SideBySide`): ``auto`` side by side
    (:class:`~benchlib.core.model.Interleave`'s defaults) unless
    :func:`~benchlib.analysis.interleaved.side_by_side_refusal` gives a reason (the design
    section says it: :func:`~benchlib.analysis.interleaved.design_kind_markdown`), ``yes`` side
    by side, ``no`` one arm per trial. An experiment that already says (``interleave`` set) keeps it.

    Raises
    ------
    ParameterError  ``yes`` for an experiment whose arms cannot run side by side (its reason),
        or a value other than auto, yes, no.
    """
    if asked not in ("auto", "yes", "no"):
        raise ParameterError(f"side_by_side {asked!r} is not valid; valid: auto, yes, no")
    if asked == "no":
        return replace(experiment, interleave=None)
    if experiment.interleave is not None:
        return experiment
    why = side_by_side_refusal(experiment)
    if why and asked == "yes":
        raise ParameterError(f"side_by_side yes: {why}; use side_by_side auto or no")
    return experiment if why else replace(experiment, interleave=Interleave())


def run_design(experiment: Experiment, families: Sequence[Family], *, sequential: str | bool = "auto",
               full: bool = False, requests: Mapping[str, float] | None = None,
               prepare: Callable[[Any], Any] | None = None, compare_kwargs: Mapping[str, Any] | None = None,
               budget_min: float | None = None, target_mde: float | None = None,
               components: PilotComponents | None = None, **run_kwargs: Any) -> DesignRun:
    """Run ``experiment`` for ``families``: without a budget (``budget_min`` ``None``, and none
    on the experiment) the fixed design with :func:`stopping_rule`'s looks, and after each block
    the questions decided so far on the progress line (:func:`decided_questions` at those looks,
    unless ``decided=`` is given); with one, :func:`run_planned` (a pilot, the plan within the
    budget for ``target_mde`` percent, futility at it). ``run_kwargs`` go to
    :func:`benchlib.run.runner.run_experiment`; its ``notebook_parameters`` (what the notebook
    was asked) are stored as :func:`~benchlib.analysis.params.as_asked` gives them, and with a
    budget the main run's run.json adds the design that ran (``pilot``:
    :attr:`benchlib.store.results.Run.plan`). A study notebook calls
    :func:`benchlib.analysis.notebook.run_study`, which builds these from its parameters."""
    from benchlib.analysis.params import as_asked
    from benchlib.analysis.questions import decided_questions
    from benchlib.run.runner import run_experiment

    if run_kwargs.get("notebook_parameters") is not None:
        # what the user asked, as `benchlib run -p` takes it again (no budget: budget_min 0)
        run_kwargs["notebook_parameters"] = as_asked(run_kwargs["notebook_parameters"])
    budget = budget_min if budget_min is not None else experiment.budget_min
    compare = dict(compare_kwargs or {})
    if budget is None:
        stopping = stopping_rule(families, experiment.trials, sequential, full=full, requests=requests, prepare=prepare,
                                 **compare)
        if "decided" not in run_kwargs:
            decided = decided_questions(families, sequential=stopping.design, **compare)
            run_kwargs["decided"] = decided if prepare is None else (lambda s: decided(prepare(s)))
        return DesignRun(run_experiment(experiment, until=stopping.until, **run_kwargs), stopping)
    run_kwargs.pop("decided", None)  # with a budget the plan's looks decide: no interim line
    planned = run_planned(experiment, families, budget_min=budget, target_mde=target_mde, components=components,
                          sequential="yes" if sequential in ("auto", True) else sequential, full=full,
                          requests=requests, prepare=prepare, compare_kwargs=compare_kwargs, **run_kwargs)
    return DesignRun(planned.run, planned.stopping, planned)
