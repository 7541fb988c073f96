#!/usr/bin/env python
"""What the cluster path costs: a local Ray cluster's load against one process's, side by side.

Builds ``services/go-nethttp-hello`` outside the repository and runs it pinned to the server
CPU. Starts a local Ray cluster (``local:N``, default 2 load nodes) once, then alternates, for
``--pairs`` pairs (A B, then B A, ...), the same closed-model trial sent

* by one process of benchlib's load generator (``run_load``, 1 worker), and
* by the cluster's load hosts (``ClusterLoad``: one actor and 1 worker per node),

every client pinned to the client CPU (on this machine every node shares it). It prints:

* the cluster's start time (s) and its memory (resident set of the Ray processes this script
  started, MB) before and after the trials;
* per cluster trial: Ray's overhead (``ready_s``: actors started and workers ready;
  ``transfer_s``: rows decoded on the driver; the wall time beyond the single-process
  trial of the same pair), the measured start skew between hosts (ms, with its ±);
* the throughput of N load nodes against 1 process: the Hodges-Lehmann estimate of the
  paired log ratios and its exact signed-rank interval (95%), as a ratio; and the same for
  p50 latency. A ratio, not a pass/fail: on one machine the nodes share the client CPU.

Run it on a quiet machine (nothing else running); it prints the load average before and
after, and a run id to quote::

    python bench/cluster_overhead.py --pairs 10
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from loadgen_vs_peers import Server, build_go_server  # noqa: E402

from benchlib.core.model import LoadSpec, Target  # noqa: E402
from benchlib.core.placement import parse_cluster  # noqa: E402
from benchlib.loadgen import run_load  # noqa: E402
from benchlib.loadgen.launch import LoadResult  # noqa: E402
from benchlib.run.cluster.cluster_load import ClusterLoad  # noqa: E402
from benchlib.run.cluster.session import ClusterSession, _proc_table  # noqa: E402
from benchlib.stats.exact import walsh_interval  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


def ray_rss_mb() -> float:
    """Resident memory (MB) of the processes below this one whose command line is Ray's
    (raylets, GCS, agents, workers): the local cluster's footprint."""
    table = _proc_table()
    me = os.getpid()
    below: set[int] = set()
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _, _) in table.items():
            if pid not in below and (ppid == me or ppid in below):
                below.add(pid)
                grew = True
    total = 0
    for pid in below:
        if b"ray" not in table[pid][2]:
            continue
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e6


def summary(res: LoadResult, wall_s: float) -> dict[str, Any]:
    """The figures of one trial: rate (req/s), p50 (ms), validity, the wall time of the call (s)."""
    lat_ms = res.latency_ns() / 1e6
    m = res.meta
    out: dict[str, Any] = {"rps": float(m["achieved_rps"]), "p50_ms": float(np.percentile(lat_ms, 50)),
                           "valid": bool(m["valid"]), "invalid_reason": m.get("invalid_reason"), "wall_s": wall_s}
    c = m.get("cluster")
    if c:
        out.update({"ready_s": c["overhead_s"]["ready_s"], "transfer_s": c["overhead_s"]["transfer_s"],
                    "skew_ms": (c["start_skew_ns"] or 0) / 1e6,
                    "skew_pm_ms": (c["start_skew_uncertainty_ns"] or 0) / 1e6})
    return out


def ratio_line(name: str, a: list[float], b: list[float]) -> str:
    """``name``: the HL estimate of b/a over pairs and its exact 95% interval."""
    d = np.log(np.asarray(b)) - np.log(np.asarray(a))
    r = walsh_interval(d)
    return (f"{name}: {np.exp(r.estimate):.3f} [{np.exp(r.lo):.3f}, {np.exp(r.hi):.3f}] "
            f"({r.achieved:.1%} exact interval, {d.size} pairs)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--nodes", type=int, default=2, help="load nodes of the local cluster (local:N)")
    ap.add_argument("--duration-s", type=float, default=3.0)
    ap.add_argument("--warmup-s", type=float, default=0.5)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "benchlib-bench")
    ap.add_argument("--json", type=Path, help="also write every trial's figures here")
    args = ap.parse_args()

    run_id = time.strftime("cluster-%Y%m%d-%H%M%S", time.gmtime())
    print(f"run {run_id}; load average before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    binary = build_go_server(args.cache)
    server = Server(binary, args.server_cpu)
    target = Target("127.0.0.1", server.port)
    spec = LoadSpec(model="closed", connections=args.connections, workers=1,
                    duration_s=args.duration_s, warmup_s=args.warmup_s)
    rows: list[dict[str, Any]] = []
    try:
        t0 = time.monotonic()
        with ClusterSession(parse_cluster(f"local:{args.nodes}")) as session:  # type: ignore[arg-type]
            start_s = time.monotonic() - t0
            mem_idle = ray_rss_mb()
            print(f"local:{args.nodes} started in {start_s:.1f} s; Ray processes' resident memory {mem_idle:.0f} MB")
            cluster = ClusterLoad(session)
            mem_peak = mem_idle
            for i in range(args.pairs):
                order = ("single", "cluster") if i % 2 == 0 else ("cluster", "single")
                pair: dict[str, Any] = {"pair": i, "order": "/".join(order)}
                for kind in order:
                    t = time.monotonic()
                    if kind == "single":
                        res = run_load(spec, target, client_cpus=[args.client_cpu], seed=i)
                    else:
                        res = cluster(spec, target, client_cpus=[args.client_cpu], seed=i)
                        mem_peak = max(mem_peak, ray_rss_mb())
                    pair[kind] = summary(res, time.monotonic() - t)
                    time.sleep(0.5)
                s, c = pair["single"], pair["cluster"]
                print(f"pair {i:2d} {pair['order']:>14}: 1 process {s['rps']:8.0f} req/s p50 {s['p50_ms']:.3f} ms "
                      f"wall {s['wall_s']:.2f} s | {args.nodes} nodes {c['rps']:8.0f} req/s p50 {c['p50_ms']:.3f} ms "
                      f"wall {c['wall_s']:.2f} s ready {c['ready_s']:.2f} s transfer {c['transfer_s']:.3f} s "
                      f"skew {c['skew_ms']:.2f} ± {c['skew_pm_ms']:.2f} ms"
                      + ("" if s["valid"] and c["valid"] else f"  invalid: {s['invalid_reason'] or c['invalid_reason']}"))
                rows.append(pair)
            mem_after = ray_rss_mb()
    finally:
        server.stop()
    single = [p["single"] for p in rows]
    clus = [p["cluster"] for p in rows]
    extra = [c["wall_s"] - s["wall_s"] for s, c in zip(single, clus)]
    print(f"\nRay's overhead per trial (median over {len(rows)} trials, s): actors and workers ready "
          f"{statistics.median(c['ready_s'] for c in clus):.2f} (max {max(c['ready_s'] for c in clus):.2f}); "
          f"rows transfer {statistics.median(c['transfer_s'] for c in clus):.3f}; wall beyond the 1-process "
          f"trial of its pair {statistics.median(extra):.2f} (max {max(extra):.2f})")
    print(f"start skew between hosts (ms): median {statistics.median(c['skew_ms'] for c in clus):.2f}, "
          f"max {max(c['skew_ms'] for c in clus):.2f}, its ± median {statistics.median(c['skew_pm_ms'] for c in clus):.2f}")
    print(f"memory of the local cluster (MB, Ray processes' resident set): idle {mem_idle:.0f}, "
          f"during trials up to {mem_peak:.0f}, after {mem_after:.0f}; start {start_s:.1f} s")
    print(ratio_line(f"throughput, {args.nodes} nodes / 1 process", [s["rps"] for s in single], [c["rps"] for c in clus]))
    print(ratio_line(f"p50 latency, {args.nodes} nodes / 1 process", [s["p50_ms"] for s in single],
                     [c["p50_ms"] for c in clus]))
    print(f"valid trials: 1 process {sum(s['valid'] for s in single)}/{len(single)}, "
          f"{args.nodes} nodes {sum(c['valid'] for c in clus)}/{len(clus)}")
    print(f"load average after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; run {run_id}")
    if args.json:
        args.json.write_text(json.dumps({"run_id": run_id, "start_s": start_s, "mem_mb": [mem_idle, mem_peak, mem_after],
                                         "pairs": rows}, indent=1))


if __name__ == "__main__":
    main()
