"""Stand-ins for the runner's seams, for tests of orchestration that need no real services.

:func:`benchlib.run.runner.run_experiment` takes its runtime, its load function and its
cross-check function (``runtime=``, ``load=``, ``cross_check=``). With the ones here a run
executes in a fraction of a second and does exactly what the test planned:

* :class:`FakeRuntime`: ``check``/``prepare``/``start`` as in :mod:`benchlib.runtime.base`,
  no process started. Each started service is a :class:`FakeHandle` that answers HTTP on its
  port from a thread of this process (so the runner's real contract check runs against it),
  records its start and stop in :attr:`FakeRuntime.events`, and samples a CPU clock that runs
  at ``cpu_per_s`` CPUs. Builds or starts can be made to fail per service.
* :class:`FakeLoad`: ``run_load``'s signature; returns a :class:`~benchlib.loadgen.LoadResult`
  of a planned shape per call (:class:`Outcome`): ``ok``, ``invalid`` (the guard's verdict),
  ``failed`` (a worker failed mid-trial: half the rows, ``failed: true``), ``dies`` (the
  service dies during the load), ``raise`` (the load generator refuses before traffic) and
  ``interrupt`` (SIGTERM to this process mid-trial: the Ctrl-C path of a real stop).
* :class:`FakeCrossCheck`: ``run_cross_check``'s signature; a wrk-shaped report, with the order;
* :func:`fake_manifests`: minimal service manifests for the fake runtime to "start" (point
  ``BENCHLIB_SERVICES`` at the folder).

Use them for the runner's bookkeeping (plan order, resume, repeats, failures, not-run arms,
cross-check order, signals); real services, sockets and load stay in the end-to-end tests.
"""

from __future__ import annotations

import http.server
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchlib.core.errors import BenchlibError, LoadGenError, RuntimeUnavailable
from benchlib.core.model import CrossCheck, LoadSpec, Target
from benchlib.core.schema import ERROR_CODES, PHASE_CODES, ROW_DTYPE
from benchlib.core.slicing import SlicePlan
from benchlib.loadgen.launch import LoadResult, loadspec_to_dict
from benchlib.runtime.base import Prepared, StartOptions, StopInfo, service_ports
from benchlib.runtime.manifest import ResolvedService

__all__ = ["FakeCrossCheck", "FakeHandle", "FakeLoad", "FakeRuntime", "Outcome", "OUTCOMES", "fake_manifests", "write_manifest"]

#: The shapes a :class:`FakeLoad` call can take.
OUTCOMES: tuple[str, ...] = ("ok", "invalid", "failed", "dies", "raise", "interrupt")


class _Answer(http.server.BaseHTTPRequestHandler):
    """Answers every request with the handle's status and body (HTTP/1.1, keep-alive)."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = self.server.body
        self.send_response(self.server.status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], status: int, body: bytes) -> None:
        self.status = status
        self.body = body
        super().__init__(address, _Answer)


class FakeHandle:
    """A "running" service of :class:`FakeRuntime` (the :class:`~benchlib.runtime.base.ServiceHandle`
    interface): answers HTTP on its port until stopped; :meth:`die` makes it a service that died.

    Attributes
    ----------
    name, host, port, ports: as a real handle's. role: ``service``, ``dependency`` or ``front``.
    enforced: ``{"runtime": <runtime name>, "cpus": [...], "limits": "not enforced: ..."}``.
    log_lines, log_bytes: what the runtime counted of its log (0).
    """

    def __init__(self, runtime: FakeRuntime, service: ResolvedService, options: StartOptions) -> None:
        self.runtime = runtime
        self.service = service
        self.name = service.name
        self.host = "127.0.0.1"
        self.port = options.port
        self.ports = service_ports(service, options)
        self.role = options.role
        self.options = options
        self.enforced: dict[str, Any] = {"runtime": runtime.name, "cpus": list(options.cpus),
                                         "limits": "not enforced: fake runtime (no process)"}
        self.log_lines = 0
        self.log_bytes = 0
        self._started_ns = time.monotonic_ns()
        self._samples: list[dict[str, Any]] = []
        self._died: str | None = None
        self._stopped: StopInfo | None = None
        self._server = _Server((self.host, self.port), runtime.status, runtime.body)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.005},
                                        name=f"fake-{self.name}", daemon=True)
        self._thread.start()
        self.sample_now()

    def die(self, detail: str = "exited with code 7") -> None:
        """The service ends on its own (as a crash would): it stops answering."""
        if self._died is None and self._stopped is None:
            self._died = detail
            self._close()
            self.runtime.events.append(("died", self.name, self.port))

    def alive(self) -> bool:
        return self._died is None and self._stopped is None

    def logs_tail(self, lines: int = 40) -> str:
        return f"{self.name}: fake service log ({self._died or 'running'})"

    def sample_now(self) -> None:
        """One CPU sample now (the clock runs at the runtime's ``cpu_per_s`` while alive)."""
        now = time.monotonic_ns()
        self._samples.append({"t_monotonic_ns": now, "cpu_s": self.runtime.cpu_per_s * (now - self._started_ns) / 1e9,
                              "mem_mb": 10.0})

    def resource_samples(self) -> list[dict[str, Any]]:
        return list(self._samples)

    def cpu_counter_ns(self) -> int | None:
        """The clock of :meth:`sample_now` read now (ns); ``None`` once stopped or dead."""
        if not self.alive():
            return None
        return int(self.runtime.cpu_per_s * (time.monotonic_ns() - self._started_ns))

    def stop(self) -> StopInfo:
        if self._stopped is None:
            if self._died is None:
                self.sample_now()
                self._close()
                self._stopped = StopInfo(exit_code=None, detail="stopped")
            else:
                self._stopped = StopInfo(exit_code=7, died_early=True, detail=self._died)
            self.runtime.events.append(("stop", self.name, self.port))
        return self._stopped

    def _close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class FakeRuntime:
    """A runtime that starts no process (see the module docstring).

    Parameters
    ----------
    name: the name it stores in the trials (``runtime``).
    build_errors: service name -> the error its ``prepare`` raises (``ToolchainMissing``,
        ``BuildError``): the arm is "not run".
    start_errors: service name -> the error its ``start`` raises (``ServiceStartError``).
    status, body: what every service answers (a contract of ``status = 200`` passes).
    cpu_per_s: CPUs each service uses while alive (its samples' clock).
    unavailable: ``check`` raises :class:`~benchlib.core.errors.RuntimeUnavailable` with this text.

    Attributes
    ----------
    events: what happened, in order: ``("check",)``, ``("prepare", service, variant)``,
        ``("start", service, role, port)``, ``("stop", service, port)``, ``("died", service, port)``.
    handles: every handle started, in order.
    """

    def __init__(self, name: str = "fake", *, build_errors: Mapping[str, BenchlibError] | None = None,
                 start_errors: Mapping[str, BenchlibError] | None = None, status: int = 200, body: bytes = b"ok",
                 cpu_per_s: float = 0.5, unavailable: str | None = None) -> None:
        self.name = name
        self.build_errors = dict(build_errors or {})
        self.start_errors = dict(start_errors or {})
        self.status = status
        self.body = body
        self.cpu_per_s = cpu_per_s
        self.unavailable = unavailable
        self.events: list[tuple[Any, ...]] = []
        self.handles: list[FakeHandle] = []

    def check(self) -> None:
        self.events.append(("check",))
        if self.unavailable:
            raise RuntimeUnavailable(self.unavailable)

    def prepare(self, service: ResolvedService) -> Prepared:
        self.events.append(("prepare", service.name, service.variant))
        if service.name in self.build_errors:
            raise self.build_errors[service.name]
        return Prepared(service=service, info={"runtime": self.name, "service": service.name,
                                               "variant": service.variant})

    def start(self, prepared: Prepared, options: StartOptions) -> FakeHandle:
        service = prepared.service
        self.events.append(("start", service.name, options.role, options.port))
        if service.name in self.start_errors:
            raise self.start_errors[service.name]
        handle = FakeHandle(self, service, options)
        self.handles.append(handle)
        return handle

    def provenance(self) -> dict[str, Any]:
        return {"runtime": self.name, "fake": True}

    def handle_at(self, port: int) -> FakeHandle | None:
        """The running handle listening on ``port`` (the latest started)."""
        for h in reversed(self.handles):
            if port in h.ports and h.alive():
                return h
        return None

    def started(self, role: str = "service") -> list[str]:
        """The services started in ``role``, in order."""
        return [e[1] for e in self.events if e[0] == "start" and e[2] == role]


@dataclass(frozen=True)
class Outcome:
    """What one :class:`FakeLoad` call does (see :data:`OUTCOMES`).

    Attributes
    ----------
    kind: ``ok``, ``invalid``, ``failed``, ``dies``, ``raise`` or ``interrupt``.
    requests: measured requests (``failed``: half of them are returned).
    warmup: warm-up requests. errors: measured requests that fail (``reset``).
    latency_ms: every successful request's latency from its due time, ms (a little spread
        is added per request, from the seed).
    window_s: wall time the call takes (the measured window lies inside it, so the
        service's CPU samples cover it).
    reason: the invalid reason or the failure (a default names the fake).
    """

    kind: str = "ok"
    requests: int = 200
    warmup: int = 20
    errors: int = 0
    latency_ms: float = 2.0
    window_s: float = 0.02
    reason: str = ""

    def __post_init__(self) -> None:
        if self.kind not in OUTCOMES:
            raise ValueError(f"unknown outcome {self.kind!r}; valid: {', '.join(OUTCOMES)}")


@dataclass
class FakeLoad:
    """``run_load`` for tests: each call returns the next planned :class:`Outcome`.

    Parameters
    ----------
    runtime: the :class:`FakeRuntime` whose service is loaded (``dies`` kills it; outcomes
        per service need it to tell which service a target is).
    outcomes: a sequence (one per call, in call order) or a mapping from service name to a
        sequence (one per call that loads that service, a front counting as the service
        behind it); an entry is an :class:`Outcome` or its ``kind``. Calls beyond the plan
        take ``default``.

    Attributes
    ----------
    calls: one dict per call: ``service``, ``kind``, ``spec``, ``target``, ``seed``, ``client_cpus``.
    """

    runtime: FakeRuntime | None = None
    outcomes: Sequence[Outcome | str] | Mapping[str, Sequence[Outcome | str]] = ()
    default: Outcome | str = "ok"
    calls: list[dict[str, Any]] = field(default_factory=list)

    def _next(self, service: str) -> Outcome:
        if isinstance(self.outcomes, Mapping):
            planned = list(self.outcomes.get(service, ()))
            done = sum(1 for c in self.calls if c["service"] == service)
        else:
            planned = list(self.outcomes)
            done = len(self.calls)
        o = planned[done] if done < len(planned) else self.default
        return o if isinstance(o, Outcome) else Outcome(o)

    def _service(self, target: Target) -> str:
        if self.runtime is None:
            return ""
        h = self.runtime.handle_at(target.port)
        if h is not None and h.role == "front" and h.options.backend is not None:
            return str(h.options.backend.name)
        return h.name if h is not None else ""

    def __call__(self, spec: LoadSpec, target: Target, *, client_cpus: Sequence[int] | None = None, seed: int = 0,
                 on_progress: Callable[[dict[str, Any]], None] | None = None) -> LoadResult:
        service = self._service(target)
        o = self._next(service)
        self.calls.append({"service": service, "kind": o.kind, "spec": spec, "target": target, "seed": seed,
                           "client_cpus": list(client_cpus or ())})
        if o.kind == "raise":
            raise LoadGenError(o.reason or "fake load: refused before any traffic")
        t0 = time.monotonic_ns()
        time.sleep(o.window_s)
        if o.kind == "interrupt":
            signal.raise_signal(signal.SIGTERM)  # the Ctrl-C path of a real stop: Interrupted from here
        if o.kind == "dies":
            victim = next((h for h in reversed(self.runtime.handles) if h.role == "service" and h.alive()), None) \
                if self.runtime is not None else None
            if victim is not None:
                victim.die("exited with code 7 during the load (fake)")
        rows, window = _rows(o, seed, time.monotonic_ns() - t0)
        return LoadResult(rows=rows, meta=_meta(o, spec, rows, window, t0, client_cpus))

    def interleaved(self, loads: Sequence[tuple[LoadSpec, Target]], plan: SlicePlan, *,
                    client_cpus: Sequence[int] | None = None, seed: int = 0,
                    on_start: Callable[[int], None] | None = None) -> list[LoadResult]:
        """``run_interleaved`` for tests: each arm takes the next planned outcome of its service
        (one call each, as :meth:`__call__` counts them); its rows fall inside its own measured
        slices. The call takes the plan's length (at least the outcomes' ``window_s``: keep the
        experiment's durations short), from the start it gives ``on_start``."""
        outcomes = []
        for i, (spec, target) in enumerate(loads):
            service = self._service(target)
            o = self._next(service)
            self.calls.append({"service": service, "kind": o.kind, "spec": spec, "target": target,
                               "seed": seed + i, "client_cpus": list(client_cpus or ()), "interleaved": True})
            outcomes.append(o)
        if any(o.kind == "raise" for o in outcomes):
            raise LoadGenError(next(o.reason for o in outcomes if o.kind == "raise") or "fake load: refused")
        t0 = time.monotonic_ns()
        if on_start is not None:
            on_start(t0)
        time.sleep(max(plan.total_s, *(o.window_s for o in outcomes)))
        if any(o.kind == "interrupt" for o in outcomes):
            signal.raise_signal(signal.SIGTERM)
        if any(o.kind == "dies" for o in outcomes) and self.runtime is not None:
            victim = next((h for h in reversed(self.runtime.handles) if h.role == "service" and h.alive()), None)
            if victim is not None:
                victim.die("exited with code 7 during the load (fake)")
        out = []
        for i, ((spec, _target), o) in enumerate(zip(loads, outcomes)):
            rows, _window = _rows(o, seed + i, int(plan.total_s * 1e9))
            win = plan.windows[i]
            measured = win[win[:, 0] >= int(plan.warmup_s * 1e9)]
            # each row moved into one of its arm's slices: the warm-up's into the first, the others spread
            due = np.linspace(0, len(measured), o.requests, endpoint=False).astype(np.int64) if len(measured) else []
            m = rows["phase"] == PHASE_CODES["measure"]
            if len(measured):
                lat = rows["t_done_ns"] - rows["t_intended_ns"]
                rows["t_intended_ns"][m] = measured[np.asarray(due)[: int(m.sum())], 0] + 1_000
                rows["t_intended_ns"][~m] = win[0, 0] + 1_000
                rows["t_sent_ns"] = rows["t_intended_ns"] + 20_000
                rows["t_done_ns"] = rows["t_intended_ns"] + lat
            window = (int(plan.warmup_s * 1e9), int(win[-1, 1]))
            meta = _meta(o, spec, rows, window, t0, client_cpus)
            meta["measured_duration_s"] = plan.measured_s(i)
            meta["interleave"] = {"arm": i, "arms": len(loads), "slice_ms": plan.slice_ms, "gap_ms": plan.gap_ms}
            out.append(LoadResult(rows=rows, meta=meta))
        return out


def _rows(o: Outcome, seed: int, span_ns: int) -> tuple[np.ndarray, tuple[int, int]]:
    """The rows of one outcome over ``span_ns`` (warm-up in the first fifth), and the
    measured window (ns after t0)."""
    rng = np.random.default_rng(seed)
    n = o.warmup + o.requests
    rows = np.zeros(n, dtype=ROW_DTYPE)
    start = span_ns // 5 if o.warmup else 0
    stop = max(start + 1, span_ns * 4 // 5)
    rows["t_intended_ns"][:o.warmup] = np.linspace(0, start, o.warmup, endpoint=False, dtype=np.int64)
    rows["t_intended_ns"][o.warmup:] = np.linspace(start, stop, o.requests, endpoint=False, dtype=np.int64)
    lat = (o.latency_ms * (1 + 0.05 * rng.random(n)) * 1e6).astype(np.int64)
    rows["t_sent_ns"] = rows["t_intended_ns"] + 20_000
    rows["t_done_ns"] = rows["t_intended_ns"] + lat
    rows["status"], rows["bytes"], rows["conn"] = 200, 100, np.arange(n) % 4
    rows["phase"][:o.warmup], rows["phase"][o.warmup:] = PHASE_CODES["warmup"], PHASE_CODES["measure"]
    if o.errors:
        bad = o.warmup + rng.choice(o.requests, min(o.errors, o.requests), replace=False)
        rows["error"][bad], rows["status"][bad], rows["bytes"][bad] = ERROR_CODES["reset"], 0, 0
    if o.kind == "failed":  # one of two workers failed: its half of the rows is lost
        rows = rows[: o.warmup + o.requests // 2]
    return rows, (start, stop)


def _meta(o: Outcome, spec: LoadSpec, rows: np.ndarray, window: tuple[int, int], t0: int,
          client_cpus: Sequence[int] | None) -> dict[str, Any]:
    """The load generator's ``meta`` for the rows, in its shape (``docs/loadgen.md``)."""
    measure = rows[rows["phase"] == PHASE_CODES["measure"]]
    ok = measure[measure["error"] == 0]
    duration = (window[1] - window[0]) / 1e9
    failure = (o.reason or "load worker 1 failed: RuntimeError: fake worker failure") if o.kind == "failed" else None
    invalid = (o.reason or "client CPU 0 was busy 97% of the traffic (fake)") if o.kind == "invalid" else failure
    cpus = list(client_cpus or ())
    return {
        "loadspec": loadspec_to_dict(spec), "description": spec.describe(), "model": spec.model,
        "offered_rps": spec.offered_rps, "achieved_rps": len(ok) / duration, "measured_duration_s": duration,
        "requests": {"warmup": int(len(rows) - len(measure)), "measure": int(len(measure)), "total": int(len(rows))},
        "errors": {"reset": int(len(measure) - len(ok))} if len(measure) > len(ok) else {}, "errors_warmup": {},
        "status_counts": {"200": int(len(ok))}, "schedule_lag_ns": {"p50": 10_000, "p99": 50_000},
        "client_cpu": {"per_worker": [0.2], "per_cpu": {str(c): 0.2 for c in cpus}},
        "valid": o.kind not in ("invalid", "failed"), "invalid_reason": invalid,
        "failed": o.kind == "failed", "failure": failure,
        "worker_errors": {"1": f"Traceback (most recent call last):\n{failure}"} if failure else {},
        "retries": 0, "unsolicited_responses": 0, "abandoned": False,
        "coordinated_omission_risk": spec.model == "closed", "workers": spec.workers, "client_cpus": cpus,
        "worker_stats": [{"worker": 0, "pid": None, "cpus": cpus, "cpu_s": 0.001, "wall_s": duration,
                          "runqueue_wait_s": 0.0, "records": int(len(rows)), "retries": 0}],
        "t0_monotonic_ns": int(t0), "measure_start_ns": [int(window[0])], "measure_stop_ns": [int(window[1])],
        "record_bytes_per_request": float(ROW_DTYPE.itemsize), "fake": o.kind,
    }


@dataclass
class FakeCrossCheck:
    """``run_cross_check`` for tests: a wrk-shaped report (``requests_per_s``, latency
    percentiles) with the order; ``calls`` lists ``(tool, url, order)``; ``error`` makes every
    call report that failure instead (as a missing tool would)."""

    requests_per_s: float = 1000.0
    error: str | None = None
    calls: list[tuple[str, str, str]] = field(default_factory=list)

    def __call__(self, check: CrossCheck, url: str, cpus: Sequence[int], *, order: str) -> dict[str, Any]:
        self.calls.append((check.tool, url, order))
        if self.error:
            return {"tool": check.tool, "order": order, "error": self.error}
        return {"tool": check.tool, "order": order, "requests": self.requests_per_s, "duration_s": 1.0,
                "requests_per_s": self.requests_per_s, "latency_percentiles_ms": {"50": 1.0, "99": 2.5},
                "latency_avg_ms": 1.1, "latency_max_ms": 3.0, "cpu_fraction": 0.1, "cpu_s": 0.1, "fake": True}


def write_manifest(root: Path, name: str, *, role: str = "service", requires: Sequence[str] = (),
                   toolchains: Sequence[str] | None = None, command: Sequence[str] = ("{python}", "server.py"),
                   extra: str = "") -> Path:
    """Write a minimal ``root/name/service.toml``: a Python service (``role``, ``requires``,
    ``toolchains`` if given, ``command``, port from ``PORT``; ``extra`` TOML lines go in its
    ``[run]`` table) with one endpoint ``/`` whose contract is status 200. Returns its folder."""
    d = Path(root) / name
    d.mkdir(parents=True, exist_ok=True)
    quoted = lambda xs: "[" + ", ".join(f'"{x}"' for x in xs) + "]"  # noqa: E731 - TOML string arrays
    (d / "service.toml").write_text("\n".join([
        f'name = "{name}"', 'language = "python"', 'framework = "test"', f'role = "{role}"',
        f"requires = {quoted(requires)}", *([f"toolchains = {quoted(toolchains)}"] if toolchains is not None else []),
        "[run]", f"command = {quoted(command)}", 'port_env = "PORT"', *([extra] if extra else []),
        "[[endpoints]]", 'name = "hello"', 'path = "/"', "[endpoints.contract]", "status = 200", ""]))
    return d


def fake_manifests(root: Path, names: Sequence[str]) -> Path:
    """Write a minimal ``service.toml`` for each of ``names`` under ``root``
    (:func:`write_manifest`: one endpoint ``/`` whose contract is status 200, all
    :class:`FakeRuntime`'s services answer) and return ``root``: set ``BENCHLIB_SERVICES`` to it."""
    for name in names:
        write_manifest(root, name)
    return Path(root)
