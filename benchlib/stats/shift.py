"""The shift function: where in the distribution an arm differs from the baseline (pure).

For each decile (10%, 20%, ... 90%), every trial contributes its own decile (``d1_ms`` ...
``d9_ms`` from :func:`~benchlib.stats.summarize_trial`); the arms' per-trial deciles are
compared exactly as a metric is (Hodges-Lehmann ratio of logs with the exact Moses or Walsh
interval), with simultaneous (Bonferroni) intervals over the nine deciles and Holm-adjusted
p-values (Doksum 1974; Wilcox 1995; Rousselet, Pernet & Wilcox 2017, here at the trial
level). A uniform slowdown shows as a flat line above 1; a tail-only change as a line that
rises at the right.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from benchlib.core.errors import ParameterError
from benchlib.stats.estimate import estimate
from benchlib.stats.multiplicity import adjust
from benchlib.stats.pairing import pair_design

__all__ = ["DECILE_COLUMNS", "shift_function", "shift_function_table"]

DECILE_COLUMNS: tuple[str, ...] = tuple(f"d{i}_ms" for i in range(1, 10))


def _pair_shift(a: pd.DataFrame, b: pd.DataFrame, paired: bool, alpha: float, confidence: float) -> list[dict[str, Any]]:
    sim_conf = 1.0 - (1.0 - confidence) / len(DECILE_COLUMNS)
    out = []
    for k, col in enumerate(DECILE_COLUMNS, start=1):
        xa = a[col].to_numpy(dtype=float)
        xb = b[col].to_numpy(dtype=float)
        if paired:
            ok = np.isfinite(xa) & np.isfinite(xb) & (xa > 0) & (xb > 0)
            xa, xb = xa[ok], xb[ok]
        else:
            xa = xa[np.isfinite(xa) & (xa > 0)]
            xb = xb[np.isfinite(xb) & (xb > 0)]
        rec: dict[str, Any] = {
            "decile": round(k / 10, 1),
            "centre_baseline": float(np.median(xa)) if xa.size else math.nan,
            "centre_arm": float(np.median(xb)) if xb.size else math.nan,
        }
        if xa.size >= 1 and xb.size >= 1 and xa.size + xb.size >= 3 and (not paired or xa.size >= 2):
            e = estimate(np.log(xa), np.log(xb), paired=paired, method="rank", confidence=sim_conf, alpha=alpha)
            rec.update(ratio=math.exp(e.effect), ci_lo=math.exp(e.lo), ci_hi=math.exp(e.hi), p_raw=e.pvalue)
        else:
            rec.update(ratio=math.nan, ci_lo=math.nan, ci_hi=math.nan, p_raw=math.nan)
        out.append(rec)
    padj = adjust(np.array([r["p_raw"] for r in out]), "holm")
    for r, p in zip(out, padj, strict=True):
        r["p_holm"] = float(p)
        r["significant"] = bool(np.isfinite(p) and p < alpha)
        r["simultaneous_confidence"] = sim_conf
    return out


def shift_function_table(
    data: pd.DataFrame,
    *,
    baseline: str,
    by: Sequence[str],
    design: str,
    alpha: float,
    confidence: float,
    pairs: Sequence[Any],
) -> pd.DataFrame:
    """Shift functions for the pairs of a comparison (used by :func:`compare`)."""
    records = []
    for p in pairs:
        g = data
        for k, v in p.labels.items():
            g = g[g[k] == v]
        pr = pair_design(g, p.baseline, p.arm, "paired" if p.paired else "unpaired")
        for rec in _pair_shift(pr.a, pr.b, pr.paired, alpha, confidence):
            records.append({**p.labels, "arm": p.arm, "baseline": p.baseline,
                            "design": "paired" if pr.paired else "unpaired", **rec})
    return pd.DataFrame.from_records(records)


def shift_function(
    summaries: pd.DataFrame,
    *,
    baseline: str,
    arm: str,
    design: str = "auto",
    alpha: float = 0.05,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """The shift function of ``arm`` against ``baseline`` from per-trial deciles.

    Parameters
    ----------
    summaries:
        Per-trial summaries of one condition with ``arm``, the decile columns ``d1_ms`` ...
        ``d9_ms`` and (for a paired design) ``block``.
    baseline, arm:
        The two arms.
    design:
        ``"auto"``, ``"paired"`` or ``"unpaired"``.
    alpha, confidence:
        Holm level over the nine deciles; family confidence of the simultaneous intervals.

    Returns
    -------
    pandas.DataFrame
        One row per decile: ``decile``, ``centre_baseline``, ``centre_arm`` (medians of
        per-trial deciles, ms), ``ratio``, ``ci_lo``, ``ci_hi``, ``p_raw``, ``p_holm``,
        ``significant``.
    """
    missing = [c for c in (*DECILE_COLUMNS, "arm") if c not in summaries.columns]
    if missing:
        raise ParameterError(f"shift_function needs the columns {missing} (summarize_trial(..., deciles=True))")
    data = summaries
    if "valid" in data.columns:
        data = data[data["valid"].astype(bool)]
    data = data.assign(arm=data["arm"].astype(str))
    for name in (baseline, arm):
        if name not in set(data["arm"]):
            raise ParameterError(f"arm {name!r} has no valid trials; arms: {sorted(set(data['arm']))}")
    pr = pair_design(data, str(baseline), str(arm), design)
    recs = _pair_shift(pr.a, pr.b, pr.paired, alpha, confidence)
    return pd.DataFrame.from_records(recs)
