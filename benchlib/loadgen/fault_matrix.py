"""The fault matrix: every test-server behaviour under both load models, bounded.

Each case starts one server of :mod:`benchlib.loadgen.testservers` (HTTP/1) or
:mod:`benchlib.loadgen.h2testservers` (HTTP/2, unary gRPC calls) on 127.0.0.1 and runs
one short trial against it, closed model (count-bound: ``requests`` arrivals exactly) and
open model (constant rate: ``rate × duration`` arrivals exactly), each with keep-alive
connections and with a new connection per request (HTTP/1.0). It measures what the
reliability page (``docs/reliability.md``) shows and ``tests/loadgen/test_fault_matrix.py``
asserts:

* the rows' error kinds (and which were expected of that server);
* rows vs arrivals (every arrival is one row, always);
* the time to finish against the case's bound (the open model's hard deadline; for the
  closed model, its rounds of requests times the response and connect timeouts, plus the
  same slack);
* the worker's peak RSS;
* processes left behind (workers still running after the trial: orphans).

``python -m benchlib.loadgen.fault_matrix`` runs them all (under a minute here) and prints the
matrix as Markdown, with the date, machine and load average; ``--json PATH`` also writes the
results. Run it under the machine's benchmark lock::

    flock /tmp/benchlib-bench.lock python -m benchlib.loadgen.fault_matrix
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchlib.core.model import LoadSpec, Target
from benchlib.core.schema import ERROR_NAMES
from benchlib.loadgen.grpcgo import SMALL_METHOD, SMALL_REQUEST
from benchlib.loadgen.h2testservers import serve as serve_h2
from benchlib.loadgen.launch import run_load
from benchlib.loadgen.testservers import serve

__all__ = ["Case", "CASES", "MODELS", "RSS_LIMIT_BYTES", "run_case", "run_matrix", "to_markdown", "worker_processes",
           "main"]

MODELS = ("closed", "open")

#: Largest acceptable peak RSS of a load worker in these cases (bytes).
RSS_LIMIT_BYTES = 200 * 2**20

#: Slack of the hard deadline beyond the planned time and the timeouts (as in the engine).
DEADLINE_SLACK_S = 5.0

#: Response timeout of the servers that never finish a response (their rows are timeouts).
SHORT_TIMEOUT_S = 0.5
#: Response timeout of the others: long, so that on a busy machine a slow response is not
#: turned into a timeout (which would say nothing about the server's behaviour).
TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 0.5
CLOSED_CONNECTIONS = 4
OPEN_CONNECTIONS = 32
OPEN_RATE_RPS = 200
OPEN_DURATION_S = 1.0


@dataclass(frozen=True)
class Case:
    """One server behaviour: the test server's mode and options, the error kinds its rows
    may have, and how many requests the closed model sends (fewer when each one waits for
    its timeout).

    ``kinds[0]`` is the server's own kind: some rows must have it. The others may appear
    too: a server whose responses cost the client much work (``continue-flood``,
    ``trailer-drip``) saturates it under the open model, and then some requests may wait in
    the queue past their timeout (a ``timeout`` row, in a trial flagged invalid).
    ``timeout_s`` is short only for the servers whose rows are all timeouts.
    ``protocol`` ``"grpc"`` runs the case with unary gRPC calls, :data:`H2_STREAMS` streams
    per connection, against a server of :mod:`benchlib.loadgen.h2testservers`.
    """

    mode: str
    kinds: tuple[str, ...]
    closed_requests: int = 400
    opts: dict[str, float] = field(default_factory=dict)
    what: str = ""
    timeout_s: float = TIMEOUT_S
    protocol: str = "http1"

    @property
    def name(self) -> str:
        """The case's name: the server mode, prefixed with ``grpc:`` for the HTTP/2 servers."""
        return self.mode if self.protocol == "http1" else f"{self.protocol}:{self.mode}"


#: Streams per connection of the HTTP/2 (gRPC) cases.
H2_STREAMS = 2
#: The gRPC method and request message of the HTTP/2 cases (seed 004's SmallRequest).
GRPC_METHOD = SMALL_METHOD
GRPC_REQUEST = SMALL_REQUEST


CASES: tuple[Case, ...] = (
    Case("hello", ("none",), what="Content-Length responses (baseline)"),
    Case("chunked", ("none",), what="chunked responses with trailers"),
    Case("close", ("none",), what="body delimited by closing the connection"),
    Case("trickle", ("none",), 40, {"delay_s": 0.0005}, "a response one byte at a time"),
    Case("garbage", ("protocol",), what="random bytes"),
    Case("truncated", ("truncated",), what="half a head, then close"),
    Case("huge", ("protocol",), 40, what="a 1 MiB response head"),
    Case("short", ("closed",), what="closed in the middle of the body"),
    Case("long", ("protocol",), what="more body bytes than Content-Length"),
    Case("reset", ("reset",), what="RST on the first request"),
    Case("silent", ("timeout",), 8, what="never answers", timeout_s=SHORT_TIMEOUT_S),
    Case("mixed", ("none", "protocol", "truncated", "closed", "reset"), 120, {"delay_s": 0.0002},
         "hello, garbage, truncated, short, reset, trickle in turn"),
    Case("continue-flood", ("none", "timeout"), 200, {"count": 1000}, "1,000 `100 Continue` heads before each response"),
    Case("chunk-drip", ("timeout",), 8, what="endless 1-byte chunks", timeout_s=SHORT_TIMEOUT_S),
    Case("trailer-drip", ("protocol", "timeout"), 40, what="endless trailer lines"),
    Case("stale-keepalive", ("none",), what="closes each keep-alive connection after its response"),
    Case("unsolicited", ("none", "protocol"), what="a second response nobody asked for"),
    # HTTP/2: unary gRPC calls against benchlib.loadgen.h2testservers
    Case("hello", ("none",), what="HTTP/2, gRPC calls answered (baseline)", protocol="grpc"),
    Case("hello", ("grpc",), opts={"grpc_status": 14}, what="every call ends with grpc-status 14 (UNAVAILABLE)",
         protocol="grpc"),
    Case("rst", ("reset", "none"), what="RST_STREAM (INTERNAL_ERROR) on every second stream", protocol="grpc"),
    Case("refuse", ("none", "reset"), what="RST_STREAM (REFUSED_STREAM) on every second stream: sent again once",
         protocol="grpc"),
    Case("goaway", ("none", "reset"), what="GOAWAY after 5 streams per connection, then close", protocol="grpc"),
    Case("stall", ("timeout",), 8, what="flow-control window 0 forever, never answers", timeout_s=SHORT_TIMEOUT_S,
         protocol="grpc"),
    Case("garbage", ("protocol", "reset"), what="garbage after the preface (a 16 MiB frame header)", protocol="grpc"),
    # "reset" too, here and below: a connection torn down while both sides still write may end in
    # a TCP reset before the bad frame is read (oversized: once in about 10 runs at load 10;
    # bad-hpack: 8 of 200 calls once, in a fresh clone's CI run at load 2)
    Case("bad-hpack", ("protocol", "reset"), what="a header block that does not decode", protocol="grpc"),
    Case("oversized", ("protocol", "reset"), what="a 20,000-byte DATA frame (over 16,384)", protocol="grpc"),
    Case("mute", ("timeout",), 8, what="never answers the preface", timeout_s=SHORT_TIMEOUT_S, protocol="grpc"),
)


def spec_for(case: Case, model: str, keep_alive: bool = True, open_duration_s: float = OPEN_DURATION_S) -> LoadSpec:
    """The case's bounded LoadSpec for ``model``; ``keep_alive=False``: a new connection per
    request (HTTP/1.0, as ab without ``-k``; HTTP/1 cases only: HTTP/2 keeps its connections);
    ``open_duration_s``: the open model's seconds at ``OPEN_RATE_RPS``."""
    proto: dict[str, Any] = {} if keep_alive else {"keep_alive": False, "http_version": "1.0"}
    if case.protocol == "grpc":
        if not keep_alive:
            raise ValueError(f"case {case.name}: HTTP/2 cases run with keep-alive connections only")
        proto = dict(protocol="grpc", streams=H2_STREAMS, method="POST", path=GRPC_METHOD, body=GRPC_REQUEST)
    if model == "closed":
        return LoadSpec(model="closed", connections=CLOSED_CONNECTIONS, duration_s=None,
                        requests=case.closed_requests, warmup_s=0, timeout_s=case.timeout_s,
                        connect_timeout_s=CONNECT_TIMEOUT_S, **proto)
    return LoadSpec(model="open", rate_rps=OPEN_RATE_RPS, duration_s=open_duration_s, warmup_s=0,
                    connections=OPEN_CONNECTIONS, timeout_s=case.timeout_s, connect_timeout_s=CONNECT_TIMEOUT_S,
                    **proto)


def arrivals(spec: LoadSpec) -> int:
    """The requests a trial of ``spec`` must record (a count-bound closed model or a
    constant-rate open model, no warm-up)."""
    if spec.model == "closed":
        assert spec.requests is not None
        return int(spec.requests)
    return int(round((spec.rate_rps or 0) * (spec.duration_s or 0)))


def bound_s(spec: LoadSpec) -> float:
    """The longest the trial may take (s), from its first request to its last row."""
    per_request = spec.timeout_s + spec.connect_timeout_s
    if spec.model == "closed":
        rounds = math.ceil(arrivals(spec) / spec.connections)
        return rounds * per_request + DEADLINE_SLACK_S
    return (spec.duration_s or 0) + per_request + DEADLINE_SLACK_S


def worker_processes() -> list[int]:
    """Load-generator worker processes that are children of this process."""
    me, out = os.getpid(), []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != me:
                continue
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if b"benchlib.loadgen.worker" in f.read():
                    out.append(int(d))
        except (OSError, IndexError, ValueError):
            continue
    return out


def run_case(case: Case, model: str, *, keep_alive: bool = True, server_cpus: Sequence[int] | None = None,
             client_cpus: Sequence[int] | None = None, open_duration_s: float = OPEN_DURATION_S) -> dict[str, Any]:
    """Run one case (``open_duration_s``: see :func:`spec_for`); a JSON-able dict of what it measured."""
    spec = spec_for(case, model, keep_alive, open_duration_s)
    serve_case = serve if case.protocol == "http1" else serve_h2
    with serve_case(case.mode, cpus=server_cpus, **case.opts) as (host, port):
        t = time.monotonic()
        result = run_load(spec, Target(host, port), client_cpus=client_cpus)
        took = time.monotonic() - t
    rows, meta = result.rows, result.meta
    codes, counts = np.unique(rows["error"], return_counts=True)
    kinds = {ERROR_NAMES[int(c)]: int(n) for c, n in zip(codes, counts)}
    last_row_s = float(rows["t_done_ns"].max()) / 1e9 if len(rows) else 0.0
    return {
        "mode": case.name,
        "what": case.what,
        "model": model,
        "keep_alive": keep_alive,
        "arrivals": arrivals(spec),
        "rows": int(len(rows)),
        "kinds": kinds,
        "statuses": {str(int(st)): int(n) for st, n in zip(*np.unique(rows["status"], return_counts=True))},
        "expected_kinds": list(case.kinds),
        "unexpected_kinds": sorted(set(kinds) - set(case.kinds)),
        "finished_s": last_row_s,
        "bound_s": bound_s(spec),
        "run_load_s": took,
        "worker_peak_rss_bytes": max((w.get("peak_rss_bytes") or 0) for w in meta["worker_stats"]),
        "retries": meta["retries"],
        "unsolicited": meta["unsolicited_responses"],
        "abandoned": meta["abandoned"],
        "failed": meta["failed"],
        "valid": meta["valid"],
        "invalid_reason": meta["invalid_reason"],
        "orphans": len(worker_processes()),
    }


def run_matrix(cases: Sequence[Case] = CASES, models: Sequence[str] = MODELS, keep_alive: Sequence[bool] = (True, False),
               **cpus: Any) -> list[dict[str, Any]]:
    """Every case under every model, with keep-alive connections and with a new connection
    per request (HTTP/1 cases; HTTP/2 ones keep theirs) (see :func:`run_case` for ``cpus``)."""
    return [run_case(c, m, keep_alive=k, **cpus) for c in cases for m in models for k in keep_alive
            if k or c.protocol == "http1"]


def _reason_short(reason: str | None) -> str:
    if not reason:
        return ""
    parts = []
    for r in reason.split("; "):
        if r.startswith("no request of the measured phase"):
            parts.append("no complete response")
        elif "bytes nobody asked for" in r:
            parts.append("unsolicited bytes")
        elif r.startswith("requests were sent late"):
            parts.append(r.split(";")[0].replace("requests were sent late: ", "late: "))
        elif "busy" in r:
            parts.append(r.split(":")[0])
        elif "failed" in r:
            parts.append(r[:60])
    return ", ".join(parts)


def to_markdown(results: Sequence[dict[str, Any]], header: dict[str, Any] | None = None) -> str:
    """The matrix as a Markdown table, with a line on where and when it ran."""
    lines = []
    if header:
        lines.append(f"Run {header['date']} on {header['machine']}; load average {header['loadavg']} "
                     f"(1, 5, 15 min) at the start; {header['git']}; the whole matrix took {header['total_s']:.0f} s.")
        lines.append("")
    lines.append("| server behaviour | model | rows / arrivals | error kinds (rows) | retries | unsolicited "
                 "| finished (s) / bound (s) | worker peak RSS (MB) | valid |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        kinds = ", ".join(f"{k} {n:,}" for k, n in sorted(r["kinds"].items(), key=lambda kv: -kv[1]))
        flag = " **unexpected: " + ", ".join(r["unexpected_kinds"]) + "**" if r["unexpected_kinds"] else ""
        valid = "yes" if r["valid"] else f"no ({_reason_short(r['invalid_reason'])})"
        lines.append(
            f"| `{r['mode']}`: {r['what']} | {r['model']}{'' if r.get('keep_alive', True) else ', new conn.'} "
            f"| {r['rows']:,} / {r['arrivals']:,} | {kinds}{flag} "
            f"| {r['retries']} | {r['unsolicited']} | {r['finished_s']:.2f} / {r['bound_s']:.1f} "
            f"| {r['worker_peak_rss_bytes'] / 2**20:.0f} | {valid} |"
        )
    lost = sum(r["arrivals"] - r["rows"] for r in results)
    late = sum(r["finished_s"] > r["bound_s"] for r in results)
    orphans = sum(r["orphans"] for r in results)
    unexpected = sum(bool(r["unexpected_kinds"]) for r in results)
    lines.append("")
    lines.append(f"{len(results)} cases: {lost} rows lost, {late} past their bound, {unexpected} with an unexpected "
                 f"error kind, {orphans} orphan processes, largest worker peak RSS "
                 f"{max(r['worker_peak_rss_bytes'] for r in results) / 2**20:.0f} MB.")
    return "\n".join(lines)


def _header(total_s: float, load: tuple[float, float, float]) -> dict[str, Any]:
    from benchlib.core.provenance import cpu_model, git_info

    git = git_info()
    commit = git.get("commit") or git.get("sha") or "?"
    return {
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{cpu_model()}, {os.cpu_count()} CPUs, Linux {platform.release()}, Python {platform.python_version()}",
        "loadavg": ", ".join(f"{x:.2f}" for x in load),
        "git": f"commit {str(commit)[:10]}{' (with uncommitted changes)' if git.get('dirty') else ''}",
        "total_s": total_s,
    }


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="benchlib's load generator against every test-server behaviour")
    ap.add_argument("--modes", nargs="*", help="only these server modes (case names: HTTP/2 ones as grpc:MODE)")
    ap.add_argument("--models", nargs="*", default=list(MODELS), choices=MODELS)
    ap.add_argument("--keep-alive", choices=("both", "yes", "no"), default="both",
                    help="keep-alive connections, a new connection per request, or both (default)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    cases = [c for c in CASES if not args.modes or c.name in args.modes]
    cpus = sorted(os.sched_getaffinity(0))
    pins: dict[str, Any] = {"server_cpus": [cpus[-1]], "client_cpus": [cpus[0]]} if len(cpus) > 1 else {}
    load = os.getloadavg()
    t = time.monotonic()
    keep = {"both": (True, False), "yes": (True,), "no": (False,)}[args.keep_alive]
    results = run_matrix(cases, args.models, keep, **pins)
    header = _header(time.monotonic() - t, load)
    print(to_markdown(results, header))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"header": header, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
