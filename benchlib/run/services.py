"""The services under test of a run: their runtimes, their builds, and their starts and stops.

:class:`RunServices` holds what a run knows of its services: the runtime of each name (checked
once), every arm's build (its service, the service's dependencies, its front; an arm whose
toolchain is missing, whose runtime is unavailable or whose build fails is not run, with why:
:attr:`RunServices.unavailable`), and the services running now.
:meth:`RunServices.start` starts an arm's dependencies, then its service, then its front, for
one trial, and stops them (the front first) when the trial ends, unless the experiment keeps
them longer: ``dependencies="block"`` shares a dependency among a block's trials (reset between
them by its manifest's ``[run] reset`` steps), ``service_starts="cell"`` keeps each
(condition, arm)'s services for all its trials (:class:`KeptHandle`). :meth:`RunServices.close`
stops whatever is still running.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from benchlib.core.errors import BuildError, ParameterError, RuntimeUnavailable, ToolchainMissing
from benchlib.core.model import Arm, Experiment
from benchlib.core.placement import CpuPlan
from benchlib.runtime import Prepared, Runtime, ServiceHandle, StartOptions, get_runtime
from benchlib.runtime.base import StopInfo, reset_service
from benchlib.runtime.manifest import ResolvedService, get_manifest, list_services
from benchlib.runtime.ports import free_port
from benchlib.store.records.run import Build, RuntimeFacts
from benchlib.store.runstore import RunStore

__all__ = ["ArmServices", "KeptHandle", "RunServices", "RuntimeChoice", "runtime_lookup"]

#: Where the runner gets its runtimes: a runtime for every name, a runtime per name (others
#: by name), or ``None`` (by name: :func:`benchlib.runtime.get_runtime`).
RuntimeChoice = Runtime | Mapping[str, Runtime] | None


def runtime_lookup(runtime: RuntimeChoice) -> Callable[[str], Runtime]:
    """The runtime of a name, as ``runtime`` says (see :data:`RuntimeChoice`)."""
    if runtime is None:
        return get_runtime
    if isinstance(runtime, Mapping):
        chosen = runtime
        return lambda name: chosen[name] if name in chosen else get_runtime(name)
    only = runtime
    return lambda name: only


def _front_names() -> list[str]:
    """The services whose manifest says ``role = "front"``."""
    return sorted(n for n, m in list_services().items() if m.role == "front") or ["(none)"]


@dataclass(frozen=True)
class ArmServices:
    """An arm's services running for a trial: its service (``handle``, as resolved: ``service``),
    its dependencies (``requires``) and its front (``None`` for an arm without one)."""

    handle: ServiceHandle
    service: ResolvedService
    dependencies: tuple[ServiceHandle, ...] = ()
    front: ServiceHandle | None = None
    front_service: ResolvedService | None = None

    @property
    def target(self) -> ServiceHandle:
        """Where the load goes: the front when there is one, else the service."""
        return self.front if self.front is not None else self.handle


class KeptHandle:
    """A running service kept for its cell's next trial (``service_starts="cell"``): everything
    is the handle's, except that ``stop()`` and leaving its context leave it running."""

    def __init__(self, handle: ServiceHandle) -> None:
        self._handle = handle
        self.name, self.host, self.port, self.enforced = handle.name, handle.host, handle.port, handle.enforced

    def __getattr__(self, name: str) -> Any:  # what a runtime's handle adds (ports, log counts, sample_now)
        return getattr(self._handle, name)

    def alive(self) -> bool:
        return self._handle.alive()

    def logs_tail(self, lines: int = 40) -> str:
        return self._handle.logs_tail(lines)

    def resource_samples(self) -> list[dict[str, Any]]:
        return self._handle.resource_samples()

    def cpu_counter_ns(self) -> int | None:
        return self._handle.cpu_counter_ns()

    def stop(self) -> StopInfo:
        return StopInfo(exit_code=None, detail="kept running for the cell's next trial (service_starts=\"cell\")")

    def __enter__(self) -> KeptHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _kept(started: ArmServices) -> ArmServices:
    return ArmServices(KeptHandle(started.handle), started.service, tuple(KeptHandle(d) for d in started.dependencies),
                       KeptHandle(started.front) if started.front is not None else None, started.front_service)


@dataclass
class RunServices:
    """The services of one run (see the module docstring).

    Attributes
    ----------
    experiment: the experiment run. lookup: the runtime of a name (:func:`runtime_lookup`).
    cpus: where services and dependencies run. store: the run's folder (the services' logs).
    runtimes: each runtime used so far, checked. prepared: each build, by (runtime, service, variant).
    unavailable: arms that cannot run, with why.
    dep_reset_s: seconds the last reset of each shared dependency took (``None``: started for
        this trial), for ``dependencies="block"``.
    """

    experiment: Experiment
    lookup: Callable[[str], Runtime]
    cpus: CpuPlan
    store: RunStore
    runtimes: dict[str, Runtime] = field(default_factory=dict)
    prepared: dict[tuple[str, str, str], Prepared] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    dep_reset_s: dict[str, float | None] = field(default_factory=dict)
    _shared: dict[tuple[str, str, str], ServiceHandle] = field(default_factory=dict)
    _shared_block: int | None = None
    _kept: dict[tuple[str, str], tuple[ArmServices, contextlib.ExitStack]] = field(default_factory=dict)

    # -- runtimes and builds -------------------------------------------------------------------
    def runtime_name(self, arm: Arm) -> str:
        """The arm's runtime's name (the experiment's unless the arm names its own)."""
        return arm.runtime or self.experiment.runtime

    def runtime(self, name: str) -> Runtime:
        """The runtime called ``name`` (checked once)."""
        if name not in self.runtimes:
            rt = self.lookup(name)
            rt.check()
            self.runtimes[name] = rt
        return self.runtimes[name]

    def runtime_for(self, arm: Arm) -> Runtime:
        """The arm's runtime, checked once."""
        return self.runtime(self.runtime_name(arm))

    def resolve(self, arm: Arm) -> ResolvedService:
        """The arm's service in its variant (refused when the manifest is a front)."""
        svc = get_manifest(arm.service).resolve(arm.variant)
        if svc.manifest.role != "service":
            raise ParameterError(f"arm {arm.name!r}: {arm.service!r} is a {svc.manifest.role}, not a service to "
                                 f"load directly; put it before one: Arm(service=..., front={arm.service!r})")
        return svc

    def resolve_front(self, arm: Arm) -> ResolvedService | None:
        """The arm's front (a manifest with ``role = "front"``) in its variant, or ``None``."""
        if arm.front is None:
            return None
        front = get_manifest(arm.front).resolve(arm.front_variant)
        if front.manifest.role != "front":
            raise ParameterError(f"arm {arm.name!r}: front {arm.front!r} is not a front (its service.toml has no "
                                 "role = \"front\"); fronts: " + ", ".join(_front_names()))
        return front

    def prepare_all(self) -> None:
        """Build every arm's service, its dependencies and its front; record arms that cannot run."""
        for arm in self.experiment.arms:
            svc = self.resolve(arm)  # a bad service, variant or front is refused before anything runs
            front = self.resolve_front(arm)
            try:
                rt = self.runtime_name(arm)
                for dep in svc.manifest.requires:
                    dsvc = get_manifest(dep).resolve()
                    if self.experiment.dependencies == "block" and not dsvc.reset:
                        raise ParameterError(f"arm {arm.name!r}: its dependency {dep!r} declares no [run] reset steps, "
                                             "so it cannot be shared by a block's trials; use "
                                             "Experiment(dependencies=\"trial\") or add reset steps to its service.toml")
                    self._prepare(rt, dsvc)
                self._prepare(rt, svc)
                if front is not None:
                    self._prepare(rt, front)
            except ToolchainMissing as exc:
                self.unavailable[arm.name] = f"{exc.missing} ({exc.hint})"
            except RuntimeUnavailable as exc:
                self.unavailable[arm.name] = f"runtime {self.runtime_name(arm)!r} unavailable: {exc}"
            except BuildError as exc:
                notes = "\n".join(getattr(exc, "__notes__", []))
                self.unavailable[arm.name] = f"build failed: {exc}"
                print(f"benchlib: {arm.name}: {exc}\n{notes}", flush=True)

    def _prepare(self, runtime: str, svc: ResolvedService) -> Prepared:
        key = (runtime, svc.name, svc.variant)
        if key not in self.prepared:
            self.prepared[key] = self.runtime(runtime).prepare(svc)
        return self.prepared[key]

    def builds(self) -> dict[str, Build]:
        """run.json's ``builds``: each build by ``service/variant`` (``runtime:service/variant``
        for a runtime other than the experiment's)."""
        return {(f"{k[1]}/{k[2]}" if k[0] == self.experiment.runtime else f"{k[0]}:{k[1]}/{k[2]}"):
                Build.from_json(dict(v.info)) for k, v in self.prepared.items()}

    def runtime_facts(self) -> dict[str, RuntimeFacts]:
        """Each runtime's facts (:meth:`~benchlib.runtime.base.Runtime.provenance`), by name."""
        return {n: RuntimeFacts.from_json(r.provenance()) for n, r in self.runtimes.items()}

    def toolchains(self) -> set[str]:
        """The toolchains the arms' services and fronts are built with."""
        return {t for a in self.experiment.arms for name in (a.service, a.front) if name
                for t in get_manifest(name).toolchains}

    # -- starts and stops ----------------------------------------------------------------------
    @contextlib.contextmanager
    def start(self, arm: Arm, condition: str, block: int) -> Iterator[ArmServices]:
        """Start the arm's dependencies, then its service, then its front (if any), for one
        trial; stop all on exit, the front first. With ``service_starts="cell"`` they start
        once per (condition, arm) and are kept running (:class:`KeptHandle`s, whose ``stop()``
        leaves them running) until :meth:`close`; a cell whose services died gets new ones."""
        if self.experiment.service_starts == "cell":
            key = (condition, arm.name)
            got = self._kept.get(key)
            if got is not None and not all(h.alive() for h in self._handles(got[0])):
                got[1].close()
                got = None
            if got is None:
                with contextlib.ExitStack() as guard:
                    started = guard.enter_context(self._start(arm, condition, block))
                    keep = guard.pop_all()  # started: kept running past this trial, closed by close()
                got = (started, keep)
                self._kept[key] = got
            yield _kept(got[0])
            return
        with self._start(arm, condition, block) as started:
            yield started

    @staticmethod
    def _handles(s: ArmServices) -> list[ServiceHandle]:
        return [*s.dependencies, s.handle, *([s.front] if s.front is not None else [])]

    @contextlib.contextmanager
    def _start(self, arm: Arm, condition: str, block: int) -> Iterator[ArmServices]:
        svc = self.resolve(arm)
        front_svc = self.resolve_front(arm)
        run_id = self.store.run_id
        rt_name, rt = self.runtime_name(arm), self.runtime_for(arm)
        log = self.store.log_path(condition, arm.name, block)
        with contextlib.ExitStack() as stack:
            deps: dict[str, ServiceHandle] = {}
            for dep in svc.manifest.requires:
                dsvc = get_manifest(dep).resolve()
                prepared = self.prepared[(rt_name, dsvc.name, dsvc.variant)]
                if self.experiment.dependencies == "block":
                    deps[dep] = self._block_dependency(rt, rt_name, prepared, block)
                    continue
                h = rt.start(prepared, StartOptions(
                    port=free_port(), cpus=self.cpus.dependencies, log_sink="pipe",
                    log_path=log.with_suffix(f".{dep}.log"), run_id=run_id, role="dependency"))
                stack.enter_context(h)
                deps[dep] = h
            limits = arm.limits or self.experiment.limits
            handle = rt.start(self.prepared[(rt_name, svc.name, svc.variant)], StartOptions(
                port=svc.fixed_port or free_port(), cpus=self.cpus.server, limits=limits, log_sink=arm.log_sink,
                log_path=log, env=dict(arm.env), deps=deps, run_id=run_id))
            stack.enter_context(handle)
            front: ServiceHandle | None = None
            if front_svc is not None:
                front = rt.start(self.prepared[(rt_name, front_svc.name, front_svc.variant)], StartOptions(
                    port=free_port(), cpus=self.cpus.server, limits=limits, log_sink="pipe",
                    log_path=log.with_suffix(f".{front_svc.name}.log"), env=dict(svc.front_env), run_id=run_id,
                    role="front", backend=handle))
                stack.enter_context(front)
            yield ArmServices(handle, svc, tuple(deps.values()), front, front_svc)

    def _block_dependency(self, rt: Runtime, rt_name: str, prepared: Prepared, block: int) -> ServiceHandle:
        """The block's instance of a dependency (``Experiment(dependencies="block")``): started
        at its first use in ``block`` (log ``logs/b<block>.<name>.log``; started again if it
        died), otherwise given fresh data by its manifest's ``[run] reset`` steps (seconds in
        :attr:`dep_reset_s`)."""
        dsvc = prepared.service
        key = (rt_name, dsvc.name, dsvc.variant)
        if self._shared_block != block:
            self.end_block()
            self._shared_block = block
        h = self._shared.get(key)
        if h is not None and not h.alive():  # it died after an earlier trial: this trial gets a new one
            h.stop()
            h = None
        if h is None:
            h = rt.start(prepared, StartOptions(
                port=free_port(), cpus=self.cpus.dependencies, log_sink="pipe",
                log_path=self.store.path / "logs" / f"b{block:03d}.{dsvc.name}.log",
                run_id=self.store.run_id, role="dependency"))
            self._shared[key] = h
            self.dep_reset_s[dsvc.name] = None
            return h
        t0 = time.monotonic()
        reset_service(dsvc, h)
        self.dep_reset_s[dsvc.name] = time.monotonic() - t0
        return h

    def end_block(self) -> None:
        """Stop the dependencies shared by the current block (``dependencies="block"``)."""
        shared, self._shared, self._shared_block = self._shared, {}, None
        for h in shared.values():
            h.stop()

    def close(self) -> None:
        """Stop what is still running: the services kept for their cells (fronts first), then
        the last block's shared dependencies."""
        kept, self._kept = self._kept, {}
        for _, stack in kept.values():
            stack.close()
        self.end_block()
