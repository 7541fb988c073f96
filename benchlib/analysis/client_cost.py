"""What benchlib's own client costs per call, and how much of a latency ratio it could explain.

With one caller and closed-loop calls, the client's work for a call (building and sending
the request, reading and checking the answer, recording the row) lies on every call's
latency: each call is due when the previous one completed. When two arms are reached over
different client paths (gRPC over HTTP/2 and JSON over HTTP/1.1, say), the client may cost
different amounts on each, and part of their latency ratio is then the client's.

A study measures it with *cost arms*: the same client path and the same request and
response bytes, against a server that answers from memory (no service work), run in the
same randomized blocks as the arms they stand beside. Per trial:

* the client's **CPU time per call** (µs): its workers' CPU time over their traffic
  (warm-up and measured phase; idle spinning excluded) over the calls they made;
* the **latency against the canned server** (the trial's median call, µs): client,
  kernel loopback and the canned server's minimal answer: everything a call costs
  outside a service's own work.

:func:`ratio_without_client` is the arithmetic (pure): a ratio of two arms' latencies with
the client's CPU per call of each path taken out, and with the whole canned path taken out
(a bound: the most that everything outside the services could explain), and the client's
share of the latency difference. :func:`client_cost_table` and :func:`ratio_table` compute
them per trial and per block, with exact signed-rank (Walsh) intervals across trials or
blocks, as the study's verdicts are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchlib.stats.exact import walsh_interval
from benchlib.store.records import TrialRecord
from benchlib.store.results import Run

__all__ = ["ClientPair", "RatioWithoutClient", "client_cost_table", "client_cpu_per_call_us", "client_trials",
           "ratio_table", "ratio_without_client"]


def client_cpu_per_call_us(trial: TrialRecord) -> float:
    """The client's CPU time per call in one trial, µs: its workers' CPU time from their first
    request to their last row (idle spinning of the open model excluded) over the rows they
    recorded (warm-up and measured calls); NaN without worker statistics."""
    load = trial.load
    if load is None or not load.worker_stats:
        return math.nan
    cpu = sum(w.traffic_cpu_s - w.spin_ns / 1e9 for w in load.worker_stats)
    calls = sum(w.records for w in load.worker_stats)
    return cpu / calls * 1e6 if calls > 0 and cpu == cpu else math.nan


def client_trials(run: Run, summaries: Any) -> Any:
    """One row per valid trial whose median is reported: ``condition``, ``arm``, ``block``,
    ``p50_us`` (the trial's median call, from the summaries; a trial whose summary leaves it
    out, NaN, is left out too) and ``client_us`` (:func:`client_cpu_per_call_us`)."""
    import pandas as pd

    p50 = {(s.condition, s.arm, int(s.block)): float(s.p50_ms) * 1e3
           for s in summaries.itertuples() if bool(s.valid) and math.isfinite(float(s.p50_ms))}
    rows = [{"condition": t.condition, "arm": t.arm, "block": t.block,
             "p50_us": p50[(t.condition, t.arm, t.block)], "client_us": client_cpu_per_call_us(t)}
            for t in run.trials if (t.condition, t.arm, t.block) in p50]
    return pd.DataFrame(rows, columns=["condition", "arm", "block", "p50_us", "client_us"])


def _hl(values: Any) -> tuple[float, float, float]:
    """Hodges-Lehmann estimate and exact 95% signed-rank interval (NaN when empty)."""
    v = np.asarray([x for x in values if x == x], dtype=float)
    if not v.size:
        return math.nan, math.nan, math.nan
    r = walsh_interval(v)
    return r.estimate, r.lo, r.hi


def _iv(lo: float, hi: float, digits: int = 1) -> str:
    return "–" if lo != lo else f"[{lo:.{digits}f}, {hi:.{digits}f}]" if math.isfinite(lo) and math.isfinite(hi) \
        else "too few trials"


def client_cost_table(trials: Any, paths: Mapping[str, str]) -> Any:
    """Per condition and cost arm (``paths``: arm -> its path in words, e.g. ``"gRPC, small"``):
    the trials, the client's CPU time per call and the latency against the canned server
    (µs; Hodges-Lehmann estimate over trials and its exact 95% interval)."""
    import pandas as pd

    out = []
    for (cond, arm), g in trials[trials["arm"].isin(list(paths))].groupby(["condition", "arm"], sort=False):
        c, clo, chi = _hl(g["client_us"])
        k, klo, khi = _hl(g["p50_us"])
        out.append({"condition": cond, "path": paths[str(arm)], "arm": arm, "trials": len(g),
                    "client CPU per call (µs)": round(c, 1), "its 95% interval": _iv(clo, chi),
                    "latency against the canned server (µs)": round(k, 1), "its 95% interval ": _iv(klo, khi)})
    return pd.DataFrame(out)


@dataclass(frozen=True)
class RatioWithoutClient:
    """A latency ratio ``a / b`` with what the client could explain of it (one block's values).

    Attributes
    ----------
    ratio: ``l_a / l_b`` as measured.
    without_client: ``(l_a - c_a) / (l_b - c_b)``: each path's client CPU per call taken out
        (NaN when a latency is not above its cost).
    without_path: ``(l_a - k_a) / (l_b - k_b)``: each path's whole latency against the
        canned server taken out (client, kernel, a minimal server): the bound, the most
        that everything outside the services could explain (NaN as above, or unmeasured).
    client_share: ``(c_a - c_b) / (l_a - l_b)``: the share of the latency difference that is
        the client's cost difference (NaN when the latencies are equal).
    """

    ratio: float
    without_client: float
    without_path: float
    client_share: float


def _net_ratio(l_a: float, l_b: float, x_a: float, x_b: float) -> float:
    a, b = l_a - x_a, l_b - x_b
    return a / b if a > 0 and b > 0 else math.nan


def ratio_without_client(l_a: float, l_b: float, c_a: float, c_b: float, k_a: float = math.nan,
                         k_b: float = math.nan) -> RatioWithoutClient:
    """The ratio ``l_a / l_b`` of two latencies (µs) with the client's CPU per call of each
    path (``c_a``, ``c_b``, µs) taken out, and with each path's latency against the canned
    server (``k_a``, ``k_b``) taken out; see :class:`RatioWithoutClient`.

    >>> r = ratio_without_client(100.0, 200.0, 20.0, 40.0)
    >>> r.ratio, r.without_client, r.client_share
    (0.5, 0.5, 0.2)
    """
    for name, v in (("l_a", l_a), ("l_b", l_b)):
        if not v > 0:
            raise ValueError(f"{name} must be a latency above 0 µs, got {v!r}")
    diff = l_a - l_b
    return RatioWithoutClient(ratio=l_a / l_b, without_client=_net_ratio(l_a, l_b, c_a, c_b),
                              without_path=_net_ratio(l_a, l_b, k_a, k_b),
                              client_share=(c_a - c_b) / diff if diff != 0 else math.nan)


@dataclass(frozen=True)
class ClientPair:
    """Two arms compared as ``a / b`` (``group`` names the row) and the cost arms of their paths."""

    group: str
    a: str
    b: str
    cost_a: str
    cost_b: str


def _ratio_iv(values: Sequence[float]) -> tuple[float, float, float]:
    """HL estimate and interval of ratios, on the log scale (as the verdicts' ratios)."""
    est, lo, hi = _hl([math.log(v) for v in values if v == v and v > 0])
    return tuple(math.exp(x) if x == x else math.nan for x in (est, lo, hi))  # type: ignore[return-value]


def ratio_table(trials: Any, pairs: Sequence[ClientPair], condition: str, *, label: str = "a / b") -> Any:
    """Per pair: :func:`ratio_without_client` in every block where the four arms have a valid
    trial of ``condition`` with its median reported, summarized over those blocks (Hodges-Lehmann estimate of the log
    ratios and its exact 95% interval; the client's share on its own scale). ``label`` names
    the ratio (``"gRPC / JSON"``)."""
    import pandas as pd

    part = trials[trials["condition"] == condition].set_index(["arm", "block"])
    out = []
    for p in pairs:
        per: list[RatioWithoutClient] = []
        for b in sorted({int(x) for x in trials["block"]}):
            keys = [(arm, b) for arm in (p.a, p.b, p.cost_a, p.cost_b)]
            if not all(k in part.index for k in keys):
                continue
            la, lb, ca, cb = (part.loc[k] for k in keys)
            if not (la["p50_us"] > 0 and lb["p50_us"] > 0):
                continue
            per.append(ratio_without_client(la["p50_us"], lb["p50_us"], ca["client_us"], cb["client_us"],
                                            ca["p50_us"], cb["p50_us"]))
        row: dict[str, Any] = {"group": p.group, "blocks": len(per)}
        for name, attr in ((label, "ratio"), (f"{label}, client CPU taken out", "without_client"),
                           (f"{label}, canned path taken out (bound)", "without_path")):
            est, lo, hi = _ratio_iv([getattr(r, attr) for r in per])
            row[name] = round(est, 3)
            row[f"{name}: 95% interval"] = _iv(lo, hi, 3)
        est, lo, hi = _hl([r.client_share for r in per])
        row["client's share of the latency difference"] = round(est, 3)
        row["its 95% interval"] = _iv(lo, hi, 3)
        out.append(row)
    return pd.DataFrame(out)
