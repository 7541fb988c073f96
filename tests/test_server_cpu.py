"""The server's CPU time per request over a trial's measured window (benchlib.store.records.cpu)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchlib.core.schema import PHASE_CODES, ROW_DTYPE
from benchlib.store.records.cpu import cpu_at, server_cpu

S = 1_000_000_000


def _samples(points):
    return [{"t_monotonic_ns": t, "cpu_s": c} for t, c in points]


def test_cpu_at_interpolates_between_samples_and_refuses_to_extrapolate():
    s = _samples([(10 * S, 1.0), (12 * S, 2.0), (13 * S, 2.2)])
    assert cpu_at(s, 11 * S) == pytest.approx(1.5)
    assert cpu_at(s, 12_500_000_000) == pytest.approx(2.1)
    assert math.isnan(cpu_at(s, 9 * S)) and math.isnan(cpu_at(s, 14 * S))
    assert math.isnan(cpu_at(s[:1], 10 * S))


def _rows(done_s, phase="measure"):
    r = np.zeros(len(done_s), ROW_DTYPE)
    r["t_done_ns"] = (np.asarray(done_s) * S).astype(np.int64)
    r["phase"] = PHASE_CODES[phase]
    return r


def test_per_request_cost_over_the_measured_window_with_a_front():
    # t0 = 100 s; measured phase from +1 s to +3 s; the service uses 0.5 CPU, nginx 0.25
    meta = {
        "load": {"t0_monotonic_ns": 100 * S, "measure_start_ns": [1 * S], "measure_stop_ns": [3 * S],
                 "requests": {"measure": 4}},
        "resources": _samples([(100 * S, 0.0), (102 * S, 1.0), (104 * S, 2.0)]),
        "front": {"resources": _samples([(100 * S, 0.0), (104 * S, 1.0)])},
    }
    rows = np.concatenate([_rows([0.5], "warmup"), _rows([1.5, 2.0, 2.5, 2.9])])
    cpu = server_cpu(meta, rows)
    assert cpu.window_s == 2.0 and cpu.requests == 4
    assert cpu.service_s == pytest.approx(1.0) and cpu.front_s == pytest.approx(0.5)
    assert cpu.per_request_us == pytest.approx(1e6 * 1.5 / 4) and cpu.front_per_request_us == pytest.approx(125_000)
    assert cpu.fraction == pytest.approx(0.75)
    # without rows, the measured count of the load meta; without samples, nothing
    assert server_cpu(meta).requests == 4
    assert server_cpu({**meta, "resources": []}) is None and server_cpu({"resources": meta["resources"]}) is None


def test_a_trial_bounded_by_a_request_count_ends_at_its_last_measured_response():
    meta = {"load": {"t0_monotonic_ns": 0, "measure_start_ns": [0], "measure_stop_ns": []},
            "resources": _samples([(0, 0.0), (10 * S, 10.0)])}
    cpu = server_cpu(meta, _rows([1.0, 2.0, 4.0]))
    assert cpu.window_s == 4.0 and cpu.requests == 3 and cpu.per_request_us == pytest.approx(4e6 / 3)
    assert server_cpu(meta) is None  # no stop and no rows: no window
