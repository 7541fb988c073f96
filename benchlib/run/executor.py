"""One trial, run and stored: the unit of replication.

:meth:`TrialExecutor.run_trial` runs a planned trial of one arm: its services start fresh
(:meth:`benchlib.run.services.RunServices.start`), the endpoint's contract is checked through
the front when there is one (the load goes there too), the load runs (warm-up, then the
measured phase) from the client's CPUs while :class:`~benchlib.run.sampler.DisturbanceSampler`
records what the machine did, the condition's peer tool runs before or after it in the blocks
chosen, the services stop (the front first), and the trial is stored atomically with its typed
record (:class:`~benchlib.store.records.TrialRecord`) and judged: ``ok``, ``invalid`` (the load
generator's guard, or the disturbance rule) or ``failed`` (the service died, broke its
contract, or the load generator failed) with its reason and whatever was measured.

What the executor takes from outside is a seam each: the load function (:class:`LoadFunction`,
:func:`benchlib.loadgen.run_load` by default) and the cross-check function
(:class:`CrossCheckFunction`). A trial of another kind (several arms measured inside one trial)
is another method beside :meth:`TrialExecutor.run_trial` that starts several arms' services
with the same :class:`~benchlib.run.services.RunServices` and stores one record per arm through
:meth:`TrialExecutor.store_trial`.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any, Protocol

import numpy as np

from benchlib.core.design import PlannedTrial, cross_check_blocks
from benchlib.core.errors import BenchlibError, ContractError, ParameterError, ServiceStartError
from benchlib.core.model import CROSS_CHECK_TOOLS, Arm, Condition, CrossCheck, Experiment, LoadSpec, Target
from benchlib.core.placement import CpuPlan
from benchlib.core.schema import ROW_DTYPE
from benchlib.core.slicing import plan_slices, slice_cpu
from benchlib.loadgen.launch import LoadResult, run_interleaved
from benchlib.run.sampler import DisturbanceSampler, bounds_from_settings
from benchlib.run.services import ArmServices, RunServices
from benchlib.run.sidebyside import BoundaryReader, InterleavedLoadFunction, arm_counter, idle_rates, slice_of_rows
from benchlib.runtime.base import ServiceHandle, handle_ports
from benchlib.runtime.contract import verify
from benchlib.runtime.manifest import Endpoint
from benchlib.store.records import (
    TRIAL_RECORD_VERSION,
    Attempt,
    DependencyRecord,
    EnforcedLimits,
    FrontRecord,
    LoadMeta,
    ServiceLog,
    TrialRecord,
    peer_report,
)
from benchlib.store.records.disturbance import Disturbance, DisturbanceBounds
from benchlib.store.records.interleave import InterleaveRecord
from benchlib.store.records.trial import utc_now
from benchlib.store.results import trial_record
from benchlib.store.runstore import RunStore

__all__ = ["CrossCheckFunction", "LoadFunction", "TrialExecutor", "cross_check_for", "request_for"]


class LoadFunction(Protocol):
    """What runs one trial's load: :func:`benchlib.loadgen.run_load`'s signature (a test may
    pass :class:`benchlib.run.testing.FakeLoad`)."""

    def __call__(self, spec: LoadSpec, target: Target, *, client_cpus: Sequence[int] | None = None,
                 seed: int = 0) -> LoadResult: ...


class CrossCheckFunction(Protocol):
    """What runs a cross-check's peer tool: :func:`benchlib.loadgen.peers.crosscheck.run_cross_check`'s signature."""

    def __call__(self, check: CrossCheck, url: str, cpus: Sequence[int], *, order: str) -> dict[str, Any]: ...


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


def _sends_requests(tool: str) -> bool:
    """Whether a peer tool's ``run_<tool>`` sends the request it is given (takes ``body``)."""
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


class _Died(Exception):
    """A service or front was found dead when the load could not start (the trial's reason)."""


def _sample_now(*handles: ServiceHandle | None) -> None:
    """One resource sample of each running handle now (runtimes that can take one)."""
    for h in handles:
        if h is not None and hasattr(h, "sample_now"):
            h.sample_now()


class TrialExecutor:
    """Runs the trials of one run, one at a time, and stores each (see the module docstring).

    Attributes
    ----------
    experiment, cpus, store: the experiment, where its services and load run, its folder.
    services: the run's services (:class:`~benchlib.run.services.RunServices`).
    load, cross_check: the seams that run a trial's load and its peer tool; load_interleaved: the
        seam that runs an interleaved trial's load (default
        :func:`benchlib.loadgen.launch.run_interleaved`).
    check_blocks: the blocks the conditions' peer tools run in (``Experiment.cross_check_blocks``).
    disturbances: what the machine did to each attempt so far (the disturbance rule's references).
    disturbance_bounds: the disturbance rule's bounds (``None``: measured and reported, never
        judged; ``BENCHLIB_DISTURBANCE_RULE=record``).
    failed_arms: the arms that failed the last interleaved trial by themselves (one did not
        start, broke its contract or died; empty when it did not fail, or failed for all alike).
    """

    def __init__(self, experiment: Experiment, services: RunServices, load: LoadFunction,
                 cross_check: CrossCheckFunction, load_interleaved: InterleavedLoadFunction | None = None) -> None:
        self.experiment = experiment
        self.load_interleaved: InterleavedLoadFunction = load_interleaved or run_interleaved
        self.services = services
        self.cpus: CpuPlan = services.cpus
        self.store: RunStore = services.store
        self.load = load
        self.cross_check = cross_check
        self.check_blocks = cross_check_blocks(experiment.trials, experiment.cross_check_blocks)
        self.disturbances: list[Disturbance] = []
        self.disturbance_bounds: DisturbanceBounds | None = bounds_from_settings()
        self.failed_arms: tuple[str, ...] = ()

    def cross_check_in(self, planned: PlannedTrial, condition: Condition) -> CrossCheck | None:
        """The condition's peer tool if it runs in this trial (its arm, one of the chosen blocks)."""
        check = condition.cross_check_of(planned.arm)
        if check is None or planned.block not in self.check_blocks:
            return None
        return check

    def _run_check(self, check: CrossCheck, url: str, endpoint: Endpoint, *, order: str) -> dict[str, Any]:
        """The cross-check of one trial, fitted to its endpoint (:func:`cross_check_for`); a
        tool that does not fit the endpoint is the cross-check's error, the trial stands."""
        try:
            fitted = cross_check_for(check, endpoint)
        except ParameterError as exc:
            return {"tool": check.tool, "order": order, "error": f"ParameterError: {exc}"}
        return self.cross_check(fitted, url, self.cpus.client, order=order)

    def store_trial(self, rows: np.ndarray, record: TrialRecord, hosts: np.ndarray | None = None, *,
                    slices: np.ndarray | None = None) -> TrialRecord:
        """Store one trial (its rows, its record; ``hosts``: each row's load host; ``slices``:
        each row's slice in an interleaved trial) and return its record as a reader reads it
        back (its file, its log, its metadata as stored)."""
        return trial_record(self.store, self.store.write_trial(rows, record.to_meta(), hosts=hosts, slices=slices))

    def _record(self, planned: PlannedTrial, attempts: Sequence[Attempt]) -> TrialRecord:
        """The record of ``planned`` before it runs: where it sits, what it runs, where."""
        exp = self.experiment
        arm = exp.arm(planned.arm)
        return TrialRecord(
            condition=planned.condition, arm=planned.arm, block=planned.block, position=planned.position,
            seq=planned.seq, service=arm.service, variant=arm.variant or "", log_sink=arm.log_sink,
            runtime=self.services.runtime_for(arm).name, limits=asdict(arm.limits or exp.limits),
            cpus={k: tuple(v) for k, v in self.cpus.to_dict().items()}, started=utc_now(), attempts=tuple(attempts),
            version=TRIAL_RECORD_VERSION)

    def _started_fields(self, rec: TrialRecord, started: ArmServices, condition: Condition,
                        got: dict[str, Any]) -> tuple[Endpoint, FrontRecord | None]:
        """What the record takes from the arm's started services (enforced limits, ports,
        dependencies, front, endpoint) into ``got``; the endpoint loaded and the front's record."""
        arm = self.experiment.arm(rec.arm)
        handle, svc, deps, front = started.handle, started.service, started.dependencies, started.front

        def enforced(h: ServiceHandle) -> EnforcedLimits | None:
            return EnforcedLimits.from_dict(dict(h.enforced), runtime=rec.runtime)

        got.update(variant=svc.variant, enforced=enforced(handle))
        if len(handle_ports(handle)) > 1:
            got["ports"] = tuple(handle_ports(handle))
        shared = self.experiment.dependencies == "block"
        got["dependencies"] = {d.name: DependencyRecord(
            port=d.port, enforced=enforced(d), shared="block" if shared else "",
            reset_s=self.services.dep_reset_s.get(d.name) if shared else None) for d in deps}
        front_rec: FrontRecord | None = None
        if front is not None and started.front_service is not None:
            front_rec = FrontRecord(service=str(arm.front), variant=started.front_service.variant,
                                    port=front.port, enforced=enforced(front))
            got["front"] = front_rec
        endpoint = svc.endpoint(condition.endpoint or arm.endpoint)
        got["endpoint"] = {"name": endpoint.name, "method": endpoint.method, "path": endpoint.path,
                           "protocol": endpoint.protocol}
        return endpoint, front_rec

    def _stopped_fields(self, rec: TrialRecord, started: ArmServices, front_rec: FrontRecord | None,
                        got: dict[str, Any]) -> str | None:
        """Stop the arm's front, then its service, recording their samples, stop and log into
        ``got``; the reason the trial failed when one of them had died during it (else ``None``)."""
        arm = self.experiment.arm(rec.arm)
        handle, front = started.handle, started.front
        alive = handle.alive()
        front_alive = front.alive() if front is not None else True
        got["resources"] = tuple(handle.resource_samples())
        front_stop = None
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
            got["log_tail"] = handle.logs_tail(40)
            return f"service died during the trial ({stop.detail})"
        if not front_alive and front is not None and front_stop is not None:
            got["log_tail"] = front.logs_tail(40)
            return f"front {arm.front} died during the trial ({front_stop.detail})"
        return None

    @staticmethod
    def _judged(result_meta: Mapping[str, Any], disturbance: Disturbance | None) -> tuple[str, str | None]:
        """A loaded trial's status and reason: the load failed, the guard invalidated it, the
        machine disturbed it, or ok."""
        if result_meta.get("failed"):
            # the load generator failed mid-trial: its rows so far are stored, as evidence
            return "failed", f"LoadGenError: {result_meta.get('failure')}"
        if not result_meta.get("valid", True):
            return "invalid", result_meta.get("invalid_reason") or "load generator marked the trial invalid"
        if disturbance is not None and disturbance.disturbed:
            return "invalid", disturbance.verdict
        return "ok", None

    def run_trial(self, planned: PlannedTrial, condition: Condition, attempts: Sequence[Attempt] = ()) -> TrialRecord:
        """Run one planned trial and store it (``attempts``: those set aside before it, kept in
        its record); returns the stored record, as read back."""
        exp = self.experiment
        arm = exp.arm(planned.arm)
        rec = self._record(planned, attempts)
        rows = np.zeros(0, dtype=ROW_DTYPE)
        hosts: np.ndarray | None = None  # each row's load host (several hosts: benchlib.run.cluster)
        status, reason = "ok", None
        got: dict[str, Any] = {}  # the record's fields as the trial gets them (TrialRecord's names)
        try:
            with self.services.start(arm, planned.condition, planned.block) as started:
                handle, deps, front = started.handle, started.dependencies, started.front
                endpoint, front_rec = self._started_fields(rec, started, condition, got)
                target = started.target
                target_url = f"http://{target.host}:{target.port}"
                got["contract"] = verify(target_url, endpoint).to_dict()
                spec = request_for(condition.load, endpoint)
                check = self.cross_check_in(planned, condition)
                # first in every other block the peer runs in (with "all": the odd blocks)
                peer_first = check is not None and self.check_blocks.index(planned.block) % 2 == 1
                if check is not None and peer_first:
                    got["peer"] = peer_report(self._run_check(check, target_url + endpoint.path, endpoint,
                                                              order="before"))
                sampler = DisturbanceSampler.for_trial(self.cpus.server, self.cpus.client, self.cpus.dependencies,
                                                       handle, front, deps).start()
                _sample_now(handle, front)  # CPU and memory as the load starts ...
                try:
                    result = self.load(spec, Target(target.host, target.port), client_cpus=self.cpus.client,
                                       seed=exp.seed * 1_000_003 + planned.seq)
                except BenchlibError:
                    self._died_first(arm, started, got)
                    raise
                _sample_now(handle, front)  # ... and as it ends
                # what the machine did to the trial (outside signals only), judged by one rule for every arm
                load_meta = LoadMeta.from_dict(result.meta)
                got["disturbance"] = sampler.finish(load_meta, history=self.disturbances, bounds=self.disturbance_bounds)
                self.disturbances.append(got["disturbance"])
                if check is not None and not peer_first:
                    got["peer"] = peer_report(self._run_check(check, target_url + endpoint.path, endpoint,
                                                              order="after"))
                rows = result.rows
                hosts = result.hosts
                got["load"] = load_meta
                died = self._stopped_fields(rec, started, front_rec, got)
                status, reason = ("failed", died) if died else self._judged(result.meta, got["disturbance"])
        except _Died as exc:
            status, reason = "failed", str(exc)
        except (ServiceStartError, ContractError) as exc:
            status, reason = self._start_failure(exc, got)
        except BenchlibError as exc:
            status = "failed"
            reason = f"{type(exc).__name__}: {exc}"
            got["traceback"] = traceback.format_exc()[-4000:]
        return self.store_trial(rows, replace(rec, **got, status=status, reason=reason, finished=utc_now()), hosts)

    @staticmethod
    def _died_first(arm: Arm, started: ArmServices, got: dict[str, Any]) -> None:
        """The load could not start (e.g. refused): if the service or its front died first,
        the death is the trial's reason, not the refused connection (raises :class:`_Died`)."""
        for who, h in (("service", started.handle), (f"front {arm.front}", started.front)):
            if h is not None and not h.alive():
                stopped = h.stop()
                if h is started.handle:
                    got["stop"] = asdict(stopped)
                got["log_tail"] = h.logs_tail(40)
                raise _Died(f"{who} died before the load connected ({stopped.detail})") from None

    @staticmethod
    def _start_failure(exc: BenchlibError, got: dict[str, Any]) -> tuple[str, str]:
        """A service that did not start, or broke its contract: the trial's status and reason
        (its log tail into ``got``)."""
        notes = getattr(exc, "__notes__", [])
        if notes:
            got["log_tail"] = "\n".join(notes)[-4000:]
        return "failed", f"{type(exc).__name__}: {exc}"

    # -- arms side by side ----------------------------------------------------------------------
    def run_interleaved(self, group: Sequence[PlannedTrial], condition: Condition,
                        attempts: Mapping[str, Sequence[Attempt]]) -> list[TrialRecord]:
        """Run one interleaved trial: every arm of ``group`` (one condition, one block) measured
        side by side (``Experiment(interleave=...)``, :mod:`benchlib.core.slicing`), and store
        each arm's part as a trial of its own; the records, as read back, in ``group``'s order.

        Every arm's dependencies, service and front start fresh, on the server's CPUs, in the
        block's order; each contract is checked; each instance is left idle for
        :data:`~benchlib.run.sidebyside.IDLE_READ_S` (its idle CPU rate); the load alternates
        between them in the plan's slices while their CPU counters are read at every slice
        boundary; the disturbance sampler counts every arm's CPU as ours; everything stops (each
        front first). One arm that cannot start, breaks its contract or dies fails the whole
        trial (every arm's record says which, and :attr:`failed_arms` names it for the runner);
        the guard and the disturbance rule judge the trial as one (an arm the guard invalidated
        makes every arm's trial invalid: the arms shared the client and the machine)."""
        exp = self.experiment
        il = exp.interleave
        assert il is not None
        recs = [self._record(p, attempts.get(p.arm, ())) for p in group]
        gots: list[dict[str, Any]] = [{} for _ in group]
        rows: list[np.ndarray] = [np.zeros(0, dtype=ROW_DTYPE) for _ in group]
        slices: list[np.ndarray | None] = [None for _ in group]
        status, reason = "ok", None
        per_arm: list[str | None] = [None for _ in group]  # an arm's own reason (it died), if any
        self.failed_arms = ()
        blamed = group[0].arm  # the arm a failure here is blamed on ("": no one arm)
        try:
            with contextlib.ExitStack() as stack:
                started: list[ArmServices] = []
                fronts: list[FrontRecord | None] = []
                specs: list[tuple[LoadSpec, Target]] = []
                peers: list[tuple[int, CrossCheck, str, Endpoint, bool]] = []  # beside the load, one arm at a time
                for k, (p, rec, got) in enumerate(zip(group, recs, gots)):
                    blamed = p.arm
                    s = stack.enter_context(self.services.start(exp.arm(p.arm), p.condition, p.block))
                    started.append(s)
                    endpoint, front_rec = self._started_fields(rec, s, condition, got)
                    fronts.append(front_rec)
                    target = s.target
                    url = f"http://{target.host}:{target.port}"
                    got["contract"] = verify(url, endpoint).to_dict()
                    specs.append((request_for(condition.load, endpoint), Target(target.host, target.port)))
                    check = self.cross_check_in(p, condition)
                    if check is not None:  # first in every other block the peer runs in
                        peers.append((k, check, url + endpoint.path, endpoint,
                                      self.check_blocks.index(p.block) % 2 == 1))
                blamed = ""  # every arm started and met its contract
                for k, check, url, endpoint, first in peers:
                    if first:
                        gots[k]["peer"] = peer_report(self._run_check(check, url, endpoint, order="before"))
                load = specs[0][0]
                plan = plan_slices(len(group), warmup_s=load.warmup_s, measured_s=float(load.duration_s or 0.0),
                                   slice_ms=il.slice_ms, gap_ms=il.gap_ms,
                                   seed=exp.seed * 1_000_003 + group[0].seq)
                counters = [arm_counter([s.handle, s.front]) for s in started]
                idle = idle_rates(counters)
                everyone = [h for s in started for h in (s.handle, s.front, *s.dependencies) if h is not None]
                sampler = DisturbanceSampler.for_trial(
                    self.cpus.server, self.cpus.client, self.cpus.dependencies, started[0].handle, started[0].front,
                    [d for s in started for d in s.dependencies],
                    beside=[h for s in started[1:] for h in (s.handle, s.front) if h is not None]).start()
                _sample_now(*everyone)
                reader = BoundaryReader(plan, counters)
                try:
                    results = self.load_interleaved(specs, plan, client_cpus=self.cpus.client,
                                                    seed=exp.seed * 1_000_003 + group[0].seq, on_start=reader.start_at)
                except BenchlibError:
                    for p, s, got in zip(group, started, gots):
                        blamed = p.arm
                        self._died_first(exp.arm(p.arm), s, got)
                    blamed = ""
                    raise
                reader.join()
                _sample_now(*everyone)
                for k, check, url, endpoint, first in peers:
                    if not first:
                        gots[k]["peer"] = peer_report(self._run_check(check, url, endpoint, order="after"))
                cpu = slice_cpu(plan, reader.times_ns, reader.values, idle)
                metas = [LoadMeta.from_dict(r.meta) for r in results]
                disturbance = sampler.finish(metas[0], history=self.disturbances, bounds=self.disturbance_bounds)
                self.disturbances.append(disturbance)
                names = tuple(p.arm for p in group)
                for k, (rec, got, s, front_rec, result, meta) in enumerate(zip(recs, gots, started, fronts, results,
                                                                              metas)):
                    rows[k] = result.rows
                    slices[k] = slice_of_rows(result.rows, plan.windows[k])
                    got.update(load=meta, disturbance=disturbance, interleave=InterleaveRecord(
                        arms=names, index=k, slice_ms=plan.slice_ms, gap_ms=plan.gap_ms, order=plan.order,
                        slices=len(plan.windows[k]), warmup_s=plan.warmup_s, measured_s=plan.measured_s(k),
                        total_s=plan.total_s, cpu=cpu[k],
                        readable=bool(reader.values) and all(row[k] is not None for row in reader.values)))
                    per_arm[k] = self._stopped_fields(rec, s, front_rec, got)
                # one trial, one judgment: a death fails it, the guard or the rule invalidates it
                died = [f"{p.arm}: {why}" for p, why in zip(group, per_arm) if why]
                if died:
                    status, reason = "failed", "; ".join(died)
                    self.failed_arms = tuple(p.arm for p, why in zip(group, per_arm) if why)
                else:
                    judged = [self._judged(r.meta, disturbance) for r in results]
                    worst = next((j for j in judged if j[0] == "failed"), next((j for j in judged if j[0] != "ok"),
                                                                               ("ok", None)))
                    status, reason = worst
                    if status != "ok" and reason != disturbance.verdict:  # the load's judgment names its arm
                        reason = f"{next(p.arm for p, j in zip(group, judged) if j == worst)}: {reason}"
        except _Died as exc:
            status, reason = "failed", f"{blamed}: {exc}" if blamed else str(exc)
            self.failed_arms = (blamed,) if blamed else ()
        except (ServiceStartError, ContractError) as exc:
            status, reason = self._start_failure(exc, gots[0])
            if blamed:
                reason, self.failed_arms = f"{blamed}: {reason}", (blamed,)
        except BenchlibError as exc:
            status = "failed"
            reason = f"{type(exc).__name__}: {exc}"
            gots[0]["traceback"] = traceback.format_exc()[-4000:]
        finished = utc_now()
        return [self.store_trial(r, replace(rec, **got, status=status, reason=reason, finished=finished), slices=sl)
                for r, rec, got, sl in zip(rows, recs, gots, slices)]
