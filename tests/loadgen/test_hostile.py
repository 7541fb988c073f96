"""A hostile server never crashes a trial: every misbehaviour is one row of its kind."""

from __future__ import annotations

import time

import numpy as np
import pytest

from benchlib.core.model import LoadSpec, Target
from benchlib.core.schema import ERROR_CODES
from benchlib.loadgen import run_load
from benchlib.loadgen.testservers import serve

from .conftest import client_cpus, server_cpus

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


@pytest.mark.parametrize("keep_alive", [True, False], ids=["keep-alive", "new-conn"])
def test_connect_timeout_when_the_accept_queue_is_full(keep_alive):
    """A listener that never accepts: once its queue is full, SYNs are dropped and
    connection attempts time out (recorded as ``timeout`` rows, one per attempt). A new
    connection per request has its connect timeout checked by the sweeper (every 30 ms here)."""
    import socket

    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(0)
    try:
        spec = LoadSpec(model="closed", connections=2, duration_s=1.0, warmup_s=0, connect_timeout_s=0.3,
                        keep_alive=keep_alive)
        r = run_load(spec, Target("127.0.0.1", lst.getsockname()[1]))
    finally:
        lst.close()
    rows = r.rows
    assert len(rows) >= 2 and np.all(rows["error"] == ERROR_CODES["timeout"])
    waited = (rows["t_done_ns"] - rows["t_sent_ns"]) / 1e9
    assert np.all(waited >= 0.29) and np.all(waited < 1.0)
    assert "connect_timeout" in r.meta["error_examples"]


# -- issue 10: servers that are cheap to run and costly for a client ---------------------------

def test_a_flood_of_1xx_heads_does_not_break_the_trial():
    """1,000 ``100 Continue`` heads before each response, in one write: once a
    RecursionError that failed the trial and lost all its rows; now every response is fine."""
    with serve("continue-flood", cpus=server_cpus(), count=1000) as (host, port):
        spec = LoadSpec(model="closed", connections=2, duration_s=None, requests=40, warmup_s=0, timeout_s=5)
        r = run_load(spec, Target(host, port))
    assert len(r.rows) == 40 and not r.meta["failed"]
    assert np.all(r.rows["error"] == 0) and np.all(r.rows["status"] == 200)
    assert np.all(r.rows["bytes"] == r.rows["bytes"][0]) and r.rows["bytes"][0] > 1000 * 25


@pytest.mark.parametrize("model", ["closed", "open"])
def test_an_endless_chunked_body_times_out_on_time(model):
    """Endless 1-byte chunks: parsing is bounded per pass of the event loop, so the response
    timeout fires on time (it fired seconds late), and a trial without one complete response
    is never valid (it was)."""
    timeout_s = 0.5
    if model == "closed":
        spec = LoadSpec(model="closed", connections=2, duration_s=1.0, warmup_s=0, timeout_s=timeout_s)
    else:
        spec = LoadSpec(model="open", rate_rps=10, duration_s=1.0, warmup_s=0, connections=4, timeout_s=timeout_s)
    with serve("chunk-drip", cpus=server_cpus()) as (host, port):
        t = time.monotonic()
        r = run_load(spec, Target(host, port), client_cpus=client_cpus())
        took = time.monotonic() - t
    rows = r.rows
    assert len(rows) >= 4 and np.all(rows["error"] == ERROR_CODES["timeout"])
    if model == "open":
        assert len(rows) == 10
    waited = (rows["t_done_ns"] - rows["t_sent_ns"]) / 1e9
    assert np.all(waited >= timeout_s) and np.all(waited < timeout_s + 0.6), waited.max()
    assert r.meta["valid"] is False and "no request of the measured phase" in r.meta["invalid_reason"]
    # bytes received per row: far more than a head (the drip was read), bounded by the timeout
    assert rows["bytes"].max() > 10_000
    assert took < 1.0 + timeout_s + 5.0


def test_endless_trailers_are_a_protocol_error():
    with serve("trailer-drip", cpus=server_cpus()) as (host, port):
        spec = LoadSpec(model="closed", connections=2, duration_s=None, requests=10, warmup_s=0, timeout_s=5)
        r = run_load(spec, Target(host, port))
    assert len(r.rows) == 10 and np.all(r.rows["error"] == ERROR_CODES["protocol"])
    assert "trailers larger than" in r.meta["error_examples"]["protocol"]
    assert r.meta["valid"] is False


def test_every_arrival_is_a_row_at_the_hard_deadline():
    """100 arrivals, 4 connections, each response endless until its 0.5 s timeout: the
    queue cannot drain before the hard deadline (planned 0.5 s + timeout 0.5 s + connect
    timeout 0.5 s + 5 s). At the deadline requests are in flight, on connections being
    opened and queued: each is one row (496 of 500 were, before)."""
    spec = LoadSpec(model="open", rate_rps=200, duration_s=0.5, warmup_s=0, connections=4, timeout_s=0.5,
                    connect_timeout_s=0.5)
    with serve("chunk-drip", cpus=server_cpus()) as (host, port):
        t = time.monotonic()
        r = run_load(spec, Target(host, port), client_cpus=client_cpus())
        took = time.monotonic() - t
    assert len(r.rows) == 100 and r.meta["requests"]["measure"] == 100
    assert np.all(r.rows["error"] == ERROR_CODES["timeout"])
    assert r.meta["abandoned"] is True and "hard deadline" in r.meta["error_examples"]["abandoned"]
    deadline_s = 0.5 + 0.5 + 0.5 + 5.0
    assert r.rows["t_done_ns"].max() / 1e9 < deadline_s + 0.5
    assert took < deadline_s + 3.0


@pytest.mark.parametrize("model", ["closed", "open"])
def test_a_stale_keepalive_connection_is_retried_once(model):
    """The server closes the connection after each response, without ``Connection: close``:
    a request sent on such a connection got no byte back; it is sent again once on a new
    connection (it turned about half the requests into reset/truncated errors). The next
    request goes out on the connection as soon as the response is read: the closed model
    always does that, the open model does when arrivals are queued (5,000/s on one
    connection), so each connection's second request meets the server's close."""
    if model == "closed":
        spec = LoadSpec(model="closed", connections=2, duration_s=None, requests=200, warmup_s=0, timeout_s=5)
    else:
        spec = LoadSpec(model="open", rate_rps=5000, duration_s=0.04, warmup_s=0, connections=1, timeout_s=5)
    with serve("stale-keepalive", cpus=server_cpus()) as (host, port):
        r = run_load(spec, Target(host, port))
    rows = r.rows
    assert len(rows) == 200
    assert np.all(rows["error"] == 0), r.meta["errors"]
    assert np.all(rows["status"] == 200)
    assert r.meta["retries"] > 0 and "sent again" in r.meta["error_examples"]["retried"]
    assert np.all(rows["t_intended_ns"] <= rows["t_sent_ns"])
    # the server answers one request per connection: each row's connection is its own
    assert len(np.unique(rows["conn"])) == 200


def test_a_post_on_a_stale_connection_is_not_retried():
    """POST is not idempotent: it is never sent twice; the error stays an error."""
    with serve("stale-keepalive", cpus=server_cpus()) as (host, port):
        spec = LoadSpec(model="closed", connections=2, duration_s=None, requests=200, warmup_s=0, timeout_s=5,
                        method="POST", body=b"x")
        r = run_load(spec, Target(host, port))
    assert len(r.rows) == 200 and r.meta["retries"] == 0
    assert r.meta["errors"]["reset"] + r.meta["errors"]["truncated"] > 0


def test_a_408_on_an_idle_connection_closes_it_and_the_trial_stays_valid():
    """Node.js answers a connection that sent no request within its ``headersTimeout`` (60 s) with
    ``408 Request Timeout`` and closes it (an open-model pool's spare connection in study 01's
    full-scale trials side by side): the server ending an idle connection, not bytes nobody asked
    for. Every request still gets its own answer."""
    # 20 arrivals/s on 4 connections: the 408 comes 5 ms after each response, while idle
    spec = LoadSpec(model="open", rate_rps=20, duration_s=1.0, warmup_s=0, connections=4, timeout_s=5)
    with serve("idle-408", cpus=server_cpus(), after_s=0.005) as (host, port):
        r = run_load(spec, Target(host, port))
    m = r.meta
    assert len(r.rows) == 20 and (r.rows["error"] == 0).all() and (r.rows["status"] == 200).all()
    assert m["idle_timeouts"] > 0 and m["unsolicited_responses"] == 0 and "idle_timeout" in m["error_examples"]
    assert m["valid"] is True, m["invalid_reason"]


@pytest.mark.parametrize("model", ["closed", "open"])
def test_unsolicited_responses_poison_the_connection(model):
    """A second response nobody asked for after each one: the connection is closed and
    counted, and the trial is invalid (its bytes were read as the next request's answer,
    and the trial was valid, before)."""
    if model == "closed":
        spec = LoadSpec(model="closed", connections=2, duration_s=None, requests=200, warmup_s=0, timeout_s=5)
        opts = {}
    else:
        # 20 arrivals/s on 4 connections: the second response comes 5 ms after the first,
        # while its connection waits for its next request
        spec = LoadSpec(model="open", rate_rps=20, duration_s=1.0, warmup_s=0, connections=4, timeout_s=5)
        opts = {"after_s": 0.005}
    with serve("unsolicited", cpus=server_cpus(), **opts) as (host, port):
        r = run_load(spec, Target(host, port))
    m = r.meta
    assert len(r.rows) == (200 if model == "closed" else 20)
    assert m["unsolicited_responses"] > 0 and "unsolicited" in m["error_examples"]
    assert m["valid"] is False and "bytes nobody asked for" in m["invalid_reason"]
    if model == "open":
        # seen on the idle connection, before its next request: every response counted as
        # one was the answer to its own request, on a connection used for nothing else after
        ok = r.rows[r.rows["error"] == 0]
        assert m["unsolicited_responses"] >= len(ok) // 2
