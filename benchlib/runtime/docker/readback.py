"""The limits in force for a container, read back from its cgroup: the host's cgroup files when
the engine is on this machine, else the container's own through ``docker exec``; what was only
configured, never read back, is said so."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchlib.core.model import Limits
from benchlib.runtime import cgroups
from benchlib.runtime.docker.handle import _exec_output

__all__ = ["read_enforced"]


def read_enforced(container: Any, limits: Limits, cpus: tuple[int, ...] | list[int], *, cgroup_version: str,
                  readback: str, local_engine: bool) -> dict[str, Any]:
    """The limits in force for ``container``, read back from its cgroup (see
    :func:`benchlib.runtime.cgroups.compare_limits` for the keys), plus what was asked of
    the engine (``host_config``) and where the values were read (``source``).

    ``cgroup_version``: the engine's (``v2``, else v1); ``readback``: ``auto`` (the host's cgroup
    files when ``local_engine``, else ``exec``), ``host`` or ``exec`` (the setting of
    :class:`~benchlib.runtime.docker.docker_runtime.DockerRuntime`); ``local_engine``: the engine
    runs on this machine."""
    container.reload()
    hc = container.attrs.get("HostConfig", {})
    asked = {"cpuset_cpus": hc.get("CpusetCpus") or None, "nano_cpus": hc.get("NanoCpus") or None,
             "memory_bytes": hc.get("Memory") or None, "memory_swap_bytes": hc.get("MemorySwap") or None,
             "network_mode": hc.get("NetworkMode")}
    version = "v2" if cgroup_version == "v2" else "v1"
    back: dict[str, Any] = {}
    source = ""
    errors = []
    pid = int(container.attrs.get("State", {}).get("Pid") or 0)
    if readback in ("auto", "host") and pid and local_engine:
        got = cgroups.read_limits(pid)
        if "error" not in got and container.id[:12] in str(got.get("cgroup_path")):
            back, version = got, got["cgroup"]
            source = f"host cgroup files ({got.get('cgroup_path')})"
        else:
            errors.append(f"host: {got.get('error') or 'the process is not in the container cgroup'}")
    if not back and readback in ("auto", "exec"):
        try:
            back = cgroups.read_limits_with(version, _exec_reader(container, version))
            if back["read"]:
                source = "container cgroup files (docker exec)"
            else:
                errors.append("exec: no cgroup file readable inside the container")
                back = {}
        except Exception as exc:  # noqa: BLE001 - no shell/cat in the image, exec refused
            errors.append(f"exec: {str(exc).splitlines()[0][:200] if str(exc) else exc}")
    if back:
        out = cgroups.compare_limits(limits, tuple(cpus), back, version, mechanism=f"docker, cgroup {version}")
    else:
        why = "; ".join(errors) or "no read-back possible"
        out = {
            "cgroup": version, "cpus": None, "cpu_quota": None, "memory_mb": None, "swap": None,
            "cpuset": f"not verified: configured {asked['cpuset_cpus']}, not read back ({why})",
            "cpu": f"not verified: configured nano_cpus {asked['nano_cpus']}, not read back ({why})",
            "memory": f"not verified: configured {asked['memory_bytes']} bytes, not read back ({why})",
        }
        source = "engine configuration only"
    out.update(runtime="docker", source=source, container=container.short_id, host_config=asked,
               image=container.attrs.get("Image"))
    return out

def _exec_reader(container: Any, version: str) -> Callable[[str, str], str | None]:
    """A reader of ``(controller, file name)`` for :func:`benchlib.runtime.cgroups.read_limits_with`:
    the container's cgroup files, all read by one ``docker exec`` (``None`` for one not there)."""
    if version == "v2":
        names = ["cpuset.cpus.effective", "cpuset.cpus", "cpu.max", "memory.max", "memory.swap.max"]
        paths = {("", n): f"/sys/fs/cgroup/{n}" for n in names}
    else:
        pairs = [("cpuset", "cpuset.cpus"), ("cpu", "cpu.cfs_quota_us"), ("cpu", "cpu.cfs_period_us"),
                 ("memory", "memory.limit_in_bytes"), ("memory", "memory.memsw.limit_in_bytes")]
        paths = {(c, n): f"/sys/fs/cgroup/{c}/{n}" for c, n in pairs}
    script = 'for f in "$@"; do printf "==%s\\n" "$f"; cat "$f" 2>/dev/null; done'
    output = _exec_output(container, ["sh", "-c", script, "sh", *paths.values()])
    found: dict[str, str] = {}
    current = None
    for line in output.decode("utf-8", "replace").splitlines():
        if line.startswith("=="):
            current = line[2:]
            continue
        if current and line.strip():
            found[current] = (found.get(current, "") + line).strip()

    def read(controller: str, name: str) -> str | None:
        key = ("", name) if version == "v2" else (controller, name)
        path = paths.get(key)
        return found.get(path) if path else None

    return read
