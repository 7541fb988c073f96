"""A running service container: health state, logs, stats sampling, stop and removal."""

from __future__ import annotations

import atexit
import signal
import threading
import time
from typing import Any

from benchlib.core import signals
from benchlib.core.model import Limits
from benchlib.runtime import cgroups, logs
from benchlib.runtime.base import StartOptions, StopInfo
from benchlib.runtime.manifest import ResolvedService

#: Containers started and not yet removed (removed at exit and on a stop signal).
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
    """atexit, plus the stop-signal path (:func:`benchlib.core.signals.on_stop`: SIGTERM and SIGHUP
    remove live containers, then the process ends as the signal would have)."""
    global _HOOKS_INSTALLED
    if not _HOOKS_INSTALLED:
        _HOOKS_INSTALLED = True
        atexit.register(_remove_live_containers)
    signals.on_stop(_remove_live_containers)


class DockerHandle:
    """A running, healthy container (see :class:`benchlib.runtime.base.ServiceHandle`)."""

    def __init__(self, runtime: Any, container: Any, service: ResolvedService, host: str, port: int,
                 options: StartOptions, limits: Limits) -> None:
        self.runtime = runtime
        self.container = container
        self.service = service
        self.name = service.name
        self.host = host
        self.port = port
        #: every port the service listens on (``[run] ports = N``); ``(port,)`` for one
        self.ports: tuple[int, ...] = (port,)
        self.options = options
        self.limits = limits
        self.enforced: dict[str, Any] = {"runtime": "docker"}
        #: the address other containers on the engine's machine reach this one at (host network)
        self.reach_host = "127.0.0.1"
        self.log_lines = 0
        self.log_bytes = 0
        self._stopped: StopInfo | None = None
        self._samples: list[dict[str, Any]] = []
        self._sampler_stop = threading.Event()
        self._sampler: threading.Thread | None = None
        self._removed = False
        self._final_log: bytes | None = None
        #: the container's CPU counter, looked up at the first read (None: none readable from here)
        self._cpu_counter: cgroups.CpuCounter | None = None
        self._cpu_counter_found = False
        with _LIVE_LOCK:
            _LIVE.add(self)

    # -- state ----------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        self.container.reload()
        state: dict[str, Any] = self.container.attrs.get("State", {})
        return state

    def alive(self) -> bool:
        """``True`` while the container runs."""
        try:
            return bool(self._state().get("Running"))
        except Exception:  # noqa: BLE001 - gone means not alive
            return False

    def logs_tail(self, lines: int = 40) -> str:
        """The container's last ``lines`` lines of stdout/stderr (kept after it is removed)."""
        if self.options.log_sink == "discard":
            return "(log discarded: log_sink='discard')"
        if self._final_log is not None:
            return "\n".join(self._final_log.decode("utf-8", "replace").rstrip().splitlines()[-lines:])
        try:
            return str(self.container.logs(stdout=True, stderr=True, tail=lines).decode("utf-8", "replace")).rstrip()
        except Exception as exc:  # noqa: BLE001
            return f"(container log not available: {exc})"

    # -- resource samples -----------------------------------------------------------------
    def _sample(self) -> dict[str, Any] | None:
        try:
            s = self.container.stats(stream=False, one_shot=True)
        except Exception:  # noqa: BLE001 - the container may be gone
            return None
        cpu = (s.get("cpu_stats") or {}).get("cpu_usage") or {}
        mem = s.get("memory_stats") or {}
        stats = mem.get("stats") or {}
        usage = mem.get("usage")
        inactive = stats.get("total_inactive_file", stats.get("inactive_file", 0))
        rss = stats.get("total_rss", stats.get("rss", stats.get("anon")))
        if usage is None and not cpu:
            return None
        sample: dict[str, Any] = {"t_monotonic_ns": time.monotonic_ns()}
        if "total_usage" in cpu:
            sample["cpu_s"] = cpu["total_usage"] / 1e9
        if usage is not None:
            sample["memory_mb"] = round(usage / 2**20, 3)
            sample["working_set_mb"] = round(max(0, usage - (inactive or 0)) / 2**20, 3)
        if rss is not None:
            sample["rss_mb"] = round(rss / 2**20, 3)
        if mem.get("max_usage") is not None:
            sample["memory_peak_mb"] = round(mem["max_usage"] / 2**20, 3)
        if (s.get("pids_stats") or {}).get("current") is not None:
            sample["pids"] = s["pids_stats"]["current"]
        return sample

    def start_sampling(self, interval_s: float) -> None:
        """Sample ``stats`` every ``interval_s`` seconds (first one now) until stopped."""
        if self._sampler is not None or interval_s <= 0:
            return

        def loop() -> None:
            while True:
                sample = self._sample()
                if sample is not None:
                    self._samples.append(sample)
                if self._sampler_stop.wait(interval_s):
                    return

        self._sampler = threading.Thread(target=loop, name=f"stats-{self.name}", daemon=True)
        self._sampler.start()

    def sample_now(self) -> bool:
        """Take one ``stats`` sample now (e.g. right after the load); ``False`` if none could be read."""
        sample = self._sample()
        if sample is not None:
            self._samples.append(sample)
        return sample is not None

    def cpu_counter_ns(self) -> int | None:
        """From the container's own cgroup files (found once through its init process), not
        the stats API, which samples about once a second; ``None`` for a container on another
        machine (``DOCKER_HOST``) or when its cgroup cannot be read from here."""
        if not self._cpu_counter_found:
            pid = int((self.container.attrs.get("State") or {}).get("Pid") or 0)
            local = bool(getattr(self.runtime, "local_engine", False))
            self._cpu_counter = cgroups.cpu_counter_of_pid(pid) if pid > 0 and local else None
            self._cpu_counter_found = True
        return self._cpu_counter.read_ns() if self._cpu_counter is not None else None

    def resource_samples(self) -> list[dict[str, Any]]:
        """CPU (``cpu_s``: cumulative CPU seconds) and memory (``memory_mb``, ``working_set_mb``,
        ``rss_mb``) samples from the engine's ``stats``, with ``t_monotonic_ns`` of this process."""
        return list(self._samples)

    # -- stop -----------------------------------------------------------------------------
    def _save_log(self) -> None:
        """Keep the container's log (for :meth:`logs_tail` after removal, and in ``log_path``)."""
        if self.options.log_sink == "discard":
            return
        path = self.options.log_path
        if path is None:
            try:
                self._final_log = self.container.logs(stdout=True, stderr=True, tail=2000)[-256 * 1024:]
            except Exception:  # noqa: BLE001
                pass
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(path, "ab") as fh:  # streamed: a logging service writes hundreds of MB per trial
                for chunk in self.container.logs(stdout=True, stderr=True, stream=True, follow=False):
                    fh.write(chunk)
        except Exception:  # noqa: BLE001 - the engine or the container went away
            pass
        info = logs.compact_log(path, self.options.log_cap_bytes)
        self.log_lines, self.log_bytes = info["lines"], info["bytes"]
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - 256 * 1024))
            self._final_log = fh.read()

    def kill_and_remove(self) -> None:
        """Remove the container at once (atexit / signal path): no log, no waiting."""
        if self._removed:
            return
        self._sampler_stop.set()
        try:
            self.container.remove(force=True, v=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        self._removed = True
        with _LIVE_LOCK:
            _LIVE.discard(self)

    def stop(self, timeout_s: float = 5.0) -> StopInfo:
        """Stop (SIGTERM, SIGKILL after ``timeout_s``), keep the log, remove the container.

        Returns
        -------
        StopInfo
            ``died_early`` when the container had already exited; ``oom_killed`` when the
            memory cap's OOM killer struck; ``exit_code`` ``None`` when it ended by our signal.
        """
        if self._stopped is not None:
            return self._stopped
        detail_extra = ""
        died_early = False
        state: dict[str, Any] = {}
        try:
            died_early = not bool(self._state().get("Running"))
            if not died_early:
                final = self._sample()
                if final is not None:
                    self._samples.append(final)
                self.container.stop(timeout=int(max(1, timeout_s)))
            try:
                self.container.wait(timeout=timeout_s + 10)
            except Exception:  # noqa: BLE001 - force removal below
                pass
            state = self._state()
            self._save_log()
        except Exception as exc:  # noqa: BLE001 - the engine or the container went away
            detail_extra = f"; engine error while stopping: {str(exc).splitlines()[0][:200] if str(exc) else exc}"
        finally:
            self._sampler_stop.set()
            if self._sampler is not None:
                self._sampler.join(timeout=5)
            self.kill_and_remove()
        code = state.get("ExitCode")
        oom = bool(state.get("OOMKilled"))
        if oom:
            detail = f"killed by the memory cap (OOM; limit {self.limits.memory_mb} MiB, exit code {code})"
        elif died_early:
            detail = f"exited on its own with code {code}" + (f" ({state['Error']})" if state.get("Error") else "")
        else:
            detail = "stopped by benchlib"
        if not died_early and not oom and code in (128 + signal.SIGTERM, 128 + signal.SIGKILL):
            code = None
        self._stopped = StopInfo(exit_code=code, oom_killed=oom, died_early=died_early, detail=detail + detail_extra)
        return self._stopped

    def __enter__(self) -> DockerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<DockerHandle {self.name} {self.container.short_id} {self.host}:{self.port}>"


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _exec_output(container: Any, cmd: list[str]) -> bytes:
    """``docker exec`` of ``cmd``; its stdout. (``Container.exec_run`` leaves its socket open.)

    Raises RuntimeError when the command exits with a non-zero code."""
    from docker.utils.socket import STDOUT, frames_iter

    api = container.client.api
    exec_id = api.exec_create(container.id, cmd, stdout=True, stderr=False)["Id"]
    sock = api.exec_start(exec_id, socket=True)
    try:
        out = b"".join(data for stream, data in frames_iter(sock, tty=False) if stream == STDOUT)
    finally:
        response = getattr(sock, "_response", None)
        if response is not None:
            response.close()
        sock.close()
    code = api.exec_inspect(exec_id).get("ExitCode")
    if code not in (0, None):
        raise RuntimeError(f"docker exec {cmd[0]} exited with code {code}")
    return out


