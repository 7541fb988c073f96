"""A hostile server never crashes a trial: every misbehaviour is one row of its kind."""

from __future__ import annotations

import numpy as np
import pytest

from benchlib.loadgen import run_load
from benchlib.loadgen.testservers import serve
from benchlib.model import LoadSpec, Target
from benchlib.schema import ERROR_CODES

from .conftest import server_cpus

CASES = [
    # mode, expected error kind of every row, extra server options
    ("garbage", "protocol", {}),
    ("truncated", "truncated", {}),
    ("huge", "protocol", {}),
    ("short", "closed", {}),
    ("long", "protocol", {}),
    ("reset", "reset", {}),
]


@pytest.mark.parametrize("mode,kind,opts", CASES, ids=[c[0] for c in CASES])
def test_misbehaviour_counted_by_kind(mode, kind, opts):
    with serve(mode, cpus=server_cpus(), **opts) as (host, port):
        spec = LoadSpec(model="closed", connections=2, duration_s=None, requests=40, warmup_s=0, timeout_s=2)
        r = run_load(spec, Target(host, port))
    rows = r.rows
    assert len(rows) == 40
    assert np.all(rows["error"] == ERROR_CODES[kind]), np.unique(rows["error"], return_counts=True)
    assert r.meta["errors"][kind] == 40
    assert r.meta["error_examples"], "an example reason per kind is kept"
    assert len(np.unique(rows["conn"])) == 40, "a connection that misbehaved is not reused"


def test_trickled_response_is_fine():
    with serve("trickle", cpus=server_cpus(), delay_s=0.0005) as (host, port):
        r = run_load(LoadSpec(connections=2, duration_s=None, requests=6, warmup_s=0), Target(host, port))
    assert np.all(r.rows["error"] == 0) and np.all(r.rows["status"] == 200)
    assert np.all(r.rows["bytes"] == r.rows["bytes"][0])


def test_mixed_misbehaviour_in_one_trial():
    with serve("mixed", cpus=server_cpus(), delay_s=0.0002) as (host, port):
        r = run_load(LoadSpec(connections=3, duration_s=None, requests=120, warmup_s=0, timeout_s=2), Target(host, port))
    errs = r.meta["errors"]
    assert len(r.rows) == 120
    assert r.meta["status_counts"].get("200", 0) >= 20
    for kind in ("protocol", "truncated", "closed", "reset"):
        assert errs[kind] >= 5, errs


def test_response_timeout():
    with serve("silent", cpus=server_cpus()) as (host, port):
        spec = LoadSpec(model="closed", connections=2, duration_s=0.9, warmup_s=0, timeout_s=0.3)
        r = run_load(spec, Target(host, port))
    rows = r.rows
    assert len(rows) >= 4 and np.all(rows["error"] == ERROR_CODES["timeout"])
    waited = (rows["t_done_ns"] - rows["t_sent_ns"]) / 1e9
    assert np.all(waited >= 0.3) and np.all(waited < 0.3 + 0.6)  # sweep granularity + a busy machine


def test_refused_connections_after_the_server_dies():
    state = {}

    def kill_after_half_a_second(info):
        if info["elapsed_s"] > 0.5 and "done" not in state:
            state["done"] = True
            state["ctx"].__exit__(None, None, None)

    ctx = serve("close", cpus=server_cpus())
    host, port = ctx.__enter__()
    state["ctx"] = ctx
    spec = LoadSpec(model="closed", connections=2, duration_s=1.5, warmup_s=0, keep_alive=False)
    r = run_load(spec, Target(host, port), on_progress=kill_after_half_a_second)
    if "done" not in state:
        ctx.__exit__(None, None, None)
    errs = r.meta["errors"]
    assert r.meta["status_counts"]["200"] > 10
    assert errs["connect"] >= 10, errs
    # a refused slot retries every 10 ms, so the rows stay bounded
    assert errs["connect"] <= 2 * 1.5 / 0.010 + 10


def test_connect_timeout_when_the_accept_queue_is_full():
    """A listener that never accepts: once its queue is full, SYNs are dropped and
    connection attempts time out (recorded as ``timeout`` rows, one per attempt)."""
    import socket

    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(0)
    try:
        spec = LoadSpec(model="closed", connections=2, duration_s=1.0, warmup_s=0, connect_timeout_s=0.3)
        r = run_load(spec, Target("127.0.0.1", lst.getsockname()[1]))
    finally:
        lst.close()
    rows = r.rows
    assert len(rows) >= 2 and np.all(rows["error"] == ERROR_CODES["timeout"])
    waited = (rows["t_done_ns"] - rows["t_sent_ns"]) / 1e9
    assert np.all(waited >= 0.29) and np.all(waited < 1.0)
    assert "connect_timeout" in r.meta["error_examples"]
