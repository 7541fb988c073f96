"""Cgroup limits for local processes, for real against this machine's cgroups (v1 or v2),
plus the parsing and v2 write logic on a fake cgroup tree (pure logic)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchlib.core.model import Limits
from benchlib.runtime import cgroups


def _enforceable() -> str | None:
    info = cgroups.describe()
    return None if info["limits"].startswith("enforceable") else info["limits"]


real = pytest.mark.skipif(_enforceable() is not None, reason=f"cgroups not writable here: {_enforceable()}")


# ----------------------------------------------------------------------------- pure parsing

def test_parse_cpu_list() -> None:
    assert cgroups.parse_cpu_list("0-2,5") == [0, 1, 2, 5]
    assert cgroups.parse_cpu_list("1\n") == [1]
    assert cgroups.parse_cpu_list("") == []


def test_read_limits_with_v1_and_v2_values() -> None:
    v1 = {("cpuset", "cpuset.cpus"): "1", ("cpu", "cpu.cfs_quota_us"): "50000",
          ("cpu", "cpu.cfs_period_us"): "100000", ("memory", "memory.limit_in_bytes"): str(256 * 2**20),
          ("memory", "memory.memsw.limit_in_bytes"): str(256 * 2**20)}
    got = cgroups.read_limits_with("v1", lambda c, n: v1.get((c, n)))
    assert (got["cpus"], got["cpu_quota"], got["memory_mb"], got["swap"]) == ([1], 0.5, 256, "disabled")
    unlimited = {**v1, ("cpu", "cpu.cfs_quota_us"): "-1", ("memory", "memory.limit_in_bytes"): "9223372036854771712"}
    got = cgroups.read_limits_with("v1", lambda c, n: unlimited.get((c, n)))
    assert got["cpu_quota"] is None and got["memory_mb"] is None
    v2 = {"cpuset.cpus.effective": "0-1", "cpu.max": "150000 100000", "memory.max": "max", "memory.swap.max": "0"}
    got = cgroups.read_limits_with("v2", lambda c, n: v2.get(n))
    assert (got["cpus"], got["cpu_quota"], got["memory_mb"], got["swap"]) == ([0, 1], 1.5, None, "disabled")


def test_compare_limits_says_what_is_and_is_not_enforced() -> None:
    back = {"cpus": [1], "cpu_quota": 1.0, "memory_mb": 512, "swap": "disabled"}
    out = cgroups.compare_limits(Limits(cpus=1, memory_mb=512), (1,), back, "v1")
    assert out["cpuset"] == out["memory"] == "enforced (cgroup v1)"
    assert out["cpu"] == "enforced (cgroup v1 CFS quota)"
    wrong = cgroups.compare_limits(Limits(cpus=2, memory_mb=256), (0,), back, "v1")
    assert wrong["cpu"].startswith("not enforced: asked for 2")
    assert wrong["memory"].startswith("not enforced: asked for 256 MiB")
    assert wrong["cpuset"].startswith("not enforced: asked for CPUs [0]")
    refused = cgroups.compare_limits(Limits(memory_mb=64), (), back, "v1", {"memory": "EACCES"})
    assert refused["memory"] == "not enforced: EACCES" and refused["cpuset"] == "no CPU set requested"


# ----------------------------------------------------------------------------- nothing writable

def test_create_is_safe_without_any_cgroup_file_system() -> None:
    h = cgroups.create("x", Limits(cpus=1, memory_mb=64), [1], system=cgroups.CgroupSystem(version="none"))
    h.add(os.getpid())  # no-op, no error
    enforced = h.enforced()
    assert enforced["memory"] == "not enforced: no cgroup file system is mounted"
    assert enforced["cpu"].startswith("not enforced") and enforced["cpuset"].startswith("not enforced")
    assert h.oom_killed() is False and h.cpu_usage_ns() is None and h.memory_peak_bytes() is None
    h.remove()
    h.remove()


def test_create_reports_unwritable_hierarchies(tmp_path: Path) -> None:
    # The "mount" is a regular file: every mkdir below it fails, as on a read-only /sys/fs/cgroup.
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    system = cgroups.CgroupSystem(version="v1", v1={c: (blocker, "/") for c in cgroups.V1_CONTROLLERS},
                                  own={c: "/" for c in cgroups.V1_CONTROLLERS})
    h = cgroups.create("svc", Limits(cpus=0.5, memory_mb=64), [1], system=system)
    enforced = h.enforced()
    for key in ("memory", "cpu", "cpuset"):
        assert enforced[key].startswith("not enforced:"), enforced
    h.remove()


# ----------------------------------------------------------------------------- v2 logic on a fake tree

def test_v2_writes_limits_and_reads_them_back_on_a_fake_tree(tmp_path: Path) -> None:
    root = tmp_path / "cgroup2"
    leaf = root / "benchlib" / f"r1-svc-8080.p{os.getpid()}"
    leaf.mkdir(parents=True)
    for d in (root, root / "benchlib"):
        (d / "cgroup.subtree_control").write_text("")
    for name in ("memory.max", "memory.swap.max", "cpu.max", "cpuset.cpus", "cgroup.procs", "memory.events",
                 "cpu.stat", "memory.peak"):
        (leaf / name).write_text("")
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids")
    system = cgroups.CgroupSystem(version="v2", v2=(root, "/"), v2_controllers=("cpuset", "cpu", "memory"),
                                  own={"": "/"})
    h = cgroups.create("r1 svc 8080", Limits(cpus=1.5, memory_mb=128), [1], system=system)
    assert h.dirs == {"": leaf}
    assert (leaf / "memory.max").read_text() == str(128 * 2**20)
    assert (leaf / "memory.swap.max").read_text() == "0"
    assert (leaf / "cpu.max").read_text() == "150000 100000"
    assert (leaf / "cpuset.cpus").read_text() == "1"
    assert "+memory" in (root / "cgroup.subtree_control").read_text()
    enforced = h.enforced()
    assert (enforced["cgroup"], enforced["cpus"], enforced["cpu_quota"], enforced["memory_mb"]) == ("v2", [1], 1.5, 128)
    assert enforced["memory"] == "enforced (cgroup v2)" and enforced["swap"] == "disabled"
    (leaf / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    (leaf / "cpu.stat").write_text("usage_usec 2500\nuser_usec 2000\n")
    (leaf / "memory.peak").write_text(str(100 * 2**20))
    assert h.oom_killed() and h.cpu_usage_ns() == 2_500_000 and h.memory_peak_bytes() == 100 * 2**20


def test_v2_missing_controllers_are_named(tmp_path: Path) -> None:
    root = tmp_path / "unified"
    root.mkdir()
    (root / "cgroup.subtree_control").write_text("")
    system = cgroups.CgroupSystem(version="v2", v2=(root, "/"), v2_controllers=("hugetlb",), own={"": "/"})
    h = cgroups.create("svc", Limits(memory_mb=64), [], system=system)
    assert "memory controller is not available in the v2 hierarchy" in h.enforced()["memory"]


# ----------------------------------------------------------------------------- this machine, for real

def test_detect_finds_this_process_and_its_limits() -> None:
    system = cgroups.detect()
    assert cgroups.cgroup_version(system) in ("v1", "v2", "hybrid", "none")
    if system.version != "none":
        got = cgroups.read_limits(os.getpid(), system=system)
        assert got.get("cgroup") == system.version and got["read"], got


@real
def test_limits_are_written_and_read_back() -> None:
    with cgroups.create(f"pytest-limits-{os.getpid()}", Limits(cpus=0.5, memory_mb=64), [1]) as h:
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], preexec_fn=h.preexec())
        try:
            assert proc.pid in h.pids()
            enforced = h.enforced()
            assert enforced["cpus"] == [1] and enforced["cpu_quota"] == 0.5 and enforced["memory_mb"] == 64, enforced
            assert enforced["memory"].startswith("enforced") and enforced["cpu"].startswith("enforced")
            assert enforced["cpuset"].startswith("enforced")
            assert os.sched_getaffinity(proc.pid) == {1}
            # read_limits (the Docker runtime's path) sees the same through /proc/<pid>/cgroup
            via_pid = cgroups.read_limits(proc.pid)
            assert (via_pid["cpus"], via_pid["cpu_quota"], via_pid["memory_mb"]) == ([1], 0.5, 64)
        finally:
            proc.kill()
            proc.wait()
    assert not any(d.exists() for d in h.dirs.values())


@real
def test_memory_cap_kills_and_is_reported_as_oom() -> None:
    with cgroups.create(f"pytest-oom-{os.getpid()}", Limits(memory_mb=48), []) as h:
        proc = subprocess.run([sys.executable, "-c", "x = bytearray(300 * 2**20); print(len(x))"],
                              preexec_fn=h.preexec(), capture_output=True, timeout=60)
        assert proc.returncode == -9, proc
        assert h.oom_killed() and h.oom_kill_count() >= 1
        peak = h.memory_peak_bytes()
        assert peak is not None and 40 * 2**20 <= peak <= 48 * 2**20


@real
def test_cpu_quota_bounds_cpu_time() -> None:
    with cgroups.create(f"pytest-cpu-{os.getpid()}", Limits(cpus=0.25), [1]) as h:
        busy = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 1.2: pass"
        proc = subprocess.Popen([sys.executable, "-c", busy])
        h.add(proc.pid)
        t0 = h.cpu_usage_ns() or 0
        start = time.monotonic()
        proc.wait(timeout=30)
        wall_s = time.monotonic() - start
        used_s = ((h.cpu_usage_ns() or 0) - t0) / 1e9
        # A quota of 0.25 CPU: at most ~a quarter of the wall time (+ one period of slack).
        assert 0 < used_s <= 0.25 * wall_s + 0.15, (used_s, wall_s)


@real
def test_sweep_removes_empty_leftovers_only() -> None:
    left = cgroups.create(f"pytest-left-{os.getpid()}", Limits(memory_mb=64), [])
    busy = cgroups.create(f"pytest-busy-{os.getpid()}", Limits(memory_mb=64), [])
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], preexec_fn=busy.preexec())
    try:
        removed = cgroups.sweep()
        assert str(left.dirs["memory"]) in removed
        assert busy.dirs["memory"].is_dir()
    finally:
        proc.kill()
        proc.wait()
        busy.remove()
        left.remove()
