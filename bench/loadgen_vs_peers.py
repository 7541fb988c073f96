#!/usr/bin/env python
"""benchlib's load generator against wrk (and ab, hey, h2load) on the same Go server.

Builds ``services/go-nethttp-hello`` outside the repository, runs it pinned to the server
CPU, and alternates benchlib and wrk (A B, then B A, ...) for ``--pairs`` pairs in each
configuration, all clients pinned to the client CPU and at equal connection counts:

* benchlib, 1 worker   vs ``wrk -t1``
* benchlib, 2 workers  vs ``wrk -t2``

Then prints, per configuration, the median of the paired ratios benchlib / wrk of
requests/s and of p50 latency, with each run's client and server CPU use (the server, not
the client, should be the bottleneck). ab, hey and h2load run once per round as further
peers. Then a new connection per request (HTTP/1.0 without keep-alive, as ``ab`` without
``-k``): benchlib's ``LoadSpec(model="closed", connections=C, requests=N, keep_alive=False,
http_version="1.0")`` against ``ab -c C -n N``, A B then B A, at ``--newconn-connections``
(20 and 400: study 03's seed), with the median of the paired ratios of requests/s and of
client CPU time per request. Finally the coordinated-omission demo: a server that freezes
``--stall-s`` in every ``--period-s``, loaded by wrk (closed), benchlib closed, and benchlib
open, next to the analytic percentiles.

``--benchlib DIR`` measures the load generator of another checkout (say, main's, for a
before/after comparison): its ``benchlib`` is imported here and by the worker processes.

Run it under the machine-wide benchmark lock::

    flock /tmp/benchlib-bench.lock python bench/loadgen_vs_peers.py
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _code_root(argv: list[str]) -> Path:
    """The checkout whose benchlib is measured: ``--benchlib DIR`` or this one. Set before
    benchlib is imported; ``PYTHONPATH`` carries it to the load generator's workers."""
    for i, a in enumerate(argv):
        if a == "--benchlib" and i + 1 < len(argv):
            return Path(argv[i + 1]).resolve()
        if a.startswith("--benchlib="):
            return Path(a.split("=", 1)[1]).resolve()
    return REPO


CODE = _code_root(sys.argv[1:])
sys.path.insert(0, str(CODE))
os.environ["PYTHONPATH"] = os.pathsep.join([str(CODE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

from benchlib.core import settings  # noqa: E402
from benchlib.core.model import LoadSpec, Target  # noqa: E402
from benchlib.loadgen import run_load  # noqa: E402
from benchlib.loadgen.peers import run_ab, run_h2load, run_hey, run_wrk  # noqa: E402
from benchlib.loadgen.testservers import serve  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def build_go_server(cache: Path) -> Path:
    """``go build`` the Go hello service into ``cache`` (outside the repository)."""
    src = REPO / "services" / "go-nethttp-hello"
    out = cache / "go-nethttp-hello" / "server"
    out.parent.mkdir(parents=True, exist_ok=True)
    if shutil.which("go") is None:
        sys.exit("go is not installed: the Go hello server cannot be built (install Go >= 1.22)")
    env = dict(os.environ, CGO_ENABLED="0")
    subprocess.run(["go", "build", "-trimpath", "-o", str(out), "."], cwd=src, env=env, check=True)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not come up")


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Server:
    """The Go server, pinned; measures its CPU use between marks."""

    def __init__(self, binary: Path, cpu: int) -> None:
        self.port = free_port()
        env = dict(os.environ, PORT=str(self.port), HOST="127.0.0.1")
        self.proc = subprocess.Popen(["taskset", "-c", str(cpu), str(binary)], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)
        self.url = f"http://127.0.0.1:{self.port}/"

    def mark(self) -> tuple[float, float]:
        return time.monotonic(), proc_cpu_s(self.proc.pid)

    def cpu_since(self, mark: tuple[float, float]) -> float:
        t, c = self.mark()
        return (c - mark[1]) / (t - mark[0])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def run_benchlib(server: Server, connections: int, workers: int, duration_s: float, warmup_s: float,
                 client_cpu: int) -> dict[str, Any]:
    spec = LoadSpec(model="closed", connections=connections, workers=workers, duration_s=duration_s, warmup_s=warmup_s)
    target = Target("127.0.0.1", server.port)
    # server CPU over the measured phase only: mark when the measured phase starts
    marks: dict[str, Any] = {}

    def progress(info: dict[str, Any]) -> None:
        if info["phase"] == "measure" and "m" not in marks:
            marks["m"] = server.mark()

    res = run_load(spec, target, client_cpus=[client_cpu], on_progress=progress)
    server_cpu = server.cpu_since(marks["m"]) if "m" in marks else float("nan")
    lat = res.latency_ns() / 1e6
    m = res.meta
    return {
        "rps": m["achieved_rps"],
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
        "client_cpu": sum(m["client_cpu"]["per_cpu"].values()),
        "server_cpu": server_cpu,
        "errors": sum(m["errors"].values()),
        "valid": m["valid"],
        "invalid_reason": m["invalid_reason"],
    }


def run_peer(name: str, server: Server, connections: int, threads: int, duration_s: float, client_cpu: int) -> dict[str, Any]:
    mark = server.mark()
    if name == "wrk":
        r = run_wrk(server.url, threads=threads, connections=connections, duration_s=duration_s, cpus=[client_cpu])
        p50 = r["latency_percentiles_ms"]["50"]
        errors = sum(r["errors"].values())
    elif name == "ab":
        r = run_ab(server.url, connections=connections, duration_s=duration_s, keep_alive=True, cpus=[client_cpu])
        p50 = r["latency_percentiles_ms"].get("50")
        errors = (r["failed"] or 0) + r["non_2xx"]
    elif name == "hey":
        r = run_hey(server.url, connections=connections, duration_s=duration_s, cpus=[client_cpu])
        p50 = r["latency_percentiles_ms"].get("50")
        errors = sum(r["errors"].values())
    elif name == "h2load":
        r = run_h2load(server.url, connections=connections, duration_s=duration_s, threads=threads, cpus=[client_cpu])
        p50 = r["latency_percentiles_ms"].get("50")  # from its per-request log
        errors = (r.get("failed") or 0) + (r.get("errored") or 0)
    else:
        raise ValueError(name)
    return {"rps": r["requests_per_s"], "p50_ms": p50, "client_cpu": r["cpu_fraction"],
            "server_cpu": server.cpu_since(mark), "errors": errors}


def fmt(x: Any, spec: str = ".3g") -> str:
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return "-"
    return format(x, spec)


def compare(args: argparse.Namespace, server: Server) -> dict[str, Any]:
    configs = [(1, 1), (2, 2)]  # (benchlib workers, wrk threads)
    results: dict[str, Any] = {}
    for workers, threads in configs:
        key = f"benchlib {workers}w vs wrk -t{threads}"
        print(f"\n== {key}, {args.connections} connections, {args.duration_s:g} s per run "
              f"(benchlib +{args.warmup_s:g} s warm-up), server CPU {args.server_cpu}, client CPU {args.client_cpu}")
        print(f"{'pair':>4} {'order':>5} | {'benchlib rps':>12} {'p50 ms':>7} {'cli':>5} {'srv':>5} | "
              f"{'wrk rps':>10} {'p50 ms':>7} {'cli':>5} {'srv':>5} | {'rps ratio':>9} {'p50 ratio':>9}")
        pairs = []
        peers: dict[str, list[dict[str, Any]]] = {p: [] for p in args.peers}
        for i in range(args.pairs):
            order = ("benchlib", "wrk") if i % 2 == 0 else ("wrk", "benchlib")
            got: dict[str, dict[str, Any]] = {}
            for who in order:
                if who == "benchlib":
                    got[who] = run_benchlib(server, args.connections, workers, args.duration_s, args.warmup_s, args.client_cpu)
                else:
                    got[who] = run_peer("wrk", server, args.connections, threads, args.duration_s, args.client_cpu)
            b, w = got["benchlib"], got["wrk"]
            ratio = b["rps"] / w["rps"]
            p50r = b["p50_ms"] / w["p50_ms"] if w["p50_ms"] else float("nan")
            pairs.append({"benchlib": b, "wrk": w, "rps_ratio": ratio, "p50_ratio": p50r, "order": order})
            print(f"{i + 1:>4} {'AB' if order[0] == 'benchlib' else 'BA':>5} | {b['rps']:>12,.0f} {b['p50_ms']:>7.3f} "
                  f"{b['client_cpu']:>5.0%} {b['server_cpu']:>5.0%} | {w['rps']:>10,.0f} {w['p50_ms']:>7.3f} "
                  f"{w['client_cpu']:>5.0%} {w['server_cpu']:>5.0%} | {ratio:>9.3f} {p50r:>9.3f}"
                  + ("" if b["valid"] else f"   [benchlib trial invalid: {b['invalid_reason']}]"))
            if workers == 1:
                for p in args.peers:
                    peers[p].append(run_peer(p, server, args.connections, 1, args.duration_s, args.client_cpu))
        med_rps = statistics.median(p["rps_ratio"] for p in pairs)
        med_p50 = statistics.median(p["p50_ratio"] for p in pairs)
        print(f"median of {len(pairs)} paired ratios benchlib/wrk: requests/s {med_rps:.3f}, p50 latency {med_p50:.3f}")
        results[key] = {"pairs": pairs, "median_rps_ratio": med_rps, "median_p50_ratio": med_p50}
        if workers == 1 and args.peers:
            b_rps = statistics.median(p["benchlib"]["rps"] for p in pairs)
            print(f"further peers ({args.connections} connections, one run per round, pinned to CPU {args.client_cpu}):")
            print(f"  {'tool':<8} {'median rps':>11} {'p50 ms':>7} {'cli':>5} {'srv':>5} {'errors':>6} | benchlib 1w / tool")
            for p, runs in peers.items():
                rps = statistics.median(r["rps"] for r in runs)
                p50s = [r["p50_ms"] for r in runs if r["p50_ms"] is not None]
                print(f"  {p:<8} {rps:>11,.0f} {fmt(statistics.median(p50s) if p50s else None, '7.3f'):>7} "
                      f"{statistics.median(r['client_cpu'] for r in runs):>5.0%} "
                      f"{statistics.median(r['server_cpu'] for r in runs):>5.0%} {sum(r['errors'] for r in runs):>6} | "
                      f"{b_rps / rps:.3f}")
            results["peers"] = peers
    return results


def newconn(args: argparse.Namespace, server: Server) -> dict[str, Any]:
    """A new connection per request: benchlib (1 worker) against ab without ``-k``, paired."""
    results: dict[str, Any] = {}
    n = args.newconn_requests
    for c in args.newconn_connections:
        key = f"new connection per request, c={c}"
        print(f"\n== {key}: benchlib closed model, {n:,} requests, keep_alive=False, HTTP/1.0 vs ab -c {c} -n {n:,} "
              f"(no -k); server CPU {args.server_cpu}, client CPU {args.client_cpu}; load average {os.getloadavg()[0]:.2f}")
        print(f"{'pair':>4} {'order':>5} | {'benchlib rps':>12} {'us/req':>7} {'cli':>5} {'srv':>5} {'err':>4} | "
              f"{'ab rps':>10} {'us/req':>7} {'cli':>5} {'srv':>5} {'err':>4} | {'rps ratio':>9} {'cpu ratio':>9}")
        pairs = []
        for i in range(args.pairs):
            order = ("benchlib", "ab") if i % 2 == 0 else ("ab", "benchlib")
            got: dict[str, dict[str, Any]] = {}
            for who in order:
                mark = server.mark()
                if who == "benchlib":
                    spec = LoadSpec(model="closed", connections=c, requests=n, duration_s=None, warmup_s=0,
                                    keep_alive=False, http_version="1.0")
                    res = run_load(spec, Target("127.0.0.1", server.port), client_cpus=[args.client_cpu])
                    m = res.meta
                    cpu_s = sum(w["traffic_cpu_s"] for w in m["worker_stats"])
                    wall_s = max(w["traffic_wall_s"] for w in m["worker_stats"])
                    got[who] = {"rps": m["achieved_rps"], "cpu_us_per_req": cpu_s / len(res.rows) * 1e6,
                                "client_cpu": cpu_s / wall_s, "errors": sum(m["errors"].values()),
                                "valid": m["valid"], "invalid_reason": m["invalid_reason"]}
                else:
                    r = run_ab(server.url, connections=c, requests=n, keep_alive=False, cpus=[args.client_cpu])
                    got[who] = {"rps": r["requests_per_s"], "cpu_us_per_req": r["cpu_s"] / n * 1e6,
                                "client_cpu": r["cpu_fraction"], "errors": (r["failed"] or 0) + r["non_2xx"]}
                got[who]["server_cpu"] = server.cpu_since(mark)
            b, a = got["benchlib"], got["ab"]
            ratio = b["rps"] / a["rps"]
            cpu_ratio = b["cpu_us_per_req"] / a["cpu_us_per_req"]
            pairs.append({"benchlib": b, "ab": a, "rps_ratio": ratio, "cpu_ratio": cpu_ratio, "order": order})
            print(f"{i + 1:>4} {'AB' if order[0] == 'benchlib' else 'BA':>5} | {b['rps']:>12,.0f} {b['cpu_us_per_req']:>7.1f} "
                  f"{b['client_cpu']:>5.0%} {b['server_cpu']:>5.0%} {b['errors']:>4} | {a['rps']:>10,.0f} "
                  f"{a['cpu_us_per_req']:>7.1f} {a['client_cpu']:>5.0%} {a['server_cpu']:>5.0%} {a['errors']:>4} | "
                  f"{ratio:>9.3f} {cpu_ratio:>9.3f}"
                  + ("" if b["valid"] else f"   [benchlib trial invalid: {b['invalid_reason']}]"))
        med_rps = statistics.median(p["rps_ratio"] for p in pairs)
        med_cpu = statistics.median(p["cpu_ratio"] for p in pairs)
        print(f"median of {len(pairs)} paired ratios benchlib/ab: requests/s {med_rps:.3f}, "
              f"client CPU per request {med_cpu:.3f}; load average {os.getloadavg()[0]:.2f}")
        results[key] = {"pairs": pairs, "median_rps_ratio": med_rps, "median_cpu_ratio": med_cpu}
    return results


def stall_demo(args: argparse.Namespace) -> dict[str, Any]:
    s, P = args.stall_s, args.period_s
    dur = 4 * P
    print(f"\n== coordinated omission: the server freezes {s:g} s in every {P:g} s; {dur:g} s runs")
    print("   analytic (open model, arrivals uniform in time): wait quantile q = max(0, s - (1-q) P)")
    truth = {q: max(0.0, s - (1 - q / 100) * P) * 1e3 for q in (50, 75, 90, 99)}
    rows = [("analytic wait (+ base latency)", truth, None)]
    with serve("stall", cpus=[args.server_cpu], stall_s=s, period_s=P) as (host, port):
        url = f"http://{host}:{port}/"
        w = run_wrk(url, threads=1, connections=args.stall_connections, duration_s=dur, cpus=[args.client_cpu])
        rows.append((f"wrk -t1 -c{args.stall_connections} --latency", {int(k): v for k, v in w["latency_percentiles_ms"].items()},
                     f"{w['requests_per_s']:,.0f} req/s"))
        target = Target(host, port)
        closed = run_load(LoadSpec(model="closed", connections=args.stall_connections, duration_s=dur, warmup_s=0.5),
                          target, client_cpus=[args.client_cpu])
        lat = closed.latency_ns() / 1e6
        rows.append((f"benchlib closed, {args.stall_connections} conns", {q: float(np.percentile(lat, q)) for q in truth},
                     f"{closed.meta['achieved_rps']:,.0f} req/s, CO risk flagged: {closed.meta['coordinated_omission_risk']}"))
        rate = args.stall_rate
        op = run_load(LoadSpec(model="open", rate_rps=rate, duration_s=dur, warmup_s=0.5, connections=int(rate * s * 1.5) + 10,
                               timeout_s=s + 5), target, client_cpus=[args.client_cpu])
        lat = op.latency_ns() / 1e6
        rows.append((f"benchlib open, {rate:g}/s constant", {q: float(np.percentile(lat, q)) for q in truth},
                     f"valid: {op.meta['valid']}, lag p99 {op.meta['schedule_lag_ns']['p99'] / 1e6:.2f} ms"))
    print(f"   {'':<34} {'p50 ms':>9} {'p75 ms':>9} {'p90 ms':>9} {'p99 ms':>9}")
    for name, pct, note in rows:
        cells = " ".join(f"{fmt(pct.get(q), '9.1f'):>9}" for q in (50, 75, 90, 99))
        print(f"   {name:<34} " + cells + (f"   {note}" if note else ""))
    return {"rows": [(n, p, note) for n, p, note in rows]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=7, help="A B pairs per configuration (at least 5)")
    ap.add_argument("--duration-s", type=float, default=5.0)
    ap.add_argument("--warmup-s", type=float, default=1.0)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--peers", nargs="*", default=["ab", "hey", "h2load"])
    ap.add_argument("--stall-s", type=float, default=1.0)
    ap.add_argument("--period-s", type=float, default=5.0)
    ap.add_argument("--stall-rate", type=float, default=500.0)
    ap.add_argument("--stall-connections", type=int, default=50)
    ap.add_argument("--no-stall", action="store_true", help="skip the coordinated-omission demo")
    ap.add_argument("--no-compare", action="store_true", help="skip the throughput comparison (keep-alive)")
    ap.add_argument("--no-newconn", action="store_true", help="skip the new-connection-per-request comparison with ab")
    ap.add_argument("--newconn-connections", type=int, nargs="*", default=[20, 400])
    ap.add_argument("--newconn-requests", type=int, default=20_000)
    ap.add_argument("--benchlib", type=Path, default=REPO,
                    help="the checkout whose load generator is measured (default: this one)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--cache", type=Path, default=settings.CACHE.value() / "bench")
    args = ap.parse_args()
    if args.pairs < 1:
        ap.error("--pairs must be >= 1")
    binary = build_go_server(args.cache)
    go = subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip()
    wrk_v = subprocess.run(["wrk", "-v"], capture_output=True, text=True)
    print(f"benchlib load generator vs peers; {go}; {(wrk_v.stdout or wrk_v.stderr).splitlines()[0]}; "
          f"python {sys.version.split()[0]}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}; "
          f"benchlib from {CODE}")
    results: dict[str, Any] = {}
    if not args.no_compare or not args.no_newconn:
        server = Server(binary, args.server_cpu)
        try:
            if not args.no_compare:
                results = compare(args, server)
            if not args.no_newconn:
                results["newconn"] = newconn(args, server)
        finally:
            server.stop()
    if not args.no_stall:
        results["stall"] = stall_demo(args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
