"""Every ``BENCHLIB_*`` environment variable: name, type, default, meaning and valid values,
read here and nowhere else.

Each :class:`Setting` reads the environment when asked (:meth:`Setting.get`), never at import,
so a variable set later (a test's ``monkeypatch.setenv``, a notebook's ``os.environ``) counts
from the next read on. A value that is not valid raises
:class:`~benchlib.core.errors.ParameterError` in one line naming the variable, the value and the
valid values. An empty value counts as unset.

``docs/settings.md`` lists them all: its table is :func:`markdown_table` (``python -m
benchlib.core.settings`` prints it; ``tests/test_settings.py`` checks that the page matches and
that no other module reads a ``BENCHLIB_*`` variable itself). A few are read by the shell
scripts in ``scripts/`` (``reader`` says so); they are defined here so the one table lists
every variable.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from benchlib.core.errors import ParameterError

__all__ = [
    "ALLOW_INSECURE_DOCKER", "ALLOW_REMOTE_TARGET", "BOMBARDIER", "BUILD_CA_BUNDLE", "CACHE", "DATA",
    "DEBIAN_MIRROR", "DOCKERD_ARGS", "DOCKERD_TIMEOUT_S", "DOCKER_BIND_HOST", "DOCKER_DEPENDENCY_BIND_HOST",
    "DOCKER_LIMITS", "DOCKER_SERVICE_HOST", "GHZ", "IMAGE_FROM_LOCAL_BUILD", "K6", "MAX_BETWEEN_TRIALS_S", "PROGRESS_FILE",
    "RUNS_FILE", "SERVICES",
    "SETTINGS",
    "SETTLE", "SETTLE_MAX_S", "SKIP_APT", "SKIP_DOCKER", "STOP_GRACE_S", "Setting", "VALIDATION_REPORT", "markdown_table",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One environment variable.

    Attributes
    ----------
    name: the variable, ``BENCHLIB_...``.
    kind: its type in words (``path``, ``flag``, ``seconds``, ``host``, ``URL``, ...).
    default: what applies when it is unset, in words.
    meaning: what it does, one sentence.
    valid: the valid values, in words (error messages and the docs say them).
    reader: the module (or script) that uses it.
    parse: the text to the value; raises ``ValueError`` for a value that is not valid.
    fallback: the value when unset (``None``: the reader decides, as ``default`` says).
    """

    name: str
    kind: str
    default: str
    meaning: str
    valid: str
    reader: str
    parse: Callable[[str], T]
    fallback: Callable[[], T] | None = None

    def raw(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The variable's text now (``environ``: another environment than this process's),
        ``None`` when unset or empty."""
        value = (os.environ if environ is None else environ).get(self.name)
        return value if value else None

    def is_set(self, environ: Mapping[str, str] | None = None) -> bool:
        """Is the variable set (to a non-empty value)?"""
        return self.raw(environ) is not None

    def get(self, environ: Mapping[str, str] | None = None) -> T | None:
        """The value now: parsed when set, else the fallback (``None`` without one).

        Raises
        ------
        ParameterError
            the value is not valid (one line: variable, value, why, valid values).
        """
        text = self.raw(environ)
        if text is None:
            return self.fallback() if self.fallback is not None else None
        try:
            return self.parse(text)
        except ValueError as exc:
            why = f": {exc}" if str(exc) else ""
            raise ParameterError(f"{self.name}={text!r} is not valid{why}; valid: {self.valid}") from None

    def value(self, environ: Mapping[str, str] | None = None) -> T:
        """:meth:`get` for a setting with a fallback (it is never ``None`` then).

        Raises
        ------
        ParameterError
            the value is not valid.
        LookupError
            the setting has no fallback and is unset (use :meth:`get`).
        """
        value = self.get(environ)
        if value is None and self.fallback is None:
            raise LookupError(f"{self.name} has no fallback; read it with get()")
        return value  # type: ignore[return-value]  # None only without a fallback: raised above


# -- parsers ------------------------------------------------------------------------------------

def _path(text: str) -> Path:
    return Path(text).expanduser()


def _flag(text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError("")
    return text == "1"


def _seconds(lo: float, hi: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError("not a number") from None
        if not (math.isfinite(value) and lo <= value <= hi):
            raise ValueError(f"outside {lo:g}..{hi:g}")
        return value

    return parse


_HOST = re.compile(r"^(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)$")


def _host(text: str) -> str:
    if not _HOST.match(text):
        raise ValueError("not a host name or IP address")
    return text


def _url(text: str) -> str:
    if not re.match(r"^(https?://[^/\s]+|file:///?\S*)", text) or re.search(r"\s", text):
        raise ValueError("not an http://, https:// or file:// URL")
    return text.rstrip("/")


def _limits(text: str) -> dict[str, float]:
    """``cpus=1,memory_mb=512`` -> ``{"cpus": 1.0, "memory_mb": 512}``; ``none``/``off`` -> ``{}``."""
    if text.strip().lower() in ("none", "off"):
        return {}
    out: dict[str, float] = {}
    for part in text.split(","):
        key, _, val = part.partition("=")
        key = key.strip()
        if key not in ("cpus", "memory_mb"):
            raise ValueError(f"unknown field {key!r}")
        try:
            out[key] = float(val) if key == "cpus" else int(val)
        except ValueError:
            raise ValueError(f"{key}={val!r} is not a number") from None
    return out


def _ca_bundle(text: str) -> Path | None:
    """A PEM file, or ``none`` (``None``: no bundle)."""
    if text.lower() in ("none", "off", "0"):
        return None
    path = Path(text).expanduser()
    if not path.is_file():
        raise ValueError(f"{str(path)!r} does not exist")
    return path


def _text(text: str) -> str:
    return text


# -- the settings ------------------------------------------------------------------------------

DATA: Setting[Path] = Setting(
    "BENCHLIB_DATA", "path", "`data/runs` of the project (beside `services/`)",
    "Root of the run folders (`<root>/<study>/<run_id>/`).", "a folder path", "benchlib.store.runstore", _path)

CACHE: Setting[Path] = Setting(
    "BENCHLIB_CACHE", "path", "`~/.cache/benchlib`",
    "Builds, peer tools, base-image tarballs and services' scratch folders, outside the clone "
    "(services inherit it).", "a folder path", "benchlib.core.buildcache", _path,
    fallback=lambda: Path.home() / ".cache" / "benchlib")

SERVICES: Setting[Path] = Setting(
    "BENCHLIB_SERVICES", "path", "the nearest `services/` above the current folder, else the one beside the package",
    "The folder of service manifests (`<name>/service.toml`).", "a folder path", "benchlib.runtime.manifest", _path)

PROGRESS_FILE: Setting[Path] = Setting(
    "BENCHLIB_PROGRESS_FILE", "path", "unset (progress goes to the notebook or the terminal)",
    "`benchlib run` sets it for the notebook's kernel: the runner appends one line per trial there.",
    "a file path", "benchlib.run.progress (set by benchlib.publish.relay)", _path)

RUNS_FILE: Setting[Path] = Setting(
    "BENCHLIB_RUNS_FILE", "path", "unset (not recorded)",
    "`benchlib run` and `report` set it for the notebook's kernel: the runner appends the folder of every "
    "run it executes, one per line, so that their closing summary can read the runs' not-run arms.",
    "a file path", "benchlib.run.hooks (set by benchlib.publish.relay)", _path)

STOP_GRACE_S: Setting[float] = Setting(
    "BENCHLIB_STOP_GRACE_S", "seconds", "60",
    "How long a stopped notebook's kernel gets to stop its load and services before it is killed.",
    "seconds from 0 to 3600", "benchlib.publish.execute", _seconds(0.0, 3600.0), fallback=lambda: 60.0)

DOCKER_LIMITS: Setting[dict[str, float]] = Setting(
    "BENCHLIB_DOCKER_LIMITS", "limits", "`cpus=1,memory_mb=512` (the seeds')",
    "Limits the Docker runtime applies to a service when the experiment asks for none.",
    "none, or the fields cpus and memory_mb as key=number joined by commas (e.g. cpus=1,memory_mb=512)",
    "benchlib.runtime.docker", _limits, fallback=lambda: {"cpus": 1.0, "memory_mb": 512})

DOCKER_SERVICE_HOST: Setting[str] = Setting(
    "BENCHLIB_DOCKER_SERVICE_HOST", "host", "127.0.0.1 (local engine), the engine's host name (remote engine)",
    "The address the load generator connects to for a container's service.", "a host name or IP address",
    "benchlib.runtime.docker", _host)

DOCKER_BIND_HOST: Setting[str] = Setting(
    "BENCHLIB_DOCKER_BIND_HOST", "host", "127.0.0.1 (a remote engine needs it set)",
    "The address services under test bind in their containers.", "a host name or IP address (e.g. 0.0.0.0)",
    "benchlib.runtime.docker", _host)

DOCKER_DEPENDENCY_BIND_HOST: Setting[str] = Setting(
    "BENCHLIB_DOCKER_DEPENDENCY_BIND_HOST", "host", "127.0.0.1 of the engine's machine",
    "The address dependencies (databases) bind in their containers.", "a host name or IP address",
    "benchlib.runtime.docker", _host)

DEBIAN_MIRROR: Setting[str] = Setting(
    "BENCHLIB_DEBIAN_MIRROR", "URL", "the Debian mirror apt uses here, else http://deb.debian.org/debian",
    "The mirror debootstrap creates missing Debian base images from.", "an http://, https:// or file:// URL",
    "benchlib.runtime.docker.images", _url)

BUILD_CA_BUNDLE: Setting[Path | None] = Setting(
    "BENCHLIB_BUILD_CA_BUNDLE", "path", "detected ($SSL_CERT_FILE, $REQUESTS_CA_BUNDLE, $PIP_CERT, $CURL_CA_BUNDLE, "
    "pip's cert)", "An extra CA bundle added to Docker build contexts (builds behind a TLS-inspecting proxy).",
    "an existing PEM file, or none", "benchlib.runtime.docker.context", _ca_bundle)

ALLOW_REMOTE_TARGET: Setting[bool] = Setting(
    "BENCHLIB_ALLOW_REMOTE_TARGET", "flag", "0",
    "1 lets the load generator and the peer tools load a host that is not loopback (a machine of your own).",
    "1 (allow), 0 (loopback only)", "benchlib.loadgen.preflight, benchlib.loadgen.peers.common", _flag,
    fallback=lambda: False)

IMAGE_FROM_LOCAL_BUILD: Setting[bool] = Setting(
    "BENCHLIB_IMAGE_FROM_LOCAL_BUILD", "flag", "1",
    "1: a service whose manifest has [docker.local_build] takes its image's program from the local runtime's build "
    "when that build used the toolchain version the Dockerfile pins (one build, the same binary in both runtimes); "
    "0: every image compiles in its Dockerfile's build stage.",
    "1 (reuse the local build), 0 (always the Dockerfile's build stage)", "benchlib.runtime.docker.local_build", _flag,
    fallback=lambda: True)

ALLOW_INSECURE_DOCKER: Setting[bool] = Setting(
    "BENCHLIB_ALLOW_INSECURE_DOCKER", "flag", "0",
    "1 allows a remote Docker engine over plain TCP without TLS (a network you control).",
    "1 (allow), 0 (refuse)", "benchlib.runtime.docker.connection", _flag, fallback=lambda: False)

K6: Setting[Path] = Setting(
    "BENCHLIB_K6", "path", "the cache's k6, else `k6` on PATH, else built with Go",
    "A k6 v0.50.0 binary for the k6 cross-checks.", "the path of a k6 v0.50.0 binary", "benchlib.loadgen.peers.k6", _path)

BOMBARDIER: Setting[Path] = Setting(
    "BENCHLIB_BOMBARDIER", "path", "the cache's bombardier, else `bombardier` on PATH, else built with Go",
    "A bombardier v1.2.6 binary for the bombardier cross-checks.", "the path of a bombardier v1.2.6 binary",
    "benchlib.loadgen.peers.bombardier", _path)

GHZ: Setting[Path] = Setting(
    "BENCHLIB_GHZ", "path", "the cache's ghz, else `ghz` on PATH, else built with Go",
    "A ghz v0.120.0 binary for the ghz (gRPC) cross-checks and bench/grpc_vs_peers.py.",
    "the path of a ghz v0.120.0 binary", "benchlib.loadgen.peers.ghz", _path)

BUILD_TIMES: Setting[Path] = Setting(
    "BENCHLIB_BUILD_TIMES", "path", "unset (not recorded)",
    "Where every build and build-cache look-up (service builds, Docker images, base images, peer tools) appends "
    "one line: what, which runtime, seconds, cache hit or not; `scripts/test.sh` sets it and prints the summary.",
    "a file path", "benchlib.core.buildcache", _path)

VALIDATION_REPORT: Setting[Path] = Setting(
    "BENCHLIB_VALIDATION_REPORT", "path", "unset (figures not written)",
    "Where the statistics validation tests write their recorded figures (JSON).", "a file path",
    "tests/stats/conftest.py", _path)

def _disturbance_rule(text: str) -> str:
    if text not in ("judge", "record"):
        raise ValueError("")
    return text


DISTURBANCE_RULE: Setting[str] = Setting(
    "BENCHLIB_DISTURBANCE_RULE", "choice", "judge",
    "What the runner does with a trial's disturbance measure (hypervisor steal, other processes' CPU, the client's "
    "canary: docs/statistics.md \"Disturbed trials\"): `judge` marks a trial disturbed beyond the bounds invalid and "
    "repeats it; `record` stores and reports the measure but never invalidates a trial (the test suite's default: "
    "its tests assert what the code decides, not how busy the machine's host was).",
    "judge, record", "benchlib.run.sampler", _disturbance_rule, fallback=lambda: "judge")

SERVER_SLOWDOWN_BOUND: Setting[float] = Setting(
    "BENCHLIB_SERVER_SLOWDOWN_BOUND", "number", "unset (recorded and reported only)",
    "A bound on the server canary's slowdown (the loop timed on the service's CPUs, its trial median over the run's "
    "ordinary): under `BENCHLIB_DISTURBANCE_RULE=judge` a trial above it is disturbed and repeated. Off by default, "
    "because the canary shares the service's CPU and the service might move it (docs/statistics.md \"The service's "
    "CPU has a speed of its own\"): set it where a run has shown that the slow state does not depend on the arm.",
    "a ratio from 1.01 to 10", "benchlib.run.sampler", _seconds(1.01, 10.0))

SETTLE: Setting[float] = Setting(
    "BENCHLIB_SETTLE", "number", "none",
    "A 1-min load average: a run waits, after its builds and just before its first trial, until the machine's load "
    "average is below it (for runs meant to be cited; `benchlib run/report --settle LOAD` sets it). The run's stored "
    "load average at start is taken after the wait.",
    "a load average from 0.01 to 64", "benchlib.run.settle", _seconds(0.01, 64.0))

SETTLE_MAX_S: Setting[float] = Setting(
    "BENCHLIB_SETTLE_MAX_S", "seconds", "600", "The longest wait for `BENCHLIB_SETTLE`; then the run starts anyway "
    "and says so (`--settle-max`).", "seconds from 0 to 86400", "benchlib.run.settle", _seconds(0.0, 86400.0),
    fallback=lambda: 600.0)
MAX_BETWEEN_TRIALS_S: Setting[float] = Setting(
    "BENCHLIB_MAX_BETWEEN_TRIALS_S", "seconds", "unset (each experiment's own `between_trials_s`)",
    "The longest pause between two trials: a run whose experiment asks for a longer one pauses this long instead, "
    "and its run.json records the pause it used. The test suite sets 0.1 (tests/conftest.py): the pause lets "
    "sockets and caches settle for a measurement, and the suite's tests assert what the code decides.",
    "seconds from 0 to 3600", "benchlib.run.runner", _seconds(0.0, 3600.0))

SKIP_APT: Setting[bool] = Setting(
    "BENCHLIB_SKIP_APT", "flag", "0", "1 makes `scripts/setup.sh` skip the apt packages.", "1 (skip), 0",
    "scripts/setup.sh", _flag, fallback=lambda: False)

SKIP_DOCKER: Setting[bool] = Setting(
    "BENCHLIB_SKIP_DOCKER", "flag", "0", "1 makes `scripts/setup.sh` skip starting the Docker engine.",
    "1 (skip), 0", "scripts/setup.sh", _flag, fallback=lambda: False)

DOCKERD_ARGS: Setting[str] = Setting(
    "BENCHLIB_DOCKERD_ARGS", "text", "none", "More arguments for dockerd, started by `scripts/docker-engine.sh`.",
    "dockerd arguments", "scripts/docker-engine.sh", _text)

DOCKERD_TIMEOUT_S: Setting[float] = Setting(
    "BENCHLIB_DOCKERD_TIMEOUT_S", "seconds", "60", "How long `scripts/docker-engine.sh` waits for dockerd to answer.",
    "seconds from 1 to 3600", "scripts/docker-engine.sh", _seconds(1.0, 3600.0), fallback=lambda: 60.0)

#: Every setting, in the order the docs list them.
SETTINGS: tuple[Setting[Any], ...] = (
    DATA, CACHE, SERVICES, PROGRESS_FILE, RUNS_FILE, STOP_GRACE_S, DOCKER_LIMITS, DOCKER_SERVICE_HOST, DOCKER_BIND_HOST,
    DOCKER_DEPENDENCY_BIND_HOST, DEBIAN_MIRROR, BUILD_CA_BUNDLE, ALLOW_REMOTE_TARGET, ALLOW_INSECURE_DOCKER, K6,
    IMAGE_FROM_LOCAL_BUILD, BOMBARDIER, GHZ, BUILD_TIMES, DISTURBANCE_RULE, SERVER_SLOWDOWN_BOUND, SETTLE, SETTLE_MAX_S,
    MAX_BETWEEN_TRIALS_S, VALIDATION_REPORT,
    SKIP_APT, SKIP_DOCKER,
    DOCKERD_ARGS, DOCKERD_TIMEOUT_S,
)

#: ``BENCHLIB_*`` names that are not settings: variables benchlib's manifests set for a
#: service's own build, and a test's stand-in secret.
NOT_SETTINGS: Mapping[str, str] = {
    "BENCHLIB_DOTNET_OUT": "set by the .NET services' service.toml for their build (the build folder)",
    "BENCHLIB_TEST_API_TOKEN": "a secret a test sets to check it never reaches a service",
}


def markdown_table() -> str:
    """The table of ``docs/settings.md``: one row per setting."""
    lines = ["| variable | type | default | meaning | valid values | read by |", "|---|---|---|---|---|---|"]
    for s in SETTINGS:
        cells = [f"`{s.name}`", s.kind, s.default, s.meaning, s.valid, s.reader]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
