"""Docker engine connections, container ownership and exit clean-up."""

from __future__ import annotations

import atexit
import gc
import os
import socket
import threading
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from benchlib.core import settings
from benchlib.core.errors import RuntimeUnavailable

_START_HINT = (
    "start an engine (as root: `scripts/docker-engine.sh start`, or `systemctl start docker`), "
    "point DOCKER_HOST at one (unix://, tcp://, ssh://user@host), or use runtime=\"local\""
)


def _redact(url: str) -> str:
    p = urlparse(url)
    if p.password:
        return url.replace(p.password, "***")
    return url


#: Set to ``1`` to use a remote engine over plain ``tcp://`` (no TLS): anyone on the network
#: path can then read and drive that engine.


def _tls_configured(environ: Mapping[str, str]) -> bool:
    """Would docker-py use TLS for a ``tcp://`` endpoint with this environment? (as
    ``docker.from_env`` decides: ``DOCKER_TLS_VERIFY`` non-empty, or ``DOCKER_CERT_PATH``)."""
    return bool(environ.get("DOCKER_CERT_PATH")) or environ.get("DOCKER_TLS_VERIFY", "") != ""


def check_endpoint_security(url: str, environ: Mapping[str, str] | None = None) -> None:
    """Refuse a remote engine reached over plain TCP: ``tcp://`` (or ``http://``) to a host that
    is not loopback, without TLS (``DOCKER_TLS_VERIFY``/``DOCKER_CERT_PATH``), unless
    ``$BENCHLIB_ALLOW_INSECURE_DOCKER`` (:data:`benchlib.core.settings.ALLOW_INSECURE_DOCKER`) is ``1``. ``unix://``,
    ``ssh://``, ``https://`` and loopback TCP
    pass.

    Raises
    ------
    RuntimeUnavailable
        naming the endpoint and the secure choices.
    """
    env = os.environ if environ is None else environ
    scheme = urlparse(url).scheme
    if scheme not in ("tcp", "http") or _engine_is_local(url) or _tls_configured(env):
        return
    if settings.ALLOW_INSECURE_DOCKER.value(env):
        return
    raise RuntimeUnavailable(
        f"the Docker engine {_redact(url)} is remote and would be used over plain TCP (no TLS): anyone on the "
        "network path could read and drive it; use TLS (DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH, port 2376), "
        f"ssh://user@host, or set {settings.ALLOW_INSECURE_DOCKER.name}=1 on a network you control"
    )


def connect(base_url: str | None = None, *, timeout_s: float = 120.0) -> Any:
    """A ``docker.DockerClient`` for ``base_url`` (default: ``$DOCKER_HOST`` or the local
    socket), checked with a ping. TLS settings come from the environment
    (``DOCKER_TLS_VERIFY``, ``DOCKER_CERT_PATH``) for ``base_url`` too.

    Raises
    ------
    RuntimeUnavailable
        saying which endpoint did not answer, why, and how to start an engine or to use
        ``runtime="local"`` instead; or refusing a remote engine over plain TCP
        (:func:`check_endpoint_security`).
    """
    try:
        import docker
    except ImportError:  # pragma: no cover - a declared dependency
        raise RuntimeUnavailable("the docker runtime needs the Docker SDK: pip install docker") from None
    url = base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    check_endpoint_security(url)
    kwargs: dict[str, Any] = {"version": "auto", "timeout": int(timeout_s)}
    if url.startswith("ssh://"):
        try:
            import paramiko  # noqa: F401
        except ImportError:
            kwargs["use_ssh_client"] = True  # the ssh binary instead of paramiko
    reason = None
    sock_path = url[len("unix://"):] if url.startswith("unix://") else None
    if sock_path is not None and not os.path.exists(sock_path):
        reason = f"{sock_path} does not exist"
    else:
        # docker-py leaves the socket of a failed connection unclosed; its ResourceWarning
        # says nothing to our users, so it is silenced (and collected) here.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            try:
                environment = dict(os.environ) if base_url is None else {**os.environ, "DOCKER_HOST": base_url}
                client = docker.from_env(environment=environment, **kwargs)
                client.ping()
            except Exception as exc:  # noqa: BLE001 - DockerException, requests/ssh transport errors
                reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            if reason is not None:
                gc.collect()
    if reason is not None:
        raise RuntimeUnavailable(
            f"runtime=\"docker\" was asked for, but no Docker engine answers at {_redact(url)} ({reason}); "
            + _START_HINT
        )
    return client


def engine_unavailable_reason(base_url: str | None = None, *, timeout_s: float = 10.0) -> str | None:
    """``None`` when a Docker engine answers at ``base_url`` (default ``$DOCKER_HOST``), else
    why not and how to start one (for skip messages and ``benchlib services``)."""
    try:
        connect(base_url, timeout_s=timeout_s).close()
    except RuntimeUnavailable as exc:
        return str(exc)
    return None


_SHARED: dict[str, Any] = {}
_SHARED_LOCK = threading.Lock()


def shared_client(base_url: str | None = None) -> Any:
    """One connected client per endpoint for this process (closed at exit), so runtimes
    created and dropped by runs do not each leave a connection pool behind."""
    key = base_url or os.environ.get("DOCKER_HOST") or ""
    with _SHARED_LOCK:
        client = _SHARED.get(key)
        if client is None:
            client = _SHARED[key] = connect(base_url)
        return client


def _close_shared_clients() -> None:
    with _SHARED_LOCK:
        clients = list(_SHARED.values())
        _SHARED.clear()
    for c in clients:
        try:
            c.close()
        except Exception:  # noqa: BLE001 - at exit
            pass


atexit.register(_close_shared_clients)  # registered first, so it runs after container removal


def _engine_is_local(url: str) -> bool:
    """Is the engine on this machine? (unix socket, or tcp to a loopback address)."""
    if url.startswith(("http+unix://", "unix://", "npipe://", "http+docker://")):
        return True
    host = urlparse(url.replace("tcp://", "http://")).hostname or ""
    return host in ("localhost", "127.0.0.1", "::1")


def _remote_host(url: str) -> str | None:
    p = urlparse(url.replace("tcp://", "http://"))
    return p.hostname


# ----------------------------------------------------------------------------- owners & exit

def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    except OSError:
        return "noboot"


def _start_ticks(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def owner_label(pid: int | None = None) -> str:
    """``<hostname>/<boot id>/<pid>/<start ticks>``: which process started a container, so a
    sweep can tell a live run's containers from a dead one's."""
    pid = pid or os.getpid()
    return f"{socket.gethostname()}/{_boot_id()}/{pid}/{_start_ticks(pid) or '?'}"


def owner_alive(label: str) -> bool | None:
    """``True``/``False`` if the owner in ``label`` runs on this machine (same host name and
    boot id) and is (not) alive; ``None`` if it cannot be told (another machine, an earlier
    boot, or an old label)."""
    parts = label.split("/")
    if len(parts) != 4 or parts[0] != socket.gethostname() or parts[1] != _boot_id():
        return None
    try:
        pid = int(parts[2])
    except ValueError:
        return None
    return _start_ticks(pid) == parts[3]


def iter_benchlib_containers(client: Any, run_id: str | None = None) -> Iterator[Any]:
    """Containers carrying benchlib's labels (of ``run_id`` when given), running or not."""
    import docker.errors

    label = "benchlib.run_id" if run_id is None else f"benchlib.run_id={run_id}"
    # list the ids, then inspect each: a container removed in between (another run's stop, a
    # sweep) is skipped (containers.list() would raise the engine's 404 for it)
    for entry in client.api.containers(all=True, filters={"label": label}):
        try:
            yield client.containers.get(entry["Id"])
        except docker.errors.NotFound:
            continue


def find_image(client: Any, ref: str) -> str | None:
    """The engine's id of image ``ref`` (``sha256:...``), or ``None`` when it has no such image."""
    import docker.errors

    try:
        return str(client.images.get(ref).id)
    except docker.errors.ImageNotFound:
        return None
