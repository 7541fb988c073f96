"""Planning a design: how many trials, blocks and measured seconds a target MDE needs (pure).

The one home of planning; each module answers one question, from what is known:

* :mod:`~benchlib.stats.planning.sample_size`: at a known spread, the trials per arm or blocks
  for a target (:func:`plan`, the fixed test; :func:`plan_sequential`, the group-sequential
  test);
* :mod:`~benchlib.stats.planning.cost`: what a trial and a block cost in wall time, from stored
  timestamps (:func:`cost_model`);
* :mod:`~benchlib.stats.planning.design_plan`: from a pilot's variance components
  (:mod:`benchlib.stats.variance`) and the cost, blocks x measured duration at the least wall
  time (:func:`plan_design`), and the MDE a design is predicted to reach
  (:func:`predicted_mde`, the one every planner and the report's design section use);
* :mod:`~benchlib.stats.planning.budget`: a study within a time budget from its pilot
  (:func:`plan_within_budget`: blocks, measured seconds, warm-up, the shortest trial the
  metrics allow).

They read the power curves of :mod:`benchlib.stats.power` and the looks of
:mod:`benchlib.stats.sequential`; the tests a run's verdicts use (``compare``, ``sequential``)
import nothing from here.
"""

from __future__ import annotations

from benchlib.stats.planning.budget import BudgetPlan, plan_within_budget
from benchlib.stats.planning.cost import CostModel, cost_model
from benchlib.stats.planning.design_plan import DesignPlan, plan_design, predicted_mde
from benchlib.stats.planning.sample_size import SequentialPlan, TrialPlan, plan, plan_sequential

__all__ = [
    "BudgetPlan",
    "CostModel",
    "DesignPlan",
    "SequentialPlan",
    "TrialPlan",
    "cost_model",
    "plan",
    "plan_design",
    "plan_sequential",
    "plan_within_budget",
    "predicted_mde",
]
