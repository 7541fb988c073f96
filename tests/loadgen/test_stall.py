"""Coordinated omission, shown: a server that freezes for 0.5 s in every 2.5 s.

Open model (constant arrivals): a request due at a uniformly random moment waits for the
end of the freeze with probability s/P, its wait then uniform on (0, s). So
P(wait > w) = (s - w) / P for 0 <= w < s, and the q-quantile of the wait is
s - (1 - q) P: p99 = 0.5 - 0.025 = 0.475 s, p90 = 0.5 - 0.25 = 0.25 s (plus the ordinary
response time, under a millisecond here). Tolerance: 40 ms, from the 5 ms arrival grid,
the server's timer granularity, and scheduling noise on a shared 2-core machine; a trial
whose own guard shows a starved client may be repeated (twice at most).

Closed model, same server: the few requests in flight during a freeze are the only ones
that see it, so its p99 is far below the truth; the trial is flagged
(``coordinated_omission_risk``).
"""

from __future__ import annotations

import numpy as np

from benchlib.core.model import LoadSpec, Target
from benchlib.loadgen import run_load
from benchlib.loadgen.testservers import serve

from .conftest import client_cpus, server_cpus

STALL_S, PERIOD_S = 0.5, 2.5
TOL_S = 0.040


def analytic_wait_quantile(q: float, stall_s: float = STALL_S, period_s: float = PERIOD_S) -> float:
    """The q-quantile of the wait caused by the freezes, for arrivals uniform in time."""
    return max(stall_s - (1 - q) * period_s, 0.0)


def _contended(meta: dict) -> bool:
    """The trial's own guard saw a starved client (a busy shared machine)."""
    lag = meta["schedule_lag_ns"]
    return (not meta["valid"]) or (lag["p99.9"] or 0) > 20_000_000


def test_open_model_matches_analytic_and_closed_model_is_flagged():
    with serve("stall", cpus=server_cpus(), stall_s=STALL_S, period_s=PERIOD_S) as (host, port):
        target = Target(host, port)
        # whole periods: the arrivals are a fixed grid, so two periods (1,000 requests, 100 in
        # each freeze) hold the same wait quantiles as four
        open_spec = LoadSpec(model="open", rate_rps=200, duration_s=2 * PERIOD_S, warmup_s=0.5,
                             connections=256, timeout_s=5)
        # On a machine shared with other work the client or server can be starved for tens
        # of milliseconds; such a trial (flagged by its own guard) may be repeated, twice at
        # most. An uncontended trial outside the tolerance fails at once.
        misses = []
        for _attempt in range(3):
            op = run_load(open_spec, target, client_cpus=client_cpus())
            lat = op.latency_ns() / 1e9
            assert len(lat) == 1000 and op.meta["errors"]["timeout"] == 0
            p50, p90, p99 = np.percentile(lat, [50, 90, 99])
            ok = (abs(p99 - analytic_wait_quantile(0.99)) < TOL_S and abs(p90 - analytic_wait_quantile(0.90)) < TOL_S
                  and p50 < 0.02)
            if ok:
                break
            misses.append((round(p50, 4), round(p90, 4), round(p99, 4), op.meta["schedule_lag_ns"]))
            assert _contended(op.meta), f"uncontended open-model trial off the analytic values: {misses[-1]}"
        else:
            raise AssertionError(f"three contended attempts, all off the analytic values: {misses}")
        assert op.meta["coordinated_omission_risk"] is False
        closed_spec = LoadSpec(model="closed", connections=4, duration_s=2 * PERIOD_S, warmup_s=0.5, timeout_s=5)
        cl = run_load(closed_spec, target, client_cpus=client_cpus())
    # the closed model under-reports the tail and says it may
    closed_p99 = np.percentile(cl.latency_ns() / 1e9, 99)
    assert closed_p99 < analytic_wait_quantile(0.99) / 2, closed_p99
    assert cl.meta["coordinated_omission_risk"] is True
    assert cl.meta["longest_pause_ns"] > 0.8 * STALL_S * 1e9
