"""Typed records of stored runs (``benchlib.store.records``): a run written by this version read
back through them (real services on 127.0.0.1), a trial in an older metadata shape read
without loss, every peer tool's parse result normalized, and the row helpers."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from benchlib.analysis import limits_table, log_lines_table, repeats_table, status_table
from benchlib.analysis.peers import peer_beside
from benchlib.core.errors import ParameterError, StorageError
from benchlib.core.schema import ROW_DTYPE
from benchlib.loadgen.peers import parse_ab, parse_h2load, parse_hey, parse_wrk
from benchlib.loadgen.peers.k6 import parse_k6_summary
from benchlib.stats.quantiles import quantile_key
from benchlib.store.records import TRIAL_RECORD_VERSION, EnforcedLimits, LoadMeta, TrialRecord, peer_report
from benchlib.store.records import rows as R
from benchlib.store.records.run import RunRecord
from benchlib.store.results import open_run
from benchlib.store.runstore import RunStore

PEERS = Path(__file__).resolve().parent / "peers" / "data"


# -- a run written by the current version -------------------------------------------------------

@pytest.mark.integration
def test_a_run_written_now_reads_back_through_the_records(tmp_path: Path) -> None:
    from benchlib.core.model import Arm, Condition, CrossCheck, Experiment, LoadSpec
    from benchlib.run.runner import run_experiment

    check = CrossCheck("wrk", (("threads", 1), ("connections", 2), ("duration_s", 1))) if shutil.which("wrk") else None
    exp = Experiment("t-records", (Arm("a", "python-aiohttp-hello"), Arm("b", "python-aiohttp-hello", log_sink="discard")),
                     (Condition("main", LoadSpec(connections=2, duration_s=0.6, warmup_s=0.2), cross_check=check),),
                     trials=1, seed=3, between_trials_s=0)
    res = run_experiment(exp, run_id="rec", out_dir=tmp_path / "runs", progress=False)
    run = res
    assert (run.study, run.run_id, run.arms, run.conditions) == ("t-records", "rec", ("a", "b"), ("main",))
    stored = {t.arm: t for t in res.store.trials()}
    assert [t.arm for t in run.trials] == [t.arm for t in res.store.trials()]
    for t in run.trials:
        assert t.version == TRIAL_RECORD_VERSION and t.meta == stored[t.arm].meta  # nothing dropped
        assert t.to_meta() == t.meta and TrialRecord.from_meta(t.to_meta()) == t  # written as to_meta()
        assert t.status == "ok" and t.valid and t.ran and t.runtime == "local" and not t.attempts
        assert t.log_sink == ("discard" if t.arm == "b" else "pipe") and t.service_log.sink == t.log_sink
        assert t.started is not None and t.finished is not None and t.started <= t.finished
        assert t.enforced is not None and t.enforced.runtime == "local" and t.enforced.cpus == t.cpus["server"]
        load = t.load
        assert load is not None and load.model == "closed" and load.valid and load.requests_measured > 0
        assert load.requests_total == load.requests_measured + load.requests_warmup
        assert 0 < load.client_cpu_busiest <= 1.5 and load.loadspec["connections"] == 2
        assert load.raw == stored[t.arm].meta["load"] and sum(load.status_counts.values()) == load.requests_measured
        assert load.extra == {}, "fields the load generator writes that LoadMeta does not name (name them)"
        assert not load.failed and load.failure is None and load.retries == 0 and load.unsolicited_responses == 0
        assert len(load.worker_stats) == load.workers == 1 and load.worker_stats[0].records == load.requests_total
        assert load.coordinated_omission_risk and load.longest_pause_ns is not None
        start, stop = load.measured_window_ns()
        assert stop - start == pytest.approx(0.6e9, rel=0.01)
        cpu = t.server_cpu()  # the rows read from the trial's file
        assert cpu is not None and cpu.requests > 0 and cpu.per_request_us > 0 and t.front is None
        assert cpu.per_request_us == pytest.approx(res.summaries().set_index("arm").loc[t.arm, "server_cpu_us_per_req"])
        rows = t.rows()
        assert len(R.measured(rows)) == load.requests_measured and len(R.ok_measured(rows)) > 0
        if check is not None:
            assert t.peer is not None and t.peer.tool == "wrk" and t.peer.ok and t.peer.requests_per_s > 0
            assert t.peer.order == "after" and t.peer.figure("p50") > 0 and t.peer.cpu_fraction >= 0
    # the same run read from its folder alone: run.json gives the experiment, arms and reasons
    again = open_run(res.path)
    assert again.arms == ("a", "b") and again.unavailable == {} and len(again.trials) == 2
    assert status_table(again)["ok"].tolist() == [1, 1]


# -- a trial stored in an older shape ------------------------------------------------------------

#: A trial's metadata as benchlib stored it before the fields added later (no record_version,
#: log_sink, previous_attempts, service_log, started/finished times, dependencies; a cross-check
#: without its order; the local runtime's enforced limits before cpus_read_back, with the
#: one-line reason of a machine without usable cgroups).
OLD_META = {
    "arm": "go", "block": 0, "condition": "hello", "position": 0, "seq": 0, "service": "go-nethttp-hello",
    "variant": "default", "runtime": "local", "limits": {"cpus": 1, "memory_mb": 512},
    "cpus": {"client": [0], "dependencies": [1], "server": [1]},
    "contract": {"ok": True, "status": 200, "url": "http://127.0.0.1:4000/", "problems": []},
    "endpoint": {"method": "GET", "name": "hello", "path": "/"},
    "enforced": {"runtime": "local", "cpus": [1], "limits": "not enforced: cgroup support not available in this build"},
    "load": {"achieved_rps": 40.0, "model": "open", "offered_rps": 40, "measured_duration_s": 1.0, "valid": True,
             "invalid_reason": None, "requests": {"measure": 40, "total": 48, "warmup": 8},
             "client_cpu": {"per_cpu": {"0": 0.05}}, "loadspec": {"model": "open", "rate_rps": 40},
             "from_a_later_version": {"x": 2}},  # a field this reader does not know: kept in ``extra``
    "cross_check": {"tool": "k6", "http_req_duration_ms": {"med": 1.5, "p(95)": 3.0, "max": 9.0, "min": 0.5,
                                                           "avg": 1.7}, "http_reqs": 41, "http_reqs_per_s": 40.5,
                    "dropped_iterations": 0},
    "stop": {"exit_code": None, "died_early": False}, "status": "ok", "reason": None,
}


def test_an_older_trial_reads_without_loss_and_the_tables_take_it(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "old" / "r0")
    store.write_run(RunRecord(parameters={"arms": [{"name": "go"}], "conditions": [{"name": "hello"}]},
                              unavailable={"dotnet": "no dotnet toolchain"}))
    rows = np.zeros(48, dtype=ROW_DTYPE)
    rows["t_intended_ns"] = np.arange(48) * 25_000_000
    rows["t_sent_ns"] = rows["t_intended_ns"] + 100_000
    rows["t_done_ns"] = rows["t_intended_ns"] + 2_000_000
    rows["status"], rows["phase"] = 200, [0] * 8 + [1] * 40
    store.write_trial(rows, OLD_META)
    store.log_path("hello", "go", 0).parent.mkdir(parents=True)
    store.log_path("hello", "go", 0).write_text("GET /\n" * 48)
    run = open_run(store.path)
    (t,) = run.trials
    assert t.version == 1 and t.meta == OLD_META  # every stored field still there
    again = TrialRecord.from_meta(t.to_meta())  # written again (from the typed fields), read the same
    assert again == t and again.version == 1 and "record_version" not in t.to_meta()
    assert again.peer == t.peer and again.load.extra == {"from_a_later_version": {"x": 2}}
    assert (t.log_sink, t.attempts, t.service_log, t.started, t.dependencies) == ("pipe", (), None, None, {})
    assert t.enforced.cpus == (1,) and t.enforced.note.startswith("not enforced") and t.enforced.cpu_quota is None
    assert t.load.extra == {"from_a_later_version": {"x": 2}} and t.load.requests_total == 48
    assert (t.load.retries, t.load.failed, t.load.failure, t.load.worker_stats, t.load.t0_monotonic_ns) == (
        0, False, None, (), None)
    assert t.front is None and t.ports == () and t.server_cpu() is None  # no samples stored then
    assert t.peer is not None and t.peer.order == "" and t.peer.figure("p50") == 1.5 and t.peer.requests == 41
    assert run.unavailable == {"dotnet": "no dotnet toolchain"} and run.arms == ("go",)
    assert repeats_table(run).empty
    lim = limits_table(run).set_index("arm")
    assert lim.loc["go", "cpu"] == "– CPU: not enforced: cgroup support not available in this build"
    assert lim.loc["dotnet", "cpus"] == "not run: no dotnet toolchain"
    lines = log_lines_table(run, expected={"go": 1}).set_index("arm")  # no runtime count: the kept log is counted
    assert lines.loc["go", "log lines per request (median over trials)"] == pytest.approx(48 / (48 + 41), abs=1e-4)
    beside = peer_beside(run, figures=("p50",), since="sent")
    assert beside.loc[0, "bl_p50"] == pytest.approx(1.9) and beside.loc[0, "bl_p50_due"] == pytest.approx(2.0)


def test_the_load_engine_s_fields_and_the_front_are_named() -> None:
    load = {"model": "open", "offered_rps": 100.0, "requests": {"warmup": 10, "measure": 90, "total": 100},
            "retries": 3, "unsolicited_responses": 1, "abandoned": True, "failed": True,
            "failure": "load worker 1 failed: OSError: x", "worker_errors": {"1": "Traceback ..."},
            "longest_pause_ns": 5_000_000, "status_counts": {"200": 88}, "errors_warmup": {"reset": 1},
            "error_examples": {"reset": "Connection reset by peer"}, "t0_monotonic_ns": 1_000,
            "measure_start_ns": [200, 100], "measure_stop_ns": [900, 950], "record_bytes_per_request": 38.0,
            "worker_stats": [{"worker": 0, "pid": 11, "cpus": [0], "cpu_s": 0.5, "runqueue_wait_s": 0.25,
                              "records": 50, "retries": 1, "abandoned": False},
                             {"worker": 1, "pid": 12, "cpus": [0], "runqueue_wait_s": 0.5, "records": 50}],
            "coordinated_omission_risk": False}
    m = LoadMeta.from_dict(load)
    assert m.extra == {} and (m.retries, m.unsolicited_responses, m.abandoned, m.failed) == (3, 1, True, True)
    assert m.failure.startswith("load worker 1") and m.worker_errors == {"1": "Traceback ..."}
    assert (m.longest_pause_ns, m.status_counts, m.errors_warmup) == (5_000_000, {"200": 88}, {"reset": 1})
    assert m.measured_window_ns() == (1_100, 1_950) and m.record_bytes_per_request == 38.0
    assert [w.worker for w in m.worker_stats] == [0, 1] and m.worker_stats[0].pid == 11
    assert m.runqueue_wait_s == 0.75 and m.worker_stats[1].retries == 0 and math.isnan(m.worker_stats[1].cpu_s)
    meta = {"condition": "c", "arm": "a", "block": 0, "runtime": "local", "ports": [9001, 9002],
            "load": load, "resources": [{"t_monotonic_ns": 0, "cpu_s": 0.0}, {"t_monotonic_ns": 2_000, "cpu_s": 1e-6}],
            "front": {"service": "nginx-fastcgi", "variant": "default", "port": 8080,
                      "enforced": {"runtime": "local", "cpus": [1]}, "stop": {"exit_code": 0},
                      "log": {"lines": 5, "bytes": 300},
                      "resources": [{"t_monotonic_ns": 0, "cpu_s": 0.0}, {"t_monotonic_ns": 2_000, "cpu_s": 2e-6}]}}
    t = TrialRecord.from_meta(meta)
    assert t.ports == (9001, 9002) and t.front.service == "nginx-fastcgi" and t.front.port == 8080
    assert t.front.enforced.cpus == (1,) and t.front.log.lines == 5 and t.front.stop == {"exit_code": 0}
    cpu = t.server_cpu()  # no file: from the metadata alone (90 measured requests)
    assert cpu.requests == 90 and cpu.window_s == pytest.approx(850e-9)
    assert cpu.service_s == pytest.approx(1e-6 * 850 / 2000) and cpu.front_s == pytest.approx(2 * cpu.service_s)


def test_a_trial_without_its_identity_is_refused_in_one_line() -> None:
    with pytest.raises(StorageError, match=r"not a trial record, \['block'\] missing"):
        TrialRecord.from_meta({"arm": "a", "condition": "c"})


def test_enforced_limits_read_both_runtimes_shapes() -> None:
    docker = {"runtime": "docker", "cgroup": "v2", "cpus": [1], "cpu_quota": 1.0, "memory_mb": 512, "swap": None,
              "cpuset": "enforced (docker, cgroup v2)", "cpu": "enforced (docker, cgroup v2 CFS quota)",
              "memory": "enforced (docker, cgroup v2)", "source": "host cgroup files", "container": "abc",
              "host_config": {"nano_cpus": 1_000_000_000}}
    e = EnforcedLimits.from_dict(docker)
    assert (e.runtime, e.cpus, e.cpu_quota, e.memory_mb, e.source) == ("docker", (1,), 1.0, 512.0, "host cgroup files")
    assert e.describe() == ("CPUs 1; CPU set enforced (docker, cgroup v2); CPU quota enforced (docker, cgroup v2 CFS "
                            "quota); memory enforced (docker, cgroup v2); cap 512 MB; quota 1 CPU")
    assert e.raw["host_config"] == {"nano_cpus": 1_000_000_000}
    local = EnforcedLimits.from_dict({"runtime": "local", "cpus": [0, 1], "cpus_read_back": [1]})
    assert local.cpus == (1,)  # the process's affinity, as read back, wins
    assert EnforcedLimits.from_dict({}) is None and LoadMeta.from_dict(None) is None


# -- peer reports, normalized --------------------------------------------------------------------

def test_every_peer_tool_s_parse_result_reads_as_one_report() -> None:
    wrk = peer_report(parse_wrk((PEERS / "wrk_t2_c10_latency.txt").read_text()))
    assert (wrk.tool, wrk.requests_per_s, wrk.requests, wrk.errors) == ("wrk", 15580.55, 15636, 0)
    assert wrk.latency_ms == {0.5: 0.355, 0.75: 3.77, 0.9: 8.56, 0.99: 18.94} and wrk.figure("p99") == 18.94
    assert wrk.mean_ms == 2.64 and wrk.max_ms == 28.81 and wrk.bytes_per_response > 0
    ab = peer_report(parse_ab((PEERS / "ab_k_c10.txt").read_text()))
    assert (ab.requests_per_s, ab.requests, ab.errors, ab.figure("p99")) == (7272.23, 7284, 0, 8.0)
    assert ab.max_ms == 13.0 and ab.figure("max") == 13.0  # ab's longest request
    hey = peer_report(parse_hey((PEERS / "hey_c10.txt").read_text()))
    assert hey.requests == 14496 and hey.figure("p99") == pytest.approx(10.3) and hey.errors == 0
    h2 = peer_report(parse_h2load((PEERS / "h2load_h1_c10.txt").read_text()))
    assert h2.requests_per_s == 6101.0 and h2.max_ms == pytest.approx(84.31) and math.isnan(h2.figure("p50"))
    k6 = peer_report({"tool": "k6", **parse_k6_summary({"metrics": {
        "http_req_duration": {"min": 0.5, "avg": 1.7, "med": 1.4, "max": 46.2, "p(50)": 1.41, "p(95)": 2.9,
                              "p(99)": 5.4},
        "http_reqs": {"count": 1000, "rate": 99.9}, "dropped_iterations": {"count": 3},
        "http_req_failed": {"value": 0.01}}})})
    assert (k6.figure("p50"), k6.figure("p95"), k6.dropped, k6.errors, k6.requests_per_s) == (1.4, 2.9, 3, 10, 99.9)
    from benchlib.loadgen.peers.bombardier import parse_bombardier

    raw = parse_bombardier((PEERS / "bombardier_mixed_c4_n60.json").read_text())
    bomb = peer_report(raw)
    assert (bomb.tool, bomb.requests, bomb.requests_per_s) == ("bombardier", raw["requests"], raw["requests_per_s"])
    assert bomb.errors == raw["non_2xx"] > 0 and bomb.figure("p50") == raw["latency_percentiles_ms"]["50"]
    failed = peer_report({"tool": "wrk", "order": "before", "error": "LoadGenError: boom"})
    assert not failed.ok and failed.order == "before" and math.isnan(failed.requests_per_s)
    with pytest.raises(ParameterError, match="no peer report adapter for tool 'vegeta'; valid: wrk, k6"):
        peer_report({"tool": "vegeta"})
    with pytest.raises(ParameterError, match="unknown peer figure"):
        wrk.figure("speed")


# -- row helpers ---------------------------------------------------------------------------------

def test_row_helpers_say_which_requests_count() -> None:
    rows = np.zeros(6, dtype=ROW_DTYPE)
    rows["t_intended_ns"] = np.arange(6) * 1_000_000
    rows["t_sent_ns"] = rows["t_intended_ns"] + 500_000
    rows["t_done_ns"] = rows["t_intended_ns"] + 3_000_000
    rows["phase"] = [0, 1, 1, 1, 1, 1]
    rows["status"] = [200, 200, 404, 200, 0, 302]
    rows["error"] = [0, 0, 0, 0, 3, 0]
    assert len(R.measured(rows)) == 5 and len(R.warmup(rows)) == 1
    assert R.ok_measured(rows)["status"].tolist() == [200, 200, 302]
    assert R.latency_ms(R.ok_measured(rows)).tolist() == [3.0] * 3
    assert R.latency_ms(R.ok_measured(rows), "sent").tolist() == [2.5] * 3
    f = R.figures(rows, since="intended", quantiles=(0.5, 0.999))
    assert f["n"] == 3 and math.isnan(f["p50"]) and math.isnan(f["p999"])  # p50 needs 100 requests, p99.9 50,000
    f = R.figures(rows, since="sent", quantiles=(0.5,), supported_only=False, method="linear")
    assert (f["p50"], f["min"], f["max"], f["mean"]) == (2.5, 2.5, 2.5, 2.5)
    with pytest.raises(ParameterError, match="since='due'; valid: intended, sent"):
        R.latency_ms(rows, "due")
    assert json.dumps(quantile_key(0.999)) == '"p999"'
