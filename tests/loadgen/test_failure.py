"""A load generator that fails never costs the rows already measured (issue 10, item 1).

The engine and the worker are run in this process, with a parser that raises after some
responses (a stand-in for a bug of ours: the real one was a RecursionError on a 1xx flood,
fixed in :mod:`benchlib.loadgen.http1`); and a real worker process is killed mid-trial.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from multiprocessing.connection import Connection

import numpy as np
import pytest
import uvloop

from benchlib.core.model import LoadSpec, Target
from benchlib.loadgen import http1, run_load
from benchlib.loadgen.engine import Engine, EngineConfig, records_to_rows
from benchlib.loadgen.fault_matrix import worker_processes
from benchlib.loadgen.testservers import serve
from benchlib.loadgen.worker import worker_main

from .conftest import server_cpus

N_REQUESTS = 1000
FAIL_AT = 30


@pytest.fixture()
def chunked_target():
    # chunked responses always go through ResponseParser.feed (never the inlined hot path)
    with serve("chunked", cpus=server_cpus()) as (host, port):
        yield Target(host, port)


@pytest.fixture()
def failing_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    feed = http1.ResponseParser.feed

    def failing_feed(self: http1.ResponseParser, data: bytes) -> int:
        calls["n"] += 1
        if calls["n"] == FAIL_AT:
            raise RuntimeError("boom: a bug in the parser")
        return feed(self, data)

    monkeypatch.setattr(http1.ResponseParser, "feed", failing_feed)


def _config(target: Target) -> dict:
    return dict(host=target.host, port=target.port, model="closed", connections=2, duration_s=None,
                requests=N_REQUESTS, warmup_s=0.0, timeout_s=5.0)


def test_a_failing_engine_records_every_request_it_sent(chunked_target, failing_parser):
    eng = Engine(EngineConfig(**_config(chunked_target)), time.monotonic_ns() + 20_000_000)
    with pytest.raises(RuntimeError, match="boom"):
        uvloop.run(eng.run())
    rows = records_to_rows(eng.records, eng.start_ns)
    sent = N_REQUESTS - eng.meas_left
    assert len(rows) == sent, "every request sent is one row"
    assert np.count_nonzero(rows["error"] == 0) >= FAIL_AT - 3
    # the request whose response raised, and the other connection's, are rows too
    assert np.count_nonzero(rows["error"] != 0) >= 1
    assert "when the load generator failed (RuntimeError: boom" in eng.reasons["abandoned"]


def test_a_failing_worker_hands_back_its_rows_and_the_error(chunked_target, failing_parser, tmp_path):
    parent, child = socket.socketpair()
    parent_conn, child_conn = Connection(parent.detach()), Connection(child.detach())
    start = time.monotonic_ns() + 20_000_000
    parent_conn.send(("start", start, start))  # read by the worker once it is ready
    rows_path = str(tmp_path / "w0.npy")
    worker_main(child_conn, _config(chunked_target), None, rows_path)
    msgs = []
    try:
        while parent_conn.poll(1):
            msgs.append(parent_conn.recv())
    except EOFError:  # the worker closed its end when it was done
        pass
    parent_conn.close()
    assert msgs[0][0] == "ready" and msgs[-1][0] == "done"
    stats = msgs[-1][1]
    assert "RuntimeError: boom" in stats["error"]
    rows = np.load(rows_path)
    assert len(rows) == stats["records"] >= FAIL_AT - 3


def _sockets(pid: int) -> int:
    """Open sockets of process ``pid`` (its pipe to the parent is one)."""
    try:
        return sum(os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:") for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def kill_a_worker_in_traffic(delay_s: float, state: dict) -> threading.Thread:
    """Kill one of this process's two load workers ``delay_s`` after both have connections
    open (the trial's traffic has started)."""
    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pids = worker_processes()
            if len(pids) >= 2 and all(_sockets(p) >= 2 for p in pids):
                time.sleep(delay_s)
                os.kill(max(pids), signal.SIGKILL)
                state["killed"] = max(pids)
                return
            time.sleep(0.01)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def test_a_killed_worker_costs_only_its_own_rows(hello_target):
    state: dict = {}
    spec = LoadSpec(model="closed", connections=4, duration_s=1.5, warmup_s=0, workers=2)
    watcher = kill_a_worker_in_traffic(0.5, state)
    r = run_load(spec, hello_target)
    watcher.join()
    m = r.meta
    assert "killed" in state
    assert m["failed"] is True and m["valid"] is False
    assert "died" in m["failure"] and "died" in m["invalid_reason"]
    assert len(m["worker_errors"]) == 1
    survivors = {int(w) for w in np.unique(r.rows["worker"])}
    assert len(survivors) == 1 and len(r.rows) > 100, "the other worker's rows are all there"
    assert np.all(r.rows["error"] == 0)
    assert m["requests"]["total"] == len(r.rows)
