"""The local runtime: services as processes on this machine (the default runtime).

* builds with the manifest's command into the build cache (:mod:`benchlib.core.buildcache`),
  reusing a build whose source hash is unchanged;
* starts the service in its own process group, pinned to the server's CPUs from its first
  instruction (``taskset``), with a memory cap and CPU quota through cgroups where writable
  (else recorded as "not enforced: why");
* waits for health (HTTP status or TCP accept), then runs ``post_start`` steps;
* captures logs (``pipe``: read by a thread into the log file, ``file``: the process writes
  the file itself, ``discard``: ``/dev/null``);
* passes a minimal environment (:data:`SERVICE_ENV_KEEP`: ``PATH``, ``HOME``, locale, ``TMPDIR``
  and what the toolchains need) plus the manifest's ``[run] env``, the arm's ``env`` and the
  port variable: a token or password in the caller's environment never reaches a service
  (builds run with the caller's whole environment, as the toolchain would by hand);
* always stops: the handle is a context manager, an ``atexit`` hook kills any process group
  still running when the interpreter exits (errors and Ctrl-C included), SIGTERM and SIGHUP
  do the same before the process dies (:func:`benchlib.core.signals.on_stop`), and a service
  started from the main thread gets SIGTERM from the Linux kernel if its starter dies
  without that (``PR_SET_PDEATHSIG``; SIGKILL included).
"""

from __future__ import annotations

import atexit
import collections
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

from benchlib.core import buildcache, settings, signals
from benchlib.core.errors import BuildError, ServiceStartError
from benchlib.runtime import logs, toolchains
from benchlib.runtime.base import (
    Prepared,
    StartOptions,
    StopInfo,
    expand,
    placeholder_values,
    run_steps,
    service_ports,
    wait_healthy,
)
from benchlib.runtime.manifest import ResolvedService
from benchlib.runtime.ports import free_port, free_ports, port_in_use

__all__ = ["LocalHandle", "LocalRuntime", "SERVICE_ENV_KEEP", "free_port", "free_ports", "port_in_use",
           "service_environment"]

#: Variables a local service inherits from benchlib's environment (besides ``LC_*``); the
#: manifest's ``[run] env``, the arm's ``env`` and the port variable are added to them.
SERVICE_ENV_KEEP = (
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR",
    "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "NODE_PATH", "DOTNET_ROOT",
    "LD_LIBRARY_PATH", settings.CACHE.name,
)


def service_environment(extra: dict[str, str], environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a local service: :data:`SERVICE_ENV_KEEP` and ``LC_*`` from
    ``environ`` (default: this process's), then ``extra`` (manifest, arm, port)."""
    source = os.environ if environ is None else environ
    env = {k: v for k, v in source.items() if k in SERVICE_ENV_KEEP or k.startswith("LC_")}
    env.update(extra)
    return env

_LIVE: set[LocalHandle] = set()
_LIVE_LOCK = threading.Lock()


def _kill_all_at_exit() -> None:
    with _LIVE_LOCK:
        handles = list(_LIVE)
    for h in handles:
        try:
            h.stop()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass


atexit.register(_kill_all_at_exit)


def _port_owner(port: int) -> str:
    """Best-effort name of the process listening on ``port`` (via ``ss``)."""
    if shutil.which("ss") is None:
        return ""
    try:
        out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.strip().split("users:")[-1].strip() if "users:" in out else ""


def _tail_of_file(path: Path | None, lines: int) -> str:
    if path is None or not path.exists():
        return ""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - 64 * 1024))
        data = fh.read().decode("utf-8", "replace")
    return "\n".join(data.splitlines()[-lines:])


class LocalHandle:
    """A running local service (see :class:`benchlib.runtime.base.ServiceHandle`)."""

    def __init__(self, name: str, host: str, port: int, proc: subprocess.Popen[bytes], log_path: Path | None,
                 log_sink: str, cgroup: Any, enforced: dict[str, Any]) -> None:
        self.name = name
        self.host = host
        self.port = port
        #: every port the service listens on (``[run] ports = N``); ``(port,)`` for one
        self.ports: tuple[int, ...] = (port,)
        self.proc = proc
        self.log_path = log_path
        self.log_sink = log_sink
        self.enforced: dict[str, Any] = enforced
        self._cgroup = cgroup
        self._tail: collections.deque[str] = collections.deque(maxlen=200)
        #: bytes of log kept in the file per trial (the rest is counted, see :mod:`benchlib.runtime.logs`)
        self.log_cap_bytes = logs.DEFAULT_LOG_CAP_BYTES
        #: lines and bytes the service wrote to its pipe (pipe sink) or file (file sink, after stop)
        self.log_lines = 0
        self.log_bytes = 0
        self._reader: threading.Thread | None = None
        self._log_fh: IO[bytes] | None = None
        self._stopped: StopInfo | None = None
        self._samples: list[dict[str, Any]] = []
        self._sampler_stop = threading.Event()
        self._sampler: threading.Thread | None = None
        with _LIVE_LOCK:
            _LIVE.add(self)

    # -- logs -----------------------------------------------------------------------------
    def _start_reader(self) -> None:
        assert self.proc.stdout is not None
        stream = self.proc.stdout
        self._log_fh = open(self.log_path, "ab") if self.log_path else None

        cap = self.log_cap_bytes

        def pump() -> None:
            # Every line is read (the pipe's cost is part of what is measured); the file keeps
            # the first `cap` bytes, then lines are only counted, and the tail is appended at
            # the end after a marker saying how much was left out.
            fh = self._log_fh
            kept_bytes = kept_lines = 0
            for line in iter(stream.readline, b""):
                self.log_lines += 1
                self.log_bytes += len(line)
                if fh is not None and kept_bytes < cap:
                    fh.write(line)
                    kept_bytes += len(line)
                    kept_lines += 1
                self._tail.append(line.decode("utf-8", "replace").rstrip("\n"))
            if fh is not None:
                if self.log_lines > kept_lines:
                    tail = [t for t in self._tail][-(self.log_lines - kept_lines):]
                    tail_bytes = sum(len(t.encode()) + 1 for t in tail)
                    fh.write(logs.marker(self.log_lines - kept_lines - len(tail),
                                         max(0, self.log_bytes - kept_bytes - tail_bytes)))
                    fh.write(("\n".join(tail) + "\n").encode())
                fh.flush()

        self._reader = threading.Thread(target=pump, name=f"log-{self.name}", daemon=True)
        self._reader.start()

    def logs_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines the service wrote (pipe or file sinks)."""
        if self.log_sink == "pipe":
            return "\n".join(list(self._tail)[-lines:])
        if self.log_sink == "file":
            return _tail_of_file(self.log_path, lines)
        return "(log discarded: log_sink='discard')"

    # -- resource samples -----------------------------------------------------------------
    def _group_usage(self) -> tuple[float, float] | None:
        """CPU seconds and RSS (MiB) of every live process in the service's process group (a
        launcher and the processes it started), from ``/proc``; ``None`` once the leader is gone."""
        ticks = os.sysconf("SC_CLK_TCK")
        page = os.sysconf("SC_PAGE_SIZE")
        pgid = self.proc.pid
        if not Path(f"/proc/{pgid}").exists():
            return None
        cpu = rss = 0.0
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[2]) != pgid:  # field 5, the process group
                    continue
                cpu += (int(stat[11]) + int(stat[12])) / ticks
                rss += int(Path(entry.path, "statm").read_text().split()[1]) * page / 2**20
            except (OSError, IndexError, ValueError):
                continue
        return cpu, rss

    def start_sampling(self, interval_s: float = 1.0) -> None:
        """Sample the service's CPU time and RSS every ``interval_s`` seconds until stopped.

        ``cpu_s`` (cumulative CPU seconds) counts every process of the service: its cgroup's
        CPU accounting where there is one (``cpu_source: "cgroup"``), else the sum over the
        live processes of its process group (``"process group"``); ``rss_mb`` is the sum of the
        group's resident sets."""
        if self._sampler is not None:
            return

        def sample() -> None:
            while not self._sampler_stop.wait(interval_s):
                if not self.sample_now():
                    return

        self._sampler = threading.Thread(target=sample, name=f"sample-{self.name}", daemon=True)
        self._sampler.start()

    def sample_now(self) -> bool:
        """Take one resource sample now (e.g. right after the load); ``False`` once the service is gone."""
        usage = self._group_usage()
        if usage is None:
            return False
        cpu_ns = None
        if self._cgroup is not None:
            try:
                cpu_ns = self._cgroup.cpu_usage_ns()
            except Exception:  # noqa: BLE001 - fall back to the process group
                cpu_ns = None
        self._samples.append({
            "t_monotonic_ns": time.monotonic_ns(),
            "cpu_s": usage[0] if cpu_ns is None else cpu_ns / 1e9,
            "cpu_source": "process group" if cpu_ns is None else "cgroup",
            "rss_mb": usage[1],
        })
        return True

    def resource_samples(self) -> list[dict[str, Any]]:
        return list(self._samples)

    def cpu_counter_ns(self) -> int | None:
        """From the cgroup benchlib made for the service (``None`` where none could be made:
        its processes then share their parent's cgroup)."""
        if self._cgroup is None or getattr(self._cgroup, "version", "none") == "none":
            return None
        try:
            value: int | None = self._cgroup.cpu_usage_ns()
        except OSError:
            return None
        return value

    # -- lifecycle ------------------------------------------------------------------------
    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout_s: float = 5.0) -> StopInfo:
        """Stop the whole process group: SIGTERM, then SIGKILL after ``timeout_s``."""
        if self._stopped is not None:
            return self._stopped
        died_early = self.proc.poll() is not None
        pgid = self.proc.pid
        if not died_early:
            try:
                os.killpg(pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                pass
        try:  # anything left in the group (children), and the leader if still alive
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        code = self.proc.wait()
        self._sampler_stop.set()
        if self._reader is not None:
            self._reader.join(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if self._log_fh is not None:
            self._log_fh.close()
        if self.log_sink == "file" and self.log_path is not None:
            info = logs.compact_log(self.log_path, self.log_cap_bytes)
            self.log_lines, self.log_bytes = info["lines"], info["bytes"]
        oom = False
        if self._cgroup is not None:
            try:
                oom = bool(self._cgroup.oom_killed())
                self.enforced.setdefault("memory_peak_mb", round(self._cgroup.memory_peak_bytes() / 2**20, 1))
            except Exception:  # noqa: BLE001 - read-back is informative only
                pass
            try:
                self._cgroup.remove()
            except Exception:  # noqa: BLE001
                pass
        if oom:
            detail = "killed by the memory cap (OOM)"
        elif died_early:
            detail = f"exited on its own with code {code}"
        else:
            detail = "stopped by benchlib"
        self._stopped = StopInfo(exit_code=code if died_early or code >= 0 else None, oom_killed=oom,
                                 died_early=died_early, detail=detail)
        with _LIVE_LOCK:
            _LIVE.discard(self)
        return self._stopped

    def __enter__(self) -> LocalHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<LocalHandle {self.name} pid={self.proc.pid} {self.host}:{self.port}>"


class LocalRuntime:
    """Services as local processes. See the module docstring."""

    name = "local"

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host

    def check(self) -> None:
        """Always usable (the local machine)."""

    def provenance(self) -> dict[str, Any]:
        info: dict[str, Any] = {"runtime": "local", "taskset": shutil.which("taskset") is not None}
        try:
            from benchlib.runtime import cgroups

            info["cgroups"] = cgroups.cgroup_version()
        except (ImportError, AttributeError):
            info["cgroups"] = "cgroup support not available"
        return info

    # -- build ----------------------------------------------------------------------------
    def prepare(self, service: ResolvedService) -> Prepared:
        """Build ``service`` into its cache folder unless an identical build is there.

        Raises ToolchainMissing (with the install hint) or BuildError (with the log tail).
        """
        versions = toolchains.require(service.manifest)
        # variants with the same build share one folder (built once; see ResolvedService.build_variant)
        build_dir = buildcache.build_dir_for(service.name, service.build_variant)
        if service.build_command is None:
            return Prepared(service=service, build_dir=build_dir, built=False,
                            info={"toolchains": versions, "build": "nothing to build"})
        digest = buildcache.source_hash(
            service.manifest.directory, service.build_inputs,
            extra={"command": service.build_command, "env": dict(service.build_env), "toolchains": versions},
        )
        t_lookup = time.monotonic()
        record_name = f"{service.name}/{service.build_variant}"
        with buildcache.locked(build_dir):
            stamp = buildcache.read_stamp(build_dir)
            if stamp is not None and stamp.get("hash") == digest:
                buildcache.record_build("service", record_name, "local", time.monotonic() - t_lookup, cached=True)
                return Prepared(service=service, build_dir=build_dir, built=False,
                                info={"toolchains": versions, "source_hash": digest,
                                      "build_s": stamp.get("build_s"), "build": "cached"})
            values = placeholder_values(service, build_dir=build_dir, port=None)
            argv = expand(service.build_command, values)
            env = {**os.environ, **{k: expand([v], values)[0] for k, v in service.build_env.items()}}
            log_path = build_dir / "build.log"
            t0 = time.monotonic()
            with open(log_path, "wb") as log:
                log.write(("$ " + " ".join(argv) + "\n").encode())
                log.flush()
                try:
                    proc = subprocess.run(argv, cwd=service.manifest.directory, env=env, stdout=log,
                                          stderr=subprocess.STDOUT, check=False)
                except FileNotFoundError as exc:
                    raise BuildError(f"{service.name} ({service.variant}): build command not found: {exc}") from None
            build_s = time.monotonic() - t0
            if proc.returncode != 0:
                err = BuildError(f"{service.name} ({service.variant}): build failed with exit code "
                                 f"{proc.returncode} after {build_s:.1f} s; full log: {log_path}")
                err.add_note("build log tail:\n" + _tail_of_file(log_path, 30))
                raise err
            buildcache.write_stamp(build_dir, {"hash": digest, "build_s": round(build_s, 2), "argv": argv,
                                               "toolchains": versions, "finished": time.time()})
            buildcache.record_build("service", record_name, "local", build_s, cached=False)
        return Prepared(service=service, build_dir=build_dir, built=True,
                        info={"toolchains": versions, "source_hash": digest, "build_s": round(build_s, 2),
                              "build": "built"})

    # -- start ----------------------------------------------------------------------------
    def start(self, prepared: Prepared, options: StartOptions) -> LocalHandle:
        """Start one instance and wait until it is healthy.

        Raises
        ------
        ServiceStartError
            the port is taken, the process exits early, or it never becomes healthy (the log
            tail is attached as a note). Nothing is left running.
        """
        service = prepared.service
        host = self.host
        ports = service_ports(service, options)
        for port in ports:
            if port_in_use(host, port):
                owner = _port_owner(port)
                raise ServiceStartError(f"{service.name}: port {port} on {host} is already in use"
                                        + (f" (by {owner})" if owner else "") + "; stop that process or pick another port")
        values = placeholder_values(service, build_dir=prepared.build_dir, port=options.port, host=host,
                                    deps=options.deps, ports=ports, backend=options.backend)
        try:
            argv = expand(service.run_command, values)
            extra = {**{k: expand([v], values)[0] for k, v in service.run_env.items()}, **dict(options.env)}
        except KeyError as exc:
            raise ServiceStartError(f"{service.name}: {exc.args[0]}") from None
        if service.port_env:
            extra[service.port_env] = str(options.port)
        if service.ports > 1:
            extra[service.ports_env] = values["ports"]
        env = service_environment(extra)
        if shutil.which("taskset"):
            argv = ["taskset", "--cpu-list", ",".join(map(str, options.cpus)), *argv]
            pin = None
        else:  # pragma: no cover - util-linux is everywhere we run
            cpus = set(options.cpus)
            pin = lambda: os.sched_setaffinity(0, cpus)  # noqa: E731

        log_path = options.log_path
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
        if options.log_sink == "pipe":
            stdout: Any = subprocess.PIPE
        elif options.log_sink == "file":
            if log_path is None:
                raise ServiceStartError(f"{service.name}: log_sink='file' needs a log_path")
            stdout = open(log_path, "ab")
        else:
            stdout = subprocess.DEVNULL

        signals.on_stop(_kill_all_at_exit)
        handle: LocalHandle | None = None
        try:
            with signals.deferred():  # a stop signal waits until the handle can stop what was started
                handle = self._spawn(service, argv, env, stdout, options, pin)
                handle.ports = ports
                if options.log_sink == "pipe":
                    handle._start_reader()
            self._wait_healthy(handle, service)
            run_steps(service, service.post_start, values, env=env)
            try:
                handle.enforced["cpus_read_back"] = sorted(os.sched_getaffinity(handle.proc.pid))
            except OSError:
                pass
        except BaseException as exc:
            if handle is None:
                raise
            handle.stop()
            if isinstance(exc, ServiceStartError):
                exc.add_note(f"log tail of {service.name}:\n{handle.logs_tail(40) or '(empty)'}")
            raise
        handle.start_sampling()
        return handle

    def _spawn(self, service: ResolvedService, argv: list[str], env: dict[str, str], stdout: Any,
               options: StartOptions, pin: Any) -> LocalHandle:
        """Create the cgroup, start the process in it (in its own session, tied to this thread
        by the parent-death signal) and return its handle."""
        log_path = options.log_path
        cgroup = None
        enforced: dict[str, Any] = {"runtime": "local", "cpus": list(options.cpus), "log_sink": options.log_sink}
        try:
            from benchlib.runtime import cgroups

            cgroup = cgroups.create(f"{options.run_id or 'adhoc'}-{service.name}-{options.port}", options.limits,
                                    options.cpus)
        except (ImportError, AttributeError):
            if options.limits.cpus is not None or options.limits.memory_mb is not None:
                enforced["limits"] = "not enforced: cgroup support not available in this build"
        enter_cgroup = cgroup.preexec() if cgroup is not None else None
        # The parent-death signal follows the thread that forks: only the main thread lives as
        # long as the services it starts may (a worker thread's services would die with it).
        tie = signals.parent_death_signal_setter() if threading.current_thread() is threading.main_thread() else None
        parent = os.getpid()
        enforced["parent_death_signal"] = "SIGTERM" if tie is not None else "not set (started outside the main thread)"

        def preexec() -> None:
            # In the child, before exec: join the cgroup, so no early thread or child escapes it.
            if enter_cgroup is not None:
                enter_cgroup()
            if tie is not None:
                tie()
                if os.getppid() != parent:  # the starter died before the tie was made
                    os._exit(1)
            if pin is not None:
                pin()

        try:
            proc = subprocess.Popen(argv, cwd=service.manifest.directory, env=env, stdin=subprocess.DEVNULL,
                                    stdout=stdout, stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=preexec if (enter_cgroup or pin or tie) else None)
        except FileNotFoundError as exc:
            if cgroup is not None:
                cgroup.remove()
            raise ServiceStartError(f"{service.name}: cannot run {argv[0]!r}: {exc}") from None
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            raise
        finally:
            if options.log_sink == "file":
                stdout.close()
        if cgroup is not None:
            try:
                cgroup.add(proc.pid)  # idempotent; records a refusal the preexec step could not report
                enforced.update(cgroup.enforced())
            except Exception as exc:  # noqa: BLE001 - recorded, never silently
                enforced["limits"] = f"not enforced: {exc}"
        handle = LocalHandle(service.name, self.host, options.port, proc, log_path, options.log_sink, cgroup,
                             enforced)
        handle.log_cap_bytes = options.log_cap_bytes
        return handle

    def _wait_healthy(self, handle: LocalHandle, service: ResolvedService) -> None:
        def exited() -> str | None:
            return None if handle.alive() else f"exited with code {handle.proc.poll()}"

        wait_healthy(service, handle.host, handle.ports, exited)
