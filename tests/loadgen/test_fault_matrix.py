"""The fault matrix (issue 10): every test-server behaviour under both load models, bounded,
on 127.0.0.1. Every arrival is one row, rows have only the error kinds the server can
cause, each trial ends within its bound, the worker's memory stays bounded, and no worker
process is left behind; with keep-alive connections and with a new connection per request
(HTTP/1.0, as ab without ``-k``). ``python -m benchlib.loadgen.fault_matrix`` prints the same matrix for
``docs/reliability.md``."""

from __future__ import annotations

import pytest

from benchlib.loadgen.fault_matrix import CASES, MODELS, RSS_LIMIT_BYTES, run_case

from .conftest import client_cpus, server_cpus

#: run_load's own overhead beyond the trial (starting the worker interpreters, merging rows)
STARTUP_SLACK_S = 5.0
#: The open model's seconds here: 100 arrivals at 200/s, half the published matrix's
#: (``python -m benchlib.loadgen.fault_matrix``), which keeps 1 s; every check below holds for both.
OPEN_DURATION_S = 0.5


#: (case, keep_alive): HTTP/1 cases with keep-alive and with a new connection per request;
#: HTTP/2 (gRPC) cases keep their connections
PAIRS = [(c, k) for c in CASES for k in (True, False) if k or c.protocol == "http1"]


def _id(case, keep_alive) -> str:
    extra = f"-{case.opts['grpc_status']}" if "grpc_status" in case.opts else ""
    return f"{case.name}{extra}-{'keep-alive' if keep_alive else 'new-conn'}"


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("case,keep_alive", PAIRS, ids=[_id(c, k) for c, k in PAIRS])
def test_fault_matrix(case, model, keep_alive):
    r = run_case(case, model, keep_alive=keep_alive, server_cpus=server_cpus(), client_cpus=client_cpus(),
                 open_duration_s=OPEN_DURATION_S)
    assert r["rows"] == r["arrivals"], "every arrival is one row"
    assert not r["unexpected_kinds"], r["kinds"]
    if case.mode == "unsolicited" and not keep_alive:
        # on a connection of its own the response nobody asked for mostly arrives while the client
        # still reads: nearly every row is 'protocol' (1-4 of 200 'none' at 1 s, 0-1 of 100 at 0.5 s)
        assert r["kinds"].get("protocol", 0) > 0, r["kinds"]
    else:
        assert case.kinds[0] in r["kinds"], f"the server's own kind {case.kinds[0]!r} is among the rows: {r['kinds']}"
    assert r["finished_s"] <= r["bound_s"], r
    assert r["run_load_s"] <= r["bound_s"] + STARTUP_SLACK_S, r
    assert r["worker_peak_rss_bytes"] <= RSS_LIMIT_BYTES
    assert r["orphans"] == 0
    assert not r["failed"], r["invalid_reason"]
    if "none" not in r["kinds"]:
        assert r["valid"] is False and "no request of the measured phase got a complete response" in r["invalid_reason"]
    if case.mode == "stale-keepalive":
        assert set(r["kinds"]) == {"none"}
        if model == "closed" and keep_alive:  # the next request goes out at once, on the connection the server closes
            assert r["retries"] > 0
    if case.protocol == "grpc" and case.mode in ("refuse", "goaway") and model == "closed":
        assert r["retries"] > 0  # calls the server did not process were sent again
    if case.protocol == "grpc" and case.opts.get("grpc_status"):
        assert r["statuses"] == {str(case.opts["grpc_status"]): r["rows"]}, "the grpc-status is in each row"
    if case.mode in ("unsolicited", "long") and case.protocol == "http1":
        assert r["unsolicited"] > 0 and r["valid"] is False and "bytes nobody asked for" in r["invalid_reason"]
