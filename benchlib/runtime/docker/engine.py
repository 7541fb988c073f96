"""Docker engine connections, container ownership and exit clean-up."""

from __future__ import annotations

import atexit
import gc
import os
import signal
import socket
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator
from urllib.parse import urlparse

from benchlib.errors import RuntimeUnavailable

if TYPE_CHECKING:
    from benchlib.runtime.docker.handle import DockerHandle

_START_HINT = (
    "start an engine (as root: `scripts/docker-engine.sh start`, or `systemctl start docker`), "
    "point DOCKER_HOST at one (unix://, tcp://, ssh://user@host), or use runtime=\"local\""
)


def _redact(url: str) -> str:
    p = urlparse(url)
    if p.password:
        return url.replace(p.password, "***")
    return url


def connect(base_url: str | None = None, *, timeout_s: float = 120.0) -> Any:
    """A ``docker.DockerClient`` for ``base_url`` (default: ``$DOCKER_HOST`` or the local
    socket), checked with a ping.

    Raises
    ------
    RuntimeUnavailable
        saying which endpoint did not answer, why, and how to start an engine or to use
        ``runtime="local"`` instead.
    """
    try:
        import docker
    except ImportError:  # pragma: no cover - a declared dependency
        raise RuntimeUnavailable("the docker runtime needs the Docker SDK: pip install docker") from None
    url = base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
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
                if base_url is None:
                    client = docker.from_env(**kwargs)
                else:
                    client = docker.DockerClient(base_url=base_url, **kwargs)
                client.ping()
            except Exception as exc:  # DockerException, requests/ssh transport errors
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
    """``True``/``False`` if the owner in ``label`` runs on this machine (since this boot) and
    is (not) alive; ``None`` if it cannot be told (another machine, or an old label)."""
    parts = label.split("/")
    if len(parts) != 4 or parts[0] != socket.gethostname() or parts[1] != _boot_id():
        return None
    try:
        pid = int(parts[2])
    except ValueError:
        return None
    return _start_ticks(pid) == parts[3]


_LIVE: set[DockerHandle] = set()
_LIVE_LOCK = threading.Lock()
_HOOKS_INSTALLED = False


def _remove_live_containers() -> None:
    with _LIVE_LOCK:
        handles = list(_LIVE)
    for h in handles:
        try:
            h.kill_and_remove()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def _install_exit_hooks() -> None:
    """atexit, plus a SIGTERM handler (only if SIGTERM has its default action and this is the
    main thread) that removes live containers and then terminates as SIGTERM would."""
    global _HOOKS_INSTALLED
    if _HOOKS_INSTALLED:
        return
    _HOOKS_INSTALLED = True
    atexit.register(_remove_live_containers)
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def on_term(signum: int, frame: Any) -> None:
            _remove_live_containers()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

        signal.signal(signal.SIGTERM, on_term)
    except (ValueError, OSError):  # pragma: no cover - not the main interpreter
        pass


def iter_benchlib_containers(client: Any, run_id: str | None = None) -> Iterator[Any]:
    """Containers carrying benchlib's labels (of ``run_id`` when given), running or not."""
    label = "benchlib.run_id" if run_id is None else f"benchlib.run_id={run_id}"
    yield from client.containers.list(all=True, filters={"label": label})

