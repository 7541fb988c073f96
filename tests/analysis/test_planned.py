"""A study planned by its pilot within a budget, through the runner's seams (issue 23, items
3-5): the pilot's blocks are stored as their own run and kept out of the analysis, the plan
sets the main run's design, a question that is settled (decided, or not decidable within the
budget) stops its arms, and the report counts blocks per arm."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from benchlib.analysis import Contrast, Family, params, run_family
from benchlib.analysis.planned import PILOT_SUFFIX, pilot_experiment, run_design, run_planned
from benchlib.analysis.stopping import blocks_per_arm
from benchlib.core.errors import ParameterError
from benchlib.core.model import Arm, Condition, Experiment, LoadSpec
from benchlib.run.testing import FakeLoad, FakeRuntime, Outcome, write_manifest
from benchlib.stats.verdict import VerdictKind


@pytest.fixture()
def services(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "services"
    d.mkdir()
    for name in ("a", "b", "c"):
        write_manifest(d, name)
    monkeypatch.setenv("BENCHLIB_SERVICES", str(d))
    return d


def _noisy(n: int) -> list[Outcome]:
    """c: every trial's latency far from the last (a spread no budget can resolve to 5%)."""
    return [Outcome(latency_ms=x, requests=2000) for x in ([1.0, 6.0, 2.5, 9.0, 1.5, 4.0] * 20)[:n]]


def test_pilot_plan_and_settled_arms_stop(services: Path, tmp_path: Path) -> None:
    exp = Experiment("t-planned", (Arm("a", "a"), Arm("b", "b"), Arm("c", "c")),
                     (Condition("main", LoadSpec(connections=2, duration_s=0.5, warmup_s=0.1)),),
                     between_trials_s=0.0, budget_min=2.0, target_mde=5.0)
    families = [Family("b", (Contrast("a", "b"),), ("p50_ms",), conditions=("main",)),
                Family("c", (Contrast("a", "c"),), ("p50_ms",), conditions=("main",))]
    rt = FakeRuntime()
    load = FakeLoad(rt, {"c": _noisy(200)}, default=Outcome(requests=2000))  # enough requests for window p50s
    got = run_planned(exp, families, runtime=rt, load=load, out_dir=tmp_path / "runs", progress=False,
                      run_id="p1", max_blocks=12)
    # the pilot: its own run, 3 blocks of every arm, no trial of it in the main run
    assert got.pilot.study == "t-planned" + PILOT_SUFFIX and got.pilot.run_id == "p1" + PILOT_SUFFIX
    assert sorted({t.block for t in got.pilot.trials}) == [0, 1, 2] and len(got.pilot.trials) == 9
    assert got.run.study == "t-planned" and not {t.path for t in got.run.trials} & {t.path for t in got.pilot.trials}
    # the plan set the main run's design and is recorded in its run.json
    exp_run = got.run.require_experiment()
    assert exp_run.trials == got.plan.trials and exp_run.conditions[0].load.duration_s == got.plan.duration_s
    assert exp_run.budget_min == 2.0 and exp_run.target_mde == 5.0
    # the shortest trial comes from the pilot's own request rates (per condition/arm)
    floor = got.plan.floor
    assert floor is not None and floor.metric == "p50_ms" and floor.arm.startswith("main/") and floor.rate_rps > 0
    assert got.plan.duration_s >= floor.duration_s
    assert got.run.store.read_run().pilot.pilot_run_id == "p1" + PILOT_SUFFIX
    # the budget counts wall time (issue 39 item 8): the pilot from its start, and what the main run will
    # spend outside its trials (the pilot's own time outside them: its start, its analysis), said before it runs
    plan = got.plan
    # (the fake trials take about no time and their stored times are whole seconds, so the two parts'
    # sizes depend on the clock; what the code decides is that both are counted)
    assert plan.pilot_minutes > 0 and 0 <= plan.outside_minutes <= plan.pilot_minutes
    assert plan.total_minutes == pytest.approx(plan.pilot_minutes + plan.minutes + plan.outside_minutes)
    assert plan.forecast().startswith(f"The plan will take about {plan.total_minutes:.1f} min: the pilot ")
    # the analysis: b equal to a is decided; c is not decidable within the budget
    design = got.stopping.design
    assert design is not None and design.target_mde == pytest.approx(0.05)
    kinds = {f.key: run_family(got.run.summaries(), f, sequential=design, shift=False).comparison.verdicts[0].kind
             for f in families}
    assert kinds["b"] in (VerdictKind.EQUIVALENT, VerdictKind.FASTER, VerdictKind.SLOWER)
    assert kinds["c"] is VerdictKind.UNDECIDABLE
    # settled questions stopped their arms before the planned maximum; the report counts blocks per arm
    per = blocks_per_arm(got.run).set_index("arm")
    assert (per["blocks_planned"] == got.plan.trials).all() and per["stopped"].all()
    # b's question settles at the first look; c's row, whose blocks may still show an effect worth deciding
    # (futility on conditional power, issue 39 item 4), at the first look or a later one
    assert per.loc["b", "blocks_run"] == design.looks[0] < got.plan.trials
    assert set(per["blocks_run"]) <= set(design.looks) and (per["blocks_run"] < got.plan.trials).all()
    text = got.markdown([run_family(got.run.summaries(), f, sequential=design, shift=False) for f in families])
    c_blocks = per.loc["c", "blocks_run"]
    assert "the pilot ran 3 blocks" in text and f"main/c {c_blocks} of {got.plan.trials} (stopped)" in text
    assert "MDE achieved" in text and "> target 5.0%" in text
    assert "blocks per arm" in got.stopping.markdown(got.run)
    from benchlib.analysis import design_section

    answers = [run_family(got.run.summaries(), f, sequential=design, shift=False) for f in families]
    section = design_section(got.run, answers, stopping=got.stopping, planned=got)
    assert section.startswith("**Pilot and plan**") and "predicted MDE" in section
    # the design table rests on the components the plan was made on
    assert f"(between trials vs within a trial) from the pilot's 3 blocks (run `p1{PILOT_SUFFIX}`)" in section


def test_without_a_budget_run_design_is_the_fixed_design_with_its_looks(services: Path, tmp_path: Path) -> None:
    exp = Experiment("t-fixed", (Arm("a", "a"), Arm("b", "b")), (Condition("main", LoadSpec(duration_s=0.5)),),
                     trials=2, between_trials_s=0.0)
    rt = FakeRuntime()
    done = run_design(exp, [Family("b", (Contrast("a", "b"),), ("p50_ms",), conditions=("main",))], sequential="no",
                      runtime=rt, load=FakeLoad(rt), out_dir=tmp_path / "runs", progress=False)
    assert done.planned is None and not done.stopping.on and len(done.run.trials) == 4
    assert params.budget(0, 0) == (None, None) and params.budget(20, 5) == (20.0, 5.0)
    with pytest.raises(ParameterError, match="target_mde must be a positive number"):
        params.budget(20, 0)


def test_bad_pilot_or_missing_budget_is_one_clear_error(services: Path) -> None:
    exp = Experiment("t-bad", (Arm("a", "a"), Arm("b", "b")), (Condition("main", LoadSpec(duration_s=0.5)),))
    with pytest.raises(ParameterError, match="pilot_blocks must be at least 3"):
        pilot_experiment(exp, 2)
    with pytest.raises(ParameterError, match="needs a budget and a target"):
        run_planned(exp, [Family("b", (Contrast("a", "b"),), ("p50_ms",))])
    with pytest.raises(ParameterError, match="budget_min must be a positive number"):
        Experiment("t-bad", exp.arms, exp.conditions, budget_min=-1)


def test_a_pilot_trial_too_short_to_split_for_its_quantiles_is_lengthened() -> None:
    """Study 01's default: 100 requests per trial (100/s for 1 s) give a p50 per trial but none per
    half, so the pilot had no within-trial variance and the plan failed; its pilot now measures
    long enough for two windows of the p50's 100 requests (x the request floor's safety)."""
    from benchlib.stats.planning.budget import request_floor

    open_short = Condition("hello", LoadSpec(model="open", rate_rps=100.0, duration_s=1.0, warmup_s=0.5))
    open_long = Condition("long", LoadSpec(model="open", rate_rps=100.0, duration_s=60.0))
    closed = Condition("closed", LoadSpec(model="closed", connections=4, duration_s=0.5))
    exp = Experiment("t-pilot", (Arm("a", "a"), Arm("b", "b")), (open_short, open_long, closed))
    pilot = pilot_experiment(exp, 3, ("p50_ms",))
    floor = request_floor(("p50_ms",), {"hello": 100.0})
    assert floor is not None and floor.requests == 100
    hello, long_, closed_ = pilot.conditions
    assert hello.load.duration_s == pytest.approx(2 * floor.duration_s) and hello.load.duration_s >= 2.0
    assert hello.load.warmup_s == 0.5 and hello.load.rate_rps == 100.0
    assert long_.load.duration_s == 60.0 and closed_.load.duration_s == 0.5  # long enough / no known rate
    assert pilot_experiment(exp, 3).conditions[0].load.duration_s == 1.0  # no quantile metric: as it was
    assert pilot.study == "t-pilot" + PILOT_SUFFIX and pilot.trials == 3
    # what a budget plans for: the quantiles 100 requests per trial can report (p50), not p90/p99
    from benchlib.analysis.planned import design_metrics

    assert design_metrics(exp, ("throughput_rps", "p50_ms", "p90_ms", "p99_ms")) == ("throughput_rps", "p50_ms")
    assert design_metrics(Experiment("t", exp.arms, (closed,)), ("p99_ms",)) == ("p99_ms",)
    counted = Condition("c20", LoadSpec(model="closed", connections=20, requests=600, duration_s=None))
    assert design_metrics(Experiment("t", exp.arms, (counted,)), ("p50_ms", "p90_ms", "p99_ms")) == (
        "p50_ms", "p90_ms")  # study 03's 600 requests per trial: no p99


def test_the_plan_sets_every_time_bounded_load_and_its_peer_tools_seconds() -> None:
    from benchlib.analysis.planned import planned_experiment
    from benchlib.core.model import CrossCheck
    from benchlib.stats.planning.budget import BudgetPlan

    plan = BudgetPlan(budget_min=5.0, target_mde=0.05, pilot_blocks=3, pilot_minutes=1.0, source="pilot",
                      trials=14, duration_s=2.6, warmup_s=0.7, minutes=3.5, mde={}, reaches=True, plan=None,
                      warmup=None)
    wrk = CrossCheck("wrk", (("threads", 2), ("connections", 100), ("duration_s", 2)), arms=("a",))
    ghz = CrossCheck("ghz", (("concurrency", 1), ("duration_s", 0.8)), arms=("a",))
    timed = Condition("closed", LoadSpec(model="closed", connections=4, duration_s=1.5, warmup_s=0.5), cross_check=wrk)
    both = Condition("c1", LoadSpec(model="closed", connections=1, duration_s=0.8, warmup_s=0.3), cross_check=(ghz,))
    counted = Condition("n", LoadSpec(model="closed", connections=4, requests=600, warmup_s=0.25),
                        cross_check=CrossCheck("ab", (("connections", 4), ("requests", 600))))
    exp = Experiment(study="s", arms=(Arm("a", "svc"), Arm("b", "svc")), conditions=(timed, both, counted), trials=8)
    got = {c.name: c for c in planned_experiment(exp, plan).conditions}
    assert planned_experiment(exp, plan).trials == 14
    assert (got["closed"].load.duration_s, got["closed"].load.warmup_s) == (2.6, 0.7)
    assert dict(got["closed"].cross_check.options)["duration_s"] == 3  # wrk: whole seconds
    assert dict(got["c1"].cross_check[0].options)["duration_s"] == 2.6
    assert got["n"] == counted  # a request count keeps its load and its peer's count


def test_a_stored_budget_run_says_what_was_asked_and_the_design_that_ran(services: Path, tmp_path: Path) -> None:
    """Planning gaps, items 1 and 2. The design section predicts the MDE the plan was made on
    (the same components, trial length, blocks, looks and families: ``predicted_mde``). The
    stored run says both what the notebook was asked (``notebook_parameters``, as
    ``benchlib run -p`` takes them again) and the design that ran (``Run.plan``: the pilot,
    blocks, measured and warm-up seconds; ``Run.experiment``), and the report's commands
    measure it again. Parent commit: the design section predicted the sequential test's MDE on
    the pilot's point estimates, the plan the fixed test's on the upper bound; the stored run
    had no typed plan and its report no design that ran; a run without a budget stored
    ``budget_min=None``, so its "measure again" command (``-p budget_min None``) was refused."""
    from benchlib.analysis import design_section
    from benchlib.analysis.pilot import design_table
    from benchlib.analysis.run_info import parameters_markdown
    from benchlib.stats.planning.design_plan import mde_text
    from benchlib.store.records.plan import PlanRecord
    from benchlib.store.results import open_run

    exp = Experiment("t-asked", (Arm("a", "a"), Arm("b", "b"), Arm("c", "c")),
                     (Condition("main", LoadSpec(connections=2, duration_s=0.5, warmup_s=0.1)),), trials=10,
                     between_trials_s=0.0)
    families = [Family("q", (Contrast("a", "b"), Contrast("a", "c")), ("p50_ms",), conditions=("main",))]
    asked = {"trials": 10, "duration_s": 0.5, "warmup_s": 0.1, "seed": 1, "budget_min": 2.0, "target_mde": 5.0}
    rt = FakeRuntime()
    load = FakeLoad(rt, {"c": _noisy(200)}, default=Outcome(requests=2000))
    done = run_design(exp, families, budget_min=2.0, target_mde=5.0, runtime=rt, load=load,
                      out_dir=tmp_path / "runs", progress=False, run_id="q1", notebook_parameters=asked)
    planned = done.planned
    assert planned is not None and planned.components is not None
    plan = planned.plan
    # item 1: the design table predicts, per row at its family's level, the MDE the plan was made on
    design = done.stopping.design
    answers = [run_family(done.run.summaries(), f, sequential=design, shift=False) for f in families]
    row = design_table(done.run, answers, components=planned.components, sequential=design).iloc[0]
    assert row["predicted_mde_pct"] == pytest.approx(100 * plan.mde["p50_ms"], rel=1e-9)
    assert plan.looks == design.looks and row["duration_s"] == plan.duration_s
    section = design_section(done.run, answers, stopping=done.stopping, planned=planned)
    assert section.count(mde_text(plan.mde["p50_ms"])) >= 2  # the plan's paragraph and the design table
    # item 2: read back from disk, the run says what was asked and the design that ran
    run = open_run(tmp_path / "runs" / "t-asked" / "q1")
    assert dict(run.notebook_parameters) == asked
    ran = run.require_experiment()
    assert (ran.trials, ran.conditions[0].load.duration_s, ran.conditions[0].load.warmup_s) == (
        plan.trials, plan.duration_s, plan.warmup_s)
    rec = run.plan
    assert isinstance(rec, PlanRecord) and (rec.trials, rec.duration_s, rec.warmup_s) == (
        plan.trials, plan.duration_s, plan.warmup_s)
    assert (rec.pilot_study, rec.pilot_run_id, rec.pilot_blocks) == ("t-asked" + PILOT_SUFFIX, "q1" + PILOT_SUFFIX, 3)
    assert rec.looks == design.looks and rec.budget_min == 2.0 and rec.target_mde == pytest.approx(0.05)
    assert open_run(tmp_path / "runs" / f"t-asked{PILOT_SUFFIX}" / f"q1{PILOT_SUFFIX}").plan is None
    text = parameters_markdown(run)
    assert f"- design that ran: {rec.describe()}" in text  # run.json keeps the parameters sorted by name
    assert ("measure it again (a new run id, the same parameters: a new pilot plans the design again): `benchlib "
            "run t-asked -p budget_min 2.0 -p duration_s 0.5 -p seed 1 -p target_mde 5.0 -p trials 10 -p warmup_s 0.1`"
            ) in text
    assert (f"without a pilot: `benchlib run t-asked -p budget_min 0 -p duration_s {plan.duration_s} -p seed 1 "
            f"-p trials {plan.trials} -p warmup_s {plan.warmup_s}`") in text
    # without a budget the notebook passes params.budget's None: stored as the notebook's 0
    fixed = run_design(replace(exp, study="t-nobudget", trials=2), families, sequential="no", runtime=rt,
                       load=FakeLoad(rt), out_dir=tmp_path / "runs", progress=False,
                       notebook_parameters={"trials": 2, "budget_min": None, "target_mde": None})
    assert dict(fixed.run.notebook_parameters) == {"trials": 2, "budget_min": 0.0} and fixed.run.plan is None
    assert "`benchlib run t-nobudget -p budget_min 0.0 -p trials 2`" in parameters_markdown(fixed.run)
    assert "design that ran" not in parameters_markdown(fixed.run)
