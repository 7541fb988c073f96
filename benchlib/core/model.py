"""The data model: what an experiment is (arms, conditions, loads, limits, trial layout), as frozen dataclasses.

Every part of benchlib shares them. Pure: imports nothing from ``runtime``, ``loadgen`` or ``store``.

Units are in the names: ``_s`` seconds, ``_ns`` nanoseconds, ``_rps`` requests per
second, ``_mb`` mebibytes.

Every field is checked when an object is made, strictly, before anything runs: an integer
field takes an integer (``True``, ``2.5`` or ``"4"`` are refused), a number field a finite
number (NaN, infinities and strings are refused), and the request (method, path, headers)
only what HTTP/1.1 allows on the wire: a method is an RFC 9110 token, a path printable ASCII
without spaces, header names tokens and values without CR, LF or other control characters,
all encodable as latin-1. Each refusal is one line naming the field, the value and what is
valid. Numeric values of other integer or real types (numpy's) are stored as ``int`` /
``float``; sequences as tuples.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from benchlib.core.design import DEFAULT_CROSS_CHECK_BLOCKS, check_cross_check_blocks
from benchlib.core.errors import LoadSpecError, ParameterError
from benchlib.core.placement import parse_cluster

__all__ = [
    "Interleave",
    "MAX_SECONDS",
    "SLICE_MS_RANGE",
    "NAME_PATTERN",
    "check_name",
    "Arm",
    "CROSS_CHECK_TOOLS",
    "Condition",
    "CrossCheck",
    "Experiment",
    "RUNTIME_NAMES",
    "LOAD_MODELS",
    "ARRIVALS",
    "HTTP_VERSIONS",
    "PROTOCOLS",
    "MAX_STREAMS",
    "Limits",
    "LoadSpec",
    "Stage",
    "Target",
]

LOAD_MODELS = ("closed", "open")
ARRIVALS = ("constant", "poisson")
HTTP_VERSIONS = ("1.1", "1.0")
#: Wire protocols of the load generator: HTTP/1.x, HTTP/2 over cleartext TCP with prior
#: knowledge, unary gRPC calls (over h2c).
PROTOCOLS = ("http1", "h2c", "grpc")
#: The most concurrent HTTP/2 streams per connection a LoadSpec may ask for.
MAX_STREAMS = 10_000
#: The largest gRPC request message (bytes): gRPC servers refuse larger ones by default.
MAX_GRPC_MESSAGE = 4 * 2**20
LoadModel = Literal["closed", "open"]
Arrival = Literal["constant", "poisson"]

#: The longest duration, warm-up or timeout accepted, in seconds (one day): a trial is bounded.
MAX_SECONDS = 86_400.0

#: Names that become folder or file names (study, arm, condition, service): letters, digits,
#: ``.``, ``_``, ``-``; not starting with ``.`` or ``-`` (so never ``.`` or ``..``).
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 section 5.6.2
_PATH = re.compile(r"/[\x21-\x7e]*")  # printable ASCII, no space
_HOST = re.compile(r"[A-Za-z0-9._:%-]{1,253}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GRPC_PATH = re.compile(r"/[A-Za-z_][A-Za-z0-9_.]*/[A-Za-z_][A-Za-z0-9_]*")
#: Connection-specific header fields HTTP/2 forbids (RFC 9113 section 8.2.2); ``host`` is
#: the ``:authority`` the client sets.
_H2_FORBIDDEN = ("connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host")


def _got(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def check_name(kind: str, value: Any) -> str:
    """``value`` if it is a plain folder name (:data:`NAME_PATTERN`), else :class:`ParameterError`
    naming ``kind`` (``"run id"``, ``"arm name"``, ...) and the rule."""
    if not isinstance(value, str) or not re.fullmatch(NAME_PATTERN, value):
        raise ParameterError(
            f"{kind} {value!r} must match {NAME_PATTERN} (a plain folder name: letters, digits, '.', '_', '-'; "
            "no '/', not '.' or '..', not starting with '.' or '-')")
    return value


def _int(owner: str, name: str, value: Any, *, low: int, optional: bool = False,
         error: type[Exception] = LoadSpecError) -> int | None:
    """``value`` as an ``int`` >= ``low`` (``None`` allowed when ``optional``); bools, floats and
    strings are refused."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise error(f"{owner}.{name} must be an integer >= {low}{' or None' if optional else ''}; got {_got(value)}")
    return int(value)


def _seconds(owner: str, name: str, value: Any, *, zero_ok: bool = False, optional: bool = False,
             error: type[Exception] = LoadSpecError) -> float | None:
    """``value`` as a finite ``float`` of seconds in (0, MAX_SECONDS] (or [0, ...] with ``zero_ok``)."""
    if value is None and optional:
        return None
    ok = (not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
          and (float(value) >= 0 if zero_ok else float(value) > 0) and float(value) <= MAX_SECONDS)
    if not ok:
        lower = ">= 0" if zero_ok else "> 0"
        raise error(f"{owner}.{name} must be a finite number of seconds {lower} and <= {MAX_SECONDS:g}"
                    f"{' or None' if optional else ''}; got {_got(value)}")
    return float(value)


def _number(owner: str, name: str, value: Any, *, what: str = "a finite number", optional: bool = False,
            error: type[Exception] = LoadSpecError) -> float | None:
    """``value`` as a finite ``float`` (any sign; the caller checks the range; ``what`` says
    what is valid in the message)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise error(f"{owner}.{name} must be {what}{' or None' if optional else ''}; got {_got(value)}")
    return float(value)


def _choice(owner: str, name: str, value: Any, valid: Sequence[str],
            error: type[Exception] = LoadSpecError) -> str:
    if not isinstance(value, str) or value not in valid:
        raise error(f"unknown {owner}.{name} {value!r}; valid: {', '.join(valid)}")
    return value


def _header_field(where: str, value: Any) -> str:
    """A header value: a string of latin-1 characters without control characters (HTAB allowed)."""
    if not isinstance(value, str):
        raise LoadSpecError(f"{where} must be a string; got {_got(value)}")
    bad = next((c for c in value if (ord(c) < 0x20 and c != "\t") or ord(c) == 0x7f or ord(c) > 0xff), None)
    if bad is not None:
        what = "a control character (CR, LF, NUL, ...)" if ord(bad) <= 0x7f else "a character outside latin-1"
        raise LoadSpecError(f"{where} {value!r} contains {what} ({bad!r}); valid: printable latin-1 text and tab "
                            "(encode other text, e.g. with urllib.parse.quote)")
    return value


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


@dataclass(frozen=True)
class Stage:
    """One step of an open-model schedule: ``rate_rps`` arrivals per second for ``duration_s``."""

    rate_rps: float
    duration_s: float

    def __post_init__(self) -> None:
        rate = _number("Stage", "rate_rps", self.rate_rps, what="a finite number of requests/s > 0")
        if rate is None or not rate > 0:
            raise LoadSpecError(f"Stage.rate_rps must be a positive finite number of requests/s; got {_got(self.rate_rps)}")
        _set(self, "rate_rps", rate)
        _set(self, "duration_s", _seconds("Stage", "duration_s", self.duration_s))


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
    http_version: ``"1.1"`` or ``"1.0"`` (HTTP/1 only).
    method, path, headers, body: the request. gRPC: ``method`` ``"POST"``, ``path`` the
        method's path ``/package.Service/Method``, ``headers`` the call's metadata, ``body``
        the serialized request message (the engine frames it).
    connect_timeout_s: per connection attempt.
    timeout_s: per response (from send to last byte).
    protocol: ``"http1"`` (HTTP/1.1 or 1.0), ``"h2c"`` (HTTP/2 over TCP, prior knowledge) or
        ``"grpc"`` (unary gRPC calls over h2c).
    streams: HTTP/2: the most concurrent streams (requests) per connection, so at most
        ``connections × streams`` requests in flight; 1 for HTTP/1.
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
    protocol: str = "http1"
    streams: int = 1

    def __post_init__(self) -> None:
        o = "LoadSpec"
        _choice(o, "model", self.model, LOAD_MODELS)
        _choice(o, "protocol", self.protocol, PROTOCOLS)
        _choice(o, "arrival", self.arrival, ARRIVALS)
        _choice(o, "http_version", self.http_version, HTTP_VERSIONS)
        _set(self, "connections", _int(o, "connections", self.connections, low=1))
        _set(self, "workers", _int(o, "workers", self.workers, low=1))
        if self.workers > self.connections:
            raise LoadSpecError(f"workers ({self.workers}) cannot exceed connections ({self.connections})")
        _set(self, "duration_s", _seconds(o, "duration_s", self.duration_s, optional=True))
        _set(self, "requests", _int(o, "requests", self.requests, low=1, optional=True))
        _set(self, "rate_rps", _number(o, "rate_rps", self.rate_rps, what="a finite number of requests/s > 0",
                                       optional=True))
        _set(self, "warmup_s", _seconds(o, "warmup_s", self.warmup_s, zero_ok=True))
        _set(self, "warmup_requests", _int(o, "warmup_requests", self.warmup_requests, low=0, optional=True))
        _set(self, "connect_timeout_s", _seconds(o, "connect_timeout_s", self.connect_timeout_s))
        _set(self, "timeout_s", _seconds(o, "timeout_s", self.timeout_s))
        if not isinstance(self.keep_alive, bool):
            raise LoadSpecError(f"LoadSpec.keep_alive must be True or False; got {_got(self.keep_alive)}")
        if not isinstance(self.stages, (tuple, list)) or not all(isinstance(st, Stage) for st in self.stages):
            raise LoadSpecError(f"LoadSpec.stages must be a sequence of Stage(rate_rps, duration_s); got {self.stages!r}")
        _set(self, "stages", tuple(self.stages))
        self._check_request()
        self._check_protocol()
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

    def _check_request(self) -> None:
        """The request line and headers: only what HTTP/1.1 allows on the wire (so a value can
        never smuggle a second request), all latin-1."""
        if not isinstance(self.method, str) or not _TOKEN.fullmatch(self.method):
            raise LoadSpecError(f"LoadSpec.method {self.method!r} is not an HTTP method token; valid: letters, digits "
                                "and !#$%&'*+-.^_`|~ (RFC 9110), no spaces, CR or LF, e.g. GET, POST, PUT, DELETE")
        if not isinstance(self.path, str) or not self.path.startswith("/"):
            raise LoadSpecError(f"LoadSpec.path must start with '/', got {self.path!r}")
        if not _PATH.fullmatch(self.path):
            raise LoadSpecError(f"LoadSpec.path {self.path!r} must be printable ASCII without spaces, CR or LF; "
                                "percent-encode other characters (urllib.parse.quote(path, safe=\"/?&=\"))")
        pairs = list(self.headers.items()) if isinstance(self.headers, Mapping) else self.headers
        if not isinstance(pairs, (tuple, list)) or not all(
                isinstance(h, (tuple, list)) and len(h) == 2 for h in pairs):
            raise LoadSpecError(f"LoadSpec.headers must be a sequence of (name, value) pairs; got {self.headers!r}")
        for name, value in pairs:
            if not isinstance(name, str) or not _TOKEN.fullmatch(name):
                raise LoadSpecError(f"LoadSpec.headers: name {name!r} is not a header name token; valid: letters, "
                                    "digits and !#$%&'*+-.^_`|~ (RFC 9110), no spaces, ':', CR or LF")
            _header_field(f"LoadSpec.headers: value of {name!r}", value)
        _set(self, "headers", tuple((str(n), str(v)) for n, v in pairs))
        if not isinstance(self.body, (bytes, bytearray, memoryview)):
            raise LoadSpecError(f"LoadSpec.body must be bytes; got {_got(self.body)} (encode text, e.g. "
                                "'...'.encode())")
        _set(self, "body", bytes(self.body))

    def _check_protocol(self) -> None:
        """``protocol`` and ``streams`` against the rest of the request."""
        _set(self, "streams", _int("LoadSpec", "streams", self.streams, low=1))
        if self.streams > MAX_STREAMS:
            raise LoadSpecError(f"LoadSpec.streams must be at most {MAX_STREAMS:,}; got {self.streams!r}")
        if self.protocol == "http1":
            if self.streams != 1:
                raise LoadSpecError(f"LoadSpec.streams={self.streams} needs protocol 'h2c' or 'grpc'; HTTP/1 sends "
                                    "one request per connection at a time (valid: streams=1, or protocol='h2c', "
                                    "which a gRPC endpoint of an experiment turns into 'grpc')")
            return
        p = self.protocol
        if not self.keep_alive:
            raise LoadSpecError(f"LoadSpec.keep_alive=False applies to HTTP/1 only; protocol {p!r} keeps its "
                                "connections open (valid: keep_alive=True)")
        if self.http_version != "1.1":
            raise LoadSpecError(f"LoadSpec.http_version={self.http_version!r} applies to HTTP/1 only; protocol {p!r} "
                                "is HTTP/2 (valid: leave http_version at '1.1')")
        for name, value in self.headers:
            low = name.lower()
            if low in _H2_FORBIDDEN or (low == "te" and value.lower() != "trailers"):
                raise LoadSpecError(f"LoadSpec.headers: {name!r} is connection-specific and not allowed in HTTP/2 "
                                    f"(RFC 9113 section 8.2.2); valid: leave it out (the client sets :authority itself), "
                                    "te only as 'trailers'")
        if p != "grpc":
            return
        if self.method != "POST":
            raise LoadSpecError(f"LoadSpec.method {self.method!r} with protocol 'grpc': gRPC calls are POST "
                                "(valid: method='POST')")
        if not _GRPC_PATH.fullmatch(self.path):
            raise LoadSpecError(f"LoadSpec.path {self.path!r} is not a gRPC method path; valid: "
                                "'/package.Service/Method', e.g. '/helloworld.Greeter/SayHello'")
        for name, _ in self.headers:
            if name.lower() in ("content-type", "te") or name.lower().startswith("grpc-"):
                raise LoadSpecError(f"LoadSpec.headers: {name!r} is set by the gRPC client itself; valid metadata: "
                                    "other lower-case names, e.g. ('x-request-id', '1')")
        if len(self.body) > MAX_GRPC_MESSAGE:
            raise LoadSpecError(f"LoadSpec.body is a gRPC message of {len(self.body):,} bytes, over the "
                                f"{MAX_GRPC_MESSAGE:,} gRPC servers accept by default (valid: at most "
                                f"{MAX_GRPC_MESSAGE:,} bytes)")

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
        parts: list[str] = [self.model]
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
        if self.protocol == "http1":
            parts.append(f"HTTP/{self.http_version}" + (" keep-alive" if self.keep_alive else ", new connection per request"))
        else:
            parts.append(f"{'gRPC over h2c' if self.protocol == 'grpc' else 'h2c'}, {self.streams} "
                         f"stream{'s' if self.streams != 1 else ''} per connection")
        return ", ".join(parts)


@dataclass(frozen=True)
class Target:
    """Where the load goes: ``host`` must be a loopback address (127.0.0.0/8 or ::1) unless
    the user explicitly targets a machine of their own."""

    host: str
    port: int

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not _HOST.fullmatch(self.host):
            raise LoadSpecError(f"Target.host must be a host name or IP address (letters, digits, '.', '-', ':'; "
                                f"IPv6 without brackets); got {_got(self.host)}")
        if isinstance(self.port, bool) or not isinstance(self.port, numbers.Integral) or not 0 < self.port < 65536:
            raise LoadSpecError(f"Target.port must be an integer from 1 to 65535; got {_got(self.port)}")
        _set(self, "port", int(self.port))

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
        cpus = _number("Limits", "cpus", self.cpus, what="a finite number of CPUs > 0", optional=True,
                       error=ParameterError)
        if cpus is not None and not cpus > 0:
            raise ParameterError(f"Limits.cpus must be > 0 or None, got {self.cpus!r}")
        _set(self, "cpus", cpus)
        _set(self, "memory_mb", _int("Limits", "memory_mb", self.memory_mb, low=1, optional=True, error=ParameterError))


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
    front: a reverse proxy before the service (a service folder whose manifest says ``role =
        "front"``, e.g. ``"nginx-fastcgi"``), or ``None`` (the load goes to the service
        itself). With a front, the service starts first (all its processes), then the front
        with the service's address(es) in its configuration; the contract check and the load
        go to the front; both run on the server's CPUs, and the front is stopped first.
    front_variant: the front's manifest variant (``None``: its default), e.g. ``"keep-conn-off"``.
    """

    name: str
    service: str
    variant: str | None = None
    endpoint: str | None = None
    log_sink: str = "pipe"
    env: tuple[tuple[str, str], ...] = field(default=())
    runtime: str | None = None
    limits: Limits | None = None
    front: str | None = None
    front_variant: str | None = None

    def __post_init__(self) -> None:
        check_name("arm name", self.name)
        check_name(f"arm {self.name!r}: service (a folder under services/)", self.service)
        if self.front is not None:
            check_name(f"arm {self.name!r}: front (a folder under services/)", self.front)
        elif self.front_variant is not None:
            raise ParameterError(f"arm {self.name!r}: front_variant {self.front_variant!r} without a front; "
                                 "name the front too, e.g. front=\"nginx-fastcgi\"")
        for key in ("variant", "endpoint", "front_variant"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, str):
                raise ParameterError(f"arm {self.name!r}: {key} must be a string or None; got {_got(value)}")
        pairs = list(self.env.items()) if isinstance(self.env, Mapping) else self.env
        if not isinstance(pairs, (tuple, list)) or not all(isinstance(e, (tuple, list)) and len(e) == 2 for e in pairs):
            raise ParameterError(f"arm {self.name!r}: env must be (name, value) pairs; got {self.env!r}")
        for k, v in pairs:
            if not isinstance(k, str) or not _ENV_NAME.fullmatch(k) or not isinstance(v, str) or "\0" in v:
                raise ParameterError(f"arm {self.name!r}: env entry {k!r}={v!r}: names match [A-Za-z_][A-Za-z0-9_]*, "
                                     "values are strings without NUL")
        _set(self, "env", tuple((k, v) for k, v in pairs))
        if self.log_sink not in LOG_SINKS:
            raise ParameterError(f"unknown log_sink {self.log_sink!r}; valid: {', '.join(LOG_SINKS)}")
        if self.runtime is not None and self.runtime not in RUNTIME_NAMES:
            raise ParameterError(f"arm {self.name!r}: unknown runtime {self.runtime!r}; valid: {', '.join(RUNTIME_NAMES)}")
        if self.limits is not None and not isinstance(self.limits, Limits):
            raise ParameterError(f"arm {self.name!r}: limits must be a Limits(...), got {self.limits!r}")


CROSS_CHECK_TOOLS = ("wrk", "k6", "ab", "hey", "h2load", "bombardier", "ghz")


@dataclass(frozen=True)
class CrossCheck:
    """A peer load tool run against the same service instance within a trial, beside
    benchlib's own load, in the blocks ``Experiment.cross_check_blocks`` picks (3 spread over the
run by default, ``"all"`` at full scale); the order alternates over those blocks, so neither
tool always runs first.

    Attributes
    ----------
    tool: one of :data:`CROSS_CHECK_TOOLS`.
    options: keyword arguments for the tool's ``run_*`` function in :mod:`benchlib.loadgen.peers`
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
        """Whether the tool runs beside ``arm``."""
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
    cross_check: a peer tool run on the same instance in the experiment's ``cross_check_blocks``
        (see :class:`CrossCheck`), or several for different arms (ghz beside the gRPC arms, h2load
        beside the JSON ones): each then names its arms, and no arm is in two (one peer tool per trial).
    """

    name: str
    load: LoadSpec
    endpoint: str | None = None
    cross_check: CrossCheck | tuple[CrossCheck, ...] | None = None

    def __post_init__(self) -> None:
        check_name("condition name", self.name)
        if not isinstance(self.load, LoadSpec):
            raise ParameterError(f"condition {self.name!r}: load must be a LoadSpec(...); got {_got(self.load)}")
        checks = self.cross_checks
        if any(not isinstance(c, CrossCheck) for c in checks):
            raise ParameterError(f"condition {self.name!r}: cross_check must be a CrossCheck(...), a tuple of them "
                                 f"or None; got {_got(self.cross_check)}")
        if len(checks) > 1:
            if any(c.arms is None for c in checks):
                raise ParameterError(f"condition {self.name!r}: with several cross-checks each names its arms "
                                     f"(arms=...); {', '.join(c.tool for c in checks if c.arms is None)} names none")
            seen: dict[str, str] = {}
            for c in checks:
                for a in c.arms or ():
                    if a in seen:
                        raise ParameterError(f"condition {self.name!r}: arm {a!r} has two cross-checks ({seen[a]} "
                                             f"and {c.tool}); one peer tool per trial")
                    seen[a] = c.tool

    @property
    def cross_checks(self) -> tuple[CrossCheck, ...]:
        """The condition's cross-checks (none, one, or several for different arms)."""
        c = self.cross_check
        return () if c is None else tuple(c) if isinstance(c, tuple) else (c,)

    def cross_check_of(self, arm: str) -> CrossCheck | None:
        """The cross-check that runs beside ``arm`` (``None``: none does)."""
        return next((c for c in self.cross_checks if c.applies_to(arm)), None)


RUNTIME_NAMES = ("local", "docker")
#: How long the arms' dependencies (``requires``) live: one start per trial, or one per block
DEPENDENCY_SCOPES = ("trial", "block")
#: :attr:`Experiment.service_starts`: a fresh service per trial (the default), or one start per
#: (condition, arm) cell kept for all its trials (for measuring what the restart costs only).
SERVICE_STARTS = ("trial", "cell")


#: :attr:`Interleave.slice_ms`'s bounds (ms): a slice long enough for a request and its
#: response at the slowest loads benchlib runs, short against the seconds a machine keeps a
#: speed state.
SLICE_MS_RANGE = (5.0, 2000.0)


@dataclass(frozen=True)
class Interleave:
    """Arms side by side: every arm of a condition measured inside one trial, the load
    alternating between the arms' fresh instances in slices (``docs/statistics.md``, "Arms side
    by side"; :mod:`benchlib.loadgen.slices`).

    Attributes
    ----------
    slice_ms: one slice (ms; 50 by default, the length the measurement chose).
    gap_ms: the idle gap after each slice (ms), in which requests still in flight complete.
    carry_over_pct: the largest carry-over (an arm's CPU in the other arms' slices beyond its
        idle rate per second of its own slices: % of the service CPU the arms after it lose,
        :attr:`~benchlib.core.slicing.SliceCpu.carry_cpu_pct`) a condition may show in its
        first block; above it,
        or with an instance whose CPU cannot be read, the condition runs in the sequential
        design from then on (its first block again), and the report says so.
    """

    slice_ms: float = 50.0
    gap_ms: float = 5.0
    carry_over_pct: float = 2.0

    def __post_init__(self) -> None:
        lo, hi = SLICE_MS_RANGE
        for name, low, high in (("slice_ms", lo, hi), ("gap_ms", 0.0, hi), ("carry_over_pct", 0.0, 100.0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not low <= v <= high:
                raise ParameterError(f"Interleave.{name} must be a number from {low:g} to {high:g}; got {_got(v)}")
            _set(self, name, float(v))


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
    repeat_disturbed: a trial the machine disturbed beyond a bound (outside signals only: other
        processes' CPU on the pinned CPUs, steal, the canary's slowdown;
        :mod:`benchlib.store.records.disturbance`) is marked invalid and run again in its place at most
        this many times (default 2); a trial still disturbed then is tried again at the end of the
        run (a make-up pass, in plan order, with as many repeats more), and only if still
        disturbed stays invalid, and the report says so. 0: such trials are marked invalid,
        never repeated.
    cross_check_blocks: the blocks in which a condition's peer tool (:class:`CrossCheck`) runs:
        ``"all"``, a number of blocks spread over the run (default 3: the first, a middle and the
        last), or a fraction of the blocks (see :func:`benchlib.core.design.cross_check_blocks`).
    dependencies: ``"trial"`` (default): each trial starts the arm's dependencies (``requires``)
        afresh and stops them after; ``"block"``: each dependency starts once per block, at the
        first trial that needs it, is shared by the block's trials (of every arm and condition)
        and stops when the block ends; before each later trial its manifest's ``[run] reset``
        steps give it fresh data (a dependency without them is refused).
    budget_min: the study's time budget in minutes, its pilot included (``None``: no budget; the
        design is ``trials`` x the conditions' durations as given). With a budget the study starts
        with a pilot (:func:`benchlib.analysis.planned.run_planned`) that chooses the blocks, the
        measured seconds and the warm-up for ``target_mde`` within it.
    target_mde: the smallest change (percent, 5 = 5%) every question should be able to detect at
        80% power (``None``: none). With sequential looks, a row that cannot reach it within the
        budget stops as "not decidable within the budget".
    cluster: where the load runs: ``None`` (default: this machine), ``"local:N"`` (a Ray
        cluster of N load nodes started on this machine for the run), ``"auto"`` or
        ``"ray://host:port"`` (an existing Ray cluster); each may add ``"?service=<resource>"``
        (the services run on the node carrying that Ray resource, e.g. ``"local:3?service=
        benchlib_host_0"``, the load from the other nodes; ``&server_cpus=all`` pins them to all
        its CPUs); see :mod:`benchlib.run.cluster` and ``docs/cluster.md`` (needs ``benchlib[cluster]``).
    interleave: ``None`` (default): each trial measures one arm (the sequential design);
        :class:`Interleave`: each trial measures every arm of a condition side by side, the load
        alternating between their fresh instances in short slices, so that slow changes of the
        machine (a CPU switching speed for seconds) fall on every arm alike. HTTP/1.1 loads
        bounded by time only, on this machine (no cluster), without ``service_starts="cell"``.
    service_starts: ``"trial"`` (default): every trial starts the arm's service (its front and
        dependencies) afresh and stops it after, so trials are independent. ``"cell"``: one start
        per (condition, arm), kept running for all that cell's trials and stopped when the run
        ends (started again if it died). This BREAKS TRIAL INDEPENDENCE (a trial inherits the
        previous one's caches, heap and connections' server state): it exists only to measure
        what the restart per trial adds to the variance and costs in time
        (``bench/variance_sources.py``); never use it for a comparison.
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
    repeat_disturbed: int = 2
    cross_check_blocks: int | float | str = DEFAULT_CROSS_CHECK_BLOCKS
    dependencies: str = "trial"
    budget_min: float | None = None
    target_mde: float | None = None
    cluster: str | None = None
    service_starts: str = "trial"
    interleave: Interleave | None = None

    def __post_init__(self) -> None:
        check_name("study name", self.study)
        parse_cluster(self.cluster)
        for name in ("budget_min", "target_mde"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                                  or v <= 0):
                raise ParameterError(f"Experiment.{name} must be a positive number or None "
                                     f"({'minutes, the pilot included' if name == 'budget_min' else 'percent, 5 = 5%'})"
                                     f"; got {_got(v)}")
            if v is not None:
                _set(self, name, float(v))
        _choice("Experiment", "dependencies", self.dependencies, DEPENDENCY_SCOPES, ParameterError)
        _choice("Experiment", "service_starts", self.service_starts, SERVICE_STARTS, ParameterError)
        self._check_interleave()
        _set(self, "cross_check_blocks", check_cross_check_blocks(self.cross_check_blocks))
        _choice("Experiment", "runtime", self.runtime, RUNTIME_NAMES, ParameterError)
        _set(self, "trials", _int("Experiment", "trials", self.trials, low=1, error=ParameterError))
        _set(self, "seed", _int("Experiment", "seed", self.seed, low=0, error=ParameterError))
        _set(self, "between_trials_s", _seconds("Experiment", "between_trials_s", self.between_trials_s, zero_ok=True,
                                                error=ParameterError))
        _set(self, "repeat_invalid", _int("Experiment", "repeat_invalid", self.repeat_invalid, low=0,
                                          error=ParameterError))
        _set(self, "repeat_disturbed", _int("Experiment", "repeat_disturbed", self.repeat_disturbed, low=0,
                                            error=ParameterError))
        if not isinstance(self.retry_failed, bool):
            raise ParameterError(f"Experiment.retry_failed must be True or False; got {_got(self.retry_failed)}")
        if not isinstance(self.limits, Limits):
            raise ParameterError(f"Experiment.limits must be a Limits(...); got {_got(self.limits)}")
        if isinstance(self.arms, list):
            _set(self, "arms", tuple(self.arms))
        if isinstance(self.conditions, list):
            _set(self, "conditions", tuple(self.conditions))
        if not all(isinstance(a, Arm) for a in self.arms):
            raise ParameterError(f"Experiment.arms must be Arm(...) objects; got {self.arms!r}")
        if not all(isinstance(c, Condition) for c in self.conditions):
            raise ParameterError(f"Experiment.conditions must be Condition(...) objects; got {self.conditions!r}")
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
        if self.baseline is not None and self.baseline not in names:
            raise ParameterError(f"baseline {self.baseline!r} is not an arm; valid: {', '.join(names)}")

    @property
    def baseline_arm(self) -> str:
        return self.baseline or self.arms[0].name

    def _check_interleave(self) -> None:
        """An interleaved design runs HTTP/1.1 loads bounded by time on this machine: anything
        else is refused here, in one line naming the way out."""
        il = self.interleave
        if il is None:
            return
        if isinstance(il, Mapping):  # as run.json stores it
            _set(self, "interleave", il := Interleave(**il))
        if not isinstance(il, Interleave):
            raise ParameterError(f"Experiment.interleave must be Interleave(...) or None; got {_got(il)}")
        why = self.side_by_side_refusal()
        if why:
            raise ParameterError(f"{why}: use interleave=None (the sequential design)")

    def side_by_side_refusal(self) -> str:
        """Why this experiment's arms cannot run side by side (``Experiment(interleave=...)``),
        in words; ``""`` when they can: the load comes from this machine, every arm starts
        afresh per trial, and every condition's load is HTTP/1.1 bounded by time."""
        if self.cluster is not None:
            return (f"an interleaved design measures every arm on this machine; cluster={self.cluster!r} "
                    "sends the load from other hosts")
        if self.service_starts != "trial":
            return "an interleaved design starts every arm afresh per trial, not once per cell (service_starts=\"cell\")"
        for c in self.conditions:
            ld = c.load
            if ld.protocol != "http1":
                return f"condition {c.name!r}: an interleaved design runs HTTP/1.1 loads only (this one is {ld.protocol})"
            if ld.requests is not None or ld.warmup_requests or ld.stages:
                return (f"condition {c.name!r}: an interleaved design needs a load bounded by time "
                        "(duration_s, warmup_s), not by a request count or stages")
        return ""

    def arm(self, name: str) -> Arm:
        for a in self.arms:
            if a.name == name:
                return a
        raise ParameterError(f"no arm {name!r}; valid: {', '.join(a.name for a in self.arms)}")
