"""``run_load``: one trial's load, run in worker processes, merged into one result."""

from __future__ import annotations

import base64
import dataclasses
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as mp_wait
from typing import Any

import numpy as np

from benchlib.core.errors import LoadGenError, LoadSpecError
from benchlib.core.model import LoadSpec, Target
from benchlib.core.schema import ERROR_NAMES, PHASE_CODES, ROW_DTYPE
from benchlib.core.signals import parent_death_signal_setter
from benchlib.core.slicing import SlicePlan
from benchlib.loadgen import guard
from benchlib.loadgen.preflight import check_client_cpus, validate
from benchlib.loadgen.shares import HostShare, split_evenly
from benchlib.loadgen.slices import check_sliceable

__all__ = ["LoadResult", "run_interleaved", "run_load", "loadspec_to_dict", "split_evenly"]

#: Seconds a worker may take to start (spawn, import, pin) before the trial is abandoned.
WORKER_START_TIMEOUT_S = 60.0

#: Delay between the start signal and the first request, so every worker has it (ns).
START_MARGIN_NS = 30_000_000


@dataclass
class LoadResult:
    """One trial's load: every request's row and the trial's metadata.

    Attributes
    ----------
    rows: :data:`benchlib.core.schema.ROW_DTYPE` array of all workers, sorted by ``t_intended_ns``;
        times in ns relative to the trial's ``t0`` on ``CLOCK_MONOTONIC``.
    meta: JSON-able dict (see ``docs/loadgen.md``).
    hosts: each row's load host (:data:`benchlib.core.schema.HOST_DTYPE`, an index into
        ``meta["cluster"]["hosts"]``) when the load came from several hosts
        (:mod:`benchlib.run.cluster`); ``None`` on one machine (every row host 0).
    """

    rows: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)
    hosts: np.ndarray | None = None

    def measured(self) -> np.ndarray:
        """The rows of the measured phase."""
        return self.rows[self.rows["phase"] == PHASE_CODES["measure"]]

    def latency_ns(self, phase: str = "measure", ok_only: bool = True) -> np.ndarray:
        """Latencies (``t_done - t_intended``, ns) of one phase, successful requests only by default."""
        r = self.rows[self.rows["phase"] == PHASE_CODES[phase]]
        if ok_only:
            r = r[r["error"] == 0]
        return r["t_done_ns"] - r["t_intended_ns"]

    def __repr__(self) -> str:
        m = self.meta
        return (
            f"LoadResult({len(self.rows):,} rows, achieved {m.get('achieved_rps', 0):,.0f} req/s, "
            f"valid={m.get('valid')}{'' if m.get('valid') else ': ' + str(m.get('invalid_reason'))})"
        )


def loadspec_to_dict(spec: LoadSpec) -> dict[str, Any]:
    """A LoadSpec as a JSON-able dict (the body as text when it is UTF-8, else base64)."""
    d = dataclasses.asdict(spec)
    d["stages"] = [[s.rate_rps, s.duration_s] for s in spec.stages]
    d["headers"] = [list(h) for h in spec.headers]
    body = bytes(spec.body)
    try:
        d["body"] = body.decode("utf-8")
    except UnicodeDecodeError:
        d["body"] = None
        d["body_base64"] = base64.b64encode(body).decode("ascii")
    return d


def _worker_configs(spec: LoadSpec, target: Target, seed: int, share: HostShare = HostShare()) -> list[dict[str, Any]]:  # noqa: B008 - frozen
    """One config per worker of this host; the workers are numbered globally over the hosts
    (:class:`benchlib.loadgen.shares.HostShare`), so their schedules and connection numbers
    are this host's disjoint part of the trial's."""
    W = spec.workers
    G = share.total_workers(W)
    conns = share.split(spec.connections, W)
    reqs = share.split(spec.requests, W) if spec.requests is not None else [None] * W
    warm = share.split(spec.warmup_requests, W) if spec.warmup_requests else [None] * W
    out = []
    for w, g in enumerate(share.global_workers(W)):
        out.append(
            dict(
                host=target.host, port=target.port, model=spec.model, connections=conns[w],
                duration_s=spec.duration_s if not spec.stages else None, requests=reqs[w],
                warmup_s=spec.warmup_s if not spec.warmup_requests else 0.0, warmup_requests=warm[w],
                rate_rps=spec.rate_rps, arrival=spec.arrival,
                stages=[(s.rate_rps, s.duration_s) for s in spec.stages],
                keep_alive=spec.keep_alive, http_version=spec.http_version, method=spec.method,
                path=spec.path, headers=list(spec.headers), body=bytes(spec.body),
                connect_timeout_s=spec.connect_timeout_s, timeout_s=spec.timeout_s,
                protocol=spec.protocol, streams=spec.streams,
                worker=g, workers=G, seed=seed,
            )
        )
    return out


#: Scratch folders of a trial's workers: ``benchlib-load-p<owner pid>-<random>`` in /dev/shm
#: (else the temporary folder); :func:`sweep_scratch` removes those whose owner is gone.
SCRATCH_PREFIX = "benchlib-load-"
#: A scratch folder without an owner pid (named before it had one) older than this (s) is a leftover.
SCRATCH_MAX_AGE_S = 6 * 3600.0


def _scratch_base() -> str | None:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def _scratch_dir() -> str:
    return tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}p{os.getpid()}-", dir=_scratch_base())


def sweep_scratch(bases: Sequence[str | None] | None = None, *, now: float | None = None) -> list[str]:
    """Remove the scratch folders a killed run left (the owner process gone, or, for folders
    named without an owner pid, older than :data:`SCRATCH_MAX_AGE_S`); folders of live owners
    stay. ``bases``: the folders to look in (default /dev/shm and the temporary folder).
    Returns the paths removed."""
    removed = []
    now = time.time() if now is None else now
    seen = set()
    for base in bases if bases is not None else (_scratch_base(), tempfile.gettempdir()):
        if base is None or base in seen or not os.path.isdir(base):
            continue
        seen.add(base)
        for name in os.listdir(base):
            path = os.path.join(base, name)
            if not name.startswith(SCRATCH_PREFIX) or not os.path.isdir(path) or os.path.islink(path):
                continue
            m = re.match(rf"{re.escape(SCRATCH_PREFIX)}p(\d+)-", name)
            try:
                gone = (not os.path.exists(f"/proc/{m.group(1)}")) if m else now - os.stat(path).st_mtime > SCRATCH_MAX_AGE_S
            except OSError:
                continue
            if gone:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def run_load(
    spec: LoadSpec,
    target: Target,
    *,
    client_cpus: Sequence[int] | None = None,
    seed: int = 0,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    share: HostShare | None = None,
    start_wall_ns: int | Callable[[], int] | None = None,
) -> LoadResult:
    """Run one trial's load against ``target`` and return every request's row.

    The load runs in ``spec.workers`` fresh interpreter processes (spawn semantics, see
    :mod:`benchlib.loadgen.worker`; so this works from a Jupyter kernel or papermill,
    whatever their event loop or threads), worker ``i`` pinned
    to ``client_cpus[i % len(client_cpus)]``. The call blocks until the trial is over.

    Parameters
    ----------
    spec: what load to apply (see :class:`benchlib.core.model.LoadSpec`).
    target: where to send it.
    client_cpus: CPUs for the workers; ``None`` leaves them on this process's CPUs.
    seed: seeds the Poisson arrivals (worker ``w`` uses ``(seed, w)``).
    on_progress: called about twice a second with ``{"elapsed_s", "requests", "inflight",
        "pending", "phase", "planned_s"}`` summed over the workers.
    share: this host's part of a load several hosts drive (:mod:`benchlib.loadgen.shares`;
        ``None``: the whole load, one machine).
    start_wall_ns: the trial's start as a wall-clock instant (``time.time_ns()``), the same
        for every host; converted here to this host's monotonic clock (``t0``); or a function
        called once the workers are ready that returns that instant (it may block until
        every host is ready: :mod:`benchlib.run.cluster`). ``None``: start as soon as the workers
        are ready. A start instant already past when the
        workers are ready is kept (the schedule stays common to the hosts; the lateness is
        ``start_late_ns`` in the meta, and the guard sees it as schedule lag).

    A worker that fails during the trial (a bug of ours, or a worker killed) does not cost
    the rows already recorded: the result holds every row the workers recorded (a failing
    engine records every request due until then, see :mod:`benchlib.loadgen.engine`), and
    its meta says ``failed: true``, ``valid: false`` and why (``failure``; each failed
    worker's traceback in ``worker_errors``).

    Raises
    ------
    benchlib.core.errors.LoadSpecError
        Before any traffic, when the spec cannot run (see :func:`validate`).
    benchlib.core.errors.LoadGenError
        When a worker fails before the trial starts (its traceback is in the message).
    """
    validate(spec, target)
    share = share or HostShare()
    if share.hosts > 1 and spec.connections < share.total_workers(spec.workers):
        raise LoadSpecError(f"{spec.connections} connections cannot be divided over {share.hosts} hosts × "
                            f"{spec.workers} worker(s); use at least {share.total_workers(spec.workers)} connections")
    cpus = check_client_cpus(client_cpus)
    cfgs = _worker_configs(spec, target, seed, share)
    planned_s = spec.warmup_s + (spec.measured_duration_s or 0.0)
    with _Workers(cfgs, cpus, planned_s, on_progress) as drive:
        stats, t0, start_late_ns, start_wall_ns = drive.run(start_wall_ns)
        rows, lag = drive.rows_of(stats, lambda w: f"w{w}.npy")
        meta = build_meta(spec, rows, lag, stats, cpus, t0)
        if share.hosts > 1 or start_wall_ns is not None:
            meta["share"] = {"host": share.host, "hosts": share.hosts,
                             "global_workers": list(share.global_workers(spec.workers))}
            meta["start_wall_ns"] = start_wall_ns
            meta["start_late_ns"] = int(start_late_ns)
        return LoadResult(rows=rows, meta=meta)


def run_interleaved(
    loads: Sequence[tuple[LoadSpec, Target]],
    plan: SlicePlan,
    *,
    client_cpus: Sequence[int] | None = None,
    seed: int = 0,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> list[LoadResult]:
    """One interleaved trial: the arms' loads, each to its own target, alternating in the
    slices of ``plan`` (:mod:`benchlib.loadgen.slices`); one result per arm, in ``loads``'
    order, holding only that arm's rows and its meta (its measured seconds are its measured
    slices', ``meta["interleave"]`` says how it ran).

    Every worker runs one sliced engine per arm in one event loop (``spec.workers`` workers,
    the same for every arm; each arm's connections split over them). ``on_start(t0_ns)`` is
    called with the trial's start on this process's monotonic clock as soon as it is set (the
    caller reads the instances' CPU counters at the slice boundaries from then on). Each spec's
    warm-up and measured seconds are replaced by the plan's.

    Raises
    ------
    benchlib.core.errors.LoadSpecError
        Before any traffic: a spec that cannot run, specs that differ in their number of
        workers, an HTTP/2 or gRPC load, or a load bounded by a request count.
    benchlib.core.errors.LoadGenError
        When a worker fails before the trial starts.
    """
    if len(loads) != len(plan.windows):
        raise LoadSpecError(f"{len(loads)} loads for a plan of {len(plan.windows)} arms")
    check_sliceable([s.model for s, _ in loads], [s.protocol for s, _ in loads],
                    [s.requests is not None or bool(s.warmup_requests) for s, _ in loads],
                    [bool(s.stages) for s, _ in loads])
    workers = {s.workers for s, _ in loads}
    if len(workers) != 1:
        raise LoadSpecError(f"the arms of an interleaved trial need the same number of workers, got {sorted(workers)}")
    specs = [s.with_(warmup_s=plan.warmup_s, duration_s=plan.total_s - plan.warmup_s) for s, _ in loads]
    for spec, (_, target) in zip(specs, loads):
        validate(spec, target)
    cpus = check_client_cpus(client_cpus)
    per_arm = [_worker_configs(spec, target, seed * 1_000_003 + i) for i, (spec, (_, target)) in
               enumerate(zip(specs, loads))]
    windows = [w.tolist() for w in plan.windows]
    cfgs = [{"arms": [per_arm[i][w] for i in range(len(loads))], "windows": windows} for w in range(len(per_arm[0]))]
    with _Workers(cfgs, cpus, plan.total_s, on_progress) as drive:
        stats, t0, _late, _wall = drive.run(None, on_start)
        out = []
        for i, spec in enumerate(specs):
            arm_stats = [w[i] if isinstance(w, list) else w for w in stats]  # a dict: the worker failed
            rows, lag = drive.rows_of(arm_stats, lambda w, i=i: f"w{w}.npy.{i}.npy")  # type: ignore[misc]  # i: an int
            measured = plan.measured_s(i)
            last_end = int(plan.windows[i][-1, 1])
            meta = build_meta(spec, rows, lag, arm_stats, cpus, t0, measured_s=measured, window_end_ns=last_end)
            meta["interleave"] = {"arm": i, "arms": len(loads), "slice_ms": plan.slice_ms, "gap_ms": plan.gap_ms,
                                  "order": list(plan.order), "slices": int(len(plan.windows[i])),
                                  "measured_s": measured, "warmup_s": plan.warmup_s, "total_s": plan.total_s}
            out.append(LoadResult(rows=rows, meta=meta))
        return out


class _Workers:
    """The worker processes of one trial: started and configured, started together, their
    stats collected, their rows read back; always stopped and their scratch folder removed."""

    def __init__(self, cfgs: list[dict[str, Any]], cpus: list[int] | None, planned_s: float,
                 on_progress: Callable[[dict[str, Any]], None] | None) -> None:
        self.cfgs = cfgs
        self.cpus = cpus
        self.planned_s = planned_s
        self.on_progress = on_progress
        self.scratch = _scratch_dir()
        self.procs: list[Any] = []
        self.pipes: list[Any] = []
        self.completed = False

    def __enter__(self) -> _Workers:
        return self

    def run(self, start_wall_ns: int | Callable[[], int] | None,
            on_start: Callable[[int], None] | None = None) -> tuple[list[Any], int, int, int | None]:
        """Start the workers, wait until each is ready, start the trial at one instant and
        wait for its end: each worker's stats, ``t0`` (monotonic ns), how late it started (ns)
        and the wall-clock start it was given (``start_wall_ns`` called, if a function)."""
        cpus = self.cpus
        for w, cfg in enumerate(self.cfgs):
            wcpus = [cpus[w % len(cpus)]] if cpus else None
            proc, pipe = _start_worker(w)
            self.procs.append(proc)
            self.pipes.append(pipe)
            pipe.send(("config", cfg, wcpus, os.path.join(self.scratch, f"w{w}.npy")))
        pipes, procs = self.pipes, self.procs
        ready: dict[int, dict[str, Any]] = {}
        deadline = time.monotonic() + WORKER_START_TIMEOUT_S
        while len(ready) < len(pipes):
            left = deadline - time.monotonic()
            if left <= 0:
                raise LoadGenError(f"load workers did not start within {WORKER_START_TIMEOUT_S:g} s")
            for answered in mp_wait([p for i, p in enumerate(pipes) if i not in ready], timeout=left):
                i = pipes.index(answered)
                msg = _recv(answered, procs[i], i)
                if msg[0] == "error":
                    raise LoadGenError(f"load worker {i} failed to start:\n{msg[1]}")
                ready[i] = msg[1]
        if callable(start_wall_ns):
            start_wall_ns = int(start_wall_ns())
        now = time.monotonic_ns()
        if start_wall_ns is None:
            t0 = now + START_MARGIN_NS
        else:  # the common wall-clock instant on this host's monotonic clock
            t0 = now + (int(start_wall_ns) - time.time_ns())
        start_late_ns = max(0, now - t0)
        for pipe in pipes:
            pipe.send(("start", t0, t0))
        if on_start is not None:
            on_start(t0)
        stats = _collect(self.planned_s, pipes, procs, self.on_progress)
        self.completed = True
        return stats, t0, start_late_ns, start_wall_ns

    def rows_of(self, stats: list[dict[str, Any]], name: Callable[[int], str]) -> tuple[np.ndarray, np.ndarray]:
        """The rows (sorted by intended time) and open-model lags of the workers that handed
        theirs back (``name(w)``: worker ``w``'s rows file in the scratch folder)."""
        parts = []
        lags = []
        for w in range(len(self.cfgs)):
            path = os.path.join(self.scratch, name(w))
            if "pid" not in stats[w]:
                continue  # failed without handing back rows
            parts.append(np.load(path, allow_pickle=False))
            lags.append(np.load(path + ".lag.npy", allow_pickle=False))
        rows = np.concatenate(parts) if parts else np.zeros(0, ROW_DTYPE)
        del parts
        rows = rows[np.argsort(rows["t_intended_ns"], kind="stable")]
        lag = np.concatenate(lags) if lags else np.zeros(0, np.int64)
        return rows, lag

    def __exit__(self, *exc: object) -> None:
        if not self.completed:  # an error or Ctrl-C: stop the workers now, not after their trial
            for p in self.procs:
                if p.is_alive():
                    p.kill()
        for pipe in self.pipes:
            try:
                pipe.close()
            except OSError:
                pass
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        shutil.rmtree(self.scratch, ignore_errors=True)


class _Proc:
    """A worker process (a fresh interpreter) with the interface the trial needs."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen

    @property
    def exitcode(self) -> int | None:
        return self.popen.poll()

    def join(self, timeout: float | None = None) -> None:
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        self.popen.kill()


_WORKER_DEATH_SIGNAL = parent_death_signal_setter(signal.SIGKILL)


def _start_worker(w: int) -> tuple[_Proc, Connection]:
    """Start worker ``w`` as ``python -m benchlib.loadgen.worker FD`` on a socket pair."""
    parent_sock, child_sock = socket.socketpair()
    try:
        popen = subprocess.Popen(
            [sys.executable, "-m", "benchlib.loadgen.worker", str(child_sock.fileno())],
            pass_fds=(child_sock.fileno(),),
            stdin=subprocess.DEVNULL,
            close_fds=True,
            # killed with the thread that started it: a load host's actor killed mid-trial
            # (benchlib.run.cluster) or a runner killed outright leaves no worker sending load
            preexec_fn=_WORKER_DEATH_SIGNAL,
        )
    finally:
        child_sock.close()
    return _Proc(popen), Connection(parent_sock.detach())


def _recv(pipe: Any, proc: Any, i: int) -> tuple[Any, ...]:
    try:
        return pipe.recv()
    except (EOFError, OSError):
        proc.join(timeout=2)
        raise LoadGenError(f"load worker {i} died (exit code {proc.exitcode}) without reporting") from None


def _collect(
    planned_s: float, pipes: list[Any], procs: list[Any], on_progress: Callable[[dict[str, Any]], None] | None
) -> list[Any]:
    """Each worker's stats, in worker order (a list of one per arm for an interleaved trial's
    worker); a worker that failed without handing back rows is ``{"worker": i, "error": why}``.
    ``planned_s``: the trial's planned seconds, for the progress events."""
    done: dict[int, dict[str, Any]] = {}
    latest: dict[int, dict[str, Any]] = {}
    last_report = 0.0
    while len(done) < len(pipes):
        waiting = [p for i, p in enumerate(pipes) if i not in done]
        for pipe in mp_wait(waiting, timeout=1.0):
            i = pipes.index(pipe)
            try:
                msg = _recv(pipe, procs[i], i)
            except LoadGenError as exc:  # died without reporting: the others' rows still count
                done[i] = {"worker": i, "error": str(exc)}
                continue
            if msg[0] == "progress":
                latest[i] = msg[1]
            elif msg[0] == "done":
                done[i] = msg[1]
            elif msg[0] == "error":
                done[i] = {"worker": i, "error": f"load worker {i} failed:\n{msg[1]}"}
        now = time.monotonic()
        if on_progress is not None and latest and now - last_report >= 0.5:
            last_report = now
            vals = list(latest.values())
            on_progress(
                {
                    "elapsed_s": max(v["elapsed_s"] for v in vals),
                    "planned_s": planned_s,
                    "requests": sum(v["requests"] for v in vals),
                    "inflight": sum(v["inflight"] for v in vals),
                    "pending": sum(v["pending"] for v in vals),
                    "phase": "measure" if any(v["phase"] == "measure" for v in vals) else "warmup",
                    "workers": len(pipes),
                }
            )
    return [done[i] for i in range(len(pipes))]


def build_meta(
    spec: LoadSpec,
    rows: np.ndarray,
    open_lag_ns: np.ndarray,
    workers: list[dict[str, Any]],
    cpus: list[int] | None,
    t0_ns: int,
    *,
    measured_s: float | None = None,
    window_end_ns: int | None = None,
) -> dict[str, Any]:
    """The trial's JSON-able metadata (see ``docs/loadgen.md``). An arm of an interleaved trial
    gives its measured seconds (``measured_s``: its measured slices') and the end of its last
    slice (``window_end_ns``, from ``t0``)."""
    measure = rows[rows["phase"] == PHASE_CODES["measure"]]
    ok = measure[measure["error"] == 0]
    failures = {str(w["worker"]): str(w["error"]) for w in workers if w.get("error")}
    workers = [w for w in workers if "pid" in w]  # the ones that handed back their rows
    # measured window
    starts = [w["t_measure_ns"] for w in workers if w.get("t_measure_ns") is not None]
    stops = [w["t_stop_ns"] for w in workers if w.get("t_stop_ns") is not None]
    planned = spec.measured_duration_s
    if measured_s is not None:
        measured_duration_s = float(measured_s)
        window_end = window_end_ns
    elif planned is not None and not spec.warmup_requests:
        # the planned window, from the measured phase's start on the shared clock
        measured_duration_s = float(planned)
        window_end = min(starts) - t0_ns + int(planned * 1e9) if starts else None
    elif len(measure):
        measured_duration_s = float(measure["t_done_ns"].max() - measure["t_intended_ns"].min()) / 1e9
        window_end = None
    else:
        measured_duration_s = 0.0
        window_end = None
    measured_duration_s = max(measured_duration_s, 1e-9)
    # achieved: responses of the measured phase completed within its window, per second
    in_window = ok if window_end is None else ok[ok["t_done_ns"] <= window_end]
    achieved = len(in_window) / measured_duration_s
    if spec.model == "open":
        lag = open_lag_ns
    else:
        lag = (rows["t_sent_ns"] - rows["t_intended_ns"])[rows["error"] != ERROR_NAMES.index("connect")]
    lags = guard.lag_percentiles(lag)
    cpu = guard.cpu_by_cpu(workers)
    unsolicited = sum(int(w.get("unsolicited_responses") or 0) for w in workers)
    retries = sum(int(w.get("retries") or 0) for w in workers)
    idle_timeouts = sum(int(w.get("idle_timeouts") or 0) for w in workers)
    valid, reason = guard.assess(spec.model, lags, cpu, worker_busy=guard.busy_by_worker(workers),
                                 ok_measured=len(ok), unsolicited=unsolicited)
    failure = None
    if failures:
        failure = "; ".join(f"load worker {i} failed: {_last_line(t)}" for i, t in sorted(failures.items()))
        valid, reason = False, failure + ("; " + reason if reason else "")
    errors = {name: int(np.count_nonzero(measure["error"] == code)) for code, name in enumerate(ERROR_NAMES) if code}
    errors_warmup = {
        name: int(np.count_nonzero((rows["error"] == code) & (rows["phase"] == PHASE_CODES["warmup"])))
        for code, name in enumerate(ERROR_NAMES)
        if code
    }
    statuses, counts = np.unique(measure["status"][measure["error"] == 0], return_counts=True)
    reasons: dict[str, str] = {}
    for w in workers:
        for k, v in w.get("reasons", {}).items():
            reasons.setdefault(k, v)
    wmeta = [
        {k: w.get(k) for k in ("worker", "pid", "cpus", "cpu_s", "wall_s", "traffic_cpu_s", "traffic_wall_s",
                                "cpu_fraction", "spin_ns", "runqueue_wait_s", "records", "record_buffer_bytes",
                                "peak_rss_growth_bytes", "peak_rss_bytes", "unsolicited_responses", "idle_timeouts", "retries",
                                "idle_connect_failures", "abandoned", "goaways", "rst_streams",
                                "connection_errors")}
        for w in workers
    ]
    n_all = len(rows)
    return {
        "loadspec": loadspec_to_dict(spec),
        "description": spec.describe(),
        "model": spec.model,
        "offered_rps": spec.offered_rps,
        "achieved_rps": achieved,
        "measured_duration_s": measured_duration_s,
        "requests": {"warmup": int(n_all - len(measure)), "measure": int(len(measure)), "total": int(n_all)},
        "errors": errors,
        "errors_warmup": errors_warmup,
        "error_examples": reasons,
        "status_counts": {str(int(s)): int(c) for s, c in zip(statuses, counts)},
        "schedule_lag_ns": lags,
        "client_cpu": {"per_worker": [w.get("cpu_fraction") for w in workers], "per_cpu": cpu},
        "valid": valid,
        "invalid_reason": reason,
        "failed": failure is not None,
        "failure": failure,
        "worker_errors": {i: t[-4000:] for i, t in failures.items()},
        "retries": retries,
        "unsolicited_responses": unsolicited,
        "idle_timeouts": idle_timeouts,
        "abandoned": any(bool(w.get("abandoned")) for w in workers),
        "coordinated_omission_risk": spec.model == "closed",
        "longest_pause_ns": _longest_pause_ns(measure),
        "workers": spec.workers,
        "client_cpus": list(cpus) if cpus is not None else None,
        "worker_stats": wmeta,
        "t0_monotonic_ns": int(t0_ns),
        "measure_start_ns": [int(s - t0_ns) for s in starts],
        "measure_stop_ns": [int(s - t0_ns) for s in stops],
        "record_bytes_per_request": _record_cost(workers),
    }


def _last_line(text: str) -> str:
    """The last non-empty line of a traceback (the exception), for one-line reasons."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else text


def _record_cost(workers: list[dict[str, Any]]) -> float | None:
    n = sum(w.get("records") or 0 for w in workers)
    b = sum(w.get("record_buffer_bytes") or 0 for w in workers)
    return b / n if n else None


def _longest_pause_ns(measure: np.ndarray) -> int | None:
    """The longest stretch of the measured phase without any response completing (ns).

    In a closed-model trial a long pause with every connection waiting is where coordinated
    omission hides latency: the requests that would have been sent are never sent.
    """
    if len(measure) < 2:
        return None
    done = np.sort(measure["t_done_ns"])
    return int(np.diff(done).max())
