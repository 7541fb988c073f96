"""The saturation guard: a client that cannot keep up marks its trial invalid, with the reason."""

from __future__ import annotations

import numpy as np

from benchlib.loadgen import run_load
from benchlib.loadgen.guard import CPU_BUSY_LIMIT, LAG_P99_LIMIT_NS, assess, cpu_by_cpu, lag_percentiles
from benchlib.model import LoadSpec


def test_assess_rules():
    ok_lag = {"p99": LAG_P99_LIMIT_NS // 2}
    assert assess("open", ok_lag, {"0": 0.5}) == (True, None)
    valid, reason = assess("closed", ok_lag, {"0": CPU_BUSY_LIMIT + 0.01})
    assert not valid and "client CPU 0" in reason
    valid, reason = assess("open", {"p99": LAG_P99_LIMIT_NS * 2}, {"0": 0.2})
    assert not valid and "sent late" in reason
    # the lag rule is about schedules: a closed model's send delay does not trip it
    assert assess("closed", {"p99": LAG_P99_LIMIT_NS * 2}, {"0": 0.2})[0]


def test_cpu_by_cpu_sums_workers_sharing_a_cpu_and_excludes_spinning():
    w = [{"cpus": [0], "cpu_s": 0.5, "wall_s": 1.0, "spin_ns": 0},
         {"cpus": [0], "cpu_s": 0.6, "wall_s": 1.0, "spin_ns": 200_000_000},
         {"cpus": [1], "cpu_s": 0.3, "wall_s": 1.0}]
    got = cpu_by_cpu(w)
    assert np.isclose(got["0"], 0.9) and np.isclose(got["1"], 0.3)


def test_lag_percentiles():
    p = lag_percentiles(np.arange(1, 1001, dtype=np.int64))
    assert p["p50"] == 500 and p["p99"] == 990 and p["max"] == 1000
    assert lag_percentiles(np.zeros(0, np.int64))["p50"] is None


def test_a_client_that_cannot_keep_up_is_flagged(hello_target):
    # 100,000 arrivals/s from one Python worker: far beyond what it can dispatch
    spec = LoadSpec(model="open", rate_rps=100_000, duration_s=0.3, warmup_s=0, connections=64, timeout_s=20)
    r = run_load(spec, hello_target)
    m = r.meta
    assert m["requests"]["measure"] == 30_000, "late, but every arrival is still sent and recorded"
    assert m["valid"] is False
    assert "sent late" in m["invalid_reason"] or "client CPU" in m["invalid_reason"]
    assert m["schedule_lag_ns"]["p99"] > LAG_P99_LIMIT_NS
    assert m["achieved_rps"] < m["offered_rps"]
