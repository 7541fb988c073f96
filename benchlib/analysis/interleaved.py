"""The design section's paragraph on the design that ran: arms side by side, or one per trial.

:func:`design_kind_markdown` says, from the stored trials: whether each condition measured its
arms side by side (``Experiment(interleave=...)``: the slices, the gap, the arms per trial) or
one arm per trial, why a condition moved to the sequential design during the run (run.json's
``design_changes``), each arm's carry-over (its service's CPU in the other arms' slices beyond
its idle rate per second of its own slices, % of the service CPU: median and largest over its
trials), and the per-block
SD of the log ratio against the baseline (the spread the paired tests see: ``docs/statistics.md``,
"Arms side by side").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from benchlib.core.errors import BenchlibError
from benchlib.core.model import Experiment
from benchlib.runtime.manifest import get_manifest
from benchlib.store.results import Run

__all__ = ["block_spread", "design_kind_markdown", "side_by_side_refusal"]

#: the metrics whose per-block spread the paragraph gives
SPREAD_METRICS: tuple[str, ...] = ("throughput_rps", "p50_ms")


def block_spread(summaries: pd.DataFrame, baseline: str, metric: str, condition: str) -> float:
    """The median over arms of the SD over blocks of ``log(arm / baseline)`` for ``metric`` in
    ``condition`` (valid trials of complete pairs; NaN with fewer than 3 blocks)."""
    d = summaries[(summaries["condition"] == condition) & summaries["valid"].astype(bool)]
    if metric not in d or baseline not in set(d["arm"]):
        return math.nan
    p = d.pivot_table(index="block", columns="arm", values=metric)
    if baseline not in p:
        return math.nan
    sds = []
    for arm in p.columns:
        if arm == baseline:
            continue
        both = p[[arm, baseline]].dropna()
        both = both[(both > 0).all(axis=1)]
        if len(both) >= 3:
            sds.append(float(np.log(both[arm] / both[baseline]).std(ddof=1)))
    return float(np.median(sds)) if sds else math.nan


def side_by_side_refusal(experiment: Experiment) -> str:
    """Why ``experiment``'s arms cannot run side by side, in words (``""``: they can): the
    experiment's own reasons (:meth:`~benchlib.core.model.Experiment.side_by_side_refusal`), or
    an arm whose endpoint speaks HTTP/2 or gRPC (its service's manifest says: the sliced
    engine interleaves HTTP/1.1 only). A service whose manifest cannot be read is left to the
    run to report."""
    why = experiment.side_by_side_refusal()
    if why:
        return why
    for c in experiment.conditions:
        for a in experiment.arms:
            try:
                protocol = get_manifest(a.service).resolve(a.variant).endpoint(c.endpoint or a.endpoint).protocol
            except BenchlibError:
                continue
            if protocol != "http1":
                return (f"condition {c.name!r}: arm {a.name!r} speaks {protocol}, and an interleaved design runs "
                        "HTTP/1.1 loads only")
    return ""


def _pct(x: float) -> str:
    return "–" if not math.isfinite(x) else f"{x:.1f}%"


def design_kind_markdown(run: Run, summaries: pd.DataFrame | None = None,
                         metrics: Sequence[str] = SPREAD_METRICS) -> str:
    """The paragraph (Markdown; "" for a run without trials)."""
    if not run.trials:
        return ""
    exp = run.experiment
    il = exp.interleave if exp is not None else None
    baseline = exp.baseline_arm if exp is not None else None
    changes = {c.condition: c for c in run.record.design_changes}
    s = summaries if summaries is not None else run.summaries()
    parts = []
    for cond in dict.fromkeys(t.condition for t in run.trials):
        trials = [t for t in run.trials if t.condition == cond]
        side = [t for t in trials if t.interleave is not None]
        if side:
            first = side[0].interleave
            assert first is not None
            carry: dict[str, list[float]] = {}
            for t in side:
                if t.interleave is not None and t.interleave.cpu is not None:
                    carry.setdefault(t.arm, []).append(t.interleave.carry_cpu_pct)
            worst = max(carry, key=lambda a: max(carry[a]), default=None)
            text = (f"`{cond}`: **arms side by side**, {len(first.arms)} arms per trial in slices of "
                    f"{first.slice_ms:g} ms with a {first.gap_ms:g} ms gap (every ordered pair of arms adjacent "
                    f"once per cycle, a random phase per trial), {first.measured_s:.2f} s measured per arm")
            if carry:
                med = float(np.median([x for v in carry.values() for x in v]))
                text += (f"; carry-over (share of the service CPU) median {_pct(med)}, largest "
                         f"{_pct(max(carry[worst]))} ({worst})"
                         if worst is not None else "")
            elif il is not None:
                text += "; carry-over not measured (no instance's CPU could be read)"
        else:
            text = f"`{cond}`: one arm per trial (the sequential design)"
            why = side_by_side_refusal(exp) if exp is not None and il is None else ""
            if why and cond not in changes:
                text += f", as its arms cannot run side by side ({why})"
        if cond in changes:
            text += f"; {changes[cond].line}"
        if baseline is not None and len(s):
            spread = [f"{m} {block_spread(s, baseline, m, cond):.3f}" for m in metrics
                      if math.isfinite(block_spread(s, baseline, m, cond))]
            if spread:
                text += f"; per-block SD of the log ratio against {baseline} (median over arms): " + ", ".join(spread)
        parts.append(text + ".")
    head = "**Design that ran.** " if len(parts) == 1 else "**Design that ran**, per condition:\n\n- "
    return head + ("\n- ".join(parts))
