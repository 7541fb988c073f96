"""A run's ``run.json`` as a typed, versioned record: :class:`RunRecord` (pure).

run.json is written and read only through :class:`RunRecord`
(:meth:`benchlib.store.runstore.RunStore.write_run`, ``read_run``, ``update_run``): the runner
writes it before its first trial and updates it as the run goes (its status, the hosts a
cluster lost, where a stopping rule stopped it), a budget run adds the design its pilot planned
(``pilot``), and every reader takes its typed fields.

Formats (``record_version``; a run.json without one is format 1). Each older format is brought
to the current one as it is read, by the ``update_to_<N>`` functions of :data:`MIGRATIONS` in
order; the file itself is never rewritten by a reader:

1. (the first runs, 2026-12-02, to this release; no ``record_version``, ``schema_version`` 1
   or 2) ``study``, ``run_id``, ``status`` (``running``, ``complete``; ``stopped`` when a
   cluster run lost too many hosts), ``parameters`` (the experiment, ``dataclasses.asdict``
   of it), ``notebook_parameters``, ``plan``, ``cpus``, ``unavailable``, ``builds``,
   ``runtime``, ``provenance``, ``finished_utc``; when they applied: ``runtimes`` (arms on
   several runtimes), ``stopped_after_blocks`` (a stopping rule), ``settle`` (a wait for a
   quiet machine), ``pilot`` (a budget run's plan), ``host_losses`` (a cluster run). The
   experiment's fields added after the first runs were left out of ``parameters`` at their
   default (so that runs stored before them still resumed); within an arm ``front`` and
   ``front_variant`` when unused; a load before HTTP/2 had no ``protocol`` and ``streams``,
   a condition before peer tools no ``cross_check``, an arm before per-arm runtimes no
   ``runtime`` and ``limits``.
2. ``record_version`` 2; ``parameters`` complete: every field of the experiment, its arms,
   conditions and loads, at its value. :func:`update_to_2` puts in what format 1 left out,
   at what it meant then (a peer tool in every block when the key is missing and a condition
   has one, as before ``cross_check_blocks`` existed).
3. ``record_version`` 3; ``parameters.interleave``: the interleaved design's slices (``null``:
   one arm per trial, the sequential design, which every earlier run used); run.json's
   ``design_changes`` lists a condition moved to the sequential design during the run (an arm's
   carry-over above the bound, or its CPU not readable). :func:`update_to_3` puts ``null`` in.

A field added to :class:`~benchlib.core.model.Experiment` (or to an arm, condition or load)
is a new format: bump :data:`RUN_RECORD_VERSION` and add ``update_to_<N>``, which fills the
new key in older runs with what those runs did (``tests/test_run_record.py`` checks that the
fields and the format agree).

Nothing stored is lost: keys this reader does not know are kept in :attr:`RunRecord.extra`
and written back; the runtime's, the provenance's and each build's dictionaries are kept as
they were produced (``raw``).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from benchlib.core.design import DEFAULT_CROSS_CHECK_BLOCKS, PlannedTrial
from benchlib.core.errors import StorageError
from benchlib.core.placement import CpuPlan
from benchlib.core.schema import READABLE_SCHEMA_VERSIONS, SCHEMA_VERSION
from benchlib.store.records._convert import as_float, as_float_or_none
from benchlib.store.records.plan import PlanRecord

__all__ = ["Build", "DesignChange", "HostLoss", "MIGRATIONS", "Provenance", "RUN_RECORD_VERSION", "RUN_STATUSES", "RunRecord",
           "RuntimeFacts", "Settled", "update", "update_to_2", "update_to_3"]

#: The run.json format this benchlib writes (see the module docstring for the history).
RUN_RECORD_VERSION = 3

#: A run's ``status``: being run (or stopped by an interrupt: a resume goes on), every planned
#: trial done (or the stopping rule ended it), stopped for good by a cluster that lost too many hosts.
RUN_STATUSES: tuple[str, ...] = ("running", "complete", "stopped")


def _pairs(v: Any) -> list[list[Any]]:
    return [list(p) for p in v or ()]


def update_to_2(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Format 1 -> 2: the keys format 1 left out of ``parameters``, put in at what they meant
    in the runs that left them out (literal values: this function never changes)."""
    out = dict(doc)
    params = out.get("parameters")
    if isinstance(params, Mapping):
        p = dict(params)
        conditions: list[Any] = [dict(c) if isinstance(c, Mapping) else c for c in p.get("conditions") or ()]
        peers = any(isinstance(c, Mapping) and c.get("cross_check") for c in conditions)
        for c in conditions:
            if isinstance(c, dict):  # each Mapping was copied into a dict above
                c.setdefault("cross_check", None)
                if isinstance(c.get("load"), Mapping):
                    c["load"] = {**c["load"], "protocol": c["load"].get("protocol", "http1"),
                                 "streams": c["load"].get("streams", 1)}
        if "conditions" in p:
            p["conditions"] = conditions
        if "arms" in p:
            p["arms"] = [{"runtime": None, "limits": None, "front": None, "front_variant": None, **a}
                         if isinstance(a, Mapping) else a for a in p.get("arms") or ()]
        defaults = {"repeat_invalid": 0, "repeat_disturbed": 2, "dependencies": "trial", "budget_min": None,
                    "target_mde": None, "cluster": None, "service_starts": "trial",
                    "cross_check_blocks": "all" if peers else DEFAULT_CROSS_CHECK_BLOCKS}
        out["parameters"] = {**defaults, **p}
    out["record_version"] = 2
    return out


def update_to_3(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Format 2 -> 3: ``parameters.interleave`` null (every run before it measured one arm per
    trial)."""
    out = dict(doc)
    if isinstance(out.get("parameters"), Mapping):
        out["parameters"] = {"interleave": None, **out["parameters"]}
    out["record_version"] = 3
    return out


#: The migrations, by the format each one makes: ``MIGRATIONS[n]`` takes format ``n - 1`` to ``n``.
MIGRATIONS: Mapping[int, Callable[[Mapping[str, Any]], dict[str, Any]]] = {2: update_to_2, 3: update_to_3}


def update(doc: Mapping[str, Any], *, where: str = "run.json") -> dict[str, Any]:
    """``doc`` (a run.json as stored, any format so far) in the current format, through
    :data:`MIGRATIONS` in order.

    Raises
    ------
    StorageError  a format newer than this benchlib's (naming ``where`` and the formats read).
    """
    version = doc.get("record_version", 1)
    if not isinstance(version, int) or not 1 <= version <= RUN_RECORD_VERSION:
        raise StorageError(f"{where}: record_version {version!r}; this benchlib reads formats 1 to "
                           f"{RUN_RECORD_VERSION} (a newer benchlib wrote it: update benchlib to read it)")
    out = dict(doc)
    for n in range(version + 1, RUN_RECORD_VERSION + 1):
        out = MIGRATIONS[n](out)
    return out


def _str_map(v: Any) -> dict[str, str]:
    return {str(k): str(x) for k, x in v.items()} if isinstance(v, Mapping) else {}


@dataclass(frozen=True)
class Provenance:
    """Where and with what a run ran (:func:`benchlib.core.provenance.collect`, at its first start).

    Attributes
    ----------
    collected_utc: when it was collected (ISO 8601, UTC; "" when not recorded).
    hostname, cpu_model, kernel, os, cgroups (``v1``, ``v2``, ``hybrid``, ``none``): the machine.
    cpu_count: CPUs of the machine (``None``: not recorded). cpus_available: the CPU ids the run
        could use. memory_gb: its memory (GB). governor: the frequency governor per CPU id.
    loadavg_at_start: the 1, 5 and 15-min load averages just before the first trial (NaN where
        the OS had none).
    python, python_executable, packages (name -> version), toolchains (name -> version, or
        ``"not installed"``): the software.
    git_sha, git_branch, git_dirty: benchlib's checkout (``None`` when not one).
    raw: the stored dictionary (written back as it is).
    """

    collected_utc: str = ""
    hostname: str = ""
    cpu_model: str = ""
    cpu_count: int | None = None
    cpus_available: tuple[int, ...] = ()
    governor: Mapping[str, str] = field(default_factory=dict)
    memory_gb: float | None = None
    kernel: str = ""
    os: str = ""
    cgroups: str = ""
    loadavg_at_start: tuple[float, ...] = ()
    python: str = ""
    python_executable: str = ""
    packages: Mapping[str, str] = field(default_factory=dict)
    toolchains: Mapping[str, str] = field(default_factory=dict)
    git_sha: str | None = None
    git_branch: str | None = None
    git_dirty: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, d: Any) -> Provenance:
        """Read run.json's ``provenance`` (missing or malformed entries read as not recorded)."""
        if not isinstance(d, Mapping):
            return cls()
        git: Mapping[str, Any] = d["git"] if isinstance(d.get("git"), Mapping) else {}
        count = d.get("cpu_count")
        return cls(
            collected_utc=str(d.get("collected_utc") or ""), hostname=str(d.get("hostname") or ""),
            cpu_model=str(d.get("cpu_model") or ""), cpu_count=int(count) if isinstance(count, (int, float)) else None,
            cpus_available=tuple(int(c) for c in d.get("cpus_available") or ()), governor=_str_map(d.get("governor")),
            memory_gb=as_float_or_none(d.get("memory_gb")), kernel=str(d.get("kernel") or ""),
            os=str(d.get("os") or ""), cgroups=str(d.get("cgroups") or ""),
            loadavg_at_start=tuple(as_float(x) for x in d.get("loadavg_at_start") or ()),
            python=str(d.get("python") or ""), python_executable=str(d.get("python_executable") or ""),
            packages=_str_map(d.get("packages")), toolchains=_str_map(d.get("toolchains")),
            git_sha=str(git["sha"]) if git.get("sha") else None,
            git_branch=str(git["branch"]) if git.get("branch") else None, git_dirty=bool(git.get("dirty")),
            raw=dict(d))

    def to_json(self) -> dict[str, Any]:
        """The stored form: the dictionary as collected."""
        return dict(self.raw)

    @property
    def started(self) -> dt.datetime | None:
        """:attr:`collected_utc` as an aware datetime (``None`` when not recorded or unreadable)."""
        if not self.collected_utc:
            return None
        try:
            t = dt.datetime.fromisoformat(self.collected_utc.replace("Z", "+00:00"))
        except ValueError:
            return None
        return t if t.tzinfo else t.replace(tzinfo=dt.UTC)

    @property
    def loadavg_1min(self) -> float | None:
        """The 1-min load average just before the run (``None``: not recorded)."""
        first = self.loadavg_at_start[0] if self.loadavg_at_start else math.nan
        return None if math.isnan(first) else first

    @property
    def commit(self) -> str:
        """benchlib's commit, 12 hex digits, ``+`` when the checkout had changes ("" when unknown)."""
        return (self.git_sha[:12] + ("+" if self.git_dirty else "")) if self.git_sha else ""


@dataclass(frozen=True)
class RuntimeFacts:
    """What a runtime said about itself for run.json (:meth:`benchlib.runtime.base.Runtime.provenance`).

    Attributes
    ----------
    name: the runtime (``local``, ``docker``, ...; "" when not recorded).
    engine_version: the container engine's version (``None`` for a runtime without one).
    raw: the stored dictionary (its other facts: cgroups, limits policy, images, a service node).
    """

    name: str = ""
    engine_version: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, d: Any) -> RuntimeFacts:
        """Read run.json's ``runtime`` (or one of ``runtimes``)."""
        if not isinstance(d, Mapping):
            return cls()
        engine = d.get("engine")  # Docker's: the engine's facts, or why it was unreachable
        version = engine.get("version") if isinstance(engine, Mapping) else d.get("engine_version")
        return cls(str(d.get("runtime") or ""), str(version) if version else None, dict(d))

    def to_json(self) -> dict[str, Any]:
        """The stored form: the dictionary as the runtime gave it."""
        return dict(self.raw)


@dataclass(frozen=True)
class Build:
    """A service's build as run.json's ``builds`` keeps it (the runtime's ``Prepared.info``).

    Attributes
    ----------
    toolchains: each toolchain's version, by name. source_hash: the hash of its sources (``None``:
        not recorded). raw: the stored dictionary (the build's other facts).
    """

    toolchains: Mapping[str, str] = field(default_factory=dict)
    source_hash: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, d: Any) -> Build:
        """Read one entry of ``builds``."""
        if not isinstance(d, Mapping):
            return cls()
        h = d.get("source_hash")
        return cls(_str_map(d.get("toolchains")), str(h) if h is not None else None, dict(d))

    def to_json(self) -> dict[str, Any]:
        """The stored form: the dictionary as the runtime gave it."""
        return dict(self.raw)


@dataclass(frozen=True)
class Settled:
    """What a wait for a quiet machine found (:func:`benchlib.run.settle.wait_for_quiet`;
    run.json's ``settle``).

    Attributes
    ----------
    threshold: the 1-min load average asked for (below it: quiet).
    loadavg: the 1-min load average when the wait ended.
    waited_s: seconds waited (not the run's cost). quiet: whether ``loadavg`` is below ``threshold``.
    """

    threshold: float
    loadavg: float
    waited_s: float
    quiet: bool

    def line(self) -> str:
        """One line for the progress output."""
        if self.quiet:
            return (f"settle: load average {self.loadavg:.2f} < {self.threshold:g} "
                    f"after {self.waited_s:.0f} s: starting")
        return (f"settle: load average still {self.loadavg:.2f} (>= {self.threshold:g}) after "
                f"{self.waited_s:.0f} s: starting anyway (the run stores its load average at start)")

    @classmethod
    def from_json(cls, d: Any) -> Settled | None:
        """Read run.json's ``settle`` (``None``: the run did not wait)."""
        if not isinstance(d, Mapping):
            return None
        return cls(as_float(d.get("threshold")), as_float(d.get("loadavg")), as_float(d.get("waited_s")),
                   bool(d.get("quiet")))

    def to_json(self) -> dict[str, Any]:
        """The stored form (the mirror of :meth:`from_json`)."""
        return {"threshold": self.threshold, "loadavg": self.loadavg, "waited_s": self.waited_s, "quiet": self.quiet}


@dataclass(frozen=True)
class HostLoss:
    """A cluster's load host lost mid-run (run.json's ``host_losses``, :mod:`benchlib.run.cluster`).

    Attributes
    ----------
    utc: when (``2026-12-07T03:26:34Z``). block: the block it was lost in (``None``: before any).
    line: what happened, in one line. stopped: the run stopped there (too few hosts left).
    """

    utc: str
    block: int | None
    line: str
    stopped: bool = False

    @classmethod
    def from_json(cls, d: Any) -> HostLoss | None:
        """Read one entry (``None`` for one that is not a loss)."""
        if not isinstance(d, Mapping) or not d.get("line"):
            return None
        block = d.get("block")
        return cls(str(d.get("utc") or ""), int(block) if isinstance(block, int) else None, str(d["line"]),
                   bool(d.get("stopped")))

    def to_json(self) -> dict[str, Any]:
        """The stored form (the mirror of :meth:`from_json`; ``stopped`` only when true)."""
        return {"utc": self.utc, "block": self.block, "line": self.line, **({"stopped": True} if self.stopped else {})}


@dataclass(frozen=True)
class DesignChange:
    """Arms of a condition moved from the interleaved to the sequential design during a run
    (run.json's ``design_changes``): its first interleaved block showed an arm whose carry-over
    exceeded the bound, or whose CPU could not be read.

    Attributes
    ----------
    condition: the condition. block: the interleaved block that showed it (it ran again, as
        did every later block, in the design the change leaves). line: why, in one line.
    arms: the arms that run one per trial from then on, the condition's other arms staying
        side by side; empty (every change stored before per-arm moves): the whole condition
        runs one arm per trial.
    """

    condition: str
    block: int
    line: str
    arms: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, d: Any) -> DesignChange | None:
        """Read one entry (``None`` for one that is not a change)."""
        if not isinstance(d, Mapping) or not d.get("condition"):
            return None
        return cls(str(d["condition"]), int(d.get("block") or 0), str(d.get("line") or ""),
                   tuple(str(a) for a in d.get("arms") or ()))

    def to_json(self) -> dict[str, Any]:
        """The stored form (the mirror of :meth:`from_json`; ``arms`` only when some)."""
        return {"condition": self.condition, "block": self.block, "line": self.line,
                **({"arms": list(self.arms)} if self.arms else {})}


#: The keys :class:`RunRecord` reads into its fields (any other lands in ``extra``).
_RUN_KEYS = frozenset({
    "record_version", "schema_version", "study", "run_id", "status", "parameters", "notebook_parameters", "plan",
    "cpus", "unavailable", "builds", "runtime", "runtimes", "provenance", "settle", "pilot", "host_losses",
    "design_changes", "stopped_after_blocks", "finished_utc",
})


def _plan(v: Any) -> tuple[PlannedTrial, ...]:
    out = []
    for p in v or ():
        if isinstance(p, Mapping):
            out.append(PlannedTrial(seq=int(p.get("seq") or 0), condition=str(p.get("condition")),
                                    block=int(p.get("block") or 0), position=int(p.get("position") or 0),
                                    arm=str(p.get("arm"))))
    return tuple(out)


@dataclass(frozen=True)
class RunRecord:
    """A run's ``run.json``, read (any format, brought to the current one) or to be written.

    Attributes
    ----------
    study, run_id: which run.
    status: one of :data:`RUN_STATUSES` ("" in a folder written by hand).
    parameters: the experiment as JSON (:func:`benchlib.run.runner.experiment_parameters`, read
        back by :func:`benchlib.store.results.experiment_from_parameters`); complete from format 2.
    notebook_parameters: what the calling notebook was asked (free-form).
    plan: every planned trial, in execution order.
    cpus: the CPUs of each role (``None``: not recorded).
    unavailable: arms that could not run, with why.
    builds: each service's build, by ``service/variant`` (``runtime:service/variant`` for an
        arm on another runtime than the experiment's).
    runtime: the experiment's runtime's facts; runtimes: each runtime's, when arms used several.
    provenance: the machine and software at the first start.
    settle: the wait for a quiet machine before the first trial (``None``: no wait asked).
    pilot: the design a pilot planned for a budget run (``None``: no budget).
    host_losses: the load hosts a cluster lost mid-run, in order.
    design_changes: the conditions an interleaved run moved to the sequential design, in order.
    stopped_after_blocks: where a stopping rule ended the run (``None``: it did not).
    finished_utc: when the run completed (``None``: not yet, or stopped).
    schema_version: the stored trials' format when written (:data:`benchlib.core.schema.SCHEMA_VERSION`).
    version: the run.json format read (:data:`RUN_RECORD_VERSION` once read: older ones are updated).
    extra: stored keys this reader does not know (written back).
    """

    study: str = ""
    run_id: str = ""
    status: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    notebook_parameters: Mapping[str, Any] = field(default_factory=dict)
    plan: tuple[PlannedTrial, ...] = ()
    cpus: CpuPlan | None = None
    unavailable: Mapping[str, str] = field(default_factory=dict)
    builds: Mapping[str, Build] = field(default_factory=dict)
    runtime: RuntimeFacts = field(default_factory=RuntimeFacts)
    runtimes: Mapping[str, RuntimeFacts] = field(default_factory=dict)
    provenance: Provenance = field(default_factory=Provenance)
    settle: Settled | None = None
    pilot: PlanRecord | None = None
    host_losses: tuple[HostLoss, ...] = ()
    design_changes: tuple[DesignChange, ...] = ()
    stopped_after_blocks: int | None = None
    finished_utc: str | None = None
    schema_version: int = SCHEMA_VERSION
    version: int = RUN_RECORD_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], *, where: str = "run.json") -> RunRecord:
        """Read a stored run.json (any format so far: :func:`update` brings it to the current one).

        Raises
        ------
        StorageError  a format newer than this benchlib's, a ``schema_version`` it does not read,
            or values of the wrong kind (naming ``where``).
        """
        schema = doc.get("schema_version", 1)  # a run.json without one (written by hand): the first format
        if schema not in READABLE_SCHEMA_VERSIONS:
            raise StorageError(f"{where}: schema_version {schema!r}; this benchlib reads "
                               f"{', '.join(map(str, READABLE_SCHEMA_VERSIONS))}")
        d = update(doc, where=where)
        try:
            cpus = d.get("cpus")
            pilot = d.get("pilot")
            planned = PlanRecord.from_json(pilot) if isinstance(pilot, Mapping) else None
            extra = {k: v for k, v in d.items() if k not in _RUN_KEYS}
            if pilot and planned is None:  # a pilot entry without a planned design: kept as stored
                extra["pilot"] = pilot
            stopped = d.get("stopped_after_blocks")
            finished = d.get("finished_utc")
            return cls(
                study=str(d.get("study") or ""), run_id=str(d.get("run_id") or ""), status=str(d.get("status") or ""),
                parameters=dict(d.get("parameters") or {}), notebook_parameters=dict(d.get("notebook_parameters") or {}),
                plan=_plan(d.get("plan")), cpus=CpuPlan.from_dict(cpus) if isinstance(cpus, Mapping) else None,
                unavailable=_str_map(d.get("unavailable")),
                builds={str(k): Build.from_json(v) for k, v in (d.get("builds") or {}).items()},
                runtime=RuntimeFacts.from_json(d.get("runtime")),
                runtimes={str(k): RuntimeFacts.from_json(v) for k, v in (d.get("runtimes") or {}).items()},
                provenance=Provenance.from_json(d.get("provenance")), settle=Settled.from_json(d.get("settle")),
                pilot=planned,
                host_losses=tuple(h for h in map(HostLoss.from_json, d.get("host_losses") or ()) if h is not None),
                design_changes=tuple(c for c in map(DesignChange.from_json, d.get("design_changes") or ())
                                     if c is not None),
                stopped_after_blocks=int(stopped) if stopped is not None else None,
                finished_utc=str(finished) if finished else None,
                schema_version=int(schema), version=int(d["record_version"]),
                extra=extra,
            )
        except (TypeError, ValueError, AttributeError) as exc:
            raise StorageError(f"{where}: unreadable run record ({type(exc).__name__}: {exc})") from None

    def to_json(self) -> dict[str, Any]:
        """The stored form (``RunRecord.from_json(r.to_json()) == r``): the record's own keys,
        the optional ones only when they apply, then :attr:`extra`."""
        out: dict[str, Any] = {
            "record_version": self.version, "schema_version": self.schema_version, "study": self.study,
            "run_id": self.run_id, "status": self.status, "parameters": dict(self.parameters),
            "notebook_parameters": dict(self.notebook_parameters), "plan": [p.to_dict() for p in self.plan],
            "cpus": self.cpus.to_dict() if self.cpus is not None else None, "unavailable": dict(self.unavailable),
            "builds": {k: b.to_json() for k, b in self.builds.items()}, "runtime": self.runtime.to_json(),
            "provenance": self.provenance.to_json(),
        }
        if self.runtimes:
            out["runtimes"] = {k: r.to_json() for k, r in self.runtimes.items()}
        if self.settle is not None:
            out["settle"] = self.settle.to_json()
        if self.pilot is not None:
            out["pilot"] = dict(self.pilot.raw)
        if self.host_losses:
            out["host_losses"] = [h.to_json() for h in self.host_losses]
        if self.design_changes:
            out["design_changes"] = [c.to_json() for c in self.design_changes]
        if self.stopped_after_blocks is not None:
            out["stopped_after_blocks"] = self.stopped_after_blocks
        if self.finished_utc is not None:
            out["finished_utc"] = self.finished_utc
        out.update({k: v for k, v in self.extra.items() if k not in out})
        return out

    def arm_names(self) -> tuple[str, ...]:
        """The arms ``parameters`` names, in the experiment's order (for a folder whose
        parameters describe no experiment, too)."""
        return tuple(str(a.get("name")) for a in self.parameters.get("arms") or () if isinstance(a, Mapping))

    def condition_names(self) -> tuple[str, ...]:
        """The conditions ``parameters`` names, in the experiment's order."""
        return tuple(str(c.get("name")) for c in self.parameters.get("conditions") or () if isinstance(c, Mapping))

    def planned_per_arm(self) -> dict[tuple[str, str], int]:
        """Blocks planned per ``(condition, arm)`` (arms that could not run left out)."""
        out: dict[tuple[str, str], int] = {}
        for p in self.plan:
            if p.arm not in self.unavailable:
                out[(p.condition, p.arm)] = out.get((p.condition, p.arm), 0) + 1
        return out
