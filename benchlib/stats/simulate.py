"""Seeded simulations of benchmark trials, for validating and explaining the statistics (pure).

The model (statistics reference, section 5.11): for trial ``t`` of an arm,

``log L[t, i] = log(median_ms) + log(shift) + u_t + drift(t) + e[t, i]``

* ``u_t ~ N(0, trial_sd^2)``: the trial's random effect (placement, warm state, neighbours);
* ``e`` an AR(1) series with coefficient ``phi`` and marginal SD ``sigma`` (bursty,
  autocorrelated requests within a run);
* a fraction ``spike_rate`` of requests multiplied by U(5, 20) (GC pauses, retransmits);
* ``drift``: a session trend plus a wander, as a function of the trial's place in the run
  order;
* optionally a tail-only change (``tail_factor``): requests above the trial's 90th
  percentile are stretched progressively so that the 99th percentile grows by that factor
  while the median stays put.

Nothing here is used to produce a reported number from a real run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict, Unpack

import numpy as np
import pandas as pd
from scipy import signal

from benchlib.core.schema import PHASE_CODES, ROW_DTYPE

__all__ = [
    "ar1",
    "trial_latencies_ms",
    "trial_rows",
    "block_order",
    "session_drift",
    "simulate_summaries",
    "LatencyShape",
]


def ar1(n: int, phi: float, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """A stationary AR(1) series of length ``n`` with marginal SD ``sigma``."""
    innov = rng.normal(0.0, sigma * np.sqrt(1.0 - phi * phi), n)
    if phi == 0.0:
        return innov
    innov[0] = rng.normal(0.0, sigma)  # start in the stationary distribution
    zi = np.zeros(1)
    out, _ = signal.lfilter([1.0], [1.0, -phi], innov, zi=zi)
    return np.asarray(out)


def _tail_stretch(lat: np.ndarray, factor: float) -> np.ndarray:
    """Stretch each row's values above its 90th percentile so that p99 grows by ``factor``."""
    if factor == 1.0:
        return lat
    ranks = np.argsort(np.argsort(lat, axis=-1, kind="stable"), axis=-1, kind="stable")
    u = (ranks + 0.5) / lat.shape[-1]
    ramp = np.clip((u - 0.90) / 0.09, 0.0, 1.0)
    return lat * np.exp(np.log(factor) * ramp)


def trial_latencies_ms(
    n_req: int,
    rng: np.random.Generator,
    *,
    median_ms: float = 5.0,
    sigma: float = 0.35,
    phi: float = 0.0,
    trial_sd: float = 0.0,
    shift: float = 1.0,
    tail_factor: float = 1.0,
    spike_rate: float = 0.005,
    offset: float = 0.0,
    level_shift: tuple[float, float] | None = None,
    n_trials: int | None = None,
) -> np.ndarray:
    """Latencies (ms) of one trial, or of ``n_trials`` trials as rows of a 2-D array.

    Parameters
    ----------
    n_req:
        Requests per trial.
    rng:
        The generator (seeded by the caller).
    median_ms, sigma, phi:
        Body: lognormal around ``median_ms`` with log-SD ``sigma`` and AR(1) coefficient
        ``phi``.
    trial_sd:
        SD of the trial random effect on the log scale (0.03 = about 3%).
    shift:
        Multiplicative effect of the arm (1.05 = 5% slower).
    tail_factor:
        Tail-only change: p99 multiplied by this, median unchanged.
    spike_rate:
        Fraction of requests multiplied by U(5, 20).
    offset:
        Additional log-scale offset for this trial (for example session drift).
    level_shift:
        ``(fraction, factor)``: from that fraction of the trial on, latencies are multiplied
        by ``factor`` (a trial that is not steady).
    n_trials:
        When given, return ``n_trials`` independent trials as a 2-D array.
    """
    rows = 1 if n_trials is None else n_trials
    out = np.empty((rows, n_req))
    for r in range(rows):
        e = ar1(n_req, phi, sigma, rng)
        u = rng.normal(0.0, trial_sd) if trial_sd > 0 else 0.0
        x = np.log(median_ms) + np.log(shift) + offset + u + e
        if level_shift is not None:
            frac, factor = level_shift
            x[int(frac * n_req) :] += np.log(factor)
        lat = np.exp(x)
        if spike_rate > 0:
            spikes = rng.random(n_req) < spike_rate
            lat[spikes] *= rng.uniform(5.0, 20.0, int(spikes.sum()))
        out[r] = lat
    if tail_factor != 1.0:
        out = _tail_stretch(out, tail_factor)
    return out[0] if n_trials is None else out


def trial_rows(
    latency_ms: np.ndarray,
    *,
    rate_rps: float = 1000.0,
    warmup_requests: int = 0,
    warmup_ms: float | None = None,
    send_lag_ms: float = 0.01,
    errors: np.ndarray | None = None,
) -> np.ndarray:
    """Open-loop :data:`~benchlib.core.schema.ROW_DTYPE` rows for the given measured latencies.

    ``warmup_requests`` rows (latency ``warmup_ms``, default the median) are put in front,
    in the warm-up phase. ``errors`` (codes, same length as ``latency_ms``) marks failed
    requests (status 0).
    """
    lat = np.asarray(latency_ms, dtype=float)
    n = warmup_requests + lat.size
    rows = np.zeros(n, dtype=ROW_DTYPE)
    period_ns = 1e9 / rate_rps
    t_int = np.round(np.arange(n) * period_ns).astype(np.int64)
    wl = float(np.median(lat)) if warmup_ms is None else warmup_ms
    all_lat = np.concatenate([np.full(warmup_requests, wl), lat])
    rows["t_intended_ns"] = t_int
    rows["t_sent_ns"] = t_int + np.int64(round(send_lag_ms * 1e6))
    rows["t_done_ns"] = t_int + np.round(all_lat * 1e6).astype(np.int64)
    rows["status"] = 200
    rows["bytes"] = 120
    rows["conn"] = np.arange(n) % 16
    rows["phase"] = PHASE_CODES["measure"]
    rows["phase"][:warmup_requests] = PHASE_CODES["warmup"]
    if errors is not None:
        err = np.asarray(errors, dtype=np.uint8)
        rows["error"][warmup_requests:] = err
        rows["status"][warmup_requests:][err != 0] = 0
    return rows


def block_order(arms: Sequence[str], n_blocks: int, design: str, rng: np.random.Generator) -> list[list[str]]:
    """The run order: ``"blocks"`` (each block every arm once, shuffled), ``"alternating"``
    (ABAB...) or ``"sequential"`` (AAAA...BBBB..., the drift-prone order)."""
    if design == "blocks":
        return [list(rng.permutation(list(arms))) for _ in range(n_blocks)]
    if design == "alternating":
        return [list(arms) for _ in range(n_blocks)]
    if design == "sequential":
        return [[a] * n_blocks for a in arms]
    raise ValueError(f"unknown design {design!r}")


def session_drift(n_slots: int, total: float) -> np.ndarray:
    """Log-scale drift over ``n_slots`` trial slots: a trend plus a wander, about ``total``."""
    if total == 0.0 or n_slots == 0:
        return np.zeros(n_slots)
    s = np.linspace(0.0, 1.0, n_slots)
    return total * s + 0.5 * total * np.sin(3.0 * np.pi * s)


class LatencyShape(TypedDict, total=False):
    """The latency model's shape that :func:`simulate_summaries` passes on to
    :func:`trial_latencies_ms` (each optional; milliseconds for ``median_ms``)."""

    median_ms: float
    sigma: float
    phi: float
    trial_sd: float
    spike_rate: float


def simulate_summaries(
    rng: np.random.Generator,
    *,
    arms: Mapping[str, float] | None = None,
    trials: int = 10,
    n_req: int = 2000,
    design: str = "blocks",
    drift: float = 0.0,
    quantiles: Sequence[float] = (0.5, 0.9, 0.99),
    tail_factors: Mapping[str, float] | None = None,
    condition: str = "sim",
    rate_rps: float = 1000.0,
    **latency: Unpack[LatencyShape],
) -> pd.DataFrame:
    """Per-trial summaries of a simulated study, in the shape :func:`benchlib.stats.compare`
    takes (``condition, arm, block, position, seq, valid`` and metric columns).

    Fast path for large simulations: quantiles by linear interpolation on each trial's
    latencies (as :func:`~benchlib.stats.summarize_trial` does for 1,000 requests or more),
    mean, and a throughput column equal to the offered rate with tiny noise.

    Parameters
    ----------
    arms:
        Arm name -> true multiplicative effect (default ``{"A": 1.0, "B": 1.0}``).
    design:
        Run order, see :func:`block_order`.
    drift:
        Total session drift on the log scale (0.10 = about 10%).
    rate_rps:
        Offered rate recorded per trial (``offered_rps``); the achieved ``throughput_rps``
        is within about 0.1% below it.
    **latency:
        Passed to :func:`trial_latencies_ms` (``sigma``, ``phi``, ``trial_sd``,
        ``spike_rate``, ``median_ms``).
    """
    arms = dict(arms or {"A": 1.0, "B": 1.0})
    tails = dict(tail_factors or {})
    order = block_order(list(arms), trials, design, rng)
    slots = [(b, p, a) for b, blk in enumerate(order) for p, a in enumerate(blk)]
    offsets = session_drift(len(slots), drift)
    records = []
    for seq, (b, p, a) in enumerate(slots):
        lat = trial_latencies_ms(
            n_req, rng, shift=arms[a], offset=float(offsets[seq]), tail_factor=tails.get(a, 1.0), **latency
        )
        qs = np.quantile(lat, quantiles)
        rec: dict[str, object] = {
            "condition": condition,
            "arm": a,
            "block": b if design != "sequential" else seq,
            "position": p if design != "sequential" else 0,
            "seq": seq,
            "valid": True,
            "n": n_req,
            "mean_ms": float(lat.mean()),
            "offered_rps": rate_rps,
            "throughput_rps": rate_rps * (1.0 - abs(rng.normal(0.0, 0.001))),
            "error_rate": 0.0,
        }
        for q, v in zip(quantiles, qs, strict=True):
            rec[_qname(q)] = float(v)
        records.append(rec)
    return pd.DataFrame.from_records(records)


def _qname(q: float) -> str:
    from benchlib.stats.quantiles import quantile_column

    return quantile_column(q)
