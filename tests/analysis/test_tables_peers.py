"""The run tables and the peer-beside-benchlib tables of ``benchlib.analysis``, on trials
written to a real run folder (``RunStore``) with known rows and metadata, and on trial
records built in memory; no service runs here."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis import (
    client_cpu_table,
    client_limited,
    limits_table,
    log_lines_table,
    measured_minutes,
    repeats_table,
    server_cpu_table,
    server_unsaturated,
    short_reasons,
    status_table,
    warmup_table,
)
from benchlib.analysis.peers import (
    peer_beside,
    peer_labels,
    peer_notes,
    peer_setup,
    peer_summary,
    peer_tables,
    peer_view,
)
from benchlib.analysis.tables import add_trial_metric, logged_lines, median_of_trials, responses_table, saturation_table
from benchlib.core.placement import CpuPlan
from benchlib.core.schema import ROW_DTYPE
from benchlib.runtime import logs
from benchlib.store.records import TrialRecord
from benchlib.store.records.run import RunRecord
from benchlib.store.results import Run, open_run
from benchlib.store.runstore import RunStore

WRK = {"tool": "wrk", "requests": 1000, "requests_per_s": 2200.0, "bytes_read": 114_000.0, "cpu_fraction": 0.3,
       "latency_percentiles_ms": {"50": 2.2, "99": 9.9}, "errors": {"connect": 0, "read": 1}}


def _rows(warm_ms: list[float], measured_ms: list[float], *, send_delay_ms: float = 0.0) -> np.ndarray:
    """Rows due 1 ms apart: the warm-up's latencies, then the measured ones (sent ``send_delay_ms`` late)."""
    lat = warm_ms + measured_ms
    rows = np.zeros(len(lat), dtype=ROW_DTYPE)
    rows["t_intended_ns"] = np.arange(len(lat)) * 1_000_000
    rows["t_sent_ns"] = rows["t_intended_ns"] + int(send_delay_ms * 1e6)
    rows["t_done_ns"] = rows["t_intended_ns"] + (np.array(lat) * 1e6).astype(np.int64)
    rows["status"] = 200
    rows["phase"] = [0] * len(warm_ms) + [1] * len(measured_ms)
    return rows


def _meta(arm: str, block: int, status: str = "ok", **extra: Any) -> dict[str, Any]:
    return {"condition": "closed", "arm": arm, "block": block, "seq": block, "status": status,
            "runtime": "local", "log_sink": "pipe"} | extra


def _run(trials: list[TrialRecord], unavailable: dict[str, str] | None = None) -> Run:
    return Run("s", "r", Path("."), tuple(trials), unavailable=unavailable or {}, arms=("fast", "odd", "slow", "gone"),
                     conditions=("closed",))


def _t(arm: str, block: int, busy: float, status: str = "ok", reason: str | None = None, **extra: Any) -> TrialRecord:
    return TrialRecord.from_meta(_meta(arm, block, status, reason=reason,
                                       load={"client_cpu": {"per_cpu": {"0": busy}}}, **extra))


def test_client_cpu_flags_the_arms_whose_client_came_near_its_limit() -> None:
    run = _run([_t("fast", 0, 0.85), _t("fast", 1, 0.83), _t("fast", 2, 0.5),
                _t("odd", 0, 0.95, "invalid", "client CPU 0 was 95% busy (limit 90%)"), _t("odd", 1, 0.3),
                _t("odd", 2, 0.3), _t("slow", 0, 0.3), _t("slow", 1, 0.81)])
    table = client_cpu_table(run).set_index("arm")
    assert table.loc["fast", "client CPU, median"] == 0.83 and table.loc["fast", "trials at ≥ 80%"] == 2
    assert table.loc["odd", "invalid (client CPU ≥ 90%)"] == 1 and table.loc["slow", "client CPU, max"] == 0.81
    assert client_limited(table.reset_index()) == ["fast", "odd", "slow"]
    assert client_limited(client_cpu_table(_run([_t("a", 0, 0.2), _t("a", 1, 0.9)]))) == ["a"]
    assert client_limited(client_cpu_table(_run([_t("a", 0, 0.2), _t("a", 1, 0.3)]))) == []


def test_status_repeats_limits_and_minutes_come_from_the_records() -> None:
    attempts = [{"status": "invalid", "reason": "late", "started_utc": "2026-12-02T10:00:00Z"}]
    local = {"runtime": "local", "cpus": [1], "cpus_read_back": [1], "cpu_quota": 1.0, "memory_mb": 512,
             "swap": "disabled", "cpu": "enforced (cgroup v1 CFS quota)", "memory": "enforced (cgroup v1)"}
    docker = {"runtime": "docker", "cpus": [1], "cpu_quota": None, "memory_mb": None, "cpu": "no limit requested",
              "memory": "no limit requested", "source": "host cgroup files", "container": "abc"}
    run = _run([
        _t("fast", 0, 0.1, enforced=local, previous_attempts=attempts, started_utc="2026-12-02T10:00:10Z",
           finished_utc="2026-12-02T10:00:20Z", dependencies={"db": {"enforced": local}},
           cpus={"server": [1], "client": [0], "dependencies": [1]}),
        _t("slow", 0, 0.1, "invalid", "late", enforced=docker, previous_attempts=attempts + attempts,
           started_utc="2026-12-02T10:00:20Z", finished_utc="2026-12-02T10:01:40Z"),
    ], unavailable={"gone": "no dotnet toolchain (install it)"})
    status = status_table(run).set_index("arm")
    assert status.loc["slow", "invalid"] == 1 and status.loc["gone", "reasons"] == "not run: no dotnet toolchain (install it)"
    rep = repeats_table(run)
    assert rep.to_dict("records") == [
        {"condition": "closed", "arm": "fast", "trials": 1, "repeated": 1, "attempts set aside": 1, "still invalid": 0},
        {"condition": "closed", "arm": "slow", "trials": 1, "repeated": 1, "attempts set aside": 2, "still invalid": 1}]
    lim = limits_table(run, unavailable={"gone": "no .NET SDK"}).set_index("arm")
    assert lim.loc["fast", "cpu"] == "1.0 CPU: enforced (cgroup v1 CFS quota)"
    assert lim.loc["fast", "memory"] == "512 MB: enforced (cgroup v1)" and lim.loc["fast", "db cpus"] == "1"
    assert lim.loc["slow", "runtime"] == "docker" and lim.loc["slow", "memory"] == "– MB: no limit requested"
    assert lim.loc["gone", "cpus"] == "not run: no .NET SDK"
    assert measured_minutes(run) == pytest.approx(1.5)
    assert math.isnan(measured_minutes(_run([])))


def test_warmup_log_lines_and_peer_tables_read_the_stored_trials(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "s" / "r")
    store.write_run(RunRecord.from_json({
        "parameters": {"arms": [{"name": "a"}, {"name": "b"}], "conditions": [{"name": "closed"}]},
        "unavailable": {}}))
    measured = [2.0] * 90 + [10.0] * 10
    for seq, (block, arm, order) in enumerate(((0, "a", "after"), (1, "a", "before"), (0, "b", "after"))):
        meta = _meta(arm, block, seq=seq, load={"requests": {"measure": 100, "warmup": 5, "total": 105},
                                       "measured_duration_s": 0.1, "client_cpu": {"per_cpu": {"0": 0.4}}},
                     cross_check={**WRK, "order": order}, service_log={"sink": "pipe", "lines": 1105})
        store.write_trial(_rows([30.0, 3.0, 3.0, 3.0, 3.0], measured, send_delay_ms=1.0), meta)
    run = open_run(store.path)
    assert run.arms == ("a", "b") and len(run.trials) == 3

    warm = warmup_table(run).set_index("arm")
    assert warm.loc["a", "first request"] == 30.0 and warm.loc["a", "warm-up median"] == 3.0
    assert warm.loc["a", "measured median"] == 2.0 and warm.loc["a", "trials"] == 2

    lines = log_lines_table(run, expected={"a": 1, "b": 1}).set_index("arm")
    assert lines.loc["a", "log lines per request (median over trials)"] == pytest.approx(1105 / (105 + 1000))
    assert lines.loc["a", "note"] == "every request logged"

    beside = peer_beside(run, figures=("p50", "max"), since="sent", tool="wrk")
    assert list(beside["order"]) == ["second", "first", "second"]
    assert beside["bl_p50"].tolist() == [1.0] * 3 and beside["bl_p50_due"].tolist() == [2.0] * 3  # sent 1 ms late
    assert beside["p50_ratio"].tolist() == [2.2] * 3 and beside["bl_requests"].tolist() == [100] * 3
    assert beside["peer_bytes"].tolist() == [114.0] * 3 and beside["peer_errors"].tolist() == [1] * 3
    summary = peer_summary(beside, main="p50").set_index("arm")
    assert summary.loc["a", "trials"] == 2 and summary.loc["a", "p50_ratio_range"] == "2.200-2.200"
    assert summary.loc["a", "p50_ratio_first"] == summary.loc["a", "p50_ratio_second"] == 2.2
    view = peer_view(beside, ["arm", "order", "peer_p50", "bl_p50", "p50_ratio", "peer_error"], "wrk", since="sent")
    assert list(view.columns) == ["arm", "wrk ran", "wrk p50 (ms)", "benchlib p50 (ms, from send)", "wrk / benchlib p50"]


def test_peer_tables_from_the_summaries_and_the_notes_say_where_the_tools_differ() -> None:
    trials = [TrialRecord.from_meta(_meta(arm, b, load={"client_cpu": {"per_cpu": {"0": 0.9 if arm == "far" else 0.2}}},
                                          cross_check={**WRK, "order": "before" if b % 2 else "after"}))
              for arm in ("near", "far") for b in (0, 1)]
    trials.append(TrialRecord.from_meta(_meta("far", 2, cross_check={"tool": "wrk", "order": "after",
                                                                       "error": "LoadGenError: wrk exited 1\nmore"})))
    summaries = pd.DataFrame([{"condition": "closed", "arm": arm, "block": b, "throughput_rps": rps,
                               "p50_ms": 2.2, "p99_ms": 9.9}
                              for arm, rps in (("near", 2210.0), ("far", 1000.0)) for b in (0, 1, 2)])
    run = Run("s", "r", Path("."), tuple(trials), arms=("near", "far"))
    beside = peer_beside(run, summaries=summaries)
    assert beside.loc[beside["arm"] == "far", "rps_ratio"].iloc[0] == pytest.approx(2.2)
    by_arm = peer_summary(beside)
    far = by_arm.set_index("arm").loc["far"]
    assert far["trials"] == 2 and far["peer_failed"] == 1 and far["peer_error"] == "LoadGenError: wrk exited 1"
    notes = peer_notes(by_arm, "wrk", why="Why.", why_latency="Latency.")
    assert "Within ±3% on requests/s, p50 and p99 (median per-trial ratios): **near**." in notes
    assert "**far**: wrk failed in 1 trial(s): LoadGenError: wrk exited 1" in notes
    assert "**far**: wrk's requests/s +120.0% against benchlib's" in notes
    assert "Client CPU: wrk 30%, benchlib's workers 90%; benchlib came near the limit" in notes
    assert notes.endswith("\nWhy.") and "Latency." not in notes  # no latency figure differed
    assert peer_notes(pd.DataFrame(), "wrk", absent="_none_") == "_none_"
    assert peer_labels("ghz", unit="µs")["peer_p99"] == "ghz p99 (µs)"
    rate = peer_view(by_arm, ["arm", "trials", "peer_rps", "peer_failed", "peer_error"], "wrk", index="arm")
    assert list(rate.columns) == ["trials (wrk ok)", "wrk req/s", "wrk failed", "wrk error"]


def test_logged_lines_count_the_kept_log_with_its_cut_markers(tmp_path: Path) -> None:
    log = tmp_path / "b000.log"
    log.write_bytes(b"".join(b"127.0.0.1 GET / 200 %06d\n" % i for i in range(50_000)))
    assert logs.compact_log(log, cap_bytes=100_000)["truncated"]
    assert log.stat().st_size < 110_000
    kept = TrialRecord.from_meta(_meta("a", 0), log_path=log)
    assert logged_lines(kept) == 50_000
    counted = TrialRecord.from_meta(_meta("a", 0, service_log={"sink": "pipe", "lines": 123, "bytes": 4567}),
                                    log_path=log)
    assert logged_lines(counted) == 123
    assert logged_lines(TrialRecord.from_meta(_meta("a", 0), log_path=tmp_path / "missing.log")) is None


def test_median_of_trials_gives_an_interval_from_six_values() -> None:
    m = median_of_trials([3.0, 1.0, 2.0, math.nan, 5.0, 4.0, 6.0])
    assert (m.median, m.n) == (3.5, 6) and m.lo <= m.median <= m.hi
    assert math.isnan(median_of_trials([1.0, 2.0]).lo) and median_of_trials([]).n == 0
    assert median_of_trials([1.0, 2.0]).text == "1.5" and median_of_trials([]).text == "–"


def test_median_intervals_print_their_achieved_level() -> None:
    """Issue 19, item 5: order-statistic intervals of a median of 6-10 trials cover 96.9-99.2%,
    never exactly 95%, but analysis/tables.py and three studies printed them under
    "median [95% CI]". The level each cell reaches is now printed in the cell (as the
    verdict tables' ``±`` do, from the same rank computation), and the headings name none."""
    from scipy.stats import quantile_test

    from benchlib.analysis.formats import MEDIAN_CI

    for n, level in ((6, "96.9%"), (8, "99.2%"), (10, "97.9%")):
        x = np.linspace(1.0, 2.0, n) ** 2
        m = median_of_trials(x)
        ref = quantile_test(x, p=0.5).confidence_interval(0.95)
        assert (m.lo, m.hi) == (float(ref.low), float(ref.high))  # the same interval as before
        assert m.text.endswith(f"] ({level} CI)"), m.text
    assert MEDIAN_CI == "median [CI]"
    run = _run([_t("a", b, 0.1, resources=[{"cpu_s": 1.0}]) for b in range(3)])
    s = pd.DataFrame({"condition": ["closed"] * 6, "arm": ["a"] * 6, "block": range(6), "valid": [True] * 6,
                      "server_cpu_us_per_req": [10.0, 11.0, 12.0, 13.0, 14.0, 15.0], "server_cpu_frac": [1.0] * 6})
    table = server_cpu_table(run, s)
    assert "server CPU per request (µs), median [CI]" in table.columns
    assert table.iloc[0]["server CPU per request (µs), median [CI]"] == "12.5 [10, 15] (96.9% CI)"


def test_a_study_s_own_metric_joins_the_summaries_by_trial() -> None:
    run = _run([_t("fast", 0, 0.1, resources=[{"cpu_s": 1.0}, {"cpu_s": 1.5}]),
                _t("slow", 0, 0.1, resources=[{"cpu_s": 2.0}, {"cpu_s": 4.0}])])
    summaries = pd.DataFrame({"condition": ["closed"] * 3, "arm": ["slow", "fast", "gone"], "block": [0, 0, 0]})
    out = add_trial_metric(summaries, run, "server_cpu_s",
                           lambda t: t.meta["resources"][-1]["cpu_s"] - t.meta["resources"][0]["cpu_s"])
    assert out["server_cpu_s"].tolist()[:2] == [2.0, 0.5] and math.isnan(out["server_cpu_s"].iloc[2])
    assert "server_cpu_s" not in summaries.columns


def test_server_cpu_table_gives_the_cost_per_request_and_names_the_servers_with_cpu_to_spare() -> None:
    rows = [{"condition": "closed", "arm": arm, "block": b, "valid": b != 6, "server_cpu_us_per_req": us * (1 + b / 100),
             "server_cpu_frac": frac} for arm, us, frac in (("busy", 20.0, 0.96), ("idle", 10.0, 0.5))
            for b in range(7)]
    rows.append({"condition": "closed", "arm": "nocpu", "block": 0, "valid": True, "server_cpu_us_per_req": math.nan,
                 "server_cpu_frac": math.nan})
    run = Run("s", "r", Path("."), (), arms=("idle", "busy", "nocpu"), conditions=("closed",),
              record=RunRecord(cpus=CpuPlan((1,), (0,), (1,))))
    table = server_cpu_table(run, pd.DataFrame(rows))
    assert list(table["arm"]) == ["idle", "busy"]  # the run's arm order; no samples, no row; invalid trials left out
    busy = table.set_index("arm").loc["busy"]
    assert busy["trials"] == 6 and busy["server CPUs busy (share of 1), median"] == 0.96
    assert busy["server CPU per request (µs), median [CI]"] == "20.5 [20, 21] (96.9% CI)" and busy["trials below 90%"] == 0
    assert server_unsaturated(table) == ["idle"]
    two = Run("s", "r", Path("."), (), arms=("idle", "busy"), record=RunRecord(cpus=CpuPlan((0, 1), (0, 1), (0, 1))))
    shared = server_cpu_table(two, pd.DataFrame(rows)).set_index("arm")
    assert shared.loc["busy", "server CPUs busy (share of 2), median"] == 0.48 and server_unsaturated(
        shared.reset_index()) == ["idle", "busy"]
    assert server_cpu_table(run, pd.DataFrame()).empty and server_unsaturated(None) == []


def test_short_reasons_drop_the_install_hint_and_keep_one_line() -> None:
    out = short_reasons({"a": "no dotnet toolchain (install the .NET 8 SDK (https://dot.net) so that `dotnet` is on "
                              "PATH, or use runtime='docker')", "b": "build failed: exit 1\nlog tail", "c": "x" * 300})
    assert out == {"a": "no dotnet toolchain", "b": "build failed: exit 1", "c": "x" * 160}


def test_peer_tables_bundle_the_tool_beside_benchlib() -> None:
    trials = [TrialRecord.from_meta(_meta("a", b, load={"client_cpu": {"per_cpu": {"0": 0.3}}},
                                          cross_check={**WRK, "order": "before" if b % 2 else "after"}))
              for b in (0, 1)]
    summaries = pd.DataFrame([{"condition": "closed", "arm": "a", "block": b, "throughput_rps": 2000.0, "p50_ms": 2.2,
                               "p99_ms": 9.9} for b in (0, 1)])
    out = peer_tables(Run("s", "r", Path("."), tuple(trials), arms=("a",)), summaries, "wrk", why="Why.")
    assert set(out) == {"beside", "by_arm", "rate", "trials", "notes"} and len(out["beside"]) == 2
    assert out["by_arm"].set_index("arm").loc["a", "rps_ratio"] == pytest.approx(1.1)
    assert {"wrk req/s", "benchlib req/s", "wrk / benchlib req/s, wrk first"} <= set(out["rate"].columns)
    assert list(out["trials"]["wrk ran"]) == ["second", "first"]
    assert "**a**: wrk's requests/s +10.0%" in out["notes"] and out["notes"].endswith("Why.")


def test_peer_setup_builds_the_tool_first_and_says_which_arms_it_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    import benchlib.loadgen.peers.bombardier as b
    from benchlib.core.errors import ToolchainMissing

    assert peer_setup("bombardier", ["a"], False, flag="bombardier_check") == (
        (), "bombardier cross-check off (`bombardier_check=False`).")
    assert peer_setup("bombardier", ["a"], False, flag='bombardier="none"')[1] == (
        'bombardier cross-check off (`bombardier="none"`).')
    monkeypatch.setattr(b, "ensure_bombardier", lambda: Path("/x/bombardier"))
    monkeypatch.setattr(b, "bombardier_version", lambda path: f"bombardier version v1.2.6 at {path}")
    assert peer_setup("bombardier", ["a", "b"]) == (("a", "b"), "bombardier version v1.2.6 at /x/bombardier on a, b")

    def missing() -> Path:
        raise ToolchainMissing("go", "bombardier", "install Go")

    monkeypatch.setattr(b, "ensure_bombardier", missing)
    arms, text = peer_setup("bombardier", ["a"])
    assert arms == () and text.startswith("bombardier cross-check not run: service 'bombardier' needs 'go'")

AB = {"tool": "ab", "requests": 1000, "requests_per_s": 4000.0, "failed": 0, "non_2xx": 0, "cpu_fraction": 0.25,
      "cpu_s": 0.0625, "latency_percentiles_ms": {"50": 5.0}}


def _loaded(arm: str, block: int, *, statuses: dict[str, int], client: float, status: str = "ok",
            ab: dict[str, Any] | None = None, errors: dict[str, int] | None = None) -> TrialRecord:
    n = sum(statuses.values()) + sum((errors or {}).values())
    load = {"requests": {"measure": n, "warmup": 10, "total": n + 10}, "status_counts": statuses,
            "errors": errors or {}, "client_cpu": {"per_cpu": {"0": client}}}
    return TrialRecord.from_meta(_meta(arm, block, status, load=load, cpus={"server": [1], "client": [0]},
                                       **({"cross_check": {**AB, **ab, "order": "after"}} if ab is not None else {})))


def test_responses_say_what_each_arm_answered_under_load() -> None:
    run = _run([_loaded("fast", 0, statuses={"200": 1000}, client=0.3, ab={}),
                _loaded("fast", 1, statuses={"200": 990}, client=0.3, errors={"reset": 10}, ab={"failed": 2}),
                _loaded("odd", 0, statuses={"502": 980, "200": 20}, client=0.2, ab={"non_2xx": 1000}),
                _loaded("odd", 1, statuses={"502": 1000}, client=0.2, status="invalid"),
                TrialRecord.from_meta(_meta("slow", 0, "failed"))])
    table = responses_table(run).set_index("arm")
    assert list(table.index) == ["fast", "odd"]  # a failed trial sent nothing
    assert table.loc["fast", "HTTP statuses"] == "200: 1,990" and table.loc["fast", "transport errors"] == "reset: 10"
    assert table.loc["fast", "error rate, max"] == pytest.approx(0.01) and table.loc["fast", "requests"] == 2000
    assert table.loc["odd", "HTTP statuses"] == "200: 20; 502: 1,980" and table.loc["odd", "transport errors"] == "none"
    assert table.loc["odd", "error rate, median"] == pytest.approx(0.99) and table.loc["odd", "trials"] == 2
    assert table.loc["odd", "ab errors"] == 1000 and table.loc["fast", "ab errors"] == 2
    assert table.loc["fast", "ab requests"] == 2000


def test_saturation_says_which_side_came_near_its_cpu_limit() -> None:
    run = _run([_loaded("fast", b, statuses={"200": 1000}, client=0.9, ab={"cpu_fraction": 0.95, "cpu_s": 0.25})
                for b in (0, 1)] + [
               _loaded("slow", b, statuses={"200": 1000}, client=0.2, ab={}, status="invalid" if b else "ok")
               for b in (0, 1)] + [_loaded("odd", 0, statuses={"200": 1000}, client=0.3)])
    summaries = pd.DataFrame([
        {"condition": "closed", "arm": "fast", "block": b, "throughput_rps": 9000.0, "server_cpu_us_per_req": 50.0,
         "server_cpu_frac": 0.45} for b in (0, 1)] + [
        {"condition": "closed", "arm": "slow", "block": b, "throughput_rps": 1000.0, "server_cpu_us_per_req": 950.0,
         "front_cpu_us_per_req": 190.0, "server_cpu_frac": 0.95} for b in (0, 1)] + [
        {"condition": "closed", "arm": "odd", "block": 0, "throughput_rps": 100.0, "server_cpu_us_per_req": 1000.0,
         "front_cpu_us_per_req": 500.0, "server_cpu_frac": 0.1}])
    table = saturation_table(run, summaries).set_index("arm")
    assert table.loc["fast", "near its CPU limit"] == "benchlib client, ab"
    assert table.loc["fast", "benchlib req/s at full client CPU"] == pytest.approx(10_000)
    assert table.loc["fast", "ab req/s per CPU-second"] == pytest.approx(4000) and math.isnan(
        table.loc["fast", "front share of server CPU"])
    assert table.loc["slow", "near its CPU limit"] == "server" and table.loc["slow", "invalid"] == 1
    assert table.loc["slow", "trials"] == 2 and table.loc["slow", "front share of server CPU"] == pytest.approx(0.2)
    assert table.loc["slow", "server req/s at full CPU"] == pytest.approx(1e6 / 950)
    assert table.loc["slow", "front req/s at full CPU"] == pytest.approx(1e6 / 190)
    assert table.loc["odd", "near its CPU limit"] == "none" and math.isnan(table.loc["odd", "ab CPU"])
    assert table.loc["odd", "server CPUs"] == 1


def test_peer_notes_name_the_condition_of_each_row() -> None:
    summary = pd.DataFrame([{"condition": c, "arm": "go", "trials": 4, "peer_failed": 0, "peer_error": None,
                             "rps_ratio": r, "peer_cpu": 0.2, "bl_client_cpu": 0.3} for c, r in (("c20", 1.01),
                                                                                                 ("c400", 1.5))])
    notes = peer_notes(summary, "ab", figures=("rps",))
    assert "Within ±3% on requests/s (median per-trial ratios): **go (c20)**." in notes
    assert "**go (c400)**: ab's requests/s +50.0% against benchlib's" in notes
