"""The cluster path's pure parts: the cluster= parameter, clock offsets and start skew, and
the merge of the hosts' results (each host judged on its own; a dead host costs its rows only)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from benchlib.core.errors import ParameterError
from benchlib.core.model import Arm, Condition, Experiment, LoadSpec
from benchlib.core.placement import ClusterSpec, parse_cluster
from benchlib.core.schema import ROW_DTYPE
from benchlib.loadgen.guard import client_side_only
from benchlib.loadgen.launch import LoadResult
from benchlib.run.cluster.clock import ClockOffset, ClockSample, estimate_offset, start_skew
from benchlib.run.cluster.merge import HostInfo, HostOutcome, merge_hosts
from benchlib.run.runner import experiment_parameters
from benchlib.store.records.load import LoadMeta
from benchlib.store.records.run import RunRecord


@pytest.mark.parametrize("value, want", [
    (None, None), ("local:2", ClusterSpec("local", nodes=2)), (" local:1 ", ClusterSpec("local", nodes=1)),
    ("auto", ClusterSpec("address", address="auto")),
    ("ray://head.example:10001", ClusterSpec("address", address="ray://head.example:10001")),
])
def test_cluster_values_parse(value: object, want: ClusterSpec | None) -> None:
    assert parse_cluster(value) == want


@pytest.mark.parametrize("value", ["local:0", "local:9", "local", "ray://nohost", "http://x:1", 3, "", "LOCAL:2"])
def test_bad_cluster_values_name_the_valid_forms(value: object) -> None:
    with pytest.raises(ParameterError, match=r"local:N|1\.\.8"):
        parse_cluster(value)


def _exp(**kw: object) -> Experiment:
    return Experiment(study="s", arms=(Arm("a", "python-hello"),),
                      conditions=(Condition("c", LoadSpec(duration_s=1.0, connections=2)),), **kw)  # type: ignore[arg-type]


def test_experiment_takes_cluster_and_older_runs_keep_their_parameters() -> None:
    assert experiment_parameters(_exp())["cluster"] is None
    assert experiment_parameters(_exp(cluster="local:2"))["cluster"] == "local:2"
    older = {k: v for k, v in experiment_parameters(_exp()).items() if k != "cluster"}  # stored before it
    assert RunRecord.from_json({"parameters": older}).parameters == experiment_parameters(_exp())  # still resumes
    with pytest.raises(ParameterError, match="cluster must be one of"):
        _exp(cluster="everywhere")


def test_without_ray_the_user_gets_one_line_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchlib.run.cluster.session import require_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ParameterError) as info:
        require_ray()
    assert str(info.value) == "cluster= needs Ray, an optional extra: pip install 'benchlib[cluster]'"


def test_the_offset_comes_from_the_shortest_round_trip() -> None:
    # the host's clock is 5 ms ahead; a queued sample (long round trip) would say otherwise
    samples = [ClockSample(0, 5_000_000 + 40_000_000, 50_000_000), ClockSample(100, 5_000_150, 200),
               ClockSample(1000, 5_003_000, 3000)]
    off = estimate_offset(samples)
    assert off == ClockOffset(offset_ns=5_000_000, rtt_ns=100, samples=3)
    with pytest.raises(ValueError):
        estimate_offset([])


def test_start_skew_is_the_spread_of_offsets_and_lateness_and_is_flagged_beyond_the_bound() -> None:
    offs = [ClockOffset(0, 200_000, 5), ClockOffset(3_000_000, 400_000, 5), ClockOffset(-1_000_000, 100_000, 5)]
    s = start_skew(offs, [0, 0, 0], bound_ns=10_000_000)
    # a clock 3 ms ahead starts 3 ms early; one 1 ms behind starts 1 ms late
    assert s.starts_ns == (0, -3_000_000, 1_000_000) and s.skew_ns == 4_000_000 and not s.exceeded
    assert s.uncertainty_ns == (100_000 + 400_000) // 2
    late = start_skew(offs, [0, 0, 20_000_000], bound_ns=10_000_000)  # ready 20 ms after the instant
    assert late.skew_ns == 24_000_000 and late.exceeded


def _host_result(n: int, start: int, step: int, *, valid: bool = True, reason: str | None = None) -> LoadResult:
    rows = np.zeros(n, ROW_DTYPE)
    rows["t_intended_ns"] = start + step * np.arange(n)
    rows["t_sent_ns"] = rows["t_intended_ns"] + 10
    rows["t_done_ns"] = rows["t_intended_ns"] + 1_000_000
    rows["phase"] = 1
    rows["status"] = 200
    meta = {"model": "open", "loadspec": {"model": "open"}, "offered_rps": 100.0, "achieved_rps": n / 1.0,
            "measured_duration_s": 1.0, "requests": {"warmup": 0, "measure": n, "total": n},
            "errors": {"timeout": 0}, "status_counts": {"200": n}, "schedule_lag_ns": {"p50": 10, "p99": 100 + start},
            "client_cpu": {"per_worker": [0.2], "per_cpu": {"0": 0.2}}, "valid": valid, "invalid_reason": reason,
            "failed": False, "failure": None, "worker_stats": [{"worker": 0, "pid": 1}],
            "measure_start_ns": [0], "measure_stop_ns": [1_000_000_000], "record_bytes_per_request": 38.0,
            "share": {"host": 0, "hosts": 2, "global_workers": [0]}, "start_late_ns": 0}
    return LoadResult(rows=rows, meta=meta)


def _info(h: int) -> HostInfo:
    return HostInfo(host=h, node_id=f"n{h}", hostname="hostname", ip="127.0.0.1", pid=100 + h, benchlib="0.1")


def test_merge_keeps_every_row_with_its_host_and_sums_the_hosts() -> None:
    off = ClockOffset(0, 1000, 3)
    res = merge_hosts([HostOutcome(_info(0), off, _host_result(50, 0, 20)),
                       HostOutcome(_info(1), off, _host_result(50, 10, 20))],
                      start_wall_ns=1, driver_t0_monotonic_ns=5, skew_bound_ns=10_000_000)
    assert len(res.rows) == 100 and np.all(np.diff(res.rows["t_intended_ns"]) == 10)
    assert res.hosts is not None and list(res.hosts[:4]) == [0, 1, 0, 1]
    m = res.meta
    assert m["valid"] and not m["failed"] and m["achieved_rps"] == 100.0 and m["requests"]["measure"] == 100
    assert m["schedule_lag_ns"]["p99"] == 110  # the worst host's
    assert set(m["client_cpu"]["per_cpu"]) == {"h0:0", "h1:0"} and m["workers"] == 2
    assert m["cluster"]["start_skew_ns"] == 0 and [h["rows"] for h in m["cluster"]["hosts"]] == [50, 50]
    assert "share" not in m and m["t0_monotonic_ns"] == 5
    lm = LoadMeta.from_dict(m)  # the trial record reads it; the cluster part is kept
    assert lm is not None and lm.valid and lm.extra["cluster"]["hosts"][1]["node_id"] == "n1"


def test_one_host_that_could_not_keep_up_makes_the_trial_invalid_naming_it() -> None:
    off = ClockOffset(0, 1000, 3)
    late = "requests were sent late: schedule lag p99 9.0 ms > 5 ms; the client could not keep to the schedule"
    res = merge_hosts([HostOutcome(_info(0), off, _host_result(10, 0, 20)),
                       HostOutcome(_info(1), off, _host_result(10, 10, 20, valid=False, reason=late))],
                      start_wall_ns=1, driver_t0_monotonic_ns=0, skew_bound_ns=10_000_000)
    assert not res.meta["valid"] and "[load host 1]" in res.meta["invalid_reason"]
    assert client_side_only(res.meta["invalid_reason"])  # repeat_invalid still sees a client-side reason
    assert [h["valid"] for h in res.meta["cluster"]["hosts"]] == [True, False]


def test_a_dead_host_fails_the_trial_and_the_others_rows_stay() -> None:
    off = ClockOffset(0, 1000, 3)
    res = merge_hosts([HostOutcome(_info(0), off, _host_result(30, 0, 20)),
                       HostOutcome(_info(1), off, failure="ActorDiedError: the actor died unexpectedly")],
                      start_wall_ns=1, driver_t0_monotonic_ns=0, skew_bound_ns=10_000_000)
    assert res.meta["failed"] and not res.meta["valid"] and len(res.rows) == 30 and not res.hosts.any()
    assert res.meta["failure"] == "load host 1 (hostname) failed: ActorDiedError: the actor died unexpectedly"
    assert res.meta["cluster"]["hosts"][1]["failed"] and res.meta["cluster"]["hosts"][1]["rows"] == 0


def test_hosts_started_too_far_apart_make_the_trial_invalid() -> None:
    res = merge_hosts([HostOutcome(_info(0), ClockOffset(0, 1000, 3), _host_result(10, 0, 20)),
                       HostOutcome(_info(1), ClockOffset(-15_000_000, 1000, 3), _host_result(10, 10, 20))],
                      start_wall_ns=1, driver_t0_monotonic_ns=0, skew_bound_ns=10_000_000)
    assert not res.meta["valid"] and res.meta["cluster"]["start_skew_exceeded"]
    assert res.meta["invalid_reason"].startswith("load hosts started 15.0 ms apart (bound 10 ms")
    assert client_side_only(res.meta["invalid_reason"])


# -- the notebook parameter, the per-host foreign CPU, the report's section ----------------------

@pytest.mark.parametrize("value, want", [(None, None), ("", None), (" local:2 ", "local:2"), ("auto", "auto"),
                                         ("ray://head:10001", "ray://head:10001")])
def test_the_notebook_parameter_is_checked_once_for_the_experiment(value: object, want: object,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from benchlib.analysis import params

    monkeypatch.setattr(params, "ray_installed", lambda: True)
    assert params.cluster(value) == want  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["local:0", "local", "everywhere", "ray://nohost", 2])
def test_a_bad_notebook_cluster_names_the_valid_choices(value: object) -> None:
    from benchlib.analysis import params

    with pytest.raises(ParameterError, match=r'None \(this machine\), "local:N" .*"auto", "ray://host:port"|1\.\.8'):
        params.cluster(value)  # type: ignore[arg-type]


def test_a_notebook_asking_for_a_cluster_without_ray_gets_one_line_naming_the_extra(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from benchlib.analysis import params

    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    assert params.cluster(None) is None  # this machine needs no Ray
    with pytest.raises(ParameterError) as info:
        params.cluster("local:2")
    assert str(info.value) == "cluster= needs Ray, an optional extra: pip install 'benchlib[cluster]'"


def test_each_hosts_foreign_cpu_is_kept_with_that_host_only() -> None:
    off = ClockOffset(0, 1000, 3)
    a, b = _host_result(10, 0, 20), _host_result(10, 10, 20)
    a.meta["foreign_cpu"] = {"cpus": [0], "foreign": 0.25}
    b.meta["foreign_cpu"] = {"cpus": [0], "foreign": 0.0}
    res = merge_hosts([HostOutcome(_info(0), off, a), HostOutcome(_info(1), off, b)],
                      start_wall_ns=1, driver_t0_monotonic_ns=0, skew_bound_ns=10_000_000)
    assert [h["foreign_cpu"]["foreign"] for h in res.meta["cluster"]["hosts"]] == [0.25, 0.0]
    assert "foreign_cpu" not in res.meta  # a host's figure, not the trial's


def test_a_host_measures_what_other_processes_took_from_its_load_cpus() -> None:
    import os

    from benchlib.run.cluster.host import host_cpu, ray_daemons_cpu_s
    from benchlib.run.sampler import DisturbanceSampler

    cpus = sorted(os.sched_getaffinity(0))
    sampler = DisturbanceSampler((), cpus, canary=False).start()
    import time

    start = time.process_time()
    x = 0
    while time.process_time() - start < 0.05:  # 50 ms of CPU of our own: 5 clock ticks or more
        x += 1
    got = host_cpu(sampler, ray_daemons_cpu_s())
    assert got["cpus"] == cpus and got["window_s"] > 0 and got["own_s"] > 0 and got["ray_s"] >= 0
    assert got["foreign"] is not None and 0.0 <= got["foreign"] <= 1.0
    assert got["foreign_s"] == pytest.approx(max(got["busy_s"] - got["own_s"] - got["ray_s"], 0.0), abs=2e-4)


def _trial(block: int, hosts: int) -> object:
    from benchlib.store.records import TrialRecord

    cluster = {"start_skew_ns": 40_000 * (block + 1), "hosts": [
        {"host": h, "node_id": f"{h}abcdef0123", "hostname": "box", "rows": 60, "requests": {"measure": 50},
         "achieved_rps": 50.0, "schedule_lag_ns": {"p99": 2_000_000}, "client_cpu": {"per_cpu": {"1": 0.3}},
         "foreign_cpu": {"foreign": 0.125}, "valid": h == 0, "failed": False,
         "invalid_reason": None if h == 0 else "requests were sent late [load host 1]",
         "clock_offset_ns": 1000, "clock_rtt_ns": 300_000} for h in range(hosts)]}
    load = {"client_cpu": {"per_cpu": {"1": 0.3}}, **({"cluster": cluster} if hosts else {})}
    return TrialRecord.from_meta({"condition": "closed", "arm": "a", "block": block, "seq": block, "status": "ok",
                                  "runtime": "local", "load": load})


def test_the_report_shows_the_load_hosts_section_only_when_a_trial_had_several_hosts() -> None:
    from pathlib import Path

    from benchlib.analysis import load_hosts_section
    from benchlib.store.results import Run

    def run(*trials: object) -> Run:
        return Run("s", "r", Path("."), tuple(trials), arms=("a",), conditions=("closed",),  # type: ignore[arg-type]
                   experiment=_exp(cluster="local:2"))

    assert not load_hosts_section(run(_trial(0, 0), _trial(1, 0)))  # one machine: no section
    assert not load_hosts_section(run(_trial(0, 1)))  # one load host: nothing to compare
    s = load_hosts_section(run(_trial(0, 2), _trial(1, 2)))
    assert s.markdown.startswith("## Load hosts\n") and "2 trial(s) sent their load from 2 hosts" in s.markdown
    assert "every host kept up in 0 of 2" in s.markdown and "Largest start skew between hosts: 0.08 ms." in s.markdown
    t = s.table
    assert list(t["host"]) == [0, 1, 0, 1] and list(t["node"]) == ["box (0abcdef0)", "box (1abcdef0)"] * 2
    assert list(t["measured requests"]) == [50] * 4 and list(t["foreign CPU"]) == [0.12] * 4
    assert list(t["valid"]) == [True, False] * 2 and t["why not"].iloc[1].endswith("[load host 1]")


def test_rays_errors_become_one_line_of_what_happened_to_the_host() -> None:
    rex = pytest.importorskip("ray.exceptions")
    from benchlib.run.cluster.faults import HostFault, fault_of, node_label

    died = "The actor died unexpectedly before finishing this task.\n\tpid: 5\n"
    node = rex.RayActorError(None, died + "The actor died because its node has died. Node Id: ab12\n\tthe actor's "
                             "node was terminated unexpectedly: health check failed")
    worker = rex.RayActorError(None, died + "The actor is dead because its worker process has died. Worker exit "
                               "type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits")
    assert fault_of(node) == HostFault("node", "its node died") and fault_of(node).lost
    assert fault_of(worker) == HostFault("actor", "its actor died (its worker process has died, SYSTEM_ERROR)")
    assert fault_of(rex.ActorUnavailableError("socket closed", None)).kind == "unreachable"
    assert fault_of(rex.GetTimeoutError("late")).kind == "unreachable"
    error = fault_of(ValueError("first\nthe last line"))  # a method's own error: not a loss
    assert error == HostFault("error", "ValueError: the last line") and not error.lost
    assert node_label("6793dfde0123", {"benchlib_load": 1.0, "benchlib_host_2": 1.0, "CPU": 2.0,
                                       "node:192.0.2.2": 1.0}) == "Ray node 6793dfde, benchlib_host_2"
