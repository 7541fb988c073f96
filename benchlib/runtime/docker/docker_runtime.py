"""The Docker runtime: services under test as containers, through the Docker SDK (docker-py).

* **Build**: ``services/<name>/Dockerfile`` (``[docker] dockerfile``) with the classic builder
  (docker-py cannot drive BuildKit, so Dockerfiles use no BuildKit-only syntax), tagged
  ``benchlib/<service>:<variant>-<content hash>``; an image with that tag is reused. The
  build runs with ``network_mode="host"`` (engines started with ``--bridge=none`` have no
  other network). Base images that are missing and cannot be pulled are created with
  debootstrap (:mod:`benchlib.runtime.docker.images`).
* **Extra CA bundle**: behind a TLS-inspecting proxy, downloads inside a build need the
  proxy's CA. When one is configured or detected (``ca_bundle``, ``$BENCHLIB_BUILD_CA_BUNDLE``,
  ``$SSL_CERT_FILE``, ``$REQUESTS_CA_BUNDLE``, ``$PIP_CERT``, ``$CURL_CA_BUNDLE``, pip's
  ``cert`` setting), it is added to the build context as ``extra-ca-certificates.crt``; the
  Dockerfiles append it to the system bundle if present. Without it, the same Dockerfiles
  build unchanged (with ``docker build`` too).
* **Run**: ``network_mode="host"``, ``cpuset_cpus`` (the server's CPUs), ``nano_cpus`` and
  ``mem_limit`` (swap disabled); labels ``benchlib.run_id``, ``benchlib.service``,
  ``benchlib.role``, ``benchlib.owner``. When the experiment asks for no limits at all
  (``Limits()``), the seeds' defaults apply: 1 CPU and 512 MiB (``default_limits``).
* **Health**: HTTP status or TCP accept as the manifest says; a container that exits first,
  or never gets healthy, raises :class:`~benchlib.core.errors.ServiceStartError` with the
  container's log tail attached (and is removed).
* **During the trial**: ``stats`` sampled every ``stats_interval_s`` (CPU, memory);
  :meth:`DockerHandle.resource_samples`.
* **Stop**: always stopped and removed (context manager, ``atexit``, SIGTERM); a run killed
  hard leaves containers that the label sweep (:mod:`benchlib.runtime.docker.leftovers`, also run
  by ``benchlib cleanup``) removes at the next start. An OOM kill is reported as such
  (``StopInfo.oom_killed``).
* **Enforced**: limits read back from the container's cgroup (host files when the engine is
  on this machine, else ``docker exec cat`` inside the container; :mod:`benchlib.runtime.docker.readback`).
* **Endpoints**: anything the SDK accepts (``DOCKER_HOST``: ``unix://``, ``tcp://``,
  ``ssh://user@host``); a remote engine over plain ``tcp://`` without TLS is refused unless
  ``BENCHLIB_ALLOW_INSECURE_DOCKER=1`` (:func:`~benchlib.runtime.docker.connection.check_endpoint_security`).
* **Listen addresses**: services bind ``127.0.0.1`` unless the user asks otherwise
  (``bind_host``, ``$BENCHLIB_DOCKER_BIND_HOST``), and dependencies (a database with the
  study's credentials) bind ``127.0.0.1`` of the engine's machine unless
  ``dependency_bind_host`` / ``$BENCHLIB_DOCKER_DEPENDENCY_BIND_HOST`` says otherwise; the
  service under test reaches them there (host networking). A remote engine needs the
  user's ``bind_host`` (the load generator must reach the service over the network); the
  load generator targets the engine's host name (``service_host`` overrides it).
"""

from __future__ import annotations

import io
import ipaddress
import os
import re
import sys
import tarfile
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib.core import buildcache, settings, signals
from benchlib.core.errors import BuildError, ParameterError, RuntimeUnavailable, ServiceStartError
from benchlib.core.model import Limits
from benchlib.runtime.base import (
    Prepared,
    StartOptions,
    backend_values,
    format_placeholders,
    placeholder_values,
    run_steps,
    service_ports,
    wait_healthy,
)
from benchlib.runtime.docker import local_build
from benchlib.runtime.docker.connection import (
    _engine_is_local,
    _redact,
    _remote_host,
    check_endpoint_security,
    owner_label,
    shared_client,
)
from benchlib.runtime.docker.context import CA_FILE_NAME, _content_hash, _context_files, _sha256_file, detect_ca_bundle
from benchlib.runtime.docker.handle import DockerHandle, _install_exit_hooks, _tail
from benchlib.runtime.docker.images import base_images, ensure_base_images
from benchlib.runtime.docker.leftovers import sweep_containers
from benchlib.runtime.docker.readback import read_enforced
from benchlib.runtime.manifest import ResolvedService
from benchlib.runtime.ports import port_in_use

__all__ = ["SEED_LIMITS", "DockerRuntime"]


def _as_limits(fields: Mapping[str, float]) -> Limits | None:
    """``{"cpus": 1.0, "memory_mb": 512}`` as :class:`Limits`; ``None`` for ``{}`` (no limits)."""
    if not fields:
        return None
    memory = fields.get("memory_mb")
    return Limits(cpus=fields.get("cpus"), memory_mb=None if memory is None else int(memory))


#: The seeds ran every service with 1 CPU and 512 MB; the default when no limit is asked for
#: (the fallback of ``$BENCHLIB_DOCKER_LIMITS``).
SEED_LIMITS = _as_limits(settings.DOCKER_LIMITS.value(environ={}))


@dataclass
class _Built:
    tag: str
    image_id: str
    info: dict[str, Any]


class DockerRuntime:
    """Services as containers (see the module docstring).

    Parameters
    ----------
    base_url: the engine (default ``$DOCKER_HOST``, else the local socket).
    default_limits: applied when a start asks for no limits at all (``Limits()``); default
        the seeds' 1 CPU and 512 MiB; ``$BENCHLIB_DOCKER_LIMITS`` (``none`` or
        ``cpus=1,memory_mb=512``) overrides it; ``None`` = no limits then.
    ca_bundle: extra CA bundle for builds (see :func:`detect_ca_bundle`).
    build_network: ``network_mode`` of build containers (``host``: works with engines
        started with ``--bridge=none``).
    bootstrap_base: create missing Debian base images with debootstrap (see :mod:`benchlib.runtime.docker.images`).
    service_host: the address the load generator connects to (default: 127.0.0.1 for a local
        engine, the engine's host name for a remote one; ``$BENCHLIB_DOCKER_SERVICE_HOST``).
    bind_host: the address the service under test binds (``$HOST``; default 127.0.0.1;
        ``$BENCHLIB_DOCKER_BIND_HOST``). A remote engine needs it set (e.g. ``0.0.0.0``):
        :meth:`check` refuses a remote engine without it.
    dependency_bind_host: the address dependencies bind (default 127.0.0.1 of the engine's
        machine, whatever the engine; ``$BENCHLIB_DOCKER_DEPENDENCY_BIND_HOST``).
    stats_interval_s: seconds between ``stats`` samples (0: none).
    readback: where limits are read back: ``auto`` (host cgroup files when the engine is on
        this machine, else ``exec``), ``host`` or ``exec``.
    build_timeout_s: bound on one image build.
    init: run the engine's init (tini) as PID 1, which forwards signals and reaps zombies.
    """

    name = "docker"

    def __init__(self, *, base_url: str | None = None, default_limits: Limits | None | str = "env",
                 ca_bundle: str | os.PathLike[str] | None = "auto", build_network: str = "host",
                 bootstrap_base: bool = True, service_host: str | None = None, bind_host: str | None = None,
                 dependency_bind_host: str | None = None, stats_interval_s: float = 1.0, readback: str = "auto",
                 build_timeout_s: float = 3600.0, init: bool = True) -> None:
        if readback not in ("auto", "host", "exec"):
            raise ParameterError(f"unknown readback {readback!r}; valid: auto, host, exec")
        self.base_url = base_url
        self.default_limits = _limits_from_env() if default_limits == "env" else default_limits
        self.ca_bundle_setting = ca_bundle
        self.build_network = build_network
        self.bootstrap_base = bootstrap_base
        self._service_host = service_host or settings.DOCKER_SERVICE_HOST.get()
        self._bind_host = bind_host or settings.DOCKER_BIND_HOST.get()
        self._dependency_bind_host = dependency_bind_host or settings.DOCKER_DEPENDENCY_BIND_HOST.get()
        self.stats_interval_s = float(stats_interval_s)
        self.readback = readback
        self.build_timeout_s = build_timeout_s
        self.init = init
        self._client: Any = None
        self._swept = False
        self._images: dict[str, dict[str, Any]] = {}
        self._engine: dict[str, Any] | None = None

    # -- connection -----------------------------------------------------------------------
    @property
    def client(self) -> Any:
        """The connected ``docker.DockerClient`` (connects on first use)."""
        if self._client is None:
            self._client = shared_client(self.base_url)
        return self._client

    @property
    def endpoint(self) -> str:
        """The engine's address as configured (``base_url``, ``$DOCKER_HOST`` or the local socket)."""
        return self.base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"

    @property
    def local_engine(self) -> bool:
        """Is the engine on this machine (a unix socket, or TCP to a loopback address)?"""
        return _engine_is_local(self.endpoint)

    @property
    def service_host(self) -> str:
        if self._service_host:
            return self._service_host
        if self.local_engine:
            return "127.0.0.1"
        return _remote_host(self.endpoint) or "127.0.0.1"

    @property
    def bind_host(self) -> str:
        """The address services under test bind: the user's, else loopback."""
        return self._bind_host or "127.0.0.1"

    @property
    def dependency_bind_host(self) -> str:
        """The address dependencies bind: the user's, else loopback (of the engine's machine)."""
        return self._dependency_bind_host or "127.0.0.1"

    def check(self) -> None:
        """Raise :class:`~benchlib.core.errors.RuntimeUnavailable` (with how to fix it) if no engine
        answers, or if the engine is remote and nobody said which address its services may
        bind there; sweep leftovers of dead runs once."""
        check_endpoint_security(self.endpoint)
        if not self.local_engine and not self._bind_host:
            raise RuntimeUnavailable(
                f"the Docker engine {_redact(self.endpoint)} is on another machine, where services bind 127.0.0.1 "
                "unless told otherwise, out of this machine's load generator's reach; set BENCHLIB_DOCKER_BIND_HOST "
                "(or bind_host=) to the address to expose them on there (e.g. 0.0.0.0, on a network you control), "
                "and BENCHLIB_ALLOW_REMOTE_TARGET=1 for the load generator")
        _ = self.client
        self._sweep_once()

    def _sweep_once(self) -> None:
        if self._swept:
            return
        self._swept = True
        try:
            sweep_containers(self.client)
        except Exception:  # noqa: BLE001 - a failed sweep must not block a run
            pass

    def engine_info(self) -> dict[str, Any]:
        """Engine facts: version, API version, OS, kernel, storage driver, cgroup driver/version."""
        if self._engine is None:
            v = self.client.version()
            i = self.client.info()
            self._engine = {
                "version": v.get("Version"), "api_version": v.get("ApiVersion"),
                "os": i.get("OperatingSystem"), "kernel": i.get("KernelVersion"),
                "arch": i.get("Architecture"), "cpus": i.get("NCPU"),
                "memory_mb": round((i.get("MemTotal") or 0) / 2**20),
                "storage_driver": i.get("Driver"), "cgroup_driver": i.get("CgroupDriver"),
                "cgroup_version": "v" + str(i.get("CgroupVersion") or "1"),
                "init_binary": i.get("InitBinary"), "name": i.get("Name"),
            }
        return self._engine

    def provenance(self) -> dict[str, Any]:
        """Facts for run.json: endpoint, engine, SDK version, limits policy, CA bundle, images."""
        # late, here and below, as in connection.connect: the Docker SDK (about 0.2 s to import)
        # loads once an engine is used, not where this package is imported for a sweep or a check
        import docker

        info: dict[str, Any] = {
            "runtime": "docker", "endpoint": _redact(self.endpoint), "sdk": f"docker-py {docker.__version__}",
            "network_mode": "host", "build_network": self.build_network,
            "default_limits": None if self.default_limits is None else {
                "cpus": self.default_limits.cpus, "memory_mb": self.default_limits.memory_mb},
            "images": dict(self._images),
        }
        try:
            info["engine"] = self.engine_info()
            info["service_host"] = self.service_host
            info["bind_host"] = self.bind_host
            info["dependency_bind_host"] = self.dependency_bind_host
        except RuntimeUnavailable as exc:
            info["engine"] = f"unreachable: {exc}"
        try:
            ca = detect_ca_bundle(self.ca_bundle_setting)
            info["ca_bundle"] = None if ca is None else {"path": str(ca), "sha256": _sha256_file(ca)[:16]}
        except ParameterError as exc:
            info["ca_bundle"] = f"invalid: {exc}"
        return info

    # -- build ----------------------------------------------------------------------------
    def prepare(self, service: ResolvedService) -> Prepared:
        """Build the service's image, or reuse the one tagged with the same content hash.

        Raises
        ------
        BuildError
            no ``[docker] dockerfile``, a missing base image that cannot be created, or a
            failed build (the build log's tail attached; the full log is kept in the cache).
        RuntimeUnavailable
            no engine answers.
        """
        manifest = service.manifest
        docker_cfg = {**manifest.raw.get("docker", {}),
                      **manifest.raw.get("variants", {}).get(service.variant, {}).get("docker", {})}
        dockerfile = docker_cfg.get("dockerfile") or manifest.dockerfile
        if dockerfile is None and (manifest.directory / "Dockerfile").is_file():
            dockerfile = "Dockerfile"
        if dockerfile is None:
            raise BuildError(f"{service.name}: no Dockerfile (service.toml has no [docker] dockerfile and "
                             f"{manifest.directory}/Dockerfile does not exist); use runtime=\"local\" for it")
        directory = manifest.directory
        dockerfile_text = (directory / dockerfile).read_text()
        build_args = {k: str(v) for k, v in service.docker_build_args.items()}
        client = self.client
        t0 = time.monotonic()
        from_local, why_not = local_build.plan(service, dockerfile_text, build_args)
        build_text = from_local.dockerfile if from_local is not None else dockerfile_text
        bases = ensure_base_images(client, build_text, build_args, bootstrap=self.bootstrap_base)
        base_ids = {}
        for ref in base_images(build_text, build_args):
            try:
                base_ids[ref] = client.images.get(ref).id
            except Exception:  # noqa: BLE001 - reported by the build itself
                base_ids[ref] = None
        ca = detect_ca_bundle(self.ca_bundle_setting)
        files = _context_files(directory, dockerfile)
        digest = _content_hash(directory, files, {
            "dockerfile": dockerfile, "build_args": build_args, "bases": base_ids,
            "ca": _sha256_file(ca) if ca else None,
            **({"from_local_build": from_local.info["sha256"], "generated_dockerfile": build_text}
               if from_local is not None else {}),
        })
        tag = f"benchlib/{service.name}:{service.variant}-{digest}"
        info: dict[str, Any] = {"tag": tag, "dockerfile": dockerfile, "build_args": build_args,
                                "base_images": base_ids, "content_hash": digest,
                                "ca_bundle": str(ca) if ca else None,
                                "from_local_build": ({"used": True, **from_local.info} if from_local is not None
                                                     else {"used": False, "why": why_not})}
        if bases:
            info["base_bootstrap"] = [b.to_dict() for b in bases]
        lock_dir = buildcache.cache_root() / "docker"
        lock_dir.mkdir(parents=True, exist_ok=True)
        with buildcache.locked(lock_dir / f"{service.name}-{service.variant}"):
            image = self._image(tag)
            built = image is None
            if image is None:
                t_build = time.monotonic()
                image = self._build(service, directory, files, dockerfile, build_args, tag, digest, ca, from_local)
                info["build_s"] = round(time.monotonic() - t0, 2)
                info["build"] = "built"
                buildcache.record_build("image", f"{service.name}/{service.variant}", "docker",
                                        time.monotonic() - t_build, cached=False)
            else:
                info["build"] = "cached"
                buildcache.record_build("image", f"{service.name}/{service.variant}", "docker",
                                        time.monotonic() - t0, cached=True)
        info["image_id"] = image.id
        info["versions"] = {k.removeprefix("benchlib.version."): v
                            for k, v in (image.labels or {}).items() if k.startswith("benchlib.version.")}
        self._images[f"{service.name}/{service.variant}"] = {"tag": tag, "image_id": image.id,
                                                             "versions": info["versions"]}
        return Prepared(service=service, build_dir=None, image=image.id, built=built, info=info)

    def _image(self, ref: str) -> Any:
        import docker.errors  # late: see provenance

        try:
            return self.client.images.get(ref)
        except docker.errors.ImageNotFound:
            return None

    def _build(self, service: ResolvedService, directory: Path, files: list[str], dockerfile: str,
               build_args: Mapping[str, str], tag: str, digest: str, ca: Path | None,
               from_local: local_build.FromLocalBuild | None = None) -> Any:
        """Build ``tag`` from ``directory``'s ``files``; with ``from_local``, from its generated
        Dockerfile and the local build's files instead of the Dockerfile's build stage."""
        from docker.utils.build import create_archive  # late: see provenance

        log_dir = buildcache.cache_root() / "docker" / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"{service.name}-{service.variant}-{digest}.log"
        extra = [(CA_FILE_NAME, ca.read_text())] if ca else []
        labels = {"benchlib.managed": "1", "benchlib.service": service.name, "benchlib.variant": service.variant,
                  "benchlib.content_hash": digest}
        if from_local is not None:
            extra.append((local_build.DOCKERFILE_NAME, from_local.dockerfile))
            labels["benchlib.from_local_build"] = "1"
            dockerfile_used = local_build.DOCKERFILE_NAME
        else:
            dockerfile_used = dockerfile
        error = None
        t0 = time.monotonic()
        with tempfile.TemporaryFile() as ctx, open(log_path, "w") as log:
            create_archive(str(directory), files=files, fileobj=ctx, extra_files=extra)
            if from_local is not None:  # the local build's files (bytes, executable) beside them
                ctx.seek(0)
                with tarfile.open(fileobj=ctx, mode="a") as tar:
                    for name, data in sorted(from_local.files.items()):
                        member = tarfile.TarInfo(f"{local_build.STAGE_DIR}/{name}")
                        member.size, member.mode, member.mtime = len(data), 0o755, 0
                        tar.addfile(member, io.BytesIO(data))
                ctx.seek(0)
            log.write(f"# docker build {service.name} ({service.variant}) -> {tag}; Dockerfile {dockerfile_used}; "
                      f"build args {dict(build_args)}; extra CA {ca}; network {self.build_network}"
                      + (f"; program from the local build {from_local.info}" if from_local is not None else "") + "\n")
            try:
                stream = self.client.api.build(
                    fileobj=ctx, custom_context=True, tag=tag, dockerfile=dockerfile_used, buildargs=dict(build_args),
                    labels=labels, rm=True, forcerm=True, pull=False, decode=True,
                    network_mode=self.build_network, timeout=self.build_timeout_s)
                for chunk in stream:
                    if "stream" in chunk:
                        log.write(chunk["stream"])
                    if "status" in chunk:
                        log.write(f"{chunk['status']} {chunk.get('progress', '')}\n")
                    if "error" in chunk:
                        error = chunk["error"].strip()
                        log.write(f"ERROR: {error}\n")
                    log.flush()
            except Exception as exc:  # noqa: BLE001 - APIError (bad Dockerfile syntax), transport errors, timeouts
                error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                log.write(f"ERROR: {error}\n")
        build_s = time.monotonic() - t0
        image = self._image(tag) if error is None else None
        if image is None:
            err = BuildError(f"{service.name} ({service.variant}): docker build of {directory / dockerfile} failed "
                             f"after {build_s:.1f} s: {error or 'no image produced'}; full log: {log_path}")
            err.add_note("build log tail:\n" + _tail(log_path.read_text(errors="replace"), 30))
            raise err
        return image

    # -- start ----------------------------------------------------------------------------
    def effective_limits(self, requested: Limits, role: str = "service") -> Limits:
        """The limits a start applies: ``requested``, or :attr:`default_limits` when nothing
        was asked for (``Limits()``) for a service under test or its front (dependencies,
        ``role == "dependency"``, are never limited by default)."""
        if requested == Limits() and self.default_limits is not None and role in ("service", "front"):
            return self.default_limits
        return requested

    def start(self, prepared: Prepared, options: StartOptions) -> DockerHandle:
        """Create and start the container, wait until healthy, read the limits back.

        Raises
        ------
        ServiceStartError
            the port is taken, the engine refuses the container (bad CPU set, ...), it exits
            before it is healthy (OOM kills are named), or never gets healthy in
            ``run.ready_timeout_s``; the container's log tail is attached and the container is
            removed.
        """
        if prepared.image is None:
            raise ServiceStartError(f"{prepared.service.name}: not prepared for docker (no image); "
                                    "call DockerRuntime.prepare first")
        client = self.client
        self._sweep_once()
        _install_exit_hooks()
        service = prepared.service
        role = str(getattr(options, "role", "service"))
        limits = self.effective_limits(options.limits, role)
        host = self.service_host
        bind = self.bind_host if role in ("service", "front") else self.dependency_bind_host
        ports = service_ports(service, options)
        for port in ports:
            if self.local_engine and port_in_use(host, port):
                raise ServiceStartError(f"{service.name}: port {port} on {host} is already in use; "
                                        "stop that process or pick another port")
        if not self.local_engine and service.post_start and _is_loopback(bind):
            raise ServiceStartError(
                f"{service.name}: its post_start steps run on this machine against port {options.port}, but on the "
                f"remote engine {_redact(self.endpoint)} it binds {bind} there, out of reach; set "
                f"{(settings.DOCKER_BIND_HOST if role == 'service' else settings.DOCKER_DEPENDENCY_BIND_HOST).name} "
                "to an address of that machine (it is then reachable from its network, credentials included)")
        values = {"host": bind, "port": str(options.port), "ports": ",".join(map(str, ports))}
        for dep, h in options.deps.items():
            values[f"dep.{dep}.port"] = str(h.port)
            values[f"dep.{dep}.host"] = getattr(h, "reach_host", None) or h.host
        if options.backend is not None:
            values.update(backend_values(options.backend))
        try:
            env = {k: format_placeholders(v, values) for k, v in service.run_env.items()}
        except KeyError as exc:
            raise ServiceStartError(f"{service.name}: run.env: {exc.args[0]} (in a container only {{host}}, "
                                    "{port}, {ports}, {dep.NAME.*} and a front's {backend.*} have a meaning)") from None
        env.update(options.env)
        if service.port_env:
            env[service.port_env] = str(options.port)
        if service.ports > 1:
            env[service.ports_env] = values["ports"]
        env.setdefault("HOST", bind)
        run_id = options.run_id or "adhoc"
        name = re.sub(r"[^a-zA-Z0-9_.-]+", "-", f"benchlib-{run_id}-{service.name}-{options.port}")[:120]
        labels = {"benchlib.run_id": run_id, "benchlib.service": service.name,
                  "benchlib.variant": service.variant, "benchlib.role": role, "benchlib.owner": owner_label()}
        host_config: dict[str, Any] = {"network_mode": "host", "init": self.init}
        if options.cpus:
            host_config["cpuset_cpus"] = ",".join(str(c) for c in options.cpus)
        if limits.cpus is not None:
            host_config["nano_cpus"] = int(round(limits.cpus * 1e9))
        if limits.memory_mb is not None:
            host_config["mem_limit"] = int(limits.memory_mb * 2**20)
            host_config["memswap_limit"] = int(limits.memory_mb * 2**20)
        if options.log_sink == "discard":
            from docker.types import LogConfig  # late: see provenance

            host_config["log_config"] = LogConfig(type="none")
        handle: DockerHandle | None = None
        try:
            with signals.deferred():  # a stop signal waits until the handle can remove the container
                try:
                    container = client.containers.create(prepared.image, detach=True, name=name, labels=labels,
                                                         environment=env, **host_config)
                except Exception as exc:  # noqa: BLE001 - APIError: name clash, bad cpuset, unknown image ...
                    raise ServiceStartError(f"{service.name}: the engine refused the container: "
                                            f"{str(exc).splitlines()[0] if str(exc) else exc}") from None
                handle = DockerHandle(self, container, service, host, options.port, options, limits)
                handle.ports = ports
                handle.reach_host = "127.0.0.1" if bind in ("0.0.0.0", "::", "") else bind
            try:
                container.start()
            except Exception as exc:  # noqa: BLE001
                raise ServiceStartError(f"{service.name}: the container did not start: "
                                        f"{str(exc).splitlines()[0] if str(exc) else exc}") from None
            self._wait_healthy(handle, service)
            for step in service.post_start:
                self._post_start(service, step, host, options)
            handle.enforced = read_enforced(container, limits, options.cpus,
                                            cgroup_version=str(self.engine_info().get("cgroup_version")),
                                            readback=self.readback, local_engine=self.local_engine)
        except BaseException as exc:
            if handle is None:
                raise
            tail = handle.logs_tail(40)
            info = handle.stop()
            if isinstance(exc, ServiceStartError):
                if info.oom_killed and "OOM" not in str(exc):
                    exc.add_note(f"{service.name} was killed by the memory cap (OOM, {limits.memory_mb} MiB)")
                exc.add_note(f"log tail of {service.name} (container {container.short_id}):\n{tail or '(empty)'}")
            raise
        handle.start_sampling(self.stats_interval_s)
        return handle

    def _post_start(self, service: ResolvedService, step: tuple[str, ...], host: str, options: StartOptions) -> None:
        values = placeholder_values(service, build_dir=None, port=options.port, host=host, deps=options.deps)
        values["python"] = sys.executable
        run_steps(service, [step], values)

    def _wait_healthy(self, handle: DockerHandle, service: ResolvedService) -> None:
        def exited() -> str | None:
            state = handle._state()
            if state.get("Running"):
                return None
            why = " (killed by the memory cap: OOM)" if state.get("OOMKilled") else ""
            return f"container exited with code {state.get('ExitCode')}{why}"

        wait_healthy(service, handle.host, handle.ports, exited)


def _is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _limits_from_env() -> Limits | None:
    """``$BENCHLIB_DOCKER_LIMITS`` (:data:`benchlib.core.settings.DOCKER_LIMITS`) as limits;
    ``None`` for ``none``."""
    return _as_limits(settings.DOCKER_LIMITS.value())


