"""k6 v0.50.0 (study 01's load tool): the script and command it runs, summary parsing, and
real runs of the built binary against a local server."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from benchlib.core.errors import LoadGenError, LoadSpecError, ParameterError
from benchlib.loadgen.peers import k6
from benchlib.loadgen.testservers import serve


def test_script_has_the_study_shape():
    script = k6.k6_script("http://127.0.0.1:8080/helloWorld", rate=100, duration_s=10)
    options = json.loads(re.search(r"export const options = (\{.*?\});\n", script, re.S).group(1))
    assert options == {"scenarios": {"test": {
        "exec": "test", "executor": "constant-arrival-rate", "duration": "10000ms", "preAllocatedVUs": 100,
        "rate": 100, "timeUnit": "1000ms"}}}
    assert 'http.get("http://127.0.0.1:8080/helloWorld")' in script
    assert "r.status === 200" in script and "export function test()" in script
    assert "maxVUs" not in script  # the study left it unset


def test_script_escapes_the_url_and_checks_parameters():
    script = k6.k6_script('http://127.0.0.1:1/a"b', rate=10, max_vus=150)
    assert r'http.get("http://127.0.0.1:1/a\"b")' in script and '"maxVUs": 150' in script
    for bad in ({"rate": 0}, {"rate": 2.5}, {"rate": 10, "duration_s": 0}, {"rate": 10, "pre_allocated_vus": 0},
                {"rate": 10, "max_vus": 5}):
        with pytest.raises(ParameterError):
            k6.k6_script("http://127.0.0.1:1/", **bad)


def test_command_uses_the_study_trend_stats_and_no_api_listener():
    cmd = k6.k6_command("/x/k6", "s.js", "out.json")
    assert cmd[:2] == ["/x/k6", "run"]
    assert cmd[cmd.index("--summary-trend-stats") + 1] == "min,avg,med,max,p(50),p(95),p(99)"
    assert cmd[cmd.index("--summary-export") + 1] == "out.json"
    assert cmd[cmd.index("--address") + 1] == "" and cmd[-1] == "s.js"
    with pytest.raises(ParameterError, match="trend stat"):
        k6.k6_command("/x/k6", "s.js", "o.json", trend_stats=["p99"])


def test_parse_summary_export_document():
    doc = {"metrics": {
        "http_req_duration": {"min": 0.5, "avg": 1.7, "med": 1.4, "max": 46.2, "p(50)": 1.4, "p(95)": 2.9,
                              "p(99)": 5.4, "thresholds": {}},
        "http_reqs": {"count": 1000, "rate": 99.9},
        "iterations": {"count": 1000, "rate": 99.9},
        "dropped_iterations": {"count": 3, "rate": 0.3},
        "checks": {"passes": 997, "fails": 3, "value": 0.997},
        "http_req_failed": {"passes": 0, "fails": 1000, "value": 0},
        "vus_max": {"value": 100, "min": 100, "max": 100},
    }}
    r = k6.parse_k6_summary(doc)
    assert r["http_req_duration_ms"] == {"min": 0.5, "avg": 1.7, "med": 1.4, "max": 46.2, "p(50)": 1.4,
                                         "p(95)": 2.9, "p(99)": 5.4}
    assert (r["http_reqs"], r["dropped_iterations"], r["checks_failed"], r["vus_max"]) == (1000, 3, 3, 100)
    del doc["metrics"]["dropped_iterations"]
    assert k6.parse_k6_summary(doc)["dropped_iterations"] == 0
    with pytest.raises(LoadGenError, match="no http_req_duration"):
        k6.parse_k6_summary({"metrics": {"iterations": {"count": 0}}})
    with pytest.raises(LoadGenError, match="no 'metrics'"):
        k6.parse_k6_summary({})


def test_non_loopback_refused_before_any_build_or_traffic():
    with pytest.raises(LoadSpecError, match="loopback"):
        k6.run_k6("http://192.0.2.1/", rate_rps=10, duration_s=1, binary="/nonexistent/k6")


def test_benchlib_k6_must_be_the_pinned_version(monkeypatch, tmp_path):
    fake = tmp_path / "k6"
    fake.write_text("#!/bin/sh\necho 'k6 v0.49.0 (go1.21, linux/amd64)'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("BENCHLIB_K6", str(fake))
    with pytest.raises(ParameterError, match="v0.50.0"):
        k6.ensure_k6(build=False)


needs_go_or_k6 = pytest.mark.skipif(shutil.which("go") is None and shutil.which("k6") is None,
                                    reason="k6 v0.50.0 is built with Go; neither go nor k6 is installed")


@pytest.mark.integration
@needs_go_or_k6
def test_real_run_at_the_study_shape():
    """The built k6 (cold: ~3 min of `go install`) against a local server, the study's
    scenario at rate 100/s for 2 s."""
    exe = k6.ensure_k6()
    assert k6.k6_version(exe).startswith("k6 v0.50.0")
    with serve("hello", cpus=[1]) as (host, port):
        r = k6.run_k6(f"http://{host}:{port}/", rate_rps=100, duration_s=2, cpus=[0])
    d = r["http_req_duration_ms"]
    assert set(d) == {"min", "avg", "med", "max", "p(50)", "p(95)", "p(99)"}
    assert 0 < d["min"] <= d["med"] <= d["p(95)"] <= d["p(99)"] <= d["max"]
    assert d["med"] == d["p(50)"]
    # 200 arrivals offered; k6 starts iterations on its own clock, allow a little slack
    assert 180 <= r["http_reqs"] + r["dropped_iterations"] <= 205
    assert r["checks_failed"] == 0 and r["checks_passed"] == r["http_reqs"] and r["http_req_failed_rate"] == 0
    assert r["vus_max"] == 100 and r["command"][:3] == ["taskset", "-c", "0"]
    assert "http_req_duration" in r["stdout"]


@pytest.mark.integration
@needs_go_or_k6
def test_real_run_counts_dropped_iterations_when_vus_run_out():
    """2 VUs against a server answering after 200 ms can start at most ~10 iterations/s, so
    most of 50/s are dropped, and k6 reports them."""
    k6.ensure_k6()
    with serve("slow", delay_s=0.2) as (host, port):
        r = k6.run_k6(f"http://{host}:{port}/", rate_rps=50, duration_s=2, pre_allocated_vus=2)
    assert r["dropped_iterations"] >= 40
    assert r["http_reqs"] <= 25 and r["http_req_duration_ms"]["min"] >= 190
