"""Load from every host of a Ray cluster: the runner's ``load=`` function for ``cluster=``.

For each trial: one load actor per host (:class:`benchlib.run.cluster.host.LoadHost`), each in
its own bundle of the session's ``STRICT_SPREAD`` placement group; each gets its share
(:class:`benchlib.loadgen.shares.HostShare`) and readies its workers; the driver measures
each host's clock offset by round trips, picks a start instant a little ahead and gives it
to every host; each host converts it to its monotonic clock and runs the engine. The rows
come back as Arrow, merged with their host (:func:`benchlib.run.cluster.merge.merge_hosts`).

Faults: a host whose actor dies or fails costs its own rows only; a host that has not
finished by the trial's deadline (planned length + response timeout + a margin) is killed
and the trial fails with the reason; on Ctrl-C (or any error) every actor is killed at once,
and with it its worker processes (they die with the thread that started them). Ray's errors
become benchlib's here, in one line naming the host (:mod:`benchlib.run.cluster.faults`; the full
text in the run's log): a host whose node is lost before the load starts raises
:class:`~benchlib.core.errors.HostLost` (never waiting on a bundle Ray is placing again); one lost
mid-trial fails the trial with ``load host <i> (<name>) failed: its node died (...)``. An
actor that stops answering is settled by :meth:`~benchlib.run.cluster.session.ClusterSession.node_fate`
(its node died, or only the actor did).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from benchlib.core.errors import HostLost, LoadGenError
from benchlib.core.model import LoadSpec, Target
from benchlib.loadgen.launch import LoadResult
from benchlib.loadgen.preflight import validate
from benchlib.loadgen.shares import HostShare
from benchlib.run.cluster.clock import START_SKEW_BOUND_NS, ClockOffset, ClockSample, estimate_offset
from benchlib.run.cluster.faults import HostFault, fault_of, log_fault
from benchlib.run.cluster.host import LoadHost, arrow_to_rows
from benchlib.run.cluster.merge import HostInfo, HostOutcome, merge_hosts
from benchlib.run.cluster.session import ClusterSession, require_ray

__all__ = ["ClusterLoad", "CLOCK_ROUND_TRIPS", "START_AHEAD_NS", "DEADLINE_MARGIN_S", "HOST_READY_TIMEOUT_S"]

#: Round trips per host for its clock offset (the shortest counts).
CLOCK_ROUND_TRIPS = 7
#: How far ahead of "now" the common start is set, beyond the slowest round trip (ns).
START_AHEAD_NS = 100_000_000
#: Seconds a host may take to start its actor and ready its workers.
HOST_READY_TIMEOUT_S = 90.0
#: Seconds past the planned end (and the response timeout) before a host is given up.
DEADLINE_MARGIN_S = 30.0
#: A trial without a planned length (a request count) gets this long at most (s).
UNPLANNED_TRIAL_LIMIT_S = 3600.0
#: Seconds between two looks at the hosts' nodes while the driver waits on the hosts.
LOOK_EVERY_S = 1.0


class ClusterLoad:
    """Runs a trial's load from every load host of ``session`` (a
    :class:`~benchlib.loadgen.launch.LoadResult` with ``hosts`` and ``meta["cluster"]``).

    Parameters
    ----------
    session: an entered :class:`~benchlib.run.cluster.session.ClusterSession`.
    skew_bound_ns: start skew beyond which a trial is invalid.
    """

    def __init__(self, session: ClusterSession, *, skew_bound_ns: int = START_SKEW_BOUND_NS) -> None:
        self.session = session
        self.skew_bound_ns = skew_bound_ns

    def deadline_s(self, spec: LoadSpec) -> float:
        """Seconds from the start signal until a host still running is given up."""
        planned = spec.measured_duration_s
        if planned is None or spec.warmup_requests:
            return UNPLANNED_TRIAL_LIMIT_S
        return float(spec.warmup_s) + float(planned) + float(spec.timeout_s) + DEADLINE_MARGIN_S

    def __call__(self, spec: LoadSpec, target: Target, *, client_cpus: Sequence[int] | None = None,
                 seed: int = 0) -> LoadResult:
        ray = require_ray()
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        validate(spec, target, probe=False)  # whether the service is reachable is each host's to say
        n = self.session.hosts
        if spec.connections < n * spec.workers:
            from benchlib.core.errors import LoadSpecError

            raise LoadSpecError(f"{spec.connections} connections cannot be divided over {n} load hosts × "
                                f"{spec.workers} worker(s); use at least {n * spec.workers} connections")
        cpus = list(client_cpus) if (client_cpus is not None and self.session.local) else None
        actor_cls = ray.remote(LoadHost)
        t_begin = time.monotonic()
        actors = [actor_cls.options(  # type: ignore[attr-defined]
            num_cpus=0, max_concurrency=4, resources=dict(self.session.bundle), max_restarts=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(self.session.placement_group,
                                                                 placement_group_bundle_index=i),
        ).remote(i) for i in range(n)]
        runs: list[Any] = []
        try:
            infos: list[HostInfo] = self._gather([a.info.remote() for a in actors], "info")
            from benchlib.core.version import VERSION

            mine = VERSION
            other = [i for i in infos if i.benchlib != mine]
            if other:
                raise LoadGenError(f"load host {other[0].host} ({other[0].hostname}) runs benchlib {other[0].benchlib}, "
                                   f"this machine {mine}: every node needs the same version")
            runs = [a.run.remote(spec, target, HostShare(i, n), seed, cpus, HOST_READY_TIMEOUT_S)
                    for i, a in enumerate(actors)]
            self._wait_ready(ray, actors, runs)
            offsets = [self._offset(ray, i, a) for i, a in enumerate(actors)]
            t_ready = time.monotonic()
            ahead = START_AHEAD_NS + 2 * max(o.rtt_ns for o in offsets)
            start_wall_ns = time.time_ns() + ahead
            driver_t0 = time.monotonic_ns() + (start_wall_ns - time.time_ns())
            self._gather([a.go.remote(start_wall_ns) for a in actors], "go")
            outcomes = self._collect(ray, actors, runs, infos, offsets, start_wall_ns, self.deadline_s(spec))
            t_end = time.monotonic()
            overhead = {"ready_s": round(t_ready - t_begin, 4),
                        "trial_s": round(t_end - t_ready, 4),
                        "transfer_s": round(sum(float(o.extra.get("transfer_s", 0.0)) for o in outcomes), 4)}
            return merge_hosts(outcomes, start_wall_ns=start_wall_ns, driver_t0_monotonic_ns=driver_t0,
                               skew_bound_ns=self.skew_bound_ns, overhead=overhead)
        finally:
            for a in actors:  # every trial's actors go, whatever happened (their workers with them)
                try:
                    ray.kill(a, no_restart=True)
                except Exception:  # noqa: BLE001 - already dead
                    pass

    def _host_name(self, i: int) -> str:
        """``load host 1 (myhost)``: the host of bundle ``i`` as the session placed it."""
        nodes = self.session.host_nodes
        return nodes[i].name() if i < len(nodes) else f"load host {i}"

    def _node_id(self, i: int) -> str:
        nodes = self.session.host_nodes
        return nodes[i].node_id if i < len(nodes) else ""

    def _settled(self, i: int, exc: BaseException) -> HostFault:
        """What happened to host ``i`` (its actor's call raised ``exc``): Ray's full text into
        the run's log; an actor that stopped answering settled by its node's fate."""
        fault = fault_of(exc)
        log_fault(self._host_name(i), exc, fault)
        if fault.kind == "unreachable" and self._node_id(i):
            why = self.session.node_fate(self._node_id(i))
            fault = HostFault("node", why) if why is not None else HostFault("actor", f"its actor died ({fault.line})")
        elif fault.kind == "node":
            label = next((h.label for h in self.session.host_nodes if h.index == i), "")
            fault = HostFault("node", f"{fault.line} ({label})" if label else fault.line)
            self.session.lost_nodes.setdefault(self._node_id(i), fault.line)
        return fault

    def _before_start(self, i: int, exc: BaseException) -> BaseException:
        """The error to raise for host ``i`` whose call failed before the load started: a lost
        node is :class:`~benchlib.core.errors.HostLost`, anything else a one-line
        :class:`~benchlib.core.errors.LoadGenError`; both name the host."""
        fault = self._settled(i, exc)
        if fault.kind == "node":
            return HostLost(f"{self._host_name(i)} lost before its load started: {fault.line}")
        if fault.kind == "error":
            return LoadGenError(fault.line)
        return LoadGenError(f"{self._host_name(i)} failed before its load started: {fault.line}")

    def _look(self) -> None:
        """Raise :class:`~benchlib.core.errors.HostLost` if a host's node is lost now (Ray marked it
        dead, or its bundle left it): nothing waits on a bundle Ray is placing again."""
        lost = self.session.lost_hosts()
        if lost:
            h, why = lost[0]
            raise HostLost(f"{h.name()} lost before its load started: {why}")

    def _gather(self, refs: list[Any], what: str) -> list[Any]:
        """Every host's answer to the call ``what`` (one ref per host, in host order), looking
        at the hosts' nodes meanwhile; a host that fails or is lost raises, naming it."""
        ray = require_ray()
        deadline = time.monotonic() + HOST_READY_TIMEOUT_S
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=len(pending), timeout=LOOK_EVERY_S)
            for ref in done:
                try:
                    ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - Ray's errors, turned into benchlib's
                    raise self._before_start(refs.index(ref), exc) from None
            if pending:
                self._look()
                if time.monotonic() > deadline:
                    late = sorted(refs.index(r) for r in pending)
                    raise LoadGenError(f"load host(s) {late} did not answer {what} within {HOST_READY_TIMEOUT_S:g} s")
        return list(ray.get(refs))

    def _wait_ready(self, ray: Any, actors: list[Any], runs: list[Any]) -> None:
        """Until every host's workers are ready; a host whose run ends first (it failed: cannot
        reach the service, a bad spec, its node lost) fails the trial now, with its reason."""
        pending = {a.wait_ready.remote(HOST_READY_TIMEOUT_S): i for i, a in enumerate(actors)}
        deadline = time.monotonic() + HOST_READY_TIMEOUT_S
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise LoadGenError(f"load host(s) {sorted(pending.values())} not ready within {HOST_READY_TIMEOUT_S:g} s")
            done, _ = ray.wait(list(pending) + runs, num_returns=1, timeout=min(left, LOOK_EVERY_S))
            if not done:
                self._look()
            for ref in done:
                if ref in pending:
                    i = pending.pop(ref)
                    try:
                        ready = ray.get(ref)
                    except Exception as exc:  # noqa: BLE001 - Ray's errors, turned into benchlib's
                        raise self._before_start(i, exc) from None
                    if not ready:
                        raise LoadGenError(f"load host {i} not ready within {HOST_READY_TIMEOUT_S:g} s")
                else:  # a run ended before the start: it failed
                    i = runs.index(ref)
                    try:
                        ray.get(ref)
                    except Exception as exc:  # noqa: BLE001 - its reason, in one line
                        raise self._before_start(i, exc) from None
                    raise LoadGenError(f"load host {i} ended before the start")

    def _offset(self, ray: Any, i: int, actor: Any) -> ClockOffset:
        samples = []
        for _ in range(CLOCK_ROUND_TRIPS):
            t1 = time.time_ns()
            try:
                remote = ray.get(actor.clock.remote(), timeout=HOST_READY_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - Ray's errors, turned into benchlib's
                raise self._before_start(i, exc) from None
            samples.append(ClockSample(t1, int(remote), time.time_ns()))
        return estimate_offset(samples)

    def _collect(self, ray: Any, actors: list[Any], runs: list[Any], infos: list[HostInfo],
                 offsets: list[ClockOffset], start_wall_ns: int, deadline_s: float) -> list[HostOutcome]:
        """Every host's outcome; hosts still running at the deadline are killed and failed; a
        host whose actor died or whose node was lost fails alone, its reason in one line."""
        end = time.monotonic() + (start_wall_ns - time.time_ns()) / 1e9 + deadline_s
        outcome: dict[int, HostOutcome] = {}
        waiting = {ref: i for i, ref in enumerate(runs)}
        while waiting:
            left = end - time.monotonic()
            if left <= 0:
                for i in waiting.values():
                    ray.kill(actors[i], no_restart=True)
                    outcome[i] = HostOutcome(infos[i], offsets[i], failure=f"did not finish within {deadline_s:g} s "
                                                                           "of the start (killed)")
                break
            done, _ = ray.wait(list(waiting), num_returns=1, timeout=min(left, LOOK_EVERY_S))
            for ref in done:
                i = waiting.pop(ref)
                t = time.monotonic()
                try:
                    data, meta = ray.get(ref)
                    rows = arrow_to_rows(data)
                except Exception as exc:  # noqa: BLE001 - the actor died or failed: the others' rows stay
                    outcome[i] = HostOutcome(infos[i], offsets[i], failure=self._settled(i, exc).line)
                    continue
                outcome[i] = HostOutcome(infos[i], offsets[i], result=LoadResult(rows=rows, meta=meta),
                                         extra={"transfer_s": round(time.monotonic() - t, 4),
                                                "arrow_bytes": len(data)})
        return [outcome[i] for i in range(len(runs))]

