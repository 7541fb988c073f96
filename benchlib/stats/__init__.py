"""benchlib.stats: trial-level statistics for benchmark comparisons (pure core).

Every inference is across trials (independent runs), never across pooled requests:

* :func:`summarize_trial` reduces one trial's requests to its summary (quantiles, mean,
  error rate, throughput, diagnostics);
* :func:`compare` compares arms with a baseline across trials: ratio = exp(Hodges-Lehmann
  shift of log per-trial summaries) with an exact interval, exact rank p-values that agree
  with it, Holm over the family, a practical margin and verdicts;
* :func:`plan` says how many trials per arm a target minimum detectable effect needs;
* :func:`shift_function` shows where in the distribution two arms differ;
* :class:`Verdict` (``Comparison.verdicts``) is each row's conclusion as data, decided by
  :func:`benchlib.stats.verdict.decide` and worded by :func:`render`.

Imports nothing from ``benchlib.runtime``, ``benchlib.loadgen`` or ``benchlib.store.runstore``.
See ``docs/statistics.md``.
"""

from __future__ import annotations

from benchlib.stats.compare import DEFAULT_METRICS, DESIGNS, compare
from benchlib.stats.comparison import Comparison
from benchlib.stats.multiplicity import CORRECTIONS, adjust
from benchlib.stats.planning.sample_size import TrialPlan, plan
from benchlib.stats.power import METHODS, mde, min_trials, power_t
from benchlib.stats.shift import shift_function
from benchlib.stats.summary import (
    QUANTILES,
    quantile_column,
    requests_frame,
    required_requests,
    summarize_trial,
    summarize_trials,
)
from benchlib.stats.verdict import Verdict, VerdictKind, render

__all__ = [
    "CORRECTIONS",
    "Comparison",
    "DEFAULT_METRICS",
    "DESIGNS",
    "METHODS",
    "QUANTILES",
    "TrialPlan",
    "Verdict",
    "VerdictKind",
    "adjust",
    "compare",
    "mde",
    "min_trials",
    "plan",
    "power_t",
    "quantile_column",
    "render",
    "requests_frame",
    "required_requests",
    "shift_function",
    "summarize_trial",
    "summarize_trials",
]
