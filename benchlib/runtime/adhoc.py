"""Services from parameters: a service the project does not hold (an image in the local Docker
engine, or a command) as a generated service folder, so the runner starts it like any other.

:func:`write_service` writes ``<name>/service.toml`` (and, for an image, a one-line
``Dockerfile``: ``FROM <image>``, so the Docker runtime runs the image with its own entry point
and command, nothing added) under the cache (``$BENCHLIB_CACHE/generated-services``, named by
a hash of its content: the same side is the same folder) and lets
:func:`~benchlib.runtime.manifest.get_manifest` find it
(:func:`~benchlib.runtime.manifest.add_generated_services`). Nothing under ``services/`` is
touched. :func:`local_image` reads an image's id and repository digests from the local engine
(no registry is asked); :func:`first_answer` starts a service once and checks its first answer
against its contract, so a side that does not answer, or answers wrongly, is one line before
anything is measured. ``docs/ab.md`` is the user's guide (study ``10_ab``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchlib.core import buildcache
from benchlib.core.errors import ContractError, ParameterError, ServiceStartError
from benchlib.runtime.manifest import ENDPOINT_PROTOCOLS, add_generated_services, get_manifest

if TYPE_CHECKING:  # pragma: no cover
    from benchlib.runtime.contract import ContractReport

__all__ = ["Expect", "ImageFacts", "Request", "Side", "first_answer", "generated_root", "local_image", "write_service"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: JSON values a ``json_fields`` check may name (TOML has no null and other inline tables)
_SCALARS = (str, int, float, bool)


@dataclass(frozen=True)
class Request:
    """The request every load sends: ``method`` and ``path`` (for gRPC ``POST`` and
    ``/package.Service/Method``), ``headers`` (name, value) pairs (gRPC: metadata), ``body``
    (gRPC: the serialized request message) and ``protocol`` (``http1``, ``h2c``, ``grpc``)."""

    method: str = "GET"
    path: str = "/"
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    protocol: str = "http1"

    def __post_init__(self) -> None:
        if self.protocol not in ENDPOINT_PROTOCOLS:
            raise ParameterError(f"protocol {self.protocol!r} is not valid; valid: {', '.join(ENDPOINT_PROTOCOLS)}")
        if not self.path.startswith("/"):
            raise ParameterError(f"path {self.path!r} must start with '/'")


@dataclass(frozen=True)
class Expect:
    """What a correct answer is: HTTP ``status``, optionally a substring of the body
    (``body_contains``) and JSON fields (dotted path, value) the body must hold. gRPC: the
    call ends with status OK (0)."""

    status: int = 200
    body_contains: str = ""
    json_fields: tuple[tuple[str, str | int | float | bool], ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.status, bool) or not isinstance(self.status, int) or not 100 <= self.status <= 599:
            raise ParameterError(f"expect_status {self.status!r} is not valid; valid: an HTTP status from 100 to 599")
        for path, value in self.json_fields:
            if not path or not isinstance(value, _SCALARS):
                raise ParameterError(f"expect_json field {path!r}: its value must be text, a number or true/false; "
                                     f"got {value!r}")


@dataclass(frozen=True)
class Side:
    """One service as the user gave it.

    Attributes
    ----------
    label: its name in the report (an arm name: letters, digits, ``.``, ``_``, ``-``).
    image: an image in the local Docker engine (``name:tag`` or an id), run by the Docker runtime.
    command: a command line (split as a shell would, but run without one; ``{port}``,
        ``{host}`` and ``{python}`` are filled in), run by the local runtime.
    port: the TCP port it always listens on; ``0``: it takes the port from ``port_env``.
    port_env: the environment variable it reads its port from (with ``port`` 0).
    env: extra environment variables (name, value).
    ready_timeout_s: seconds it may take to accept connections after its start.
    """

    label: str
    image: str = ""
    command: str = ""
    port: int = 0
    port_env: str = "PORT"
    env: tuple[tuple[str, str], ...] = ()
    ready_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        p = self.label.lower()
        if bool(self.image.strip()) == bool(self.command.strip()):
            raise ParameterError(f"side {self.label}: give {p}_image (an image in the local Docker engine) or "
                                 f"{p}_command (a command run here), exactly one of them")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ParameterError(f"{p}_port {self.port!r} is not valid; valid: 0 (it reads {p}_port_env) or a "
                                 "TCP port from 1 to 65535")
        if not self.port and not _ENV_NAME.fullmatch(self.port_env):
            raise ParameterError(f"{p}_port_env {self.port_env!r} is not valid; valid: the name of the environment "
                                 f"variable the service reads its port from (e.g. PORT), or a fixed {p}_port")
        if self.command and not self.port and "{port}" not in self.command and not self.port_env:
            raise ParameterError(f"side {self.label}: say how it gets its port: {p}_port_env, {{port}} in "
                                 f"{p}_command, or a fixed {p}_port")
        if self.command:
            argv = shlex.split(self.command)
            if not argv:
                raise ParameterError(f"{p}_command is empty")

    @property
    def runtime(self) -> str:
        """``docker`` for an image, ``local`` for a command."""
        return "docker" if self.image else "local"

    @property
    def what(self) -> str:
        """The side in words: ``image myapp:pr`` or ``command ./server --fast``."""
        return f"image {self.image}" if self.image else f"command {self.command}"


@dataclass(frozen=True)
class ImageFacts:
    """An image of the local engine: the reference given, its id (``sha256:...``), its
    repository digests (empty for an image built or loaded here and never pushed) and when it
    was created (ISO 8601)."""

    ref: str
    id: str
    repo_digests: tuple[str, ...]
    created: str


def local_image(ref: str, label: str = "") -> ImageFacts:
    """``ref`` as the local Docker engine holds it (no registry is asked: an image not there is
    not pulled).

    Raises
    ------
    ParameterError  no such image here (naming it, and how to build or load one), or no engine.
    """
    from benchlib.core.errors import RuntimeUnavailable
    from benchlib.runtime.docker import connect

    who = f"side {label}: " if label else ""
    try:
        client = connect()
        import docker.errors

        try:
            image = client.images.get(ref)
        except docker.errors.ImageNotFound:
            raise ParameterError(
                f"{who}image {ref!r} is not in the local Docker engine (no registry is asked); build it "
                f"(docker build -t {ref} .) or load it (docker load -i image.tar); a Dockerfile's base image "
                "that cannot be pulled: benchlib images bootstrap") from None
    except RuntimeUnavailable as exc:
        raise ParameterError(f"{who}image {ref!r} needs a Docker engine: {str(exc).splitlines()[0]}") from None
    attrs = image.attrs or {}
    return ImageFacts(ref, str(image.id), tuple(attrs.get("RepoDigests") or ()), str(attrs.get("Created", "")))


def generated_root() -> Path:
    """Where generated service folders go: ``$BENCHLIB_CACHE/generated-services`` (created)."""
    root = buildcache.cache_root() / "generated-services"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _toml(value: object) -> str:
    """A TOML value of a string, number, bool or list/table of them (JSON's escapes are TOML's)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def service_toml(name: str, side: Side, request: Request, expect: Expect, image_id: str = "") -> str:
    """The ``service.toml`` of ``side`` (with its request as ``request.bin`` beside it)."""
    run: dict[str, object] = {"command": shlex.split(side.command) if side.command else ["(the image's own)"],
                              "ready_timeout_s": float(side.ready_timeout_s)}
    if side.port:
        run["port"] = side.port
    else:
        run["port_env"] = side.port_env
    if side.env:
        run["env"] = dict(side.env)
    lines = ["schema = 1", f"name = {_toml(name)}",
             f"description = {_toml(f'{side.label}: {side.what} (generated from parameters)')}",
             f"language = {_toml('image' if side.image else 'command')}", f"framework = {_toml(side.label)}",
             "toolchains = []", "", "[versions]"]
    if image_id:
        lines.append(f"image = {_toml(image_id)}")
    lines += ["", "[run]", *(f"{k} = {_toml(v)}" for k, v in run.items()), "", "[health]", 'kind = "tcp"', ""]
    if side.image:
        lines += ["[docker]", 'dockerfile = "Dockerfile"', ""]
    lines += ["[[endpoints]]", 'name = "request"', f"protocol = {_toml(request.protocol)}",
              f"method = {_toml(request.method.upper())}", f"path = {_toml(request.path)}"]
    if request.headers:
        lines.append(f"headers = {_toml(dict(request.headers))}")
    if request.protocol == "grpc":
        lines += ['request_file = "request.bin"', "", "[endpoints.contract]", "grpc_status = 0"]
    else:
        if request.body:
            lines.append('body_file = "request.bin"')
        lines += ["", "[endpoints.contract]", f"status = {expect.status}"]
        if expect.body_contains:
            lines.append(f"body_regex = {_toml('.*' + re.escape(expect.body_contains) + '.*')}")
        if expect.json_fields:
            lines.append(f"json_fields = {_toml(dict(expect.json_fields))}")
    return "\n".join(lines) + "\n"


def write_service(side: Side, request: Request, expect: Expect, *, image: ImageFacts | None = None,
                  root: Path | None = None) -> str:
    """Write ``side`` as a service folder (see the module docstring) and return its name
    (``ab-<label>-<hash>``), which :func:`~benchlib.runtime.manifest.get_manifest` then finds.
    The same side, request and answer give the same name and folder."""
    root = root or generated_root()
    draft = service_toml("x", side, request, expect, image.id if image else "")
    digest = hashlib.sha256(draft.encode() + request.body + (image.ref.encode() if image else b"")).hexdigest()[:12]
    name = f"ab-{re.sub(r'[^a-z0-9]+', '-', side.label.lower()).strip('-') or 'side'}-{digest}"
    folder = root / name
    if not (folder / "service.toml").is_file():
        tmp = root / f".{name}.{os.getpid()}"
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "request.bin").write_bytes(request.body)
        if image is not None:
            (tmp / "Dockerfile").write_text(f"# the image as the local engine holds it ({image.id})\n"
                                            f"FROM {image.ref}\n")
        (tmp / "service.toml").write_text(service_toml(name, side, request, expect, image.id if image else ""))
        try:
            tmp.rename(folder)
        except OSError:  # another process wrote the same folder first: identical content
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    add_generated_services(root)
    get_manifest(name)  # validated now: a bad value is one line before anything runs
    return name


def _last_lines(exc: BaseException, n: int = 3) -> str:
    """The last ``n`` lines of a start error's log tail (its notes), joined on one line."""
    notes = "\n".join(getattr(exc, "__notes__", []))
    lines = [ln.strip() for ln in notes.splitlines()[1:] if ln.strip() and not ln.startswith("log tail of")]
    return " | ".join(lines[-n:]) or "(no output)"


def first_answer(name: str, runtime: str, label: str) -> ContractReport:
    """Start service ``name`` once on ``runtime``, send it the request and check the answer,
    then stop it: a side that never accepts connections, exits, or answers wrongly is one line
    before anything is measured.

    Raises
    ------
    ParameterError  the side did not start or become ready within its ``ready_timeout_s`` (with
        its last log lines), or its first answer fails the contract (with what came back).
    """
    from benchlib.core.errors import BuildError, ToolchainMissing
    from benchlib.runtime import StartOptions, get_runtime
    from benchlib.runtime.contract import verify
    from benchlib.runtime.ports import free_port

    svc = get_manifest(name).resolve()
    rt = get_runtime(runtime)
    try:
        rt.check()
        prepared = rt.prepare(svc)
    except (BuildError, ToolchainMissing) as exc:
        raise ParameterError(f"side {label}: {str(exc).splitlines()[0]}") from None
    options = StartOptions(port=svc.fixed_port or free_port(), cpus=tuple(sorted(os.sched_getaffinity(0))),
                           run_id="ab-check")
    try:
        handle = rt.start(prepared, options)
    except ServiceStartError as exc:
        raise ParameterError(f"side {label}: {str(exc).splitlines()[0]}; its last log lines: {_last_lines(exc)}") \
            from None
    with handle:
        scheme = "grpc" if svc.endpoint().protocol == "grpc" else "http"
        try:
            report = verify(f"{scheme}://{handle.host}:{handle.port}", svc.endpoint(), raise_on_error=False)
        except ContractError as exc:  # no answer at all (connection reset, timeout)
            raise ParameterError(f"side {label}: no answer to its first request: {exc}; its last log lines: "
                                 f"{' | '.join(handle.logs_tail(3).splitlines()[-3:]) or '(no output)'}") from None
    if not report.ok:
        body = report.body[:160].decode("utf-8", "replace")
        raise ParameterError(f"side {label}: its first answer fails the check ({'; '.join(report.problems)}); "
                             f"it answered {report.status} {body!r}")
    return report
