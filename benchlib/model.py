"""The data model: frozen dataclasses shared by every part of benchlib.

Pure: imports nothing from ``runtime``, ``loadgen`` or ``store``.

Units are in the names: ``_s`` seconds, ``_ns`` nanoseconds, ``_rps`` requests per
second, ``_mb`` mebibytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from benchlib.errors import LoadSpecError, ParameterError

__all__ = [
    "Arm",
    "CROSS_CHECK_TOOLS",
    "Condition",
    "CrossCheck",
    "Experiment",
    "RUNTIME_NAMES",
    "LOAD_MODELS",
    "ARRIVALS",
    "HTTP_VERSIONS",
    "Limits",
    "LoadSpec",
    "Stage",
    "Target",
]

LOAD_MODELS = ("closed", "open")
ARRIVALS = ("constant", "poisson")
HTTP_VERSIONS = ("1.1", "1.0")
LoadModel = Literal["closed", "open"]
Arrival = Literal["constant", "poisson"]


@dataclass(frozen=True)
class Stage:
    """One step of an open-model schedule: ``rate_rps`` arrivals per second for ``duration_s``."""

    rate_rps: float
    duration_s: float

    def __post_init__(self) -> None:
        if not (self.rate_rps > 0 and math.isfinite(self.rate_rps)):
            raise LoadSpecError(f"stage rate_rps must be a positive finite number, got {self.rate_rps!r}")
        if not (self.duration_s > 0 and math.isfinite(self.duration_s)):
            raise LoadSpecError(f"stage duration_s must be positive, got {self.duration_s!r}")


@dataclass(frozen=True)
class LoadSpec:
    """What load one trial applies.

    Closed model: ``connections`` connections; each sends its next request when the previous
    response is complete; stops after ``duration_s`` (measured phase) or ``requests`` requests.

    Open model: requests are due on a schedule (``arrival`` at ``rate_rps``, or ``stages``);
    at most ``connections`` are in flight; latency counts from the intended send time, so a
    request that waits for a free connection has that wait in its latency.

    The warm-up phase (``warmup_s`` seconds, or ``warmup_requests`` requests, whichever is
    given) runs first on the same connections and is recorded with ``phase="warmup"``.

    Attributes
    ----------
    model: ``"closed"`` or ``"open"``.
    connections: closed: concurrent connections; open: the most requests in flight.
    duration_s: length of the measured phase in seconds (``None`` when ``requests`` bounds it).
    requests: closed only: total measured requests (``bombardier -n``, ``ab -n``).
    rate_rps: open only: arrivals per second (ignored when ``stages`` is given).
    arrival: open only: ``"constant"`` spacing or ``"poisson"`` arrivals.
    stages: open only: a list of (rate, duration) steps for throughput-vs-latency sweeps.
    warmup_s: warm-up seconds before the measured phase (0 for none).
    warmup_requests: alternative warm-up bound as a request count.
    workers: client worker processes, pinned to the client's CPUs.
    keep_alive: reuse connections; ``False`` opens one connection per request (``ab`` without ``-k``).
    http_version: ``"1.1"`` or ``"1.0"``.
    method, path, headers, body: the request.
    connect_timeout_s: per connection attempt.
    timeout_s: per response (from send to last byte).
    """

    model: LoadModel = "closed"
    connections: int = 16
    duration_s: float | None = 10.0
    requests: int | None = None
    rate_rps: float | None = None
    arrival: Arrival = "constant"
    stages: tuple[Stage, ...] = ()
    warmup_s: float = 2.0
    warmup_requests: int | None = None
    workers: int = 1
    keep_alive: bool = True
    http_version: str = "1.1"
    method: str = "GET"
    path: str = "/"
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    connect_timeout_s: float = 5.0
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if self.model not in LOAD_MODELS:
            raise LoadSpecError(f"unknown load model {self.model!r}; valid: {', '.join(LOAD_MODELS)}")
        if self.arrival not in ARRIVALS:
            raise LoadSpecError(f"unknown arrival {self.arrival!r}; valid: {', '.join(ARRIVALS)}")
        if self.http_version not in HTTP_VERSIONS:
            raise LoadSpecError(f"unknown http_version {self.http_version!r}; valid: {', '.join(HTTP_VERSIONS)}")
        if not isinstance(self.connections, int) or self.connections < 1:
            raise LoadSpecError(f"connections must be an integer >= 1, got {self.connections!r}")
        if not isinstance(self.workers, int) or self.workers < 1:
            raise LoadSpecError(f"workers must be an integer >= 1, got {self.workers!r}")
        if self.workers > self.connections:
            raise LoadSpecError(f"workers ({self.workers}) cannot exceed connections ({self.connections})")
        if self.duration_s is not None and not (self.duration_s > 0 and math.isfinite(self.duration_s)):
            raise LoadSpecError(f"duration_s must be a positive number of seconds, got {self.duration_s!r}")
        if self.requests is not None and (not isinstance(self.requests, int) or self.requests < 1):
            raise LoadSpecError(f"requests must be an integer >= 1, got {self.requests!r}")
        if self.warmup_s < 0 or not math.isfinite(self.warmup_s):
            raise LoadSpecError(f"warmup_s must be >= 0, got {self.warmup_s!r}")
        if self.warmup_requests is not None and self.warmup_requests < 0:
            raise LoadSpecError(f"warmup_requests must be >= 0, got {self.warmup_requests!r}")
        if self.timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise LoadSpecError("timeout_s and connect_timeout_s must be positive")
        if not self.path.startswith("/"):
            raise LoadSpecError(f"path must start with '/', got {self.path!r}")
        if self.model == "open":
            if self.requests is not None:
                raise LoadSpecError("requests (a total count) applies to the closed model only; "
                                    "the open model is bounded by duration_s or stages")
            if not self.stages:
                if self.rate_rps is None or not (self.rate_rps > 0 and math.isfinite(self.rate_rps)):
                    raise LoadSpecError(f"the open model needs rate_rps > 0 (or stages), got {self.rate_rps!r}")
                if self.duration_s is None:
                    raise LoadSpecError("the open model needs duration_s (or stages)")
        else:
            if self.stages:
                raise LoadSpecError("stages apply to the open model only")
            if self.rate_rps is not None:
                raise LoadSpecError("rate_rps applies to the open model only; "
                                    "use model='open' for a fixed arrival rate")
            if self.duration_s is None and self.requests is None:
                raise LoadSpecError("the closed model needs duration_s or requests")

    @property
    def measured_duration_s(self) -> float | None:
        """Planned length of the measured phase in seconds (``None`` if bounded by a count)."""
        if self.stages:
            return sum(s.duration_s for s in self.stages)
        return self.duration_s if self.requests is None else None

    @property
    def offered_rps(self) -> float | None:
        """Mean offered arrival rate of the measured phase (open model), else ``None``."""
        if self.model != "open":
            return None
        if self.stages:
            total = sum(s.duration_s for s in self.stages)
            return sum(s.rate_rps * s.duration_s for s in self.stages) / total
        return self.rate_rps

    def with_(self, **changes: Any) -> LoadSpec:
        """A copy with ``changes`` applied (validated again); unknown names are refused."""
        valid = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - valid)
        if unknown:
            raise ParameterError(f"unknown LoadSpec field(s) {unknown}; valid: {', '.join(sorted(valid))}")
        return replace(self, **changes)

    def describe(self) -> str:
        """One human line, e.g. ``closed, 100 connections, 30 s, 2 workers, keep-alive``."""
        parts = [self.model]
        if self.model == "open":
            if self.stages:
                parts.append("stages " + ", ".join(f"{s.rate_rps:g}/s x {s.duration_s:g} s" for s in self.stages))
            else:
                parts.append(f"{self.arrival} {self.rate_rps:g} req/s")
            parts.append(f"at most {self.connections} in flight")
        else:
            parts.append(f"{self.connections} connection{'s' if self.connections != 1 else ''}")
        if self.requests is not None:
            parts.append(f"{self.requests:,} requests")
        elif not self.stages and self.duration_s is not None:
            parts.append(f"{self.duration_s:g} s")
        if self.warmup_s:
            parts.append(f"{self.warmup_s:g} s warm-up")
        parts.append(f"{self.workers} worker{'s' if self.workers != 1 else ''}")
        parts.append(f"HTTP/{self.http_version}" + (" keep-alive" if self.keep_alive else ", new connection per request"))
        return ", ".join(parts)


@dataclass(frozen=True)
class Target:
    """Where the load goes: ``host`` must be a loopback address (127.0.0.0/8 or ::1) unless
    the user explicitly targets a machine of their own."""

    host: str
    port: int

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


@dataclass(frozen=True)
class Limits:
    """Resource limits applied to a service under test.

    Attributes
    ----------
    cpus: number of CPUs (``nano_cpus`` in Docker; a CFS quota locally); ``None`` = no quota.
    memory_mb: memory cap in MiB; ``None`` = no cap.
    """

    cpus: float | None = None
    memory_mb: int | None = None

    def __post_init__(self) -> None:
        if self.cpus is not None and not self.cpus > 0:
            raise ParameterError(f"Limits.cpus must be > 0 or None, got {self.cpus!r}")
        if self.memory_mb is not None and not self.memory_mb > 0:
            raise ParameterError(f"Limits.memory_mb must be > 0 or None, got {self.memory_mb!r}")


LOG_SINKS = ("pipe", "file", "discard")


@dataclass(frozen=True)
class Arm:
    """One thing being compared: a service in a variant, with runtime options.

    Attributes
    ----------
    name: label used in tables, plots and file names (``[A-Za-z0-9._-]+``).
    service: the service's folder name under ``services/``.
    variant: the manifest variant (``fair``, ``faithful``, ...); ``None`` = the manifest's default.
    endpoint: the manifest endpoint to load (``None`` = the first one).
    log_sink: where the service's stdout/stderr go: ``pipe`` (read by the runtime and kept),
        ``file`` (written by the service straight to a file), ``discard`` (``/dev/null``).
    env: extra environment variables for the service.
    runtime: this arm's runtime (``"local"`` or ``"docker"``); ``None`` = the experiment's.
        Lets one experiment compare runtimes in randomized blocks (harness overhead).
    limits: this arm's resource limits; ``None`` = the experiment's.
    """

    name: str
    service: str
    variant: str | None = None
    endpoint: str | None = None
    log_sink: str = "pipe"
    env: tuple[tuple[str, str], ...] = field(default=())
    runtime: str | None = None
    limits: Limits | None = None

    def __post_init__(self) -> None:
        import re

        if not re.fullmatch(r"[A-Za-z0-9._-]+", self.name):
            raise ParameterError(f"arm name {self.name!r} must match [A-Za-z0-9._-]+ (it names files)")
        if self.log_sink not in LOG_SINKS:
            raise ParameterError(f"unknown log_sink {self.log_sink!r}; valid: {', '.join(LOG_SINKS)}")
        if self.runtime is not None and self.runtime not in RUNTIME_NAMES:
            raise ParameterError(f"arm {self.name!r}: unknown runtime {self.runtime!r}; valid: {', '.join(RUNTIME_NAMES)}")
        if self.limits is not None and not isinstance(self.limits, Limits):
            raise ParameterError(f"arm {self.name!r}: limits must be a Limits(...), got {self.limits!r}")


CROSS_CHECK_TOOLS = ("wrk", "k6", "ab", "hey", "h2load", "bombardier")


@dataclass(frozen=True)
class CrossCheck:
    """A peer load tool run against the same service instance within each trial, beside
    benchlib's own load (the order alternates by block, so neither always runs first).

    Attributes
    ----------
    tool: one of :data:`CROSS_CHECK_TOOLS`.
    options: keyword arguments for the tool's ``run_*`` function in :mod:`benchlib.peers`
        (e.g. ``(("threads", 2), ("connections", 100), ("duration_s", 30))`` for wrk).
    arms: the arms to cross-check (``None``: all).
    """

    tool: str
    options: tuple[tuple[str, Any], ...] = ()
    arms: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.tool not in CROSS_CHECK_TOOLS:
            raise ParameterError(f"unknown cross-check tool {self.tool!r}; valid: {', '.join(CROSS_CHECK_TOOLS)}")

    def applies_to(self, arm: str) -> bool:
        return self.arms is None or arm in self.arms


@dataclass(frozen=True)
class Condition:
    """One load condition of an experiment: a LoadSpec and the endpoint it is applied to.

    Attributes
    ----------
    name: label (``[A-Za-z0-9._-]+``; names folders), e.g. ``"main"``, ``"helloWorld"``, ``"rate-0.5"``.
    load: the LoadSpec. Its request (method, path, body, headers) is replaced by the arm's
        endpoint from the service manifest, so one condition fits services whose paths differ.
    endpoint: the manifest endpoint to load (``None``: the arm's, else the service's first).
    cross_check: a peer tool run on the same instance in every trial (see :class:`CrossCheck`).
    """

    name: str
    load: LoadSpec
    endpoint: str | None = None
    cross_check: CrossCheck | None = None

    def __post_init__(self) -> None:
        import re

        if not re.fullmatch(r"[A-Za-z0-9._-]+", self.name):
            raise ParameterError(f"condition name {self.name!r} must match [A-Za-z0-9._-]+ (it names folders)")


RUNTIME_NAMES = ("local", "docker")


@dataclass(frozen=True)
class Experiment:
    """Arms x conditions x a blocked design: everything one study run executes.

    Attributes
    ----------
    study: the study's name (names the run folder).
    arms: the arms compared; the first is the baseline unless ``baseline`` says otherwise.
    conditions: load conditions; each gets ``trials`` blocks of every arm.
    trials: blocks per condition (each block runs every arm once, in a counterbalanced order).
    seed: seeds the block orders and the load generator's schedules.
    runtime: ``"local"`` or ``"docker"``.
    limits: resource limits for every service under test (dependencies are not limited).
    baseline: the arm others are compared against (default: the first arm).
    between_trials_s: idle seconds between trials (lets sockets in TIME_WAIT and caches settle).
    retry_failed: on resume, re-run stored trials whose status is "failed" (old files are kept aside).
    repeat_invalid: a trial the load generator's guard marks invalid (the client, not the service,
        could not keep the load: schedule lag, client CPU) is run again at once, in its place in
        the block, at most this many times; the invalid attempts are kept aside (``.failed-N``
        files) and listed in the stored trial's ``previous_attempts``. 0 (default): never.
    """

    study: str
    arms: tuple[Arm, ...]
    conditions: tuple[Condition, ...]
    trials: int = 10
    seed: int = 0
    runtime: str = "local"
    limits: Limits = Limits()
    baseline: str | None = None
    between_trials_s: float = 0.5
    retry_failed: bool = False
    repeat_invalid: int = 0

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIME_NAMES:
            raise ParameterError(f"unknown runtime {self.runtime!r}; valid: {', '.join(RUNTIME_NAMES)}")
        if not self.arms:
            raise ParameterError("an experiment needs at least one arm")
        names = [a.name for a in self.arms]
        if len(set(names)) != len(names):
            raise ParameterError(f"arm names must be unique, got {names}")
        if not self.conditions:
            raise ParameterError("an experiment needs at least one condition")
        cnames = [c.name for c in self.conditions]
        if len(set(cnames)) != len(cnames):
            raise ParameterError(f"condition names must be unique, got {cnames}")
        if not isinstance(self.trials, int) or self.trials < 1:
            raise ParameterError(f"trials must be an integer >= 1, got {self.trials!r}")
        if not isinstance(self.repeat_invalid, int) or isinstance(self.repeat_invalid, bool) or self.repeat_invalid < 0:
            raise ParameterError(f"repeat_invalid must be an integer >= 0, got {self.repeat_invalid!r}")
        if self.baseline is not None and self.baseline not in names:
            raise ParameterError(f"baseline {self.baseline!r} is not an arm; valid: {', '.join(names)}")

    @property
    def baseline_arm(self) -> str:
        return self.baseline or self.arms[0].name

    def arm(self, name: str) -> Arm:
        for a in self.arms:
            if a.name == name:
                return a
        raise ParameterError(f"no arm {name!r}; valid: {', '.join(a.name for a in self.arms)}")
