"""Memory caps and CPU quotas for local processes through Linux cgroups (v1 and v2).

:func:`create` makes one cgroup per service instance, a child of the cgroup this process is
in (``<own cgroup>/benchlib/<name>``, for each controller), writes the limits, and reads
them back. Whatever cannot be written is reported, never hidden: the handle's
:meth:`CgroupHandle.enforced` says ``"not enforced: <why>"`` for that limit. It is safe to
call on a machine where nothing is writable (no root, read-only ``/sys/fs/cgroup``, no
cgroup file system at all).

Hierarchies:

- **v1** (and the v1 controllers of a hybrid host, where ``/sys/fs/cgroup/unified`` is a
  v2 mount without controllers): ``memory`` (``memory.limit_in_bytes``, plus
  ``memory.memsw.limit_in_bytes`` so the cap cannot be dodged by swapping), ``cpu``
  (``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``), ``cpuset`` (``cpuset.cpus``), ``cpuacct``
  (usage).
- **v2**: ``memory.max``, ``memory.swap.max = 0``, ``cpu.max``, ``cpuset.cpus``; the
  controllers are enabled in the parents' ``cgroup.subtree_control``. v2 forbids processes
  in a cgroup that delegates controllers, so this works when this process runs in the root
  cgroup or in a delegated one (``systemd-run --scope -p Delegate=yes``); otherwise the
  reason is reported.

:func:`read_limits` reads the same facts for any process (a container's init process), which
is how the Docker runtime reads back what the engine applied.

The ``enforced`` dictionary (also used by the Docker runtime)::

    {"cgroup": "v1", "cgroup_path": "/benchlib/r1-go-8080",
     "cpus": [1], "cpu_quota": 1.0, "memory_mb": 512, "swap": "disabled",
     "cpuset": "enforced (cgroup v1)", "cpu": "enforced (cgroup v1 CFS quota)",
     "memory": "enforced (cgroup v1)"}

``cpus`` is the CPU list read back (``None`` when not confined), ``cpu_quota`` the CFS quota
in CPUs (``None`` = no quota), ``memory_mb`` the cap in MiB (``None`` = no cap).
"""

from __future__ import annotations

import errno
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib.core.model import Limits

__all__ = [
    "CgroupHandle",
    "CpuCounter",
    "cpu_counter_of_pid",
    "CgroupSystem",
    "create",
    "cgroup_version",
    "compare_limits",
    "describe",
    "detect",
    "kill_owned_by",
    "parse_cpu_list",
    "read_limits",
    "read_limits_with",
    "sweep",
]

#: v1 controllers benchlib uses, and the key each one is reported under.
V1_CONTROLLERS = ("memory", "cpu", "cpuacct", "cpuset")
V2_CONTROLLERS = ("memory", "cpu", "cpuset")
_UNLIMITED_V1 = 1 << 62  # memory.limit_in_bytes reads ~ 2**63 - page size when unlimited
_NAME_OK = re.compile(r"[^A-Za-z0-9._-]+")
CFS_PERIOD_US = 100_000


# ----------------------------------------------------------------------------- discovery

@dataclass(frozen=True)
class CgroupSystem:
    """Where the cgroup hierarchies are mounted and where this process sits in them.

    Attributes
    ----------
    version: ``"v1"`` (v1 controllers, possibly with an empty v2 mount: hybrid), ``"v2"``
        (unified) or ``"none"``.
    v1: controller -> (mount point, mount root) of each v1 hierarchy.
    v2: (mount point, mount root) of the v2 hierarchy, if mounted.
    v2_controllers: controllers available in the v2 hierarchy.
    own: controller (``""`` for v2) -> this process's cgroup path.
    """

    version: str
    v1: Mapping[str, tuple[Path, str]] = field(default_factory=dict)
    v2: tuple[Path, str] | None = None
    v2_controllers: tuple[str, ...] = ()
    own: Mapping[str, str] = field(default_factory=dict)

    def v1_dir(self, controller: str, cgroup_path: str) -> Path | None:
        """The directory of ``cgroup_path`` (as in ``/proc/<pid>/cgroup``) in a v1 hierarchy."""
        if controller not in self.v1:
            return None
        mount, root = self.v1[controller]
        return _under(mount, root, cgroup_path)

    def v2_dir(self, cgroup_path: str) -> Path | None:
        """The directory of ``cgroup_path`` in the v2 hierarchy."""
        if self.v2 is None:
            return None
        mount, root = self.v2
        return _under(mount, root, cgroup_path)


def _under(mount: Path, root: str, cgroup_path: str) -> Path | None:
    root = root.rstrip("/") or "/"
    if root != "/" and not (cgroup_path == root or cgroup_path.startswith(root + "/")):
        return None  # the cgroup is outside the part of the hierarchy mounted here
    rel = cgroup_path[len(root):] if root != "/" else cgroup_path
    return mount / rel.lstrip("/")


def _proc_cgroups(pid: int | str = "self", proc: Path = Path("/proc")) -> dict[str, str]:
    """controller -> path from ``/proc/<pid>/cgroup`` (``""`` is the v2 entry)."""
    out: dict[str, str] = {}
    try:
        text = (proc / str(pid) / "cgroup").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            out[""] = path
        for c in controllers.split(","):
            if c:
                out[c] = path
    return out


def detect(proc: Path = Path("/proc")) -> CgroupSystem:
    """Read ``/proc/self/mountinfo`` and ``/proc/self/cgroup``: which cgroup version and where."""
    v1: dict[str, tuple[Path, str]] = {}
    v2: tuple[Path, str] | None = None
    try:
        mountinfo = (proc / "self" / "mountinfo").read_text()
    except OSError:
        mountinfo = ""
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields_l = left.split()
        fields_r = right.split()
        if len(fields_l) < 5 or len(fields_r) < 3:
            continue
        root, mount_point = _unescape(fields_l[3]), Path(_unescape(fields_l[4]))
        fstype, super_opts = fields_r[0], fields_r[2]
        if fstype == "cgroup2":
            if v2 is None or str(mount_point) == "/sys/fs/cgroup":
                v2 = (mount_point, root)
        elif fstype == "cgroup":
            for opt in super_opts.split(","):
                if opt in V1_CONTROLLERS and opt not in v1:
                    v1[opt] = (mount_point, root)
    v2_controllers: tuple[str, ...] = ()
    if v2 is not None:
        try:
            v2_controllers = tuple((v2[0] / "cgroup.controllers").read_text().split())
        except OSError:
            v2_controllers = ()
    own = _proc_cgroups("self", proc)
    if v1:
        version = "v1"
    elif v2 is not None:
        version = "v2"
    else:
        version = "none"
    return CgroupSystem(version=version, v1=v1, v2=v2, v2_controllers=v2_controllers, own=own)


def _unescape(s: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def cgroup_version(system: CgroupSystem | None = None) -> str:
    """``"v1"``, ``"v2"``, ``"hybrid"`` (v1 controllers plus a v2 mount) or ``"none"``."""
    s = system or detect()
    if s.version == "v1" and s.v2 is not None:
        return "hybrid"
    return s.version


def describe(system: CgroupSystem | None = None) -> dict[str, Any]:
    """This machine's cgroup set-up, for provenance: version, mounts, this process's
    cgroups, and whether benchlib can create limited cgroups here (and why not)."""
    s = system or detect()
    info: dict[str, Any] = {"version": cgroup_version(s)}
    if s.v1:
        info["v1_controllers"] = sorted(s.v1)
    if s.v2 is not None:
        info["v2_mount"] = str(s.v2[0])
        info["v2_controllers"] = list(s.v2_controllers)
    info["own"] = {k or "unified": v for k, v in s.own.items() if k in ("", *V1_CONTROLLERS)}
    bases = _base_dirs(s)
    writable = {c or "unified": os.access(d.parent, os.W_OK) for c, d in bases.items()}
    info["writable"] = writable
    if s.version == "none":
        info["limits"] = "not enforced: no cgroup file system is mounted"
    elif not any(writable.values()):
        info["limits"] = "not enforced: the cgroup directories are not writable (run as root, or in a delegated cgroup)"
    else:
        info["limits"] = f"enforceable (cgroup {s.version})"
    return info


def parse_cpu_list(text: str) -> list[int]:
    """``"0-2,5"`` -> ``[0, 1, 2, 5]``."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def _read(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _why(exc: OSError) -> str:
    return f"{exc.strerror or exc} ({errno.errorcode.get(exc.errno or 0, exc.errno)})"


# ----------------------------------------------------------------------------- read-back

def read_limits_with(version: str, read: Callable[[str, str], str | None]) -> dict[str, Any]:
    """Read CPU set, CPU quota, memory cap and swap from a cgroup.

    Parameters
    ----------
    version: ``"v1"`` or ``"v2"``.
    read: ``read(controller, file_name) -> text or None``; for v2 the controller is ignored.
        This lets the same code read host files, or files inside a container (``docker exec``).

    Returns
    -------
    dict
        ``cpus`` (list or ``None``), ``cpu_quota`` (CPUs or ``None``), ``memory_mb`` (MiB or
        ``None``), ``swap`` (``"disabled"``, ``"allowed"`` or ``None`` when unknown) and
        ``read`` (the files that could be read).
    """
    out: dict[str, Any] = {"cpus": None, "cpu_quota": None, "memory_mb": None, "swap": None}
    got: list[str] = []
    if version == "v1":
        cpus = read("cpuset", "cpuset.cpus")
        quota = read("cpu", "cpu.cfs_quota_us")
        period = read("cpu", "cpu.cfs_period_us")
        mem = read("memory", "memory.limit_in_bytes")
        memsw = read("memory", "memory.memsw.limit_in_bytes")
        if cpus is not None:
            got.append("cpuset.cpus")
            out["cpus"] = parse_cpu_list(cpus)
        if quota is not None and period is not None:
            got.append("cpu.cfs_quota_us")
            q, p = int(quota), int(period)
            out["cpu_quota"] = round(q / p, 4) if q > 0 and p > 0 else None
        if mem is not None:
            got.append("memory.limit_in_bytes")
            m = int(mem)
            out["memory_mb"] = None if m >= _UNLIMITED_V1 else round(m / 2**20, 3)
            if memsw is not None:
                sw = int(memsw)
                out["swap"] = "disabled" if sw == m else "allowed"
    elif version == "v2":
        cpus = read("cpuset", "cpuset.cpus.effective") or read("cpuset", "cpuset.cpus")
        cpu_max = read("cpu", "cpu.max")
        mem = read("memory", "memory.max")
        swap = read("memory", "memory.swap.max")
        if cpus:
            got.append("cpuset.cpus.effective")
            out["cpus"] = parse_cpu_list(cpus)
        if cpu_max is not None:
            got.append("cpu.max")
            q_s, _, p_s = cpu_max.partition(" ")
            out["cpu_quota"] = None if q_s == "max" else round(int(q_s) / int(p_s or CFS_PERIOD_US), 4)
        if mem is not None:
            got.append("memory.max")
            out["memory_mb"] = None if mem == "max" else round(int(mem) / 2**20, 3)
        if swap is not None:
            out["swap"] = "disabled" if swap == "0" else "allowed"
    if isinstance(out["memory_mb"], float) and out["memory_mb"].is_integer():
        out["memory_mb"] = int(out["memory_mb"])
    out["read"] = got
    return out


def read_limits(pid: int, *, system: CgroupSystem | None = None, proc: Path = Path("/proc")) -> dict[str, Any]:
    """The limits of process ``pid``'s cgroups, read from the host's cgroup files.

    Returns :func:`read_limits_with`'s dictionary plus ``cgroup`` (``v1``/``v2``) and
    ``cgroup_path`` (the memory cgroup's path), or ``{"error": why}`` when the process or
    its cgroup files cannot be read.
    """
    s = system or detect(proc)
    paths = _proc_cgroups(pid, proc)
    if not paths:
        return {"error": f"cannot read {proc}/{pid}/cgroup (no such process, or another pid namespace)"}
    if s.version == "v1":
        def read(controller: str, name: str) -> str | None:
            p = paths.get(controller)
            d = s.v1_dir(controller, p) if p is not None else None
            return _read(d / name) if d is not None else None

        out = read_limits_with("v1", read)
        out.update(cgroup="v1", cgroup_path=paths.get("memory"))
    elif s.version == "v2":
        d = s.v2_dir(paths.get("", "/"))

        def read2(_controller: str, name: str) -> str | None:
            return _read(d / name) if d is not None else None

        out = read_limits_with("v2", read2)
        out.update(cgroup="v2", cgroup_path=paths.get(""))
    else:
        return {"error": "no cgroup file system is mounted"}
    if not out["read"]:
        return {"error": f"the cgroup files of pid {pid} are not readable here", **out}
    return out


def compare_limits(requested: Limits, cpus: Sequence[int], read_back: Mapping[str, Any], version: str,
             reasons: Mapping[str, str] | None = None, mechanism: str | None = None) -> dict[str, Any]:
    """Compare what was asked with what was read back; the ``enforced`` dictionary.

    Parameters
    ----------
    requested: the limits asked for.
    cpus: the CPUs asked for (empty: no CPU set requested).
    read_back: :func:`read_limits_with`'s result.
    version: ``v1`` / ``v2``.
    reasons: per-limit (``cpuset``, ``cpu``, ``memory``) reasons why a limit could not be set.
    mechanism: text in the "enforced (...)" phrases, default ``cgroup <version>``.
    """
    reasons = dict(reasons or {})
    mech = mechanism or f"cgroup {version}"
    out: dict[str, Any] = {
        "cgroup": version,
        "cpus": read_back.get("cpus"),
        "cpu_quota": read_back.get("cpu_quota"),
        "memory_mb": read_back.get("memory_mb"),
        "swap": read_back.get("swap"),
    }
    # CPU set
    if not cpus:
        out["cpuset"] = "no CPU set requested"
    elif "cpuset" in reasons:
        out["cpuset"] = f"not enforced: {reasons['cpuset']}"
    elif out["cpus"] is None:
        out["cpuset"] = "not enforced: cpuset.cpus could not be read back"
    elif sorted(out["cpus"]) == sorted(set(cpus)):
        out["cpuset"] = f"enforced ({mech})"
    else:
        out["cpuset"] = f"not enforced: asked for CPUs {sorted(set(cpus))}, cpuset reads {out['cpus']}"
    # CPU quota
    if requested.cpus is None:
        out["cpu"] = "no limit requested" if out["cpu_quota"] is None else f"quota {out['cpu_quota']} CPUs (not requested)"
    elif "cpu" in reasons:
        out["cpu"] = f"not enforced: {reasons['cpu']}"
    elif out["cpu_quota"] is not None and abs(out["cpu_quota"] - requested.cpus) <= 0.011 * requested.cpus:
        out["cpu"] = f"enforced ({mech} CFS quota)"
    else:
        out["cpu"] = f"not enforced: asked for {requested.cpus} CPUs, the quota reads {out['cpu_quota']}"
    # memory
    if requested.memory_mb is None:
        out["memory"] = "no limit requested" if out["memory_mb"] is None else f"cap {out['memory_mb']} MiB (not requested)"
    elif "memory" in reasons:
        out["memory"] = f"not enforced: {reasons['memory']}"
    elif out["memory_mb"] is not None and abs(out["memory_mb"] - requested.memory_mb) < 1:
        out["memory"] = f"enforced ({mech})"
    else:
        out["memory"] = f"not enforced: asked for {requested.memory_mb} MiB, the cap reads {out['memory_mb']}"
    return out


# ----------------------------------------------------------------------------- the handle

class CpuCounter:
    """The CPU time of one cgroup, read straight from its file (a few µs a read: fit for slice
    boundaries 50 ms apart); :meth:`read_ns` is ``None`` once the file is gone."""

    def __init__(self, path: Path, v2: bool) -> None:
        self.path = path
        self.v2 = v2

    def read_ns(self) -> int | None:
        try:
            text = self.path.read_text()
        except OSError:
            return None
        if self.v2:
            m = re.search(r"^usage_usec (\d+)", text, re.M)
            return int(m.group(1)) * 1000 if m else None
        return int(text) if text.strip() else None


def cpu_counter_of_pid(pid: int, *, system: CgroupSystem | None = None,
                       proc: Path = Path("/proc")) -> CpuCounter | None:
    """The CPU counter of the cgroup ``pid`` lives in (v2 ``cpu.stat``, v1 ``cpuacct.usage``), or
    ``None`` when it cannot be read. The caller knows whether that cgroup is the process's own
    (a container's, a service's benchlib made) or one shared with others."""
    system = system or detect(proc)
    groups = _proc_cgroups(pid, proc)
    if "" in groups and system.v2 is not None:
        d = system.v2_dir(groups[""])
        if d is not None and (d / "cpu.stat").exists():
            return CpuCounter(d / "cpu.stat", v2=True)
    if "cpuacct" in groups:
        d = system.v1_dir("cpuacct", groups["cpuacct"])
        if d is not None and (d / "cpuacct.usage").exists():
            return CpuCounter(d / "cpuacct.usage", v2=False)
    return None


def _clean_name(name: str) -> str:
    cleaned = _NAME_OK.sub("-", name).strip(".-") or "service"
    return cleaned[:100]


@dataclass
class CgroupHandle:
    """One service instance's cgroup(s). Create it with :func:`create`.

    Attributes
    ----------
    name: the cgroup's leaf name.
    version: ``v1``, ``v2`` or ``none``.
    limits: the limits asked for.
    cpus: the CPUs asked for.
    dirs: controller -> directory that was created (v2: key ``""``).
    reasons: limit (``cpuset``, ``cpu``, ``memory``, ``all``) -> why it is not enforced.
    """

    name: str
    version: str
    limits: Limits
    cpus: tuple[int, ...]
    dirs: dict[str, Path] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    _removed: bool = False

    # -- adding processes

    def _procs_files(self) -> list[Path]:
        return [d / "cgroup.procs" for d in self.dirs.values()]

    def add(self, pid: int) -> None:
        """Move process ``pid`` (all its threads) into this cgroup; its later children follow.

        A controller that refuses is recorded in :attr:`reasons` (and shows in
        :meth:`enforced`), never raised: a service runs with or without its limits.
        """
        for controller, d in list(self.dirs.items()):
            try:
                _write(d / "cgroup.procs", str(pid))
            except OSError as exc:
                key = {"memory": "memory", "cpu": "cpu", "cpuset": "cpuset"}.get(controller, "all")
                if controller in ("", "cpuacct"):
                    key = "all" if controller == "" else "cpuacct"
                self.reasons[key] = f"adding pid {pid} to {d} failed: {_why(exc)}"

    def preexec(self) -> Callable[[], None]:
        """A ``preexec_fn`` for :class:`subprocess.Popen` that puts the child into this cgroup
        before it runs the service, so no early child process escapes the limits. Errors are
        ignored there; :meth:`enforced` reads back what really happened."""
        files = [str(p) for p in self._procs_files()]

        def _enter() -> None:
            for f in files:
                try:
                    fd = os.open(f, os.O_WRONLY)
                    try:
                        os.write(fd, b"0")
                    finally:
                        os.close(fd)
                except OSError:
                    pass

        return _enter

    def pids(self) -> list[int]:
        """Processes now in the cgroup (from the first hierarchy)."""
        for d in self.dirs.values():
            text = _read(d / "cgroup.procs")
            if text is not None:
                return [int(x) for x in text.split()]
        return []

    # -- reading

    def _file(self, controller: str, name: str) -> str | None:
        d = self.dirs.get("" if self.version == "v2" else controller)
        return _read(d / name) if d is not None else None

    def enforced(self) -> dict[str, Any]:
        """What is enforced, as read back from the cgroup files (see the module docstring)."""
        if self.version == "none" or not self.dirs:
            why = self.reasons.get("all", "no cgroup could be created")
            return {
                "cgroup": None, "cpus": None, "cpu_quota": None, "memory_mb": None, "swap": None,
                "cpuset": "no CPU set requested" if not self.cpus else f"not enforced: {why}",
                "cpu": "no limit requested" if self.limits.cpus is None else f"not enforced: {why}",
                "memory": "no limit requested" if self.limits.memory_mb is None else f"not enforced: {why}",
            }
        back = read_limits_with(self.version, self._file)
        out = compare_limits(self.limits, self.cpus, back, self.version, self.reasons)
        key = "" if self.version == "v2" else "memory"
        d = self.dirs.get(key) or next(iter(self.dirs.values()))
        out["cgroup_path"] = str(d)
        return out

    def oom_kill_count(self) -> int:
        """How many processes the memory cap's OOM killer killed in this cgroup."""
        if self.version == "v2":
            text = self._file("memory", "memory.events") or ""
        else:
            text = self._file("memory", "memory.oom_control") or ""
        m = re.search(r"^oom_kill (\d+)", text, re.M)
        return int(m.group(1)) if m else 0

    def oom_killed(self) -> bool:
        """``True`` when the memory cap's OOM killer killed a process of this cgroup."""
        return self.oom_kill_count() > 0

    def cpu_usage_ns(self) -> int | None:
        """CPU time used by the cgroup's processes so far, in nanoseconds (``None``: unknown)."""
        if self.version == "v2":
            m = re.search(r"^usage_usec (\d+)", self._file("cpu", "cpu.stat") or "", re.M)
            return int(m.group(1)) * 1000 if m else None
        text = self._file("cpuacct", "cpuacct.usage")
        return int(text) if text else None

    def memory_current_bytes(self) -> int | None:
        """Memory charged to the cgroup now, in bytes."""
        text = self._file("memory", "memory.current" if self.version == "v2" else "memory.usage_in_bytes")
        return int(text) if text else None

    def memory_peak_bytes(self) -> int | None:
        """The most memory charged to the cgroup, in bytes (v2 needs Linux >= 5.19)."""
        text = self._file("memory", "memory.peak" if self.version == "v2" else "memory.max_usage_in_bytes")
        return int(text) if text else None

    # -- removal

    def remove(self, timeout_s: float = 5.0) -> None:
        """Remove the cgroup directories (after the processes in them have exited).

        Waits up to ``timeout_s`` seconds for exiting processes; a cgroup that still holds
        processes then is left for :func:`sweep`. Safe to call twice.
        """
        if self._removed:
            return
        deadline = time.monotonic() + timeout_s
        for d in list(self.dirs.values()):
            _rmdir_when_empty(d, max(0.0, deadline - time.monotonic()))
        self._removed = True

    def __enter__(self) -> CgroupHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def _base_dirs(system: CgroupSystem) -> dict[str, Path]:
    """controller -> ``<own cgroup>/benchlib`` directory for each usable hierarchy."""
    out: dict[str, Path] = {}
    if system.version == "v1":
        for c in V1_CONTROLLERS:
            d = system.v1_dir(c, system.own.get(c, "/"))
            if d is not None:
                out[c] = d / "benchlib"
    elif system.version == "v2":
        d = system.v2_dir(system.own.get("", "/"))
        if d is not None:
            out[""] = d / "benchlib"
    return out


def create(name: str, limits: Limits, cpus: Sequence[int] = (), *,
           system: CgroupSystem | None = None) -> CgroupHandle:
    """Create a cgroup for one service instance and write ``limits`` and ``cpus`` into it.

    Parameters
    ----------
    name: a name unique to the instance (e.g. ``<run_id>-<service>-<port>``); characters
        other than ``[A-Za-z0-9._-]`` are replaced.
    limits: memory cap (``memory_mb``) and CPU quota (``cpus``); ``None`` fields are left
        unlimited (the cgroup still measures CPU and memory use).
    cpus: CPU ids for ``cpuset.cpus`` (empty: inherit).
    system: the cgroup layout (default: :func:`detect`); tests pass a fake tree.

    Returns
    -------
    CgroupHandle
        Always; limits that could not be written are reported by :meth:`CgroupHandle.enforced`
        as ``"not enforced: <why>"``. Put processes in with :meth:`~CgroupHandle.add` or
        :meth:`~CgroupHandle.preexec`; call :meth:`~CgroupHandle.remove` after they exit.
    """
    s = system or detect()
    leaf = f"{_clean_name(name)}.p{os.getpid()}"  # the owner's pid: sweep() spares live owners
    handle = CgroupHandle(name=leaf, version=s.version, limits=limits, cpus=tuple(sorted(set(cpus))))
    if s.version == "none":
        handle.reasons["all"] = "no cgroup file system is mounted"
        return handle
    bases = _base_dirs(s)
    if not bases:
        handle.reasons["all"] = "this process's cgroup is outside the mounted cgroup file system"
        return handle
    if s.version == "v1":
        _create_v1(handle, bases)
    else:
        _create_v2(handle, bases[""], s)
    return handle


def _mkdir(d: Path) -> None:
    try:
        d.mkdir()
    except FileExistsError:
        pass


def _create_v1(h: CgroupHandle, bases: Mapping[str, Path]) -> None:
    for controller, base in bases.items():
        d = base / h.name
        try:
            _mkdir(base)
            if controller == "cpuset":
                _init_cpuset_v1(base)
            _mkdir(d)
        except OSError as exc:
            why = f"cannot create {d}: {_why(exc)}"
            h.reasons.setdefault({"cpuacct": "cpuacct"}.get(controller, controller), why)
            continue
        h.dirs[controller] = d
        try:
            if controller == "memory":
                _init_memory_v1(d, h.limits)
            elif controller == "cpu":
                _init_cpu_v1(d, h.limits)
            elif controller == "cpuset":
                _init_cpuset_v1(d, h.cpus)
        except OSError as exc:
            h.reasons[controller] = f"writing limits in {d} failed: {_why(exc)}"
    if "cpuset" not in h.dirs and "cpuset" in bases:
        pass  # reason already recorded
    for needed in ("memory", "cpu", "cpuset"):
        if needed not in bases:
            h.reasons.setdefault(needed, f"the {needed} controller is not mounted")


def _init_cpuset_v1(d: Path, cpus: Sequence[int] | None = None) -> None:
    """A new v1 cpuset cgroup is empty (no CPUs, no memory nodes) until both are written."""
    parent = d.parent
    if not (_read(d / "cpuset.mems") or ""):
        _write(d / "cpuset.mems", _read(parent / "cpuset.mems") or "0")
    want = ",".join(str(c) for c in cpus) if cpus else (_read(parent / "cpuset.cpus") or "")
    if want and (cpus or not (_read(d / "cpuset.cpus") or "")):
        _write(d / "cpuset.cpus", want)


def _init_memory_v1(d: Path, limits: Limits) -> None:
    if limits.memory_mb is None:
        return
    limit = str(int(limits.memory_mb * 2**20))
    memsw = d / "memory.memsw.limit_in_bytes"
    # memsw must stay >= the memory limit: raise the memory limit first when lowering memsw
    # would fail, and the other way round.
    try:
        _write(d / "memory.limit_in_bytes", limit)
        if memsw.exists():
            _write(memsw, limit)
    except OSError:
        if memsw.exists():
            _write(memsw, limit)
        _write(d / "memory.limit_in_bytes", limit)


def _init_cpu_v1(d: Path, limits: Limits) -> None:
    if limits.cpus is None:
        return
    _write(d / "cpu.cfs_period_us", str(CFS_PERIOD_US))
    _write(d / "cpu.cfs_quota_us", str(max(1000, int(round(limits.cpus * CFS_PERIOD_US)))))


def _create_v2(h: CgroupHandle, base: Path, s: CgroupSystem) -> None:
    wanted = [c for c in V2_CONTROLLERS if c in s.v2_controllers]
    missing = [c for c in V2_CONTROLLERS if c not in s.v2_controllers]
    for c in missing:
        h.reasons[c] = (f"the {c} controller is not available in the v2 hierarchy "
                        f"(it may be bound to a v1 hierarchy; {base.parent}/cgroup.controllers)")
    d = base / h.name
    try:
        _mkdir(base)
        for parent in (base.parent, base):
            enable = " ".join(f"+{c}" for c in wanted)
            if enable:
                try:
                    _write(parent / "cgroup.subtree_control", enable)
                except OSError as exc:
                    if exc.errno == errno.EBUSY:
                        raise OSError(exc.errno, (
                            f"{parent} holds processes, so cgroup v2 does not let it delegate controllers "
                            f"(no internal processes rule); run benchlib in a delegated cgroup, e.g. "
                            f"`systemd-run --user --scope -p Delegate=yes benchlib ...`")) from None
                    raise
        _mkdir(d)
    except OSError as exc:
        why = exc.strerror if exc.errno == errno.EBUSY else f"cannot set up {d}: {_why(exc)}"
        for c in wanted:
            h.reasons.setdefault(c, why)
        h.reasons.setdefault("all", why)
        if not d.is_dir():
            return
    h.dirs[""] = d
    try:
        if h.limits.memory_mb is not None and "memory" in wanted:
            _write(d / "memory.max", str(int(h.limits.memory_mb * 2**20)))
            if (d / "memory.swap.max").exists():
                _write(d / "memory.swap.max", "0")
    except OSError as exc:
        h.reasons["memory"] = f"writing memory.max in {d} failed: {_why(exc)}"
    try:
        if h.limits.cpus is not None and "cpu" in wanted:
            quota = max(1000, int(round(h.limits.cpus * CFS_PERIOD_US)))
            _write(d / "cpu.max", f"{quota} {CFS_PERIOD_US}")
    except OSError as exc:
        h.reasons["cpu"] = f"writing cpu.max in {d} failed: {_why(exc)}"
    try:
        if h.cpus and "cpuset" in wanted:
            _write(d / "cpuset.cpus", ",".join(str(c) for c in h.cpus))
    except OSError as exc:
        h.reasons["cpuset"] = f"writing cpuset.cpus in {d} failed: {_why(exc)}"


# ----------------------------------------------------------------------------- sweep

def _owner_pid(d: Path) -> int | None:
    """The pid of the process that created cgroup ``d`` (its ``.p<pid>`` suffix)."""
    m = re.search(r"\.p(\d+)$", d.name)
    return int(m.group(1)) if m else None


def _leaf_dirs(system: CgroupSystem) -> list[Path]:
    out: list[Path] = []
    for base in _base_dirs(system).values():
        try:
            out.extend(p for p in base.iterdir() if p.is_dir())
        except OSError:
            continue
    return out


def _kill_members(d: Path, timeout_s: float) -> None:
    """SIGKILL every process in cgroup ``d`` (``cgroup.kill`` where the kernel has it), until
    it is empty or ``timeout_s`` seconds have passed."""
    import signal

    kill_file = d / "cgroup.kill"
    deadline = time.monotonic() + timeout_s
    while True:
        pids = [int(x) for x in (_read(d / "cgroup.procs") or "").split()]
        if not pids or time.monotonic() > deadline:
            return
        try:
            if kill_file.exists():
                _write(kill_file, "1")
            else:
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        except OSError:
            return
        time.sleep(0.05)


def kill_owned_by(owner_pid: int, system: CgroupSystem | None = None, *, timeout_s: float = 5.0) -> list[str]:
    """Kill the processes in the cgroups that process ``owner_pid`` created (the services it
    started) and remove those cgroups: for an owner that was killed before it could stop them.

    Returns
    -------
    list[str]
        The directories removed.
    """
    s = system or detect()
    removed: list[str] = []
    for d in _leaf_dirs(s):
        if _owner_pid(d) != owner_pid:
            continue
        _kill_members(d, timeout_s)
        if _rmdir_when_empty(d, timeout_s):
            removed.append(str(d))
    return removed


def _rmdir_when_empty(d: Path, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            d.rmdir()
            return True
        except FileNotFoundError:
            return False
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                return False
            time.sleep(0.05)


def sweep(system: CgroupSystem | None = None, *, min_age_s: float = 600.0, kill_orphans: bool = False) -> list[str]:
    """Remove leftover, empty ``benchlib/<name>`` cgroups below this process's cgroups
    (left by a killed run). Cgroups that still hold processes are kept, and so are empty
    ones whose creating process is alive and that are younger than ``min_age_s`` seconds
    (another benchlib process may be about to start a service in them).

    With ``kill_orphans``, the processes in cgroups whose creating process is gone (services
    that outlived a killed run) are killed first, and those cgroups removed too.

    Returns
    -------
    list[str]
        The directories removed.
    """
    s = system or detect()
    removed: list[str] = []
    for d in _leaf_dirs(s):
        owner = _owner_pid(d)
        own = owner == os.getpid()
        other_alive = owner is not None and not own and Path(f"/proc/{owner}").exists()
        owner_gone = owner is not None and not own and not other_alive
        if (_read(d / "cgroup.procs") or "").strip():
            if not (kill_orphans and owner_gone):
                continue
            _kill_members(d, 5.0)
        if other_alive:
            try:
                if time.time() - d.stat().st_mtime < min_age_s:
                    continue
            except OSError:
                continue
        if _rmdir_when_empty(d, 2.0 if kill_orphans else 0.0):
            removed.append(str(d))
    return removed
