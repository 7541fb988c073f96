"""bombardier v1.2.6 (study 02's load tool): the command it runs, parsing of captured JSON
reports, and real runs of the built binary against a local server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchlib.core.errors import LoadGenError, LoadSpecError, ParameterError
from benchlib.core.model import CROSS_CHECK_TOOLS, CrossCheck
from benchlib.loadgen.peers import bombardier
from benchlib.loadgen.testservers import serve

DATA = Path(__file__).parent / "data"


def test_command_has_the_seed_shape():
    cmd = bombardier.bombardier_command("/x/bombardier", "http://127.0.0.1:5000/api/values/5",
                                        connections=125, requests=500_000)
    assert cmd == ["/x/bombardier", "-c", "125", "-n", "500000", "-t", "2000ms", "-l", "-o", "json", "-p", "r",
                   "-m", "GET", "http://127.0.0.1:5000/api/values/5"]
    timed = bombardier.bombardier_command("b", "http://127.0.0.1:1/", connections=8, duration_s=2.5,
                                          headers=[("X-A", "1")], client="http1")
    assert timed[timed.index("-d") + 1] == "2500ms" and "-n" not in timed
    assert timed[timed.index("-H") + 1] == "X-A: 1" and "--http1" in timed


@pytest.mark.parametrize("kwargs", [
    {},  # neither a count nor a duration
    {"requests": 10, "duration_s": 1},
    {"requests": 0}, {"requests": 2.5}, {"duration_s": 0}, {"duration_s": 0.5},
    {"requests": 10, "connections": 0},
    {"requests": 10, "client": "curl"},
    {"requests": 10, "timeout_s": 0},
])
def test_command_refuses_bad_parameters(kwargs):
    with pytest.raises(ParameterError):
        bombardier.bombardier_command("b", "http://127.0.0.1:1/", **kwargs)


def test_parse_captured_report():
    text = (DATA / "bombardier_c125_n20000.json").read_text()
    r = bombardier.parse_bombardier(text)
    assert (r["tool"], r["client"], r["connections"], r["test_type"]) == ("bombardier", "fasthttp", 125,
                                                                          "number-of-requests")
    assert r["requests_planned"] == r["requests"] == 20_000 and r["status_counts"]["2xx"] == 20_000
    assert r["non_2xx"] == 0 and r["errors"] == {}
    assert r["duration_s"] == pytest.approx(0.191450188)
    assert r["requests_per_s"] == pytest.approx(20_000 / 0.191450188)
    # latencies are microseconds in the JSON, milliseconds here
    assert r["latency_avg_ms"] == pytest.approx(1.17027355) and r["latency_max_ms"] == pytest.approx(11.644)
    assert r["latency_percentiles_ms"] == pytest.approx({"50": 1.11, "75": 1.622, "90": 1.95, "95": 2.096,
                                                         "99": 5.472})
    # the seed's "Reqs/sec" row: statistics of the 20-ms rate samples, not requests / time
    s = r["reqs_per_s_sampled"]
    assert s["mean"] == pytest.approx(108010.56996190171) and s["max"] == pytest.approx(135240.15563479703)
    assert s["percentiles"]["50"] == pytest.approx(111847.606461)
    assert r["bytes_read"] == 1_860_000 and r["bytes_written"] == 1_260_000
    assert r["throughput_bytes_per_s"] == pytest.approx(3_120_000 / 0.191450188)
    # the decoded document parses the same
    assert bombardier.parse_bombardier(json.loads(text)) == r


def test_parse_report_with_failures():
    r = bombardier.parse_bombardier((DATA / "bombardier_mixed_c4_n60.json").read_text())
    assert r["status_counts"] == {"1xx": 0, "2xx": 59, "3xx": 0, "4xx": 0, "5xx": 0, "others": 1}
    assert r["requests"] == 60 and r["non_2xx"] == 1 and r["errors"] == {"unexpected EOF": 1}


def test_parse_timed_report_and_garbage():
    doc = json.loads((DATA / "bombardier_c125_n20000.json").read_text())
    spec = doc["spec"]
    del spec["numberOfRequests"]
    spec.update(testType="timed", testDurationSeconds=10)
    r = bombardier.parse_bombardier(doc)
    assert r["test_type"] == "timed" and r["duration_planned_s"] == 10 and "requests_planned" not in r
    with pytest.raises(LoadGenError, match="cannot parse bombardier"):
        bombardier.parse_bombardier("Bombarding http://127.0.0.1:1/ with 10 request(s)")
    with pytest.raises(LoadGenError, match="KeyError"):
        bombardier.parse_bombardier({"spec": {}, "result": {}})


def test_is_a_cross_check_tool():
    assert "bombardier" in CROSS_CHECK_TOOLS
    assert CrossCheck("bombardier", (("connections", 125), ("requests", 500_000))).tool == "bombardier"


def test_non_loopback_refused_before_any_build_or_traffic():
    with pytest.raises(LoadSpecError, match="loopback"):
        bombardier.run_bombardier("http://192.0.2.1/", requests=10, binary="/nonexistent/bombardier")


def test_benchlib_bombardier_must_be_the_pinned_version(monkeypatch, tmp_path):
    fake = tmp_path / "bombardier"
    fake.write_text("#!/bin/sh\necho 'bombardier version unspecified linux/amd64'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("BENCHLIB_BOMBARDIER", str(fake))
    with pytest.raises(ParameterError, match="v1.2.6.*unspecified"):
        bombardier.ensure_bombardier(build=False)


needs_go_or_bombardier = pytest.mark.skipif(
    shutil.which("go") is None and shutil.which("bombardier") is None,
    reason="bombardier v1.2.6 is built with Go; neither go nor bombardier is installed")


@pytest.mark.integration
@needs_go_or_bombardier
def test_real_run_closed_model_count():
    """The built bombardier (cold: ``go install`` from the module proxy) against a local
    server: the seed's shape, scaled down to 2,000 requests on 16 connections."""
    exe = bombardier.ensure_bombardier()
    assert bombardier.bombardier_version(exe).startswith("bombardier version v1.2.6")
    with serve("hello", cpus=[1]) as (host, port):
        r = bombardier.run_bombardier(f"http://{host}:{port}/", connections=16, requests=2000, cpus=[0])
    assert r["requests"] == r["requests_planned"] == r["status_counts"]["2xx"] == 2000
    assert r["errors"] == {} and r["non_2xx"] == 0 and r["connections"] == 16
    p = r["latency_percentiles_ms"]
    assert set(p) == {"50", "75", "90", "95", "99"}
    assert 0 < p["50"] <= p["75"] <= p["90"] <= p["95"] <= p["99"] <= r["latency_max_ms"]
    assert r["requests_per_s"] == pytest.approx(2000 / r["duration_s"])
    # the hello server's response is 93 bytes on the wire (status line, two headers, 13-byte body)
    assert r["bytes_read"] == 2000 * 93
    assert r["command"][:3] == ["taskset", "-c", "0"] and r["bombardier_version"].split()[2] == "v1.2.6"
    assert r["cpu_s"] is not None and r["cpu_s"] > 0


@pytest.mark.integration
@needs_go_or_bombardier
def test_real_run_timed_and_failures_counted():
    """A timed run against a server that answers after 50 ms: 4 connections for 1 s make at
    most about 80 requests, each at least 50 ms; against a silent server every request fails
    with a timeout and is counted in ``others``."""
    with serve("slow", delay_s=0.05) as (host, port):
        r = bombardier.run_bombardier(f"http://{host}:{port}/", connections=4, duration_s=1)
    assert r["test_type"] == "timed" and r["duration_planned_s"] == 1
    assert 4 <= r["requests"] <= 4 * 21 and r["status_counts"]["2xx"] == r["requests"]
    assert r["latency_percentiles_ms"]["50"] >= 49
    with serve("silent") as (host, port):
        r = bombardier.run_bombardier(f"http://{host}:{port}/", connections=2, requests=4, timeout_s=0.3)
    assert r["status_counts"]["2xx"] == 0 and r["status_counts"]["others"] == r["requests"] == 4
    assert sum(r["errors"].values()) == 4


@pytest.mark.integration
@needs_go_or_bombardier
def test_runs_as_a_cross_check_and_fills_the_summary():
    """The runner's cross-check path: ``run_bombardier`` with the CrossCheck's options, its
    headline figures in the trial summary."""
    from benchlib.run.runner import run_cross_check
    from benchlib.store.records import peer_report
    from benchlib.store.results import cross_check_summary

    check = CrossCheck("bombardier", (("connections", 4), ("requests", 200)))
    with serve("hello", cpus=[1]) as (host, port):
        meta = run_cross_check(check, f"http://{host}:{port}/", [0], order="before")
    assert meta["tool"] == "bombardier" and meta["order"] == "before" and "error" not in meta
    summary = cross_check_summary(peer_report(meta))
    assert summary["xcheck_tool"] == "bombardier" and summary["xcheck_error"] is None
    assert summary["xcheck_rps"] == meta["requests_per_s"] > 0
    assert 0 < summary["xcheck_p50_ms"] <= summary["xcheck_p99_ms"]
