"""Study 00, the quickstart: is Go's net/http faster than Python's aiohttp here? What is its own
in ``notebooks/00_quickstart.ipynb``: two hello-world services, one closed-model load, every
arm against Python in one Holm family (stored as ``derived/comparison.json``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from benchlib.analysis.params import Runtime, StudyParameters
from benchlib.analysis.planned import StudyDesign
from benchlib.analysis.questions import Family
from benchlib.core.model import Arm, Condition, Experiment, LoadSpec

__all__ = ["ARMS", "BASELINE", "METRICS", "Parameters", "STUDY", "design"]

STUDY = "00_quickstart"
BASELINE = "python-aiohttp"
ARMS: tuple[Arm, ...] = (Arm(BASELINE, "python-aiohttp-hello"), Arm("go-nethttp", "go-nethttp-hello"))
METRICS: tuple[str, ...] = ("p50_ms", "p99_ms", "throughput_rps")


@dataclass(frozen=True, kw_only=True)
class Parameters(StudyParameters):
    """The quickstart's parameters (its notebook's ``parameters`` cell).

    Attributes
    ----------
    runtime: ``local`` (processes) or ``docker`` (containers).
    duration_s, warmup_s: measured and warm-up seconds per trial; ``0``: the design's.
    connections: keep-alive connections of the closed model.
    """

    runtime: Runtime = "local"
    duration_s: float = 0.0
    warmup_s: float = 0.0
    connections: int = 16

    #: chosen by the planner (docs/statistics.md) from a 10 x 10 s pilot; full: the former scale
    DEFAULT_DESIGN: ClassVar[Mapping[str, Any]] = {"trials": 10, "duration_s": 1.0, "warmup_s": 0.5}
    FULL_DESIGN: ClassVar[Mapping[str, Any]] = {"trials": 10, "duration_s": 10.0, "warmup_s": 2.0}


def design(p: Parameters) -> StudyDesign:
    """Both services under ``p.connections`` keep-alive connections for ``p.trials`` blocks, and
    the one question: Go against Python on p50, p99 and throughput."""
    experiment = Experiment(
        study=STUDY, arms=ARMS, trials=p.trials, seed=p.seed, runtime=p.runtime, cluster=p.cluster, baseline=BASELINE,
        conditions=(Condition("closed", LoadSpec(model="closed", connections=p.connections, duration_s=p.duration_s,
                                                 warmup_s=p.warmup_s)),))
    family = Family.against("all", BASELINE, [a.name for a in ARMS], conditions=["closed"], metrics=METRICS)
    return StudyDesign(experiment=experiment, families=(family,), one_table=True)
