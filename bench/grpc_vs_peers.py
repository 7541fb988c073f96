#!/usr/bin/env python
"""benchlib's HTTP/2 + gRPC engine against other gRPC clients and ghz, on the grpc-go server.

Unary calls of ``/SmallPayloadService/SendSmallPayload`` (seed 004's small message) against
the grpc-go test server (``benchlib/loadgen/grpcserver``) pinned to the server CPU; every
client pinned to the client CPU, closed loop, one connection, at ``--streams`` (default 1
and 50) concurrent calls:

* ``benchlib``: the load generator (``protocol="grpc"``, :mod:`benchlib.loadgen.h2engine`,
  a hand-written HTTP/2 framer on uvloop), one worker, every call a stored row;
* ``grpcio``: a client on grpcio's C core (``grpc.aio``, one channel, ``streams`` tasks
  each awaiting its next call), recording the same per-call times (intended/sent/done,
  status) in memory;
* ``h2``: a client on the pure-Python HTTP/2 stack ``h2`` (an asyncio protocol on uvloop,
  ``streams`` streams on one connection), recording the same per-call times;
* ``ghz`` v0.120.0 (``-c streams --connections 1``), the reference;
* ``h2load`` (nghttp2, ``-c 1 -m streams``, the framed message as POST data with gRPC's
  headers): no gRPC status check, an upper bound for the raw HTTP/2 rate.

Each round runs every client once; the order alternates (A B C ..., then ... C B A), for
``--pairs`` rounds. Printed per configuration: the median over rounds of each client's
calls/s and of its ratio to ghz's calls/s in the same round, with client and server CPU.

Run it under the machine's benchmark lock::

    flock /tmp/benchlib-bench.lock python bench/grpc_vs_peers.py --json /tmp/grpc_vs_peers.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CLK_TCK = os.sysconf("SC_CLK_TCK")
CLIENTS = ("benchlib", "grpcio", "h2", "ghz", "h2load")


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


# -- the two alternative clients (run in a subprocess: ``--client NAME``) -------------------
def _grpcio_client(port: int, streams: int, duration_s: float, warmup_s: float) -> dict[str, Any]:
    import asyncio

    import grpc
    import numpy as np

    from benchlib.loadgen.grpcgo import SMALL_METHOD, SMALL_REQUEST

    async def main() -> dict[str, Any]:
        rows: list[tuple[int, int, int]] = []
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.enable_http_proxy", 0)]) as ch:
            call = ch.unary_unary(SMALL_METHOD)  # bytes in, bytes out
            t_end = time.monotonic_ns() + int((warmup_s + duration_s) * 1e9)

            async def slot() -> None:
                while True:
                    t0 = time.monotonic_ns()
                    if t0 >= t_end:
                        return
                    try:
                        await call(SMALL_REQUEST, timeout=10)
                        code = 0
                    except grpc.aio.AioRpcError as exc:
                        code = exc.code().value[0]
                    rows.append((t0, time.monotonic_ns(), code))

            t_start = time.monotonic_ns()
            await asyncio.gather(*(slot() for _ in range(streams)))
        return _summary(np.array(rows, dtype=np.int64).reshape(-1, 3), t_start, warmup_s, duration_s)

    import uvloop

    return uvloop.run(main())


def _h2_client(port: int, streams: int, duration_s: float, warmup_s: float) -> dict[str, Any]:
    import asyncio
    import socket
    import struct

    import h2.config
    import h2.connection
    import h2.events
    import numpy as np

    from benchlib.loadgen.grpcgo import SMALL_METHOD, SMALL_REQUEST

    framed = b"\x00" + struct.pack(">I", len(SMALL_REQUEST)) + SMALL_REQUEST
    headers = [(":method", "POST"), (":scheme", "http"), (":path", SMALL_METHOD), (":authority", f"127.0.0.1:{port}"),
               ("content-type", "application/grpc"), ("te", "trailers")]
    rows: list[tuple[int, int, int]] = []

    class Client(asyncio.Protocol):
        def __init__(self, done: asyncio.Future[None]) -> None:
            self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="ascii"))
            self.done = done
            self.inflight: dict[int, list[int]] = {}
            self.t_end = 0

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            self.conn.initiate_connection()
            self.t_end = time.monotonic_ns() + int((warmup_s + duration_s) * 1e9)
            for _ in range(streams):
                self.send()
            transport.write(self.conn.data_to_send())  # type: ignore[attr-defined]

        def send(self) -> None:
            sid = self.conn.get_next_available_stream_id()
            self.inflight[sid] = [time.monotonic_ns(), -1]
            self.conn.send_headers(sid, headers)
            self.conn.send_data(sid, framed, end_stream=True)

        def data_received(self, data: bytes) -> None:
            for ev in self.conn.receive_data(data):
                if isinstance(ev, h2.events.DataReceived):
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.TrailersReceived):
                    st = self.inflight.get(ev.stream_id)
                    if st is not None:
                        st[1] = int(dict(ev.headers).get("grpc-status", "2"))
                if getattr(ev, "stream_ended", None) is not None or isinstance(ev, h2.events.StreamReset):
                    sid = ev.stream_id
                    st = self.inflight.pop(sid, None)
                    if st is None:
                        continue
                    now = time.monotonic_ns()
                    rows.append((st[0], now, st[1] if not isinstance(ev, h2.events.StreamReset) else -2))
                    if now < self.t_end:
                        self.send()
            data_out = self.conn.data_to_send()
            if data_out:
                self.transport.write(data_out)  # type: ignore[attr-defined]
            if not self.inflight and not self.done.done():
                self.done.set_result(None)

        def connection_lost(self, exc: Exception | None) -> None:
            if not self.done.done():
                self.done.set_result(None)

    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        t_start = time.monotonic_ns()
        transport, _ = await loop.create_connection(lambda: Client(done), "127.0.0.1", port)
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await done
        transport.close()
        return _summary(np.array(rows, dtype=np.int64).reshape(-1, 3), t_start, warmup_s, duration_s)

    import uvloop

    return uvloop.run(main())


def _summary(rows: Any, t_start: int, warmup_s: float, duration_s: float) -> dict[str, Any]:
    """Calls/s over the measured window (sent after the warm-up), p50, errors."""
    import numpy as np

    t_meas = t_start + int(warmup_s * 1e9)
    m = rows[rows[:, 0] >= t_meas]
    lat_ms = (m[:, 1] - m[:, 0]) / 1e6
    return {"calls": int(len(m)), "rps": len(m) / duration_s,
            "p50_ms": float(np.percentile(lat_ms, 50)) if len(m) else float("nan"),
            "errors": int((m[:, 2] != 0).sum())}


# -- the driver ---------------------------------------------------------------------------
def run_client(name: str, port: int, streams: int, args: argparse.Namespace, workdir: Path,
               server_pid: int) -> dict[str, Any]:
    from benchlib.core.model import LoadSpec, Target
    from benchlib.loadgen import run_load
    from benchlib.loadgen.grpcgo import PROTO, SMALL_METHOD, SMALL_REQUEST
    from benchlib.loadgen.peers.ghz import run_ghz
    from benchlib.loadgen.peers.h2load import run_h2load

    cpu = [args.client_cpu]
    s0, t0 = proc_cpu_s(server_pid), time.monotonic()
    url = f"http://127.0.0.1:{port}{SMALL_METHOD}"
    if name == "benchlib":
        spec = LoadSpec(model="closed", connections=1, streams=streams, protocol="grpc", method="POST",
                        path=SMALL_METHOD, body=SMALL_REQUEST, duration_s=args.duration_s, warmup_s=args.warmup_s)
        res = run_load(spec, Target("127.0.0.1", port), client_cpus=cpu)
        m = res.meta
        import numpy as np

        out = {"rps": m["achieved_rps"], "p50_ms": float(np.percentile(res.latency_ns() / 1e6, 50)),
               "errors": int(sum(m["errors"].values())), "client_cpu": sum(m["client_cpu"]["per_cpu"].values()),
               "valid": m["valid"]}
    elif name in ("grpcio", "h2"):
        cmd = ["taskset", "-c", str(args.client_cpu), sys.executable, __file__, "--client", name, "--port", str(port),
               "--streams", str(streams), "--duration-s", str(args.duration_s), "--warmup-s", str(args.warmup_s)]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        stdout, _ = p.communicate(timeout=args.duration_s + args.warmup_s + 120)
        out = json.loads(stdout.strip().splitlines()[-1])
        out["client_cpu"] = out.pop("cpu_s") / out.pop("wall_s")  # over the run, not the interpreter's start
    elif name == "ghz":
        r = run_ghz(url, proto=PROTO, body=SMALL_REQUEST, concurrency=streams, connections=1,
                    duration_s=args.duration_s + args.warmup_s, cpus=cpu)
        out = {"rps": r["requests_per_s"], "p50_ms": r["latency_percentiles_ms"].get("50"), "errors": r["non_ok"],
               "client_cpu": r["cpu_fraction"]}
    elif name == "h2load":
        r = run_h2load(url, connections=1, duration_s=args.duration_s, warmup_s=args.warmup_s, threads=1, h1=False,
                       cpus=cpu, method="POST", body=b"\x00" + len(SMALL_REQUEST).to_bytes(4, "big") + SMALL_REQUEST,
                       headers=(("content-type", "application/grpc"), ("te", "trailers")),
                       extra_args=["-m", str(streams)])
        out = {"rps": r["requests_per_s"], "p50_ms": r["latency_percentiles_ms"].get("50"),
               "errors": (r.get("failed") or 0) + (r.get("errored") or 0), "client_cpu": r["cpu_fraction"]}
    else:
        raise ValueError(name)
    out["server_cpu"] = (proc_cpu_s(server_pid) - s0) / (time.monotonic() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--client", choices=("grpcio", "h2"), help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--streams", type=int, nargs="*", default=[1, 50])
    ap.add_argument("--pairs", type=int, default=3, help="rounds per configuration (the order alternates)")
    ap.add_argument("--duration-s", type=float, default=5.0)
    ap.add_argument("--warmup-s", type=float, default=1.0)
    ap.add_argument("--clients", nargs="*", default=list(CLIENTS), choices=CLIENTS)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    if args.client:  # a child: one run of an alternative client, a JSON line on stdout
        fn = _grpcio_client if args.client == "grpcio" else _h2_client
        c0, w0 = time.process_time(), time.monotonic()
        out = fn(args.port, args.streams[0], args.duration_s, args.warmup_s)
        out["cpu_s"], out["wall_s"] = time.process_time() - c0, time.monotonic() - w0
        print(json.dumps(out))
        return

    from benchlib.loadgen.grpcgo import build_grpc_server
    from benchlib.loadgen.peers.ghz import ensure_ghz

    cpus = sorted(os.sched_getaffinity(0))
    args.client_cpu, server_cpu = cpus[0], cpus[-1]
    ensure_ghz()
    server = subprocess.Popen(["taskset", "-c", str(server_cpu), str(build_grpc_server()), "-addr", "127.0.0.1:0"],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = int(server.stdout.readline().split()[1])
    results: dict[str, Any] = {"started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                               "load_avg_start": os.getloadavg(), "duration_s": args.duration_s,
                               "warmup_s": args.warmup_s, "pairs": args.pairs, "client_cpu": args.client_cpu,
                               "server_cpu": server_cpu, "configs": {}}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for streams in args.streams:
                runs: dict[str, list[dict[str, Any]]] = {c: [] for c in args.clients}
                for r in range(args.pairs):
                    order = list(args.clients) if r % 2 == 0 else list(reversed(args.clients))
                    for name in order:
                        res = run_client(name, port, streams, args, Path(tmp), server.pid)
                        runs[name].append(res)
                        print(f"streams={streams} round {r + 1} {name:9s} {res['rps']:9.0f} calls/s  "
                              f"client CPU {res['client_cpu'] or 0:.2f}  server CPU {res['server_cpu']:.2f}  "
                              f"errors {res['errors']}", flush=True)
                summary: dict[str, Any] = {}
                for name, rs in runs.items():
                    row = {"rps_median": statistics.median(x["rps"] for x in rs),
                           # the client's CPU per call (µs): what it costs, whatever the server allowed
                           "client_us_per_call_median": statistics.median(
                               (x["client_cpu"] or 0) / x["rps"] * 1e6 for x in rs),
                           "client_cpu_median": statistics.median(x["client_cpu"] or 0 for x in rs),
                           "server_cpu_median": statistics.median(x["server_cpu"] for x in rs),
                           "runs": rs}
                    if "ghz" in runs and name != "ghz":
                        row["ratio_to_ghz_median"] = statistics.median(
                            x["rps"] / g["rps"] for x, g in zip(rs, runs["ghz"]))
                    summary[name] = row
                results["configs"][f"streams={streams}"] = summary
    finally:
        server.terminate()
        server.wait(timeout=10)
    results["load_avg_end"] = os.getloadavg()
    results["finished_utc"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    print(f"\nload average at start {results['load_avg_start']}, at end {results['load_avg_end']}")
    for cfg, summary in results["configs"].items():
        print(f"{cfg} (1 connection):")
        for name, row in summary.items():
            ratio = f"  x{row['ratio_to_ghz_median']:.2f} of ghz (median of paired ratios)" \
                if "ratio_to_ghz_median" in row else ""
            print(f"  {name:9s} {row['rps_median']:9.0f} calls/s  client {row['client_us_per_call_median']:6.1f} "
                  f"µs CPU/call  CPU client {row['client_cpu_median']:.2f} server {row['server_cpu_median']:.2f}{ratio}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
