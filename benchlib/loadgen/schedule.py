"""Open-model arrival schedules: when each request is due.

Pure (numpy only). A schedule is a list of segments ``(rate_rps, duration_s)`` starting at
offset 0; the warm-up segment (if any) comes first, at the rate of the first measured
segment. Arrival times are generated in blocks of at most ``block`` arrivals, so an hour at
100,000 req/s never materialises at once.

With ``W`` workers, worker ``w`` gets:

* ``constant``: every ``W``-th slot of the global constant schedule, starting at slot ``w``,
  so the union over the workers is exactly the global schedule;
* ``poisson``: an independent Poisson process at ``rate / W`` seeded by ``(seed, w)``; the
  union of independent Poisson processes is a Poisson process at ``rate``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["segments_for", "arrival_offsets_ns", "arrivals_in_window"]


def segments_for(
    rate_rps: float | None,
    duration_s: float | None,
    stages: Sequence[tuple[float, float]],
    warmup_s: float,
) -> list[tuple[float, float]]:
    """The schedule's segments ``(rate_rps, duration_s)``: warm-up first, then the measured ones.

    Parameters
    ----------
    rate_rps, duration_s: the constant rate and measured length (used when ``stages`` is empty).
    stages: measured segments as ``(rate_rps, duration_s)`` pairs.
    warmup_s: warm-up seconds, at the first measured rate (0 for none).
    """
    measured = [(float(r), float(d)) for r, d in stages] if stages else [(float(rate_rps or 0), float(duration_s or 0))]
    out: list[tuple[float, float]] = []
    if warmup_s > 0:
        out.append((measured[0][0], float(warmup_s)))
    out.extend(measured)
    return out


def arrival_offsets_ns(
    segments: Sequence[tuple[float, float]],
    *,
    arrival: str,
    worker: int = 0,
    workers: int = 1,
    seed: int = 0,
    block: int = 65536,
) -> Iterator[np.ndarray]:
    """Yield arrays (int64, ascending) of this worker's arrival offsets in ns from the start.

    Parameters
    ----------
    segments: ``(rate_rps, duration_s)`` in order (see :func:`segments_for`).
    arrival: ``"constant"`` or ``"poisson"``.
    worker, workers: this worker's index and the number of workers.
    seed: base seed; the Poisson stream of worker ``w`` is seeded by ``(seed, w)``.
    block: largest array yielded.
    """
    if arrival not in ("constant", "poisson"):
        raise ValueError(f"unknown arrival {arrival!r}; valid: constant, poisson")
    rng = np.random.default_rng([seed, worker])
    seg_start_s = 0.0
    for rate, dur in segments:
        seg_end_s = seg_start_s + dur
        if arrival == "constant":
            interval = 1.0 / rate
            # global slots k = 0..n-1 at seg_start + k*interval; this worker takes k = w mod W
            n_total = int(np.floor(dur * rate - 1e-9)) + 1
            k = worker
            while k < n_total:
                ks = np.arange(k, min(n_total, k + block * workers), workers, dtype=np.float64)
                yield np.round((seg_start_s + ks * interval) * 1e9).astype(np.int64)
                k = int(ks[-1]) + workers
        else:
            r = rate / workers
            t = seg_start_s
            while True:
                gaps = rng.exponential(1.0 / r, size=block)
                ts = t + np.cumsum(gaps)
                inside = ts[ts < seg_end_s]
                if inside.size:
                    yield np.round(inside * 1e9).astype(np.int64)
                if inside.size < ts.size:
                    break
                t = float(ts[-1])
        seg_start_s = seg_end_s


def arrivals_in_window(
    segments: Sequence[tuple[float, float]], *, arrival: str, workers: int = 1, seed: int = 0
) -> np.ndarray:
    """All arrival offsets (ns) of all workers, merged and sorted (for tests and plots)."""
    parts = [
        a
        for w in range(workers)
        for a in arrival_offsets_ns(segments, arrival=arrival, worker=w, workers=workers, seed=seed)
    ]
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
