"""Service manifests: ``services/<name>/service.toml``, loaded and validated.

A manifest names the service, its language and framework with pinned versions, the studies
it belongs to, its variants (``fair`` fixes an original study's quirks, ``faithful`` keeps
them), the endpoints it implements with the contract each must satisfy, how to build and
run it locally (argument lists, never shell strings), its Dockerfile, its health check, the
services it needs running first and the toolchains it requires. The full format, with an
example, is in ``docs/services.md``.

Placeholders in ``build.command``, ``run.command``, ``post_start``, ``reset`` and env values:

======================  =====================================================================
``{service_dir}``       the folder holding ``service.toml``
``{build_dir}``         a per-service, per-variant build cache outside the clone
``{cargo_target_dir}``  the Cargo target folder all Rust services' local builds share
``{port}``              the TCP port the runtime chose (also exported as ``run.port_env``)
``{host}``              the address to bind (``127.0.0.1``)
``{python}``            the running Python interpreter
``{dep.NAME.port}``     the port of required service NAME (likewise ``{dep.NAME.host}``)
``{ports}``             all the service's ports, comma-separated (``[run] ports = N``; else ``{port}``)
``{backend.host}``      a front only: the address of the service it forwards to (likewise
                        ``{backend.port}``, its first port, and ``{backend.ports}``, all of them)
======================  =====================================================================

Multi-process services: ``[run] ports = N`` asks the runtime for N free ports; the first is
``{port}`` (and ``run.port_env``), all of them are ``{ports}`` and the variable
``run.ports_env`` (default ``PORTS``: ``p1,p2,...``); the service's own launcher starts one
process per port, all in the service's process group, cgroup or container. The health check
probes every port.

Fronts (``role = "front"``): a reverse proxy such as nginx, started after the service under
test with that service's address in ``{backend.*}``; the contract check and the load go to
the front (``Arm(front=..., front_variant=...)``). A service may pass environment variables to
whatever front it runs behind with ``[run] front_env`` (e.g. PHP-FPM's script name).

A bad manifest raises :class:`~benchlib.core.errors.ManifestError` naming the file, the field and
what was expected.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib.core import settings
from benchlib.core.errors import ManifestError, ParameterError
from benchlib.core.model import check_name

__all__ = [
    "ENDPOINT_PROTOCOLS",
    "Contract",
    "Endpoint",
    "LocalBuildOutputs",
    "Manifest",
    "ResolvedService",
    "add_generated_services",
    "find_services_dir",
    "get_manifest",
    "list_services",
    "load_manifest",
]

MANIFEST_SCHEMA = 1
KNOWN_TOOLCHAINS = ("go", "cargo", "node", "npm", "python", "dotnet", "nginx", "php-fpm")
HEALTH_KINDS = ("http", "tcp", "grpc")
#: Endpoint protocols: HTTP/1.1, HTTP/2 over cleartext (prior knowledge), unary gRPC.
ENDPOINT_PROTOCOLS = ("http1", "h2c", "grpc")
ROLES = ("service", "front")
#: The most ports one service may ask for (``[run] ports``).
MAX_PORTS = 64
_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")


@dataclass(frozen=True)
class Contract:
    """What a response must look like.

    Attributes
    ----------
    status: required HTTP status.
    body: the exact body (UTF-8), or ``None``.
    body_regex: a regular expression the whole body must match, or ``None``.
    json: the parsed JSON body must equal this value, or ``None``.
    content_type: required ``Content-Type`` prefix (case-insensitive), ``""`` = must be
        absent, ``None`` = not checked.
    headers: header name -> exact value, or ``"*"`` for "present".
    varies: ``True``: two consecutive responses must have different bodies (a body generated
        per request); ``False``: they must be identical (a fixed body); ``None``: not checked.
    grpc_status: gRPC endpoints: the grpc-status the call must end with (0 = OK).
    message: gRPC endpoints: the exact serialized response message, or ``None``.
    message_json: gRPC endpoints: the response message decoded as ``message_type`` of
        ``proto`` must equal this (protobuf's JSON form, field names as in the ``.proto``,
        default values included), or ``None``.
    message_type, proto: the response's message type (full name) and ``.proto`` file.
    json_fields: (dotted path, value) pairs the parsed JSON body must hold (``("status", "ok")``:
        ``{"status": "ok", ...}``; ``("data.id", 1)``: ``{"data": {"id": 1}}``); other fields free.
    content_type_sniffed: ``"go"``: a server that leaves the type to Go's net/http, which
        sniffs it from the body (:func:`benchlib.runtime.contract.go_sniffed_type`): the type
        sniffed from the response's own body is accepted too (a random text that starts with
        ``BM`` is ``image/bmp``); ``None``: only ``content_type``.
    """

    status: int = 200
    body: str | None = None
    body_regex: str | None = None
    json: Any = None
    content_type: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    varies: bool | None = None
    grpc_status: int = 0
    message: bytes | None = None
    message_json: Any = None
    message_type: str | None = None
    proto: Path | None = None
    json_fields: tuple[tuple[str, Any], ...] = ()
    content_type_sniffed: str | None = None


#: The servers whose type sniffing a contract can accept (``content_type_sniffed``).
SNIFFERS = ("go",)


@dataclass(frozen=True)
class Endpoint:
    """One endpoint a service implements, with the request to send and the contract.

    ``protocol``: ``"http1"``, ``"h2c"`` (HTTP/2, prior knowledge) or ``"grpc"`` (a unary
    gRPC method: ``method`` is ``POST``, ``path`` the method's path
    ``/package.Service/Method``, ``body`` the serialized request message, ``headers`` the
    call's metadata; ``proto`` the ``.proto`` file that declares the method, when the
    manifest names one: ghz cross-checks need it).
    """

    name: str
    method: str
    path: str
    contract: Contract
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    protocol: str = "http1"
    proto: Path | None = None


@dataclass(frozen=True)
class ResolvedService:
    """A manifest with one variant applied: everything a runtime needs to build and run it."""

    manifest: Manifest
    variant: str
    description: str
    build_command: tuple[str, ...] | None
    build_env: Mapping[str, str]
    build_inputs: tuple[str, ...]
    run_command: tuple[str, ...]
    run_env: Mapping[str, str]
    port_env: str | None
    ready_timeout_s: float
    post_start: tuple[tuple[str, ...], ...]
    endpoints: tuple[Endpoint, ...]
    docker_build_args: Mapping[str, str]
    ports: int = 1
    #: ``[docker.local_build]``: the image may take its program from the local build (see
    #: :mod:`benchlib.runtime.docker.local_build`); ``None``: it always compiles in its image
    docker_local_build: LocalBuildOutputs | None = None
    ports_env: str = "PORTS"
    front_env: Mapping[str, str] = field(default_factory=dict)
    #: ``[run] reset``: steps that give a running instance fresh data (a dependency that the
    #: runner keeps for a whole block runs them before each trial after the first)
    reset: tuple[tuple[str, ...], ...] = ()
    #: ``[run] port``: the TCP port the service always listens on (it cannot be told another);
    #: ``None``: the runtime picks a free one per start and passes it (``{port}``, ``port_env``)
    fixed_port: int | None = None

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def build_variant(self) -> str:
        """The variant whose build folder this variant uses: the first of the manifest's
        variants with the same build (command, environment and inputs), so variants that
        differ only in how they run (``[run]``, endpoints) are built once, not once each."""
        build = (self.build_command, dict(self.build_env), self.build_inputs)
        for v in self.manifest.variants:
            other = self.manifest.resolve(v)
            if (other.build_command, dict(other.build_env), other.build_inputs) == build:
                return v
        return self.variant

    def endpoint(self, name: str | None = None) -> Endpoint:
        """The endpoint called ``name`` (the first one when ``None``)."""
        if not self.endpoints:
            raise ParameterError(f"service {self.name!r} declares no HTTP endpoints")
        if name is None:
            return self.endpoints[0]
        for ep in self.endpoints:
            if ep.name == name:
                return ep
        raise ParameterError(
            f"service {self.name!r} has no endpoint {name!r}; valid: {', '.join(e.name for e in self.endpoints)}"
        )


@dataclass(frozen=True)
class Manifest:
    """A validated ``service.toml``."""

    path: Path
    name: str
    description: str
    language: str
    framework: str
    versions: Mapping[str, str]
    toolchains: tuple[str, ...]
    requires: tuple[str, ...]
    studies: tuple[str, ...]
    default_variant: str
    health_kind: str
    health_path: str
    health_status: int
    dockerfile: str | None
    raw: Mapping[str, Any] = field(repr=False)
    #: ``"service"`` (loaded directly, or behind a front) or ``"front"`` (a reverse proxy an
    #: arm puts before its service: ``Arm(front=...)``)
    role: str = "service"
    #: Python packages (import names) that ``{python}``, the interpreter running benchlib, must
    #: import to run the service locally (benchlib's ``[services]`` extra); a missing one makes
    #: the arm "not run" with how to install it
    python_packages: tuple[str, ...] = ()

    @property
    def directory(self) -> Path:
        return self.path.parent

    @property
    def variants(self) -> tuple[str, ...]:
        declared = tuple(self.raw.get("variants", {}).keys())
        return declared or (self.default_variant,)

    def resolve(self, variant: str | None = None) -> ResolvedService:
        """Apply ``variant`` (default: :attr:`default_variant`) and return the result."""
        v = variant or self.default_variant
        if v not in self.variants:
            raise ParameterError(
                f"service {self.name!r} has no variant {v!r}; valid: {', '.join(self.variants)}"
            )
        over = self.raw.get("variants", {}).get(v, {})
        build = {**self.raw.get("build", {}), **over.get("build", {})}
        run = {**self.raw.get("run", {}), **over.get("run", {})}
        build_env = {**self.raw.get("build", {}).get("env", {}), **over.get("build", {}).get("env", {})}
        run_env = {**self.raw.get("run", {}).get("env", {}), **over.get("run", {}).get("env", {})}
        endpoints = tuple(
            _endpoint(self.path, i, ep, v) for i, ep in enumerate(self.raw.get("endpoints", []))
        )
        docker = {**self.raw.get("docker", {}), **over.get("docker", {})}
        return ResolvedService(
            manifest=self,
            variant=v,
            description=str(over.get("description", self.description)),
            build_command=tuple(build["command"]) if build.get("command") else None,
            build_env=build_env,
            build_inputs=tuple(build.get("inputs", ())),
            run_command=tuple(run["command"]),
            run_env=run_env,
            port_env=run.get("port_env"),
            ready_timeout_s=float(run.get("ready_timeout_s", 60.0)),
            post_start=tuple(tuple(c) for c in run.get("post_start", ())),
            reset=tuple(tuple(c) for c in run.get("reset", ())),
            endpoints=endpoints,
            docker_build_args=dict(docker.get("build_args", {})),
            docker_local_build=_local_build(self.path, docker.get("local_build")),
            ports=int(run.get("ports", 1)),
            ports_env=str(run.get("ports_env", "PORTS")),
            front_env={**self.raw.get("run", {}).get("front_env", {}), **over.get("run", {}).get("front_env", {})},
            fixed_port=run.get("port"),
        )


@dataclass(frozen=True)
class LocalBuildOutputs:
    """``[docker.local_build]``: what the Dockerfile's ``build`` stage writes to ``/out``, taken
    from the local build instead when both use one toolchain version.

    Attributes
    ----------
    toolchain_arg: the Dockerfile build argument that pins the toolchain (``GO_VERSION``,
        ``RUST_IMAGE``): its version number must equal the local toolchain's.
    out: file name in ``/out`` -> a local build output (a path with placeholders, e.g.
        ``{build_dir}/server``) or a command (placeholders expanded) whose standard output is
        the file (``["rustc", "--version"]``).
    """

    toolchain_arg: str
    out: Mapping[str, str | tuple[str, ...]]


def _local_build(path: Path, table: Any) -> LocalBuildOutputs | None:
    """``[docker.local_build]`` checked (``None`` when absent)."""
    if table is None:
        return None
    where = "docker.local_build"
    if not isinstance(table, dict) or set(table) != {"toolchain_arg", "out"}:
        raise _err(path, where, "a table with toolchain_arg and out", table)
    arg, out = table["toolchain_arg"], table["out"]
    if not isinstance(arg, str) or not arg:
        raise _err(path, f"{where}.toolchain_arg", "the name of the Dockerfile ARG that pins the toolchain", arg)
    if not isinstance(out, dict) or not out:
        raise _err(path, f"{where}.out", "a table of /out file names", out)
    files: dict[str, str | tuple[str, ...]] = {}
    for name, src in out.items():
        if "/" in name or name in ("", ".", ".."):
            raise _err(path, f"{where}.out", "file names without '/'", name)
        if isinstance(src, str) and src:
            files[name] = src
        elif isinstance(src, list) and src and all(isinstance(a, str) for a in src):
            files[name] = tuple(src)
        else:
            raise _err(path, f"{where}.out.{name}", "a local build output's path or a command (array of strings)", src)
    return LocalBuildOutputs(arg, files)


def _err(path: Path, field_name: str, expected: str, got: Any = None) -> ManifestError:
    tail = "" if got is None else f", got {got!r}"
    return ManifestError(f"{path}: field {field_name!r}: expected {expected}{tail}")


def _str(path: Path, data: Mapping[str, Any], key: str, *, required: bool = True, default: str = "") -> str:
    if key not in data:
        if required:
            raise _err(path, key, "a string (required)")
        return default
    value = data[key]
    if not isinstance(value, str):
        raise _err(path, key, "a string", value)
    return value


def _argv(path: Path, where: str, value: Any) -> tuple[str, ...]:
    if not (isinstance(value, list) and value and all(isinstance(x, str) for x in value)):
        raise _err(path, where, "a non-empty list of strings (an argument list, not a shell string)", value)
    return tuple(value)


def _str_map(path: Path, where: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise _err(path, where, "a table of string values", value)
    return dict(value)


_CONTRACT_KEYS = {"status", "body", "body_file", "body_regex", "json", "json_fields", "content_type", "headers",
                  "varies", "content_type_sniffed"}
_GRPC_CONTRACT_KEYS = {"grpc_status", "response_file", "response_json", "response_type", "varies"}
_GRPC_PATH_RE = re.compile(r"/[A-Za-z_][A-Za-z0-9_.]*/[A-Za-z_][A-Za-z0-9_]*")


def _service_file(path: Path, where: str, value: Any, suffixes: tuple[str, ...] = ()) -> Path:
    """A file of the service (a path relative to its folder, inside it), which must exist."""
    if not isinstance(value, str) or not value or value.startswith("/") or ".." in Path(value).parts:
        raise _err(path, where, "a file path relative to the service's folder (no '..', not absolute)", value)
    f = path.parent / value
    if not f.is_file():
        raise _err(path, where, "an existing file in the service's folder", value)
    if suffixes and f.suffix not in suffixes:
        raise _err(path, where, f"a file ending in {' or '.join(suffixes)}", value)
    return f


def _grpc_contract(path: Path, where: str, data: Any, proto: Path | None) -> Contract:
    if not isinstance(data, dict):
        raise _err(path, where, "a table", data)
    unknown = set(data) - _GRPC_CONTRACT_KEYS
    if unknown:
        raise _err(path, f"{where}.{sorted(unknown)[0]}", f"one of {sorted(_GRPC_CONTRACT_KEYS)} (a gRPC endpoint)")
    code = data.get("grpc_status", 0)
    if isinstance(code, bool) or not isinstance(code, int) or not 0 <= code <= 16:
        raise _err(path, f"{where}.grpc_status", "a gRPC status code (0 = OK ... 16)", code)
    if "content_type_sniffed" in data and data["content_type_sniffed"] not in SNIFFERS:
        raise _err(path, f"{where}.content_type_sniffed", f"one of {', '.join(map(repr, SNIFFERS))}",
                   data["content_type_sniffed"])
    if "varies" in data and not isinstance(data["varies"], bool):
        raise _err(path, f"{where}.varies", "true (messages differ per call) or false (identical)", data["varies"])
    message = None
    if "response_file" in data:
        message = _service_file(path, f"{where}.response_file", data["response_file"], (".bin",)).read_bytes()
    message_json = data.get("response_json")
    mtype = data.get("response_type")
    if message_json is not None:
        if message is not None:
            raise _err(path, f"{where}.response_json", "either response_file or response_json, not both")
        if isinstance(message_json, str):
            import json as _json

            try:
                message_json = _json.loads(message_json)
            except ValueError as exc:
                raise _err(path, f"{where}.response_json", f"a JSON object or a TOML table ({exc})") from None
        if not isinstance(message_json, dict):
            raise _err(path, f"{where}.response_json", "a JSON object or a TOML table", message_json)
        if proto is None or not isinstance(mtype, str):
            raise _err(path, f"{where}.response_type", "the response's message type, with the endpoint's proto = "
                       "\"file.proto\" (to decode the response for response_json)", mtype)
        from benchlib.runtime.protos import message_type

        try:
            message_type(proto, mtype)
        except ParameterError as exc:
            raise _err(path, f"{where}.response_type", f"a message of {proto.name} ({exc})", mtype) from None
    return Contract(status=200, varies=data.get("varies"), grpc_status=code, message=message,
                    message_json=message_json, message_type=mtype if message_json is not None else None,
                    proto=proto if message_json is not None else None)


def _contract(path: Path, where: str, data: Any) -> Contract:
    if not isinstance(data, dict):
        raise _err(path, where, "a table", data)
    unknown = set(data) - _CONTRACT_KEYS
    if unknown:
        extra = " (grpc_status, response_file and response_json need protocol = \"grpc\")" if \
            unknown & _GRPC_CONTRACT_KEYS else ""
        raise _err(path, f"{where}.{sorted(unknown)[0]}", f"one of {sorted(_CONTRACT_KEYS)}{extra}")
    status = data.get("status", 200)
    if not isinstance(status, int) or not 100 <= status <= 599:
        raise _err(path, f"{where}.status", "an HTTP status code (100-599)", status)
    for key in ("body", "body_regex", "content_type"):
        if key in data and not isinstance(data[key], str):
            raise _err(path, f"{where}.{key}", "a string", data[key])
    if "body_regex" in data:
        try:
            re.compile(data["body_regex"])
        except re.error as exc:
            raise _err(path, f"{where}.body_regex", f"a valid regular expression ({exc})", data["body_regex"]) from None
    if "content_type_sniffed" in data and data["content_type_sniffed"] not in SNIFFERS:
        raise _err(path, f"{where}.content_type_sniffed", f"one of {', '.join(map(repr, SNIFFERS))}",
                   data["content_type_sniffed"])
    if "varies" in data and not isinstance(data["varies"], bool):
        raise _err(path, f"{where}.varies", "true (bodies differ per request) or false (identical)", data["varies"])
    headers = _str_map(path, f"{where}.headers", data.get("headers", {}))
    body = data.get("body")
    if "body_file" in data:
        if body is not None:
            raise _err(path, f"{where}.body_file", "either body or body_file, not both")
        body = _service_file(path, f"{where}.body_file", data["body_file"]).read_text("utf-8")
    json_fields = data.get("json_fields", {})
    if not isinstance(json_fields, dict) or not all(isinstance(k, str) and k for k in json_fields):
        raise _err(path, f"{where}.json_fields", "a table of dotted JSON paths -> the values they must hold",
                   json_fields)
    return Contract(
        status=status,
        body=body,
        body_regex=data.get("body_regex"),
        json=data.get("json"),
        content_type=data.get("content_type"),
        headers=tuple(sorted(headers.items())),
        varies=data.get("varies"),
        json_fields=tuple(json_fields.items()),
        content_type_sniffed=data.get("content_type_sniffed"),
    )


_GRPC_ENDPOINT_KEYS = {"proto", "request_file", "request_json", "request_type"}


def _grpc_request(path: Path, where: str, data: Mapping[str, Any]) -> tuple[bytes, Path | None]:
    """A gRPC endpoint's request message (bytes) and its ``.proto`` (or ``None``)."""
    proto = _service_file(path, f"{where}.proto", data["proto"], (".proto",)) if "proto" in data else None
    if "request_file" in data:
        if "request_json" in data:
            raise _err(path, f"{where}.request_json", "either request_file or request_json, not both")
        return _service_file(path, f"{where}.request_file", data["request_file"], (".bin",)).read_bytes(), proto
    if "request_json" in data:
        rtype = data.get("request_type")
        if proto is None or not isinstance(rtype, str):
            raise _err(path, f"{where}.request_type", "the request's message type (full name), with proto = "
                       "\"file.proto\", to build the message from request_json", rtype)
        value = data["request_json"]
        if not isinstance(value, (str, dict)):
            raise _err(path, f"{where}.request_json", "a JSON text or a TOML table", value)
        from benchlib.runtime.protos import encode_json

        try:
            return encode_json(proto, rtype, value), proto
        except ParameterError as exc:
            raise _err(path, f"{where}.request_json", f"a {rtype} in protobuf's JSON form ({exc})", value) from None
    return b"", proto  # the empty message (all fields at their defaults)


def _endpoint(path: Path, index: int, data: Any, variant: str | None = None) -> Endpoint:
    where = f"endpoints[{index}]"
    if not isinstance(data, dict):
        raise _err(path, where, "a table", data)
    name = _str(path, data, "name")
    protocol = data.get("protocol", "http1")
    if protocol not in ENDPOINT_PROTOCOLS:
        raise _err(path, f"{where}.protocol", f"one of {', '.join(ENDPOINT_PROTOCOLS)}", protocol)
    if protocol == "grpc":
        return _grpc_endpoint(path, where, name, data, variant)
    bad = _GRPC_ENDPOINT_KEYS & set(data)
    if bad:
        raise _err(path, f"{where}.{sorted(bad)[0]}", "a field of gRPC endpoints only (protocol = \"grpc\")")
    method = _str(path, data, "method", required=False, default="GET").upper()
    if method not in ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"):
        raise _err(path, f"{where}.method", "an HTTP method (GET, POST, ...)", method)
    ep_path = _str(path, data, "path")
    if not ep_path.startswith("/"):
        raise _err(path, f"{where}.path", "a path starting with '/'", ep_path)
    contract_data = dict(data.get("contract", {}))
    by_variant = data.get("contract_by_variant", {})
    if not isinstance(by_variant, dict):
        raise _err(path, f"{where}.contract_by_variant", "a table of variant -> contract overrides", by_variant)
    if variant is not None and variant in by_variant:
        contract_data.update(by_variant[variant])
    contract = _contract(path, f"{where}.contract", contract_data)
    body = _str(path, data, "body", required=False).encode()
    if "body_file" in data:
        if body:
            raise _err(path, f"{where}.body_file", "either body or body_file, not both")
        body = _service_file(path, f"{where}.body_file", data["body_file"]).read_bytes()
    headers = _str_map(path, f"{where}.headers", data.get("headers", {}))
    return Endpoint(name=name, method=method, path=ep_path, contract=contract, body=body,
                    headers=tuple(headers.items()), protocol=protocol)


def _grpc_endpoint(path: Path, where: str, name: str, data: Mapping[str, Any], variant: str | None) -> Endpoint:
    method = _str(path, data, "method", required=False, default="POST").upper()
    if method != "POST":
        raise _err(path, f"{where}.method", "POST (gRPC calls are POST; the gRPC method goes in path)", method)
    ep_path = _str(path, data, "path")
    if not _GRPC_PATH_RE.fullmatch(ep_path):
        raise _err(path, f"{where}.path", "a gRPC method path '/package.Service/Method'", ep_path)
    if "body" in data:
        raise _err(path, f"{where}.body", "request_file (a serialized message, .bin) or request_json with "
                   "request_type and proto, for a gRPC endpoint")
    body, proto = _grpc_request(path, where, data)
    headers = _str_map(path, f"{where}.headers", data.get("headers", {}))
    contract_data = dict(data.get("contract", {}))
    by_variant = data.get("contract_by_variant", {})
    if not isinstance(by_variant, dict):
        raise _err(path, f"{where}.contract_by_variant", "a table of variant -> contract overrides", by_variant)
    if variant is not None and variant in by_variant:
        contract_data.update(by_variant[variant])
    contract = _grpc_contract(path, f"{where}.contract", contract_data, proto)
    return Endpoint(name=name, method="POST", path=ep_path, contract=contract, body=body,
                    headers=tuple(headers.items()), protocol="grpc", proto=proto)


_TOP_KEYS = {
    "schema", "name", "role", "description", "language", "framework", "versions", "toolchains", "requires",
    "studies", "default_variant", "build", "run", "health", "docker", "variants", "endpoints", "python_packages",
}


def load_manifest(path: str | Path) -> Manifest:
    """Load and validate one ``service.toml``.

    Raises
    ------
    ManifestError
        naming the file, the field and what was expected.
    """
    path = Path(path).absolute()
    if path.is_dir():
        path = path / "service.toml"
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(f"{path}: no such manifest") from None
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path}: not valid TOML: {exc}") from None

    unknown = set(raw) - _TOP_KEYS
    if unknown:
        raise _err(path, sorted(unknown)[0], f"one of the known fields {sorted(_TOP_KEYS)}")
    schema = raw.get("schema", MANIFEST_SCHEMA)
    if schema != MANIFEST_SCHEMA:
        raise _err(path, "schema", f"{MANIFEST_SCHEMA}", schema)
    name = _str(path, raw, "name")
    if not _NAME_RE.fullmatch(name):
        raise _err(path, "name", "lower-case letters, digits, '.', '_' or '-'", name)
    if name != path.parent.name:
        raise _err(path, "name", f"the folder's name {path.parent.name!r}", name)
    toolchains = raw.get("toolchains", [])
    if not isinstance(toolchains, list) or any(t not in KNOWN_TOOLCHAINS for t in toolchains):
        raise _err(path, "toolchains", f"a list of {', '.join(KNOWN_TOOLCHAINS)}", toolchains)
    requires = raw.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) and _NAME_RE.fullmatch(r) for r in requires):
        raise _err(path, "requires", "a list of service names (folder names under services/)", requires)
    studies = raw.get("studies", [])
    if not isinstance(studies, list) or not all(isinstance(s, str) for s in studies):
        raise _err(path, "studies", "a list of study names", studies)
    versions = _str_map(path, "versions", raw.get("versions", {}))
    python_packages = raw.get("python_packages", [])
    if not isinstance(python_packages, list) or not all(
            isinstance(p, str) and p.isidentifier() for p in python_packages):
        raise _err(path, "python_packages", "a list of Python import names (e.g. [\"aiohttp\"])", python_packages)
    if python_packages and "python" not in toolchains:
        raise _err(path, "python_packages", "toolchains to include \"python\" (the packages are imported by {python})",
                   python_packages)

    run = raw.get("run")
    if not isinstance(run, dict):
        raise _err(path, "run", "a [run] table with command = [...]")
    _argv(path, "run.command", run.get("command"))
    if "env" in run:
        _str_map(path, "run.env", run["env"])
    if "port_env" in run and not isinstance(run["port_env"], str):
        raise _err(path, "run.port_env", "the name of an environment variable", run["port_env"])
    for key in ("post_start", "reset"):
        for i, cmd in enumerate(run.get(key, [])):
            _argv(path, f"run.{key}[{i}]", cmd)
    _check_ports(path, "run", run)
    role = raw.get("role", "service")
    if role not in ROLES:
        raise _err(path, "role", f"one of {', '.join(ROLES)}", role)
    build = raw.get("build", {})
    if not isinstance(build, dict):
        raise _err(path, "build", "a [build] table", build)
    if "command" in build:
        _argv(path, "build.command", build["command"])
    if "env" in build:
        _str_map(path, "build.env", build["env"])

    variants = raw.get("variants", {})
    if not isinstance(variants, dict):
        raise _err(path, "variants", "a table of variant tables", variants)
    for vname, vdata in variants.items():
        if not isinstance(vdata, dict):
            raise _err(path, f"variants.{vname}", "a table", vdata)
        bad = set(vdata) - {"description", "build", "run", "docker"}
        if bad:
            raise _err(path, f"variants.{vname}.{sorted(bad)[0]}", "one of description, build, run, docker")
        if "command" in vdata.get("build", {}):
            _argv(path, f"variants.{vname}.build.command", vdata["build"]["command"])
        if "command" in vdata.get("run", {}):
            _argv(path, f"variants.{vname}.run.command", vdata["run"]["command"])
        for section in ("build", "run"):
            if "env" in vdata.get(section, {}):
                _str_map(path, f"variants.{vname}.{section}.env", vdata[section]["env"])
        _check_ports(path, f"variants.{vname}.run", vdata.get("run", {}))
    default_variant = _str(path, raw, "default_variant", required=False,
                           default=next(iter(variants), "default"))
    if variants and default_variant not in variants:
        raise _err(path, "default_variant", f"one of the declared variants {sorted(variants)}", default_variant)

    health = raw.get("health", {})
    if not isinstance(health, dict):
        raise _err(path, "health", "a table", health)
    health_kind = health.get("kind", "http")
    if health_kind not in HEALTH_KINDS:
        raise _err(path, "health.kind", f"one of {', '.join(HEALTH_KINDS)}", health_kind)
    health_path = health.get("path", "/")
    if not isinstance(health_path, str) or not health_path.startswith("/"):
        raise _err(path, "health.path", "a path starting with '/'", health_path)
    health_status = health.get("status", 200)
    if not isinstance(health_status, int):
        raise _err(path, "health.status", "an HTTP status code", health_status)

    docker = raw.get("docker", {})
    dockerfile = docker.get("dockerfile") if isinstance(docker, dict) else None
    if dockerfile is not None and not (path.parent / dockerfile).is_file():
        raise _err(path, "docker.dockerfile", "an existing file next to service.toml", dockerfile)
    # [docker.local_build] checked when the manifest is read, not first when a variant resolves
    for table in [docker, *(v.get("docker", {}) for v in raw.get("variants", {}).values() if isinstance(v, dict))]:
        if isinstance(table, dict):
            _local_build(path, table.get("local_build"))

    endpoints = raw.get("endpoints", [])
    if not isinstance(endpoints, list):
        raise _err(path, "endpoints", "an array of [[endpoints]] tables", endpoints)
    seen: set[str] = set()
    for i, ep in enumerate(endpoints):
        e = _endpoint(path, i, ep)
        if e.name in seen:
            raise _err(path, f"endpoints[{i}].name", "a name unique within the service", e.name)
        seen.add(e.name)
        for vname in ep.get("contract_by_variant", {}):
            if vname not in variants:
                raise _err(path, f"endpoints[{i}].contract_by_variant.{vname}",
                           f"a declared variant ({', '.join(sorted(variants)) or 'none declared'})")
            _endpoint(path, i, ep, vname)

    return Manifest(
        path=path,
        name=name,
        description=_str(path, raw, "description", required=False),
        language=_str(path, raw, "language"),
        framework=_str(path, raw, "framework"),
        versions=versions,
        toolchains=tuple(toolchains),
        requires=tuple(requires),
        studies=tuple(studies),
        default_variant=default_variant,
        health_kind=health_kind,
        health_path=health_path,
        health_status=health_status,
        dockerfile=dockerfile,
        raw=raw,
        role=role,
        python_packages=tuple(python_packages),
    )


def _check_ports(path: Path, where: str, run: Mapping[str, Any]) -> None:
    """``ports`` (an integer 1..MAX_PORTS), ``ports_env`` (a variable name) and ``front_env``
    (a table of strings) of a ``[run]`` table or a variant's ``run``."""
    if "ports" in run:
        n = run["ports"]
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_PORTS:
            raise _err(path, f"{where}.ports", f"an integer from 1 to {MAX_PORTS} (one process per port)", n)
    if "ports_env" in run and not (isinstance(run["ports_env"], str) and
                                   re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", run["ports_env"])):
        raise _err(path, f"{where}.ports_env", "the name of an environment variable", run["ports_env"])
    if "front_env" in run:
        _str_map(path, f"{where}.front_env", run["front_env"])
    if "port" in run:
        n = run["port"]
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 65535:
            raise _err(path, f"{where}.port", "the TCP port the service always listens on (1-65535)", n)


def find_services_dir(start: str | Path | None = None) -> Path:
    """The project's ``services/`` folder: ``$BENCHLIB_SERVICES`` if set, else the nearest
    ``services/`` above ``start`` (default: the current directory), else the one beside the
    installed package."""
    root = settings.SERVICES.get()
    if root is not None:
        return root
    here = Path(start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "services").is_dir() and (d / "benchlib").is_dir():
            return d / "services"
    return Path(__file__).resolve().parents[2] / "services"


def list_services(services_dir: str | Path | None = None) -> dict[str, Manifest]:
    """Every manifest under ``services_dir``, by name (all validated)."""
    root = Path(services_dir) if services_dir else find_services_dir()
    return {m.name: m for m in (load_manifest(p) for p in sorted(root.glob("*/service.toml")))}


#: Folders of services generated for a run (not the project's: an A/B comparison's sides,
#: :mod:`benchlib.runtime.adhoc`), searched after ``services/`` by :func:`get_manifest`.
_GENERATED: list[Path] = []


def add_generated_services(folder: str | Path) -> None:
    """Let :func:`get_manifest` find the services in ``folder`` (each ``<name>/service.toml``)
    after the project's, for the rest of this process (:func:`list_services` keeps listing the
    project's only)."""
    path = Path(folder).resolve()
    if path not in _GENERATED:
        _GENERATED.append(path)


def get_manifest(name: str, services_dir: str | Path | None = None) -> Manifest:
    """The manifest of service ``name`` (a folder directly under ``services/``: a plain name,
    never a path such as ``../x``, or under a folder of generated services:
    :func:`add_generated_services`); an unknown name lists the valid ones."""
    check_name("service", name)
    root = Path(services_dir) if services_dir else find_services_dir()
    path = root / name / "service.toml"
    if not path.is_file() and services_dir is None:
        path = next((p for p in (g / name / "service.toml" for g in _GENERATED) if p.is_file()), path)
    if not path.is_file():
        known = sorted(p.parent.name for p in root.glob("*/service.toml"))
        raise ParameterError(f"unknown service {name!r}; valid: {', '.join(known) or '(none found in ' + str(root) + ')'}")
    return load_manifest(path)
