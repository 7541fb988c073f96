"""The closed model against a real server on 127.0.0.1."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchlib.core.model import LoadSpec
from benchlib.core.schema import PHASE_CODES, ROW_DTYPE
from benchlib.loadgen import LoadResult, run_load

from .conftest import client_cpus


def _check_rows(result: LoadResult) -> None:
    rows = result.rows
    assert rows.dtype == ROW_DTYPE
    assert np.all(np.diff(rows["t_intended_ns"]) >= 0), "rows sorted by t_intended_ns"
    assert np.all(rows["t_intended_ns"] <= rows["t_sent_ns"])
    assert np.all(rows["t_sent_ns"] <= rows["t_done_ns"])
    assert rows["t_intended_ns"].min() >= 0, "times are relative to t0, which precedes the first request"
    json.dumps(result.meta)  # JSON-able


def test_closed_duration_keepalive(hello_target):
    spec = LoadSpec(model="closed", connections=8, duration_s=1.0, warmup_s=0.3)
    seen = []
    result = run_load(spec, hello_target, client_cpus=client_cpus(), on_progress=seen.append)
    _check_rows(result)
    rows = result.rows
    meta = result.meta
    measured = rows[rows["phase"] == PHASE_CODES["measure"]]
    warm = rows[rows["phase"] == PHASE_CODES["warmup"]]
    assert len(measured) > 100 and len(warm) > 10
    assert np.all(rows["status"] == 200) and np.all(rows["error"] == 0)
    # HTTP/1.1 keep-alive: 8 connections, each reused
    assert len(np.unique(rows["conn"])) == 8
    assert np.all(rows["bytes"] == rows["bytes"][0]) and rows["bytes"][0] > 13
    # phases split at warm-up end; the measured window is the planned duration
    assert warm["t_intended_ns"].max() < 300_000_000 <= measured["t_intended_ns"].min()
    assert measured["t_intended_ns"].max() < 1_300_000_000
    assert meta["requests"] == {"warmup": len(warm), "measure": len(measured), "total": len(rows)}
    # achieved: measured responses completed inside the 1 s window (the last in-flight ones end after it)
    in_window = np.count_nonzero(measured["t_done_ns"] <= 1_300_000_000)
    assert meta["achieved_rps"] == pytest.approx(in_window / 1.0)
    assert len(measured) - in_window <= 8
    assert meta["status_counts"] == {"200": len(measured)}
    assert sum(meta["errors"].values()) == 0
    assert meta["coordinated_omission_risk"] is True
    assert meta["offered_rps"] is None
    assert meta["loadspec"]["connections"] == 8
    assert isinstance(meta["valid"], bool)
    assert meta["record_bytes_per_request"] <= 64
    assert seen and seen[-1]["requests"] > 0


def test_closed_request_count(hello_target):
    spec = LoadSpec(model="closed", connections=4, duration_s=None, requests=1234, warmup_requests=100, warmup_s=0)
    result = run_load(spec, hello_target)
    _check_rows(result)
    assert result.meta["requests"]["measure"] == 1234
    assert result.meta["requests"]["warmup"] == 100
    assert np.all(result.rows["error"] == 0)


def test_an_exception_in_on_progress_stops_the_trial_at_once(hello_target):
    import time

    def boom(info):
        raise KeyboardInterrupt("stop")

    t = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_load(LoadSpec(connections=2, duration_s=30, warmup_s=0), hello_target, on_progress=boom)
    assert time.monotonic() - t < 10, "the workers are killed, not waited for"


def test_works_from_inside_a_running_event_loop(hello_target):
    """As in a Jupyter kernel: run_load called from a coroutine on a running loop."""
    import asyncio

    async def main():
        return run_load(LoadSpec(connections=2, duration_s=None, requests=50, warmup_s=0), hello_target)

    r = asyncio.run(main())
    assert r.meta["requests"]["measure"] == 50
