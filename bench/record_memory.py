#!/usr/bin/env python
"""Measure the load generator's memory cost per recorded request.

Runs one closed-model trial of ``--requests`` requests (one worker) against a local test
server and prints, from the worker's own accounting:

* the record buffer's allocated bytes per request (the engine's ``bytearray``, growth slack included);
* the worker's peak-RSS growth during the traffic divided by the requests (everything the
  process kept per request, measured by the kernel);
* the merged ``ROW_DTYPE`` rows' bytes per request in the parent.

    flock /tmp/benchlib-bench.lock python bench/record_memory.py --requests 2000000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchlib.core.model import LoadSpec, Target
from benchlib.loadgen import run_load
from benchlib.loadgen.testservers import serve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--connections", type=int, default=32)
    args = ap.parse_args()
    with serve("hello", cpus=[1]) as (host, port):
        spec = LoadSpec(model="closed", connections=args.connections, duration_s=None, requests=args.requests,
                        warmup_s=0)
        r = run_load(spec, Target(host, port), client_cpus=[0])
    w = r.meta["worker_stats"][0]
    n = w["records"]
    print(f"requests recorded: {n:,} ({r.meta['achieved_rps']:,.0f} req/s)")
    print(f"record buffer allocated: {w['record_buffer_bytes'] / n:.1f} bytes/request "
          "(bytearray of 38-byte ROW_DTYPE records, growth slack included)")
    print(f"worker peak RSS growth during traffic: {w['peak_rss_growth_bytes'] / n:.1f} bytes/request")
    print(f"merged rows in the parent: {r.rows.nbytes / len(r.rows):.1f} bytes/request (ROW_DTYPE)")


if __name__ == "__main__":
    main()
