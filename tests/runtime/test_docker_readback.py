"""Where a container's limits are read back from, and what is said when they cannot be: unit
tests of the decision with a fake container (the reads themselves, against a real engine, are in
``test_docker.py``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from benchlib.core.model import Limits
from benchlib.runtime.docker.readback import read_enforced


class _RefusingApi:
    def exec_create(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("exec refused: no shell in the image")


def _container(pid: int = 0) -> Any:
    attrs = {"HostConfig": {"CpusetCpus": "1", "NanoCpus": 500_000_000, "Memory": 256 * 2**20,
                            "MemorySwap": 256 * 2**20, "NetworkMode": "host"},
             "State": {"Pid": pid}, "Image": "sha256:abc"}
    return SimpleNamespace(attrs=attrs, id="0123456789abcdef", short_id="0123456789", reload=lambda: None,
                           client=SimpleNamespace(api=_RefusingApi()))


def test_an_exec_refused_leaves_the_engine_configuration_and_says_why() -> None:
    out = read_enforced(_container(), Limits(cpus=0.5, memory_mb=256), (1,), cgroup_version="v2",
                        readback="exec", local_engine=True)
    assert out["source"] == "engine configuration only" and out["cgroup"] == "v2"
    assert out["cpus"] is None and out["memory_mb"] is None
    assert out["cpuset"] == "not verified: configured 1, not read back (exec: exec refused: no shell in the image)"
    assert out["host_config"]["nano_cpus"] == 500_000_000 and out["container"] == "0123456789"
    assert out["runtime"] == "docker" and out["image"] == "sha256:abc"


def test_host_files_are_read_only_on_the_engines_machine() -> None:
    out = read_enforced(_container(pid=1), Limits(), (1,), cgroup_version="v1", readback="host", local_engine=False)
    assert out["source"] == "engine configuration only" and out["cgroup"] == "v1"
    assert out["memory"] == f"not verified: configured {256 * 2**20} bytes, not read back (no read-back possible)"
