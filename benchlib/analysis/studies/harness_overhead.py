"""Study 90, the harness overhead: does running the service in Docker change what we measure?
What is its own in ``notebooks/90_harness_overhead.ipynb``: one service as a local process, in
a container with the host's CPUs and in one with a 1-CPU quota, every arm against the local
one in one Holm family (stored as ``derived/comparison.json``); what each arm's cgroup really
enforced, and the Docker engine and image for the provenance.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from benchlib.analysis.params import StudyParameters, yes_no
from benchlib.analysis.planned import StudyDesign
from benchlib.analysis.questions import Family
from benchlib.core.model import Arm, Condition, Experiment, Limits, LoadSpec
from benchlib.store.results import Run

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["BASELINE", "METRICS", "Parameters", "STUDY", "design", "docker_markdown", "enforced_table"]

STUDY = "90_harness_overhead"
BASELINE = "local"
METRICS: tuple[str, ...] = ("p50_ms", "p99_ms", "throughput_rps")


@dataclass(frozen=True, kw_only=True)
class Parameters(StudyParameters):
    """Study 90's parameters (its notebook's ``parameters`` cell; the arms name their runtimes).

    Attributes
    ----------
    service: the service under test (any with a Dockerfile).
    duration_s, warmup_s: measured and warm-up seconds per trial; ``0``: the design's.
    connections: keep-alive connections of the closed model (the open model's most in flight).
    open_model: ``yes``: also the open model at ``open_rate_rps``; ``auto``: the design's.
    open_rate_rps: the open model's arrivals per second; ``0`` leaves it out.
    memory_mb: every arm's memory cap (MB).
    """

    service: str = "go-nethttp-hello"
    duration_s: float = 0.0
    warmup_s: float = 0.0
    connections: int = 16
    open_model: str = "auto"
    open_rate_rps: float = 2000.0
    memory_mb: int = 512

    #: the planner's (budget_min 4, target_mde 10, run 20261205-034000-0287 on a quiet machine:
    #: MDEs 4-8% where 9 blocks x 1 s left 8-16%; docs/statistics.md); full: the former scale
    DEFAULT_DESIGN: ClassVar[Mapping[str, Any]] = {"trials": 13, "duration_s": 0.5, "warmup_s": 0.5,
                                                   "open_model": "no"}
    FULL_DESIGN: ClassVar[Mapping[str, Any]] = {"trials": 10, "duration_s": 10.0, "warmup_s": 2.0,
                                                "open_model": "yes"}


def design(p: Parameters) -> StudyDesign:
    """The service as ``local``, ``docker-host`` and ``docker-1cpu`` (each capped at
    ``p.memory_mb``), under the closed model and, with ``open_model``, the open one; the one
    question: each container against the local process."""
    limits = Limits(memory_mb=p.memory_mb)
    arms = (Arm("local", p.service, runtime="local", limits=limits),
            Arm("docker-host", p.service, runtime="docker", limits=limits),
            Arm("docker-1cpu", p.service, runtime="docker", limits=Limits(cpus=1.0, memory_mb=p.memory_mb)))
    conditions = [Condition("closed", LoadSpec(model="closed", connections=p.connections, duration_s=p.duration_s,
                                               warmup_s=p.warmup_s))]
    if yes_no("open_model", p.open_model) and p.open_rate_rps > 0:
        conditions.append(Condition("open", LoadSpec(model="open", rate_rps=p.open_rate_rps, connections=p.connections,
                                                     duration_s=p.duration_s, warmup_s=p.warmup_s)))
    experiment = Experiment(study=STUDY, arms=arms, conditions=tuple(conditions), trials=p.trials, seed=p.seed,
                            runtime="local", cluster=p.cluster, baseline=BASELINE)
    family = Family.against("all", BASELINE, [a.name for a in arms], conditions=[c.name for c in conditions],
                            metrics=METRICS)
    return StudyDesign(experiment=experiment, families=(family,), one_table=True)


def enforced_table(run: Run) -> pd.DataFrame:
    """What each arm's service really ran with, read back from its cgroup files in every trial
    (one row per arm and distinct CPU set and memory cap): the CPU set, the CFS quota in CPUs,
    the memory cap (MB), swap, and where the values were read (a container's id elided)."""
    import pandas as pd

    rows = [{"arm": t.arm, "runtime": t.meta.get("runtime"),
             **{k: (t.meta.get("enforced") or {}).get(k) for k in
                ("cpus", "cpu_quota", "memory_mb", "swap", "cpu", "memory", "source")}}
            for t in run.trials if t.meta.get("enforced")]
    out = pd.DataFrame(rows, columns=["arm", "runtime", "cpus", "cpu_quota", "memory_mb", "swap", "cpu", "memory",
                                      "source"])
    out = out.drop_duplicates(subset=["arm", "cpu", "memory"])
    return out.assign(source=out["source"].fillna("cgroup files of the process").astype(str).map(
        lambda s: re.sub(r"\(/docker/[0-9a-f]+\)", "(/docker/<id>)", s)))


def docker_markdown(run: Run) -> str:
    """The Docker engine (version, API, storage driver, cgroup version and driver, endpoint,
    SDK) and each image's tag, id and pinned versions, as run.json recorded them ("" when
    no arm ran on Docker)."""
    info = run.record.runtimes["docker"].raw if "docker" in run.record.runtimes else {}
    if not info:
        return ""
    engine = info.get("engine") or {}
    lines = [f"- Docker engine {engine.get('version')} (API {engine.get('api_version')}), storage driver "
             f"{engine.get('storage_driver')}, cgroup {engine.get('cgroup_version')} ({engine.get('cgroup_driver')}), "
             f"endpoint `{info.get('endpoint')}`, {info.get('sdk')}"]
    lines += [f"- image of `{name}`: `{image.get('tag')}` ({image.get('image_id', '')[:19]}), versions "
              f"{image.get('versions')}" for name, image in (info.get("images") or {}).items()]
    return "\n".join(lines)
