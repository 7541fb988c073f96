"""Protocol features against real servers on 127.0.0.1: HTTP/1.0, no keep-alive, POST
bodies, custom headers, chunked and close-delimited bodies, several workers."""

from __future__ import annotations

import time

import numpy as np

from benchlib.core.model import LoadSpec, Target
from benchlib.core.schema import ERROR_CODES, ROW_DTYPE
from benchlib.loadgen import run_load
from benchlib.loadgen.testservers import serve

from .conftest import client_cpus, server_cpus


def test_http10_connection_per_request(hello_target):
    spec = LoadSpec(model="closed", connections=4, duration_s=None, requests=300, warmup_s=0,
                    keep_alive=False, http_version="1.0")
    r = run_load(spec, hello_target)
    rows = r.rows
    assert len(rows) == 300 and np.all(rows["status"] == 200) and np.all(rows["error"] == 0)
    # one connection per request, as ab without -k
    assert len(np.unique(rows["conn"])) == 300


def test_new_connections_to_a_host_name_and_a_large_body():
    """A new connection per request: the name is resolved once per trial; a 4 MiB POST body,
    more than the socket takes at once, is sent in parts (the server answers only once it
    has read all of it)."""
    with serve("echo", cpus=server_cpus()) as (host, port):
        body = bytes(range(256)) * (4 * 4096)
        spec = LoadSpec(model="closed", connections=2, duration_s=None, requests=8, warmup_s=0, method="POST",
                        body=body, keep_alive=False, http_version="1.0", timeout_s=30)
        r = run_load(spec, Target("localhost", port))
    assert len(r.rows) == 8 and np.all(r.rows["error"] == 0) and np.all(r.rows["status"] == 200)
    assert len(np.unique(r.rows["conn"])) == 8


def test_new_connections_try_the_next_address():
    """A new connection per request tries the target's addresses in turn, as
    ``create_connection`` does, and later connections start at the one that worked: here the
    first address refuses (nothing listens on 127.0.0.2)."""
    import socket

    import uvloop

    from benchlib.loadgen.engine import Engine, EngineConfig

    class FirstAddressRefuses(Engine):
        async def resolve(self) -> None:
            await super().resolve()
            self.addrs.insert(0, (socket.AF_INET, ("127.0.0.2", self.cfg.port)))

    with serve("hello", cpus=server_cpus()) as (host, port):
        cfg = EngineConfig(host=host, port=port, model="closed", connections=2, requests=30, duration_s=None,
                           keep_alive=False, http_version="1.0")
        eng = FirstAddressRefuses(cfg, time.monotonic_ns() + 10_000_000)
        uvloop.run(eng.run())
    rows = np.frombuffer(eng.records, dtype=ROW_DTYPE)
    assert len(rows) == 30 and np.all(rows["error"] == 0) and np.all(rows["status"] == 200)
    assert eng.addr_first == 1 and len(eng.addrs) == 2


def test_post_body_and_custom_headers():
    with serve("echo", cpus=server_cpus()) as (host, port):
        body = b'{"name": "benchlib", "n": 42}'
        spec = LoadSpec(model="closed", connections=2, duration_s=None, requests=20, warmup_s=0,
                        method="POST", path="/items?x=1", body=body,
                        headers=(("X-Bench", "yes"), ("Content-Type", "application/json")))
        r = run_load(spec, Target(host, port))
    assert np.all(r.rows["status"] == 200) and np.all(r.rows["error"] == 0)
    # the echoed request: head with our headers and a Content-Length, and the body
    import socket

    from benchlib.loadgen.http1 import build_request
    req = build_request("POST", "/items?x=1", host, port, headers=spec.headers, body=body)
    assert req.startswith(b"POST /items?x=1 HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nX-Bench: yes\r\n" in req and b"\r\nContent-Length: 29\r\n" in req and req.endswith(body)
    head_len = len(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(req))
    assert np.all(r.rows["bytes"] == head_len + len(req))
    del socket


def test_chunked_and_close_delimited_bodies():
    with serve("chunked", cpus=server_cpus(), chunks=5) as (host, port):
        r = run_load(LoadSpec(connections=2, duration_s=None, requests=50, warmup_s=0), Target(host, port))
    assert np.all(r.rows["error"] == 0) and np.all(r.rows["status"] == 200)
    assert len(np.unique(r.rows["conn"])) == 2, "chunked responses keep the connection alive"
    with serve("close", cpus=server_cpus()) as (host, port):
        r = run_load(LoadSpec(connections=2, duration_s=None, requests=50, warmup_s=0), Target(host, port))
    assert np.all(r.rows["error"] == 0) and np.all(r.rows["status"] == 200)
    assert len(np.unique(r.rows["conn"])) == 50, "Connection: close means one connection per request"


def test_two_workers_merged_on_one_clock(hello_target):
    spec = LoadSpec(model="closed", connections=6, duration_s=0.8, warmup_s=0.2, workers=2)
    r = run_load(spec, hello_target, client_cpus=client_cpus())
    rows = r.rows
    assert set(np.unique(rows["worker"])) == {0, 1}
    assert np.all(np.diff(rows["t_intended_ns"]) >= 0)
    # connection numbers are unique across workers: 3 per worker, 6 in all
    per_worker = {w: set(np.unique(rows["conn"][rows["worker"] == w])) for w in (0, 1)}
    assert len(per_worker[0]) == 3 and len(per_worker[1]) == 3 and not per_worker[0] & per_worker[1]
    # both workers' measured phases start at the same instant of the shared clock
    assert r.meta["measure_start_ns"] == [200_000_000, 200_000_000]
    for w in (0, 1):
        mine = rows[(rows["worker"] == w) & (rows["phase"] == 1)]
        assert mine["t_intended_ns"].min() >= 200_000_000
    assert len(r.meta["client_cpu"]["per_worker"]) == 2
    assert np.all(rows["error"] == ERROR_CODES["none"])
