"""Executes an :class:`~benchlib.core.model.Experiment`: the plan of trials, one by one.

For each planned trial, in the order of the randomized blocks (:mod:`benchlib.core.design`):

1. start the arm's dependencies (``requires``) and the service itself, fresh, pinned to the
   server's CPUs, with the experiment's limits (the runtime waits for health); then the
   arm's front, if it has one (``Arm(front=...)``: a reverse proxy given the service's
   address(es)), on the same CPUs;
2. check the endpoint's contract (httpx), through the front when there is one (the load
   goes there too);
3. run the load (warm-up, then the measured phase) from the client's CPUs;
4. stop everything (the front first) and store the trial (rows + metadata) atomically.

Arms whose toolchain is missing, or whose build fails, are not run; they stay in the
results as "not run: <why>". A trial that fails (the service dies, breaks its contract)
is stored with its reason and whatever was measured; the run goes on. A re-run with the
same ``run_id`` skips stored trials; it first reads ``run.json`` and every stored trial (a
damaged file is named before anything is written), and refuses a run folder whose
``run.json`` is gone (its parameters and provenance cannot be recovered).

On a cluster (``Experiment(cluster=...)``) the hosts are asked after every trial whether they
are as before (:class:`HostCheck`): after a host was lost, the block it was lost in runs again in
full on the hosts left (its stored trials set aside), or the run stops with
:class:`~benchlib.core.errors.HostLost` (``docs/cluster.md``, "Faults"). The full text behind such
one-line notes goes to the run's log, ``logs/run.log`` (:mod:`benchlib.run.runlog`).

SIGTERM and SIGHUP stop a run as Ctrl-C does (:func:`benchlib.core.signals.interrupt_on_signals`):
the trial under way is abandoned, its load and services stopped, and the trials stored before
it are kept for a resume.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import traceback
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any, Callable, Collection, Iterator, Mapping, Protocol, Sequence, Union

import numpy as np

from benchlib.core import provenance as _provenance
from benchlib.core import settings
from benchlib.run.settle import Settled, wait_for_quiet
from benchlib.runtime.contract import verify
from benchlib.run.cpus import CpuPlan, plan_cpus
from benchlib.core.design import PlannedTrial, cross_check_blocks, plan_trials
from benchlib.run.sampler import DisturbanceSampler, bounds_from_settings
from benchlib.core.errors import (
    BenchlibError,
    BuildError,
    ContractError,
    HostLost,
    ParameterError,
    RuntimeUnavailable,
    ServiceStartError,
    StorageError,
    ToolchainMissing,
)
from benchlib.runtime import toolchains
from benchlib.runtime.manifest import Endpoint, ResolvedService, get_manifest
from benchlib.core.model import CROSS_CHECK_TOOLS, Arm, Condition, CrossCheck, Experiment, LoadSpec, Target
from benchlib.loadgen.peers.crosscheck import run_cross_check
from benchlib.run.progress import ProgressCallback, make_progress
from benchlib.store.records import (TRIAL_RECORD_VERSION, Attempt, DependencyRecord, EnforcedLimits, FrontRecord, LoadMeta,
                              ServiceLog, TrialRecord, peer_report)
from benchlib.store.records.disturbance import Disturbance, DisturbanceBounds, is_disturbed
from benchlib.store.records.trial import utc_now, utc_stamp
from benchlib.store.results import Run, open_run, trial_summary
from benchlib.run.runlog import run_log
from benchlib.runtime import Prepared, Runtime, ServiceHandle, StartOptions, get_runtime
from benchlib.runtime.base import StopInfo, handle_ports, reset_service
from benchlib.runtime.ports import free_port
from benchlib.core.schema import ROW_DTYPE
from benchlib.core.signals import interrupt_on_signals
from benchlib.store.runstore import RunStore, StoredTrial

if TYPE_CHECKING:
    from benchlib.loadgen import LoadResult

__all__ = ["CrossCheckFunction", "ExperimentResult", "HostCheck", "LoadFunction", "RuntimeChoice", "StopRule",
           "cross_check_for", "request_for", "run_cross_check", "run_experiment"]

#: Where the runner's own one-line notes go in full (the run's log, :mod:`benchlib.run.runlog`).
LOG = logging.getLogger("benchlib.run.runner")

#: What :func:`run_experiment` returns: the run, read (:class:`benchlib.store.results.Run`; the
#: name older imports use).
ExperimentResult = Run

#: A stopping rule: ``rule(run, blocks_done)`` -> the ``(condition, arm)`` pairs that still
#: need blocks (``None``: all); see :func:`run_experiment`'s ``until``.
StopRule = Callable[[Run, int], "Collection[tuple[str, str]] | None"]


def request_for(load: LoadSpec, endpoint: Endpoint) -> LoadSpec:
    """``load`` with its request (method, path, body, headers) taken from ``endpoint``.

    A gRPC endpoint makes the load ``protocol="grpc"`` (its body is the request message), an
    ``h2c`` endpoint ``protocol="h2c"``; an HTTP/1.1 endpoint keeps the load's ``http1`` or
    ``h2c``, and refuses ``grpc``.
    """
    protocol = load.protocol
    if endpoint.protocol in ("grpc", "h2c"):
        protocol = endpoint.protocol
    elif protocol == "grpc":
        raise ParameterError(f"endpoint {endpoint.name!r} is not a gRPC method (protocol {endpoint.protocol!r}); "
                             "a LoadSpec with protocol='grpc' needs an endpoint with protocol = \"grpc\"")
    return load.with_(method=endpoint.method, path=endpoint.path, body=endpoint.body,
                      headers=tuple(endpoint.headers), protocol=protocol)


@contextlib.contextmanager
def _pinned_to(cpus: Sequence[int]) -> Iterator[None]:
    """Keep this (orchestrating) process off the server's CPUs while trials run."""
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, set(cpus))
        yield
    finally:
        os.sched_setaffinity(0, before)


class LoadFunction(Protocol):
    """What runs one trial's load: :func:`benchlib.loadgen.run_load`'s signature (a test may
    pass :class:`benchlib.run.testing.FakeLoad`)."""

    def __call__(self, spec: LoadSpec, target: Target, *, client_cpus: Sequence[int] | None = None,
                 seed: int = 0) -> LoadResult: ...


class HostCheck(Protocol):
    """The hosts a run's load comes from, when they can be lost mid-run (a Ray cluster's:
    :meth:`benchlib.run.cluster.session.ClusterSession.check`), asked after every trial."""

    def check(self) -> str | None:
        """``None`` when the hosts are as before; after hosts were lost and the rest reserved
        again, one line saying so (the trial's block then runs again in full). Raises
        :class:`~benchlib.core.errors.HostLost` (one line) when the run cannot go on."""
        ...


class CrossCheckFunction(Protocol):
    """What runs a cross-check's peer tool: :func:`run_cross_check`'s signature."""

    def __call__(self, check: CrossCheck, url: str, cpus: Sequence[int], *, order: str) -> dict[str, Any]: ...


#: Where the runner gets its runtimes: a runtime for every name, a runtime per name (others
#: by name), or ``None`` (by name: :func:`benchlib.runtime.get_runtime`).
RuntimeChoice = Union[Runtime, Mapping[str, Runtime], None]


def _runtime_lookup(runtime: RuntimeChoice) -> Callable[[str], Runtime]:
    """The runtime of a name, as ``runtime`` says (see :data:`RuntimeChoice`)."""
    if runtime is None:
        return get_runtime
    if isinstance(runtime, Mapping):
        chosen = runtime
        return lambda name: chosen[name] if name in chosen else get_runtime(name)
    only = runtime
    return lambda name: only


class _Executor:
    """Holds the state of one run while it executes."""

    def __init__(self, experiment: Experiment, runtimes: Callable[[str], Runtime], cpus: CpuPlan, store: RunStore,
                 progress: ProgressCallback, load: LoadFunction, cross_check: CrossCheckFunction) -> None:
        self.exp = experiment
        self.lookup = runtimes
        self.runtimes: dict[str, Runtime] = {}
        self.cpus = cpus
        self.store = store
        self.progress = progress
        self.load = load
        self.cross_check = cross_check
        self.prepared: dict[tuple[str, str, str], Prepared] = {}  # (runtime, service, variant) -> build
        self.unavailable: dict[str, str] = {}
        #: the blocks in which the conditions' peer tools run (Experiment.cross_check_blocks)
        self.check_blocks = cross_check_blocks(experiment.trials, experiment.cross_check_blocks)
        #: dependencies="block": the running dependencies of the current block, and its number
        self.shared: dict[tuple[str, str, str], ServiceHandle] = {}
        self.shared_block: int | None = None
        #: seconds the last reset of each shared dependency took (None: started for this trial)
        self.dep_reset_s: dict[str, float | None] = {}
        #: what the machine did to each attempt so far (the disturbance rule's references)
        self.disturbances: list[Disturbance] = []
        #: the disturbance rule's bounds (``None``: measured and reported, never judged;
        #: ``BENCHLIB_DISTURBANCE_RULE=record``)
        self.disturbance_bounds: DisturbanceBounds | None = bounds_from_settings()
        #: service_starts="cell": each (condition, arm)'s running services (service, resolved
        #: service, dependencies, front) and every handle to stop when the run ends
        self.kept: dict[tuple[str, str], tuple[tuple[Any, ...], list[ServiceHandle], contextlib.ExitStack]] = {}

    def cross_check_for(self, planned: PlannedTrial, condition: Condition) -> CrossCheck | None:
        """The condition's peer tool if it runs in this trial (its arm, one of the chosen blocks)."""
        check = condition.cross_check_of(planned.arm)
        if check is None or planned.block not in self.check_blocks:
            return None
        return check

    def run_check(self, check: CrossCheck, url: str, endpoint: Endpoint, *, order: str) -> dict[str, Any]:
        """The cross-check of one trial, fitted to its endpoint (:func:`cross_check_for`); a
        tool that does not fit the endpoint is the cross-check's error, the trial stands."""
        try:
            fitted = cross_check_for(check, endpoint)
        except ParameterError as exc:
            return {"tool": check.tool, "order": order, "error": f"ParameterError: {exc}"}
        return self.cross_check(fitted, url, self.cpus.client, order=order)

    def runtime_name(self, arm: Arm) -> str:
        return arm.runtime or self.exp.runtime

    def runtime_for(self, arm: Arm) -> Runtime:
        """The arm's runtime (the experiment's unless the arm names its own), checked once."""
        return self.runtimes_by_name(self.runtime_name(arm))

    def resolve(self, arm: Arm) -> ResolvedService:
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
        for arm in self.exp.arms:
            svc = self.resolve(arm)  # a bad service, variant or front is refused before anything runs
            front = self.resolve_front(arm)
            try:
                rt = self.runtime_name(arm)
                for dep in svc.manifest.requires:
                    dsvc = get_manifest(dep).resolve()
                    if self.exp.dependencies == "block" and not dsvc.reset:
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
            self.prepared[key] = self.runtimes_by_name(runtime).prepare(svc)
        return self.prepared[key]

    def runtimes_by_name(self, name: str) -> Runtime:
        """The runtime called ``name`` (checked once)."""
        if name not in self.runtimes:
            rt = self.lookup(name)
            rt.check()
            self.runtimes[name] = rt
        return self.runtimes[name]

    def block_dependency(self, rt: Runtime, rt_name: str, prepared: Prepared, block: int) -> ServiceHandle:
        """The block's instance of a dependency (``Experiment(dependencies="block")``): started
        at its first use in ``block`` (log ``logs/b<block>.<name>.log``; started again if it
        died), otherwise given fresh data by its manifest's ``[run] reset`` steps (seconds in
        :attr:`dep_reset_s`)."""
        dsvc = prepared.service
        key = (rt_name, dsvc.name, dsvc.variant)
        if self.shared_block != block:
            self.end_block()
            self.shared_block = block
        h = self.shared.get(key)
        if h is not None and not h.alive():  # it died after an earlier trial: this trial gets a new one
            h.stop()
            h = None
        if h is None:
            h = rt.start(prepared, StartOptions(
                port=free_port(), cpus=self.cpus.dependencies, log_sink="pipe",
                log_path=self.store.path / "logs" / f"b{block:03d}.{dsvc.name}.log",
                run_id=self.store.run_id, role="dependency"))
            self.shared[key] = h
            self.dep_reset_s[dsvc.name] = None
            return h
        t0 = time.monotonic()
        reset_service(dsvc, h)
        self.dep_reset_s[dsvc.name] = time.monotonic() - t0
        return h

    def end_block(self) -> None:
        """Stop the dependencies shared by the current block (``dependencies="block"``)."""
        shared, self.shared, self.shared_block = self.shared, {}, None
        for h in shared.values():
            h.stop()

    def stop_kept(self) -> None:
        """Stop the services kept for their cells (``service_starts="cell"``), fronts first."""
        kept, self.kept = self.kept, {}
        for _, _, stack in kept.values():
            stack.close()

    @contextlib.contextmanager
    def services(self, arm: Arm, condition: str, block: int) -> Iterator[
            tuple[ServiceHandle, ResolvedService, list[ServiceHandle], ServiceHandle | None]]:
        """Start the arm's dependencies, then the arm's service, then its front (if any); stop
        all on exit, the front first. Yields (service, resolved service, dependencies, front).
        With ``service_starts="cell"`` they start once per (condition, arm) and are kept
        running (a :class:`_KeptHandle` each, whose ``stop()`` leaves them running) until
        :meth:`stop_kept`; a cell whose services died gets new ones."""
        if self.exp.service_starts == "cell":
            key = (condition, arm.name)
            got = self.kept.get(key)
            if got is not None and not all(h.alive() for h in got[1]):
                got[2].close()
                got = None
            if got is None:
                with contextlib.ExitStack() as guard:
                    handle, svc, deps, front = guard.enter_context(self._start_services(arm, condition, block))
                    handles = [*deps, handle, *([front] if front is not None else [])]
                    keep = guard.pop_all()  # started: kept running past this trial, closed by stop_kept()
                got = ((handle, svc, deps, front), handles, keep)
                self.kept[key] = got
            handle, svc, deps, front = got[0]
            yield (_KeptHandle(handle), svc, [_KeptHandle(d) for d in deps],
                   _KeptHandle(front) if front is not None else None)
            return
        with self._start_services(arm, condition, block) as started:
            yield started

    @contextlib.contextmanager
    def _start_services(self, arm: Arm, condition: str, block: int) -> Iterator[
            tuple[ServiceHandle, ResolvedService, list[ServiceHandle], ServiceHandle | None]]:
        svc = self.resolve(arm)
        front_svc = self.resolve_front(arm)
        run_id = self.store.run_id
        rt_name, rt = self.runtime_name(arm), self.runtime_for(arm)
        with contextlib.ExitStack() as stack:
            deps: dict[str, ServiceHandle] = {}
            for dep in svc.manifest.requires:
                dsvc = get_manifest(dep).resolve()
                prepared = self.prepared[(rt_name, dsvc.name, dsvc.variant)]
                if self.exp.dependencies == "block":
                    deps[dep] = self.block_dependency(rt, rt_name, prepared, block)
                    continue
                h = rt.start(prepared, StartOptions(
                    port=free_port(), cpus=self.cpus.dependencies, log_sink="pipe",
                    log_path=self.store.log_path(condition, arm.name, block).with_suffix(f".{dep}.log"),
                    run_id=run_id, role="dependency"))
                stack.enter_context(h)
                deps[dep] = h
            handle = rt.start(self.prepared[(rt_name, svc.name, svc.variant)], StartOptions(
                port=free_port(), cpus=self.cpus.server, limits=arm.limits or self.exp.limits, log_sink=arm.log_sink,
                log_path=self.store.log_path(condition, arm.name, block), env=dict(arm.env), deps=deps,
                run_id=run_id))
            stack.enter_context(handle)
            front: ServiceHandle | None = None
            if front_svc is not None:
                front = rt.start(self.prepared[(rt_name, front_svc.name, front_svc.variant)], StartOptions(
                    port=free_port(), cpus=self.cpus.server, limits=arm.limits or self.exp.limits,
                    log_sink="pipe", log_path=self.store.log_path(condition, arm.name, block).with_suffix(
                        f".{front_svc.name}.log"),
                    env=dict(svc.front_env), run_id=run_id, role="front", backend=handle))
                stack.enter_context(front)
            yield handle, svc, list(deps.values()), front

    def run_trial(self, planned: PlannedTrial, condition: Condition,
                  attempts: Sequence[Attempt] = ()) -> TrialRecord:
        """Run one planned trial and store it (``attempts``: those set aside before it, kept in
        its record); returns the stored record."""
        arm = self.exp.arm(planned.arm)
        rt_name = self.runtime_for(arm).name
        rec = TrialRecord(
            condition=planned.condition, arm=planned.arm, block=planned.block, position=planned.position,
            seq=planned.seq, service=arm.service, variant=arm.variant or "", log_sink=arm.log_sink, runtime=rt_name,
            limits=asdict(arm.limits or self.exp.limits), cpus={k: tuple(v) for k, v in self.cpus.to_dict().items()},
            started=utc_now(), attempts=tuple(attempts), version=TRIAL_RECORD_VERSION)
        rows = np.zeros(0, dtype=ROW_DTYPE)
        hosts: np.ndarray | None = None  # each row's load host (several hosts: benchlib.run.cluster)
        status, reason = "ok", None
        got: dict[str, Any] = {}  # the record's fields as the trial gets them (TrialRecord's names)

        def enforced(h: ServiceHandle) -> EnforcedLimits | None:
            return EnforcedLimits.from_dict(dict(h.enforced), runtime=rt_name)

        try:
            with self.services(arm, planned.condition, planned.block) as (handle, svc, deps, front):
                got.update(variant=svc.variant, enforced=enforced(handle))
                if len(handle_ports(handle)) > 1:
                    got["ports"] = tuple(handle_ports(handle))
                shared = self.exp.dependencies == "block"
                got["dependencies"] = {d.name: DependencyRecord(
                    port=d.port, enforced=enforced(d), shared="block" if shared else "",
                    reset_s=self.dep_reset_s.get(d.name) if shared else None) for d in deps}
                front_rec: FrontRecord | None = None
                if front is not None:
                    front_rec = FrontRecord(service=str(arm.front), variant=self.resolve_front(arm).variant,  # type: ignore[union-attr]
                                            port=front.port, enforced=enforced(front))
                    got["front"] = front_rec
                endpoint = svc.endpoint(condition.endpoint or arm.endpoint)
                got["endpoint"] = {"name": endpoint.name, "method": endpoint.method, "path": endpoint.path,
                                   "protocol": endpoint.protocol}
                target = front if front is not None else handle
                target_url = f"http://{target.host}:{target.port}"
                got["contract"] = verify(target_url, endpoint).to_dict()
                spec = request_for(condition.load, endpoint)
                check = self.cross_check_for(planned, condition)
                # first in every other block the peer runs in (with "all": the odd blocks)
                peer_first = check is not None and self.check_blocks.index(planned.block) % 2 == 1
                if check is not None and peer_first:
                    got["peer"] = peer_report(self.run_check(check, target_url + endpoint.path, endpoint,
                                                             order="before"))
                sampler = DisturbanceSampler.for_trial(self.cpus.server, self.cpus.client, self.cpus.dependencies,
                                                       handle, front, deps).start()
                _sample_now(handle, front)  # CPU and memory as the load starts ...
                try:
                    result = self.load(spec, Target(target.host, target.port), client_cpus=self.cpus.client,
                                       seed=self.exp.seed * 1_000_003 + planned.seq)
                except BenchlibError:
                    # the load could not start (e.g. refused): if the service or its front died
                    # first, the death is the trial's reason, not the refused connection
                    for who, h in (("service", handle), (f"front {arm.front}", front)):
                        if h is not None and not h.alive():
                            stopped = h.stop()
                            if h is handle:
                                got["stop"] = asdict(stopped)
                            got["log_tail"] = h.logs_tail(40)
                            raise _Died(f"{who} died before the load connected ({stopped.detail})") from None
                    raise
                _sample_now(handle, front)  # ... and as it ends
                # what the machine did to the trial (outside signals only), judged by one rule for every arm
                got["disturbance"] = sampler.finish(LoadMeta.from_dict(result.meta), history=self.disturbances,
                                                    bounds=self.disturbance_bounds)
                self.disturbances.append(got["disturbance"])
                if check is not None and not peer_first:
                    got["peer"] = peer_report(self.run_check(check, target_url + endpoint.path, endpoint,
                                                             order="after"))
                rows = result.rows
                hosts = result.hosts
                got["load"] = LoadMeta.from_dict(result.meta)
                alive = handle.alive()
                front_alive = front.alive() if front is not None else True
                got["resources"] = tuple(handle.resource_samples())
                if front is not None and front_rec is not None:  # the front first: it forwards to the service
                    front_resources = tuple(front.resource_samples())
                    front_stop = front.stop()
                    got["front"] = replace(front_rec, resources=front_resources, stop=asdict(front_stop), log=ServiceLog(
                        "pipe", getattr(front, "log_lines", None), getattr(front, "log_bytes", None)))
                stop = handle.stop()
                got["stop"] = asdict(stop)
                got["service_log"] = ServiceLog(arm.log_sink, getattr(handle, "log_lines", None),
                                                getattr(handle, "log_bytes", None))
                if not alive:
                    status = "failed"
                    reason = f"service died during the trial ({stop.detail})"
                    got["log_tail"] = handle.logs_tail(40)
                elif not front_alive:
                    status = "failed"
                    reason = f"front {arm.front} died during the trial ({front_stop.detail})"
                    got["log_tail"] = front.logs_tail(40)  # type: ignore[union-attr]
                elif result.meta.get("failed"):
                    # the load generator failed mid-trial: its rows so far are stored, as evidence
                    status = "failed"
                    reason = f"LoadGenError: {result.meta.get('failure')}"
                elif not result.meta.get("valid", True):
                    status = "invalid"
                    reason = result.meta.get("invalid_reason") or "load generator marked the trial invalid"
                elif got["disturbance"].disturbed:
                    status = "invalid"
                    reason = got["disturbance"].verdict
        except _Died as exc:
            status, reason = "failed", str(exc)
        except (ServiceStartError, ContractError) as exc:
            status = "failed"
            reason = f"{type(exc).__name__}: {exc}"
            notes = getattr(exc, "__notes__", [])
            if notes:
                got["log_tail"] = "\n".join(notes)[-4000:]
        except BenchlibError as exc:
            status = "failed"
            reason = f"{type(exc).__name__}: {exc}"
            got["traceback"] = traceback.format_exc()[-4000:]
        rec = replace(rec, **got, status=status, reason=reason, finished=utc_now())
        self.store.write_trial(rows, rec.to_meta(), hosts=hosts)
        return rec


def _settle(show: Callable[[Any], None], study: str) -> Settled | None:
    """Wait for the load average ``BENCHLIB_SETTLE`` asks for (at most ``BENCHLIB_SETTLE_MAX_S``),
    saying how it went; returns what it found (stored in run.json as ``settle``: the seconds
    waited are not the run's cost); nothing when unset."""
    threshold = settings.SETTLE.get()
    if threshold is None:
        return None
    got = wait_for_quiet(threshold, max_wait_s=settings.SETTLE_MAX_S.value())
    show({"event": "note", "study": study, "text": got.line()})
    return got


class _Died(Exception):
    """A service or front was found dead when the load could not start (the trial's reason)."""


class _KeptHandle:
    """A running service kept for its cell's next trial (``service_starts="cell"``): everything
    is the handle's, except that ``stop()`` and leaving its context leave it running."""

    def __init__(self, handle: ServiceHandle) -> None:
        self._handle = handle

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    def stop(self, *args: Any, **kwargs: Any) -> StopInfo:
        return StopInfo(exit_code=None, detail="kept running for the cell's next trial (service_starts=\"cell\")")

    def __enter__(self) -> _KeptHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _sample_now(*handles: ServiceHandle | None) -> None:
    """One resource sample of each running handle now (runtimes that can take one)."""
    for h in handles:
        if h is not None and hasattr(h, "sample_now"):
            h.sample_now()


def _front_names() -> list[str]:
    """The services whose manifest says ``role = "front"``."""
    from benchlib.runtime.manifest import list_services

    return sorted(n for n, m in list_services().items() if m.role == "front") or ["(none)"]


def _sends_requests(tool: str) -> bool:
    """Whether a peer tool's ``run_<tool>`` sends the request it is given (takes ``body``)."""
    import importlib
    import inspect

    func = getattr(importlib.import_module(f"benchlib.loadgen.peers.{tool}"), f"run_{tool}")
    return "body" in inspect.signature(func).parameters


def cross_check_for(check: CrossCheck, endpoint: Endpoint) -> CrossCheck:
    """``check`` fitted to the endpoint it cross-checks: a gRPC endpoint is cross-checked by
    ghz only, which gets the endpoint's request message (``body``), metadata (``headers``)
    and ``.proto`` (``proto``) unless ``check.options`` set them. An HTTP endpoint's method,
    body and headers go to a tool that sends a request as given (its ``run_*`` takes
    ``body``: h2load); a tool that sends bodyless GETs cross-checks GET endpoints only.

    Raises
    ------
    ParameterError  a gRPC endpoint with another tool, ghz with an HTTP endpoint, or a tool
        that sends bodyless GETs with an endpoint of another method or with a body (the
        runner records it as the cross-check's error; the trial stands).
    """
    grpc_ep = endpoint.protocol == "grpc"
    if grpc_ep != (check.tool == "ghz"):
        raise ParameterError(
            f"endpoint {endpoint.name!r} is a gRPC method: cross-check it with ghz (CrossCheck('ghz', ...))"
            if grpc_ep else f"ghz calls gRPC methods; endpoint {endpoint.name!r} is {endpoint.protocol!r} "
                            f"(valid tools for it: {', '.join(t for t in CROSS_CHECK_TOOLS if t != 'ghz')})")
    options = dict(check.options)
    if not grpc_ep:
        if _sends_requests(check.tool):
            options.setdefault("method", endpoint.method)
            options.setdefault("body", endpoint.body or None)
            options.setdefault("headers", tuple(endpoint.headers))
            return replace(check, options=tuple(options.items()))
        if endpoint.body or endpoint.method.upper() != "GET":
            senders = [t for t in CROSS_CHECK_TOOLS if t != "ghz" and _sends_requests(t)]
            raise ParameterError(f"{check.tool} sends GET requests without a body; endpoint {endpoint.name!r} is "
                                 f"{endpoint.method} with a {len(endpoint.body)}-byte body: cross-check it with "
                                 f"{', '.join(senders)}")
        return check
    options.setdefault("body", endpoint.body)
    options.setdefault("headers", tuple(endpoint.headers))
    if endpoint.proto is not None:
        options.setdefault("proto", str(endpoint.proto))
    return replace(check, options=tuple(options.items()))


def _check_same_plan(store: RunStore, old: Mapping[str, Any], plan: list[PlannedTrial],
                     params: Mapping[str, Any]) -> None:
    if not old:
        return
    if old.get("parameters") != params or old.get("plan") != [p.to_dict() for p in plan]:
        raise ParameterError(
            f"run {store.run_id!r} of study {store.study!r} exists with different parameters or plan; "
            "use a new run_id (\"\" picks one) or the same parameters to resume it"
        )


def _read_stored(store: RunStore) -> tuple[dict[str, Any], dict[tuple[str, str, int], StoredTrial]]:
    """Everything a resume needs from the run folder, read before anything is written there:
    ``run.json`` and every stored trial, rows included (a damaged file raises
    :class:`StorageError` naming it). A folder with stored data but no ``run.json`` is refused."""
    run = store.read_run()
    trials = store.trials(verify=True)
    if not run and store.has_data():
        raise StorageError(
            f"{store.path} holds {len(trials)} stored trial(s) but no run.json (deleted?); without it the run's "
            "parameters, plan and provenance are unknown, so it cannot be resumed: start a new run (run_id \"\" "
            "picks one); the stored files stay where they are"
        )
    return run, {(t.condition, t.arm, t.block): t for t in trials}


def experiment_parameters(exp: Experiment) -> dict[str, Any]:
    """The experiment as JSON-able parameters (stored in run.json, compared on resume)."""
    import json

    params = json.loads(json.dumps(asdict(exp), default=lambda o: o.hex() if isinstance(o, bytes) else str(o)))
    if not params.get("repeat_invalid"):  # added later: runs stored before it still resume
        params.pop("repeat_invalid", None)
    if params.get("repeat_disturbed") == 2:  # likewise (its default: stored only when not)
        params.pop("repeat_disturbed", None)
    if params.get("dependencies") == "trial":  # likewise
        params.pop("dependencies", None)
    for key in ("budget_min", "target_mde"):  # likewise (issue 23): absent without a budget
        if params.get(key) is None:
            params.pop(key, None)
    if params.get("cluster") is None:  # likewise
        params.pop("cluster", None)
    if params.get("service_starts") == "trial":  # likewise
        params.pop("service_starts", None)
    if params.get("cross_check_blocks") == "all" or not any(c.cross_check for c in exp.conditions):
        params.pop("cross_check_blocks", None)  # likewise (before it, every block ran the peer tool)
    for arm in params.get("arms", ()):  # likewise the arms' front (added later): absent when unused
        for key in ("front", "front_variant"):
            if arm.get(key) is None:
                arm.pop(key, None)
    return dict(params)


def run_experiment(
    experiment: Experiment,
    *,
    run_id: str | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    cpus: CpuPlan | None = None,
    progress: bool | ProgressCallback = True,
    notebook_parameters: Mapping[str, Any] | None = None,
    runtime: RuntimeChoice = None,
    load: LoadFunction | None = None,
    cross_check: CrossCheckFunction | None = None,
    until: StopRule | None = None,
    decided: Callable[[Any], Sequence[str]] | None = None,
    hosts: HostCheck | None = None,
) -> Run:
    """Run (or resume) ``experiment`` and return the run, read (:class:`benchlib.store.results.Run`:
    its trials, summaries, provenance; ``ran`` and ``skipped`` count this execution's trials).

    Parameters
    ----------
    experiment: arms, conditions, trials, seed, runtime and limits.
    run_id: ``None`` or ``""`` for a new run; an existing id resumes that run (same parameters).
    out_dir: root of the run folders (default ``data/runs`` of the project, or ``$BENCHLIB_DATA``).
    cpus: CPU assignment (default: :func:`benchlib.run.cpus.plan_cpus`).
    progress: ``True`` (automatic renderer), ``False`` or a callback taking event dicts.
    notebook_parameters: the calling notebook's parameters, stored in run.json.
    runtime: the runtime(s) to start services with instead of the ones the experiment and its
        arms name (:func:`benchlib.runtime.get_runtime`): one :class:`~benchlib.runtime.Runtime`
        for every name, or a mapping from names to runtimes (other names by name). Each trial
        stores the name of the runtime that ran it.
    load: the function that runs a trial's load (default :func:`benchlib.loadgen.run_load`, or
        with ``experiment.cluster`` :class:`benchlib.run.cluster.cluster_load.ClusterLoad` on the cluster
        started or joined for this run and stopped or left when it ends; a cluster with
        ``?service=<resource>`` also runs the services on that node:
        :mod:`benchlib.run.cluster.service`).
    cross_check: the function that runs a cross-check's peer tool (default :func:`run_cross_check`).
    until: a stopping rule (e.g. :class:`benchlib.analysis.stopping.StopWhenSettled`), called
        after each complete block as ``until(run, blocks_done)`` (``run``: the trials so far,
        a :class:`~benchlib.store.results.Run`); it returns the
        ``(condition, arm)`` pairs that still need blocks (``None``: all). Later trials of the
        other pairs are not run (a ``settled`` progress event each); when none is left the
        run ends, and run.json records ``stopped_after_blocks``.
    decided: called once each block completes with the per-trial summaries of the trials so
        far (a DataFrame, as :meth:`benchlib.store.results.Run.summaries`); returns the questions already
        decided, in words, for the progress line of that block (e.g.
        :func:`benchlib.analysis.questions.decided_questions`). Each trial is summarized once.
    hosts: asked after every trial whether the load's hosts are as before (:class:`HostCheck`;
        default: none, or with ``experiment.cluster`` the run's
        :class:`~benchlib.run.cluster.session.ClusterSession`): after a re-reservation the block
        runs again in full; :class:`~benchlib.core.errors.HostLost` from it stops the run.

    Raises
    ------
    benchlib.core.signals.Interrupted
        SIGINT, SIGTERM or SIGHUP arrived (a ``KeyboardInterrupt``): the trial under way was
        abandoned, its load and services stopped; stored trials are kept.
    benchlib.core.errors.HostLost
        a cluster run (``experiment.cluster``) cannot go on: fewer load hosts left than its
        ``min_hosts``, or its service node lost (one line); the block under way was set aside,
        the other stored trials are kept for a resume on a repaired cluster. A run that can go
        on reserves the load hosts again and runs the block that lost a host again in full.
    benchlib.core.errors.StorageError
        resuming a run whose folder has no ``run.json``, or whose stored data is unreadable
        (the file is named); nothing was written then.
    """
    with interrupt_on_signals():
        if load is None and experiment.cluster is not None:
            from benchlib.run.cluster.cluster_load import ClusterLoad
            from benchlib.run.cluster.cluster_peer import ClusterCrossCheck
            from benchlib.run.cluster.service import on_service_node
            from benchlib.run.cluster.session import ClusterSession
            from benchlib.core.placement import parse_cluster

            spec = parse_cluster(experiment.cluster)
            assert spec is not None
            # stopped (a local cluster) or left whatever happens; with "?service=" the services
            # run on that node (each runtime wrapped), stopped there at the end
            with ClusterSession(spec) as session, on_service_node(session, _runtime_lookup(runtime)) as runtimes:
                return _run(experiment, run_id, out_dir, cpus or plan_cpus(), progress, notebook_parameters,
                            runtimes, ClusterLoad(session), cross_check or ClusterCrossCheck(session), until,
                            decided, hosts=hosts or session)
        if load is None:
            from benchlib.loadgen import run_load

            load = run_load
        return _run(experiment, run_id, out_dir, cpus or plan_cpus(), progress, notebook_parameters,
                    _runtime_lookup(runtime), load, cross_check or run_cross_check, until, decided, hosts=hosts)



def _record_run_folder(store: RunStore) -> None:
    """Append the run's folder to ``$BENCHLIB_RUNS_FILE`` when set (``benchlib run`` / ``report``
    read the runs' not-run arms from there for their summary)."""
    path = settings.RUNS_FILE.get()
    if path is not None:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{store.path.resolve()}\n")


class _Decided:
    """The ``decided`` hook of a run: summaries of the trials so far, each trial summarized once."""

    def __init__(self, store: RunStore, hook: Callable[[Any], Sequence[str]] | None) -> None:
        self.store = store
        self.hook = hook
        self.rows: dict[tuple[str, str, int], dict[str, Any]] = {}

    def forget(self, block: int) -> None:
        """Drop the summaries of ``block``'s trials (set aside: the block runs again)."""
        self.rows = {k: v for k, v in self.rows.items() if k[2] != block}

    def __call__(self) -> list[str] | None:
        if self.hook is None:
            return None
        import pandas as pd

        for t in self.store.trials():
            key = (t.condition, t.arm, t.block)
            if key not in self.rows:
                self.rows[key] = trial_summary(TrialRecord.from_meta(t.meta, path=t.path))
        try:
            return list(self.hook(pd.DataFrame(list(self.rows.values()))))
        except Exception as exc:  # noqa: BLE001 - an interim look for the progress display never stops a run
            return [f"(not computed: {type(exc).__name__}: {exc})"]


def _run(experiment: Experiment, run_id: str | None, out_dir: str | os.PathLike[str] | None, cpus: CpuPlan,
         progress: bool | ProgressCallback, notebook_parameters: Mapping[str, Any] | None,
         runtimes: Callable[[str], Runtime], load: LoadFunction, cross_check: CrossCheckFunction,
         until: StopRule | None = None, decided: Callable[[Any], Sequence[str]] | None = None,
         hosts: HostCheck | None = None) -> Run:
    longest = settings.MAX_BETWEEN_TRIALS_S.get()  # $BENCHLIB_MAX_BETWEEN_TRIALS_S: the pause used is the one stored
    if longest is not None and experiment.between_trials_s > longest:
        experiment = replace(experiment, between_trials_s=longest)
    runtime = runtimes(experiment.runtime)
    runtime.check()  # before the run folder is made
    store = RunStore.open(experiment.study, run_id, root=out_dir)
    existing, stored = _read_stored(store)
    show = make_progress(progress)
    ex = _Executor(experiment, runtimes, cpus, store, show, load, cross_check)
    ex.runtimes[experiment.runtime] = runtime
    ex.prepare_all()
    runnable = [a.name for a in experiment.arms if a.name not in ex.unavailable]
    plan = plan_trials(runnable, experiment.trials, seed=experiment.seed,
                       conditions=[c.name for c in experiment.conditions]) if runnable else []
    params = experiment_parameters(experiment)
    _check_same_plan(store, existing, plan, params)
    toolchain_names = {t for a in experiment.arms for name in (a.service, a.front) if name
                       for t in get_manifest(name).toolchains}
    if not existing:
        settled = _settle(show, experiment.study)  # BENCHLIB_SETTLE: a quiet machine before the first trial
        store.write_run({
            "study": experiment.study, "run_id": store.run_id, "status": "running",
            "parameters": params, "notebook_parameters": dict(notebook_parameters or {}),
            "plan": [p.to_dict() for p in plan], "cpus": cpus.to_dict(),
            "unavailable": ex.unavailable,
            "builds": {(f"{k[1]}/{k[2]}" if k[0] == experiment.runtime else f"{k[0]}:{k[1]}/{k[2]}"): dict(v.info)
                       for k, v in ex.prepared.items()},
            "runtime": runtime.provenance(), "provenance": _provenance.collect(toolchains.versions(toolchain_names)),
            **({"runtimes": {n: r.provenance() for n, r in ex.runtimes.items()}} if len(ex.runtimes) > 1 else {}),
            **({"settle": asdict(settled)} if settled is not None else {}),
        })
    _record_run_folder(store)
    conditions = {c.name: c for c in experiment.conditions}
    ran = skipped = 0
    show({"event": "start", "study": experiment.study, "run_id": store.run_id, "total": len(plan),
          "blocks": experiment.trials if plan else 0, "unavailable": dict(ex.unavailable),
          "plan": [(p.condition, p.arm, ex.cross_check_for(p, conditions[p.condition]) is not None) for p in plan]})
    decide = _Decided(store, decided)
    needed: set[tuple[str, str]] | None = None  # (condition, arm) pairs the stopping rule still wants
    stopped_after: int | None = None
    still: list[tuple[PlannedTrial, TrialRecord, list[Attempt]]] = []  # disturbed when their repeats ran out

    def again(planned: PlannedTrial, rec: TrialRecord, attempts: list[Attempt],
              cap: Callable[[TrialRecord], int]) -> TrialRecord:
        """Run an invalid trial again in its place while the attempts added here are fewer than
        ``cap(rec)``, each attempt set aside and listed in ``attempts``; the last record."""
        base = len(attempts)
        while rec.status == "invalid" and len(attempts) - base < cap(rec):
            attempts.append(Attempt(rec.status, rec.reason, rec.started, rec.finished))
            store.set_aside(planned.condition, planned.arm, planned.block)
            if experiment.between_trials_s:
                time.sleep(experiment.between_trials_s)
            rec = ex.run_trial(planned, conditions[planned.condition], attempts)
        return rec

    queue = list(range(len(plan)))  # the plan's trials still to run, by index, in order
    prev: PlannedTrial | None = None  # the last trial taken from the queue
    current: PlannedTrial | None = None  # the last trial run
    ran_here: dict[tuple[str, str, int], TrialRecord] = {}  # the trials this execution stored
    carried: dict[tuple[str, str, int], list[Attempt]] = {}  # attempts set aside when their block ran again
    losses: list[dict[str, Any]] = list(existing.get("host_losses") or [])

    def set_aside_block(block: int) -> int:
        """Move every stored trial of ``block`` aside (a host was lost in it: it runs again in
        full, on one host set); each one's record goes to the attempts of the trial that
        replaces it. How many were set aside."""
        aside = 0
        for p in plan:
            key = (p.condition, p.arm, p.block)
            if p.block != block:
                continue
            old = stored.pop(key, None)
            prior = ran_here.pop(key, None) or (TrialRecord.from_meta(old.meta, path=old.path) if old else None)
            if store.set_aside(*key) is not None:
                aside += 1
                if prior is not None:
                    why = f"set aside: block b{block} ran again in full on the load hosts left after a loss"
                    carried[key] = [*prior.attempts, Attempt(prior.status, f"{prior.reason}; {why}" if prior.reason
                                                             else why, prior.started, prior.finished)]
        decide.forget(block)
        return aside

    def after_trial(planned: PlannedTrial) -> None:
        """Ask the hosts whether they are as before (:meth:`HostCheck.check`, which raises
        :class:`~benchlib.core.errors.HostLost` when the run cannot go on); after a re-reservation,
        ``planned``'s block runs again in full, and make-up trials of blocks run on the hosts
        before are dropped."""
        nonlocal queue
        note = hosts.check() if hosts is not None else None
        if note is None:
            return
        block = planned.block
        idx = [j for j, p in enumerate(plan) if p.block == block]
        undone = sum(j not in queue for j in idx)  # counted as done by the progress so far
        aside = set_aside_block(block)
        queue = idx + [j for j in queue if plan[j].block != block]
        dropped = len(still)
        still.clear()
        text = (f"{note}; block b{block} runs again in full on them ({aside} trial(s) set aside)"
                + (f"; {dropped} make-up trial(s) dropped (their blocks ran on the hosts before)" if dropped else ""))
        losses.append({"utc": utc_stamp(utc_now()), "block": block, "line": text})
        store.update_run(host_losses=losses)
        LOG.info(text)
        show({"event": "note", "study": experiment.study, "text": text, "undone": undone})

    with _pinned_to(cpus.client), contextlib.ExitStack() as shared:
        shared.enter_context(run_log(store.path))  # the full text behind one-line notes (logs/run.log)
        shared.callback(ex.end_block)  # dependencies="block": the last block's, also on an interrupt
        shared.callback(ex.stop_kept)  # service_starts="cell": the kept services, also on an interrupt
        try:
            while True:
                while queue:
                    i = queue.pop(0)
                    planned = plan[i]
                    new_block = prev is not None and planned.block > prev.block
                    if new_block and prev is not None:  # every condition's trials of the previous block are stored
                        ex.end_block()
                        show({"event": "block", "study": experiment.study, "total": len(plan), "block": prev.block,
                              "decided": decide()})
                    ev = {"study": experiment.study, "total": len(plan), **planned.to_dict()}
                    if until is not None and new_block:
                        wanted = until(open_run(store, experiment=experiment, unavailable=ex.unavailable), planned.block)
                        needed = None if wanted is None else {(str(c), str(a)) for c, a in wanted}
                        if needed is not None and not needed:
                            stopped_after = planned.block
                            show({**ev, "event": "settled", "blocks": planned.block})
                            break
                    prev = planned
                    if needed is not None and (planned.condition, planned.arm) not in needed:
                        show({**ev, "event": "settled"})
                        continue
                    key = (planned.condition, planned.arm, planned.block)
                    old = stored.get(key)
                    if old is not None:
                        if not (experiment.retry_failed and old.meta.get("status") == "failed"):
                            skipped += 1
                            show({**ev, "event": "skip"})
                            continue
                        store.set_aside(planned.condition, planned.arm, planned.block)
                    t_trial = time.monotonic()
                    current = planned
                    attempts: list[Attempt] = carried.pop(key, [])
                    carried_n = len(attempts)
                    rec = ex.run_trial(planned, conditions[planned.condition], attempts)
                    # the client could not keep the load, or the machine disturbed the trial: run it again, in its place
                    rec = again(planned, rec, attempts, lambda r: experiment.repeat_disturbed if is_disturbed(r.reason)
                                else experiment.repeat_invalid)
                    ran += 1
                    ran_here[key] = rec
                    if rec.status == "invalid" and is_disturbed(rec.reason) and experiment.repeat_disturbed:
                        still.append((planned, rec, attempts))
                    done = rec.load.raw if rec.load is not None else {}
                    if experiment.between_trials_s:
                        time.sleep(experiment.between_trials_s)
                    show({**ev, "event": "trial", "status": rec.status, "reason": rec.reason,
                          "repeated": len(attempts) - carried_n, "achieved_rps": done.get("achieved_rps"),
                          "p50_ms": done.get("p50_ms"), "seconds": time.monotonic() - t_trial})
                    after_trial(planned)
                if not plan or stopped_after is not None or not still:
                    break
                # a make-up pass at the end of the run, in plan order: a disturbance (a steal episode,
                # a neighbour) that outlasted a slot's repeats has often passed by now; the same rule
                # and cap for every slot, whatever its arm
                planned, rec, attempts = still.pop(0)
                t_trial, current = time.monotonic(), planned
                rec = again(planned, rec, attempts, lambda r: experiment.repeat_disturbed if is_disturbed(r.reason)
                            else 0)
                ran_here[(planned.condition, planned.arm, planned.block)] = rec
                show({"event": "note", "study": experiment.study,
                      "text": f"make-up trial {planned.condition}/{planned.arm} b{planned.block} (disturbed when its "
                              f"repeats ran out): {rec.status}" + (f" ({rec.reason})" if rec.status != "ok" else "")
                              + f", {len(attempts)} attempt(s) set aside, {time.monotonic() - t_trial:.1f} s"})
                after_trial(planned)
        except HostLost as exc:
            # the run cannot go on: the block under way lost a host (it runs again in full on
            # resume); every other stored trial is kept
            aside = set_aside_block(current.block) if current is not None else 0
            kept = len(store.trials())
            line = (f"{exc}: the run stops; {kept} stored trial(s) kept"
                    + (f" (block b{current.block}'s {aside} set aside: it runs again in full on resume)"
                       if current is not None and aside else "")
                    + f"; resume with run_id {store.run_id!r} on a repaired cluster")
            losses.append({"utc": utc_stamp(utc_now()), "block": current.block if current else None, "line": line,
                           "stopped": True})
            store.update_run(status="stopped", host_losses=losses)
            LOG.info(line)
            show({"event": "note", "study": experiment.study, "text": line})
            raise HostLost(line) from None
        if plan and stopped_after is None:
            show({"event": "block", "study": experiment.study, "total": len(plan), "block": plan[-1].block,
                  "decided": decide()})
    store.update_run(status="complete", finished_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     **({"stopped_after_blocks": stopped_after} if stopped_after is not None else {}))
    show({"event": "done", "study": experiment.study, "run_id": store.run_id, "ran": ran, "skipped": skipped})
    return replace(open_run(store, experiment=experiment, unavailable=ex.unavailable), ran=ran, skipped=skipped)
