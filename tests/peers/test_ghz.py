"""ghz v0.120.0 (the gRPC peer): the command it runs, parsing of captured JSON reports, the
records adapter. Real runs against the grpc-go server: tests/loadgen/test_grpc.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchlib.core.errors import LoadGenError, LoadSpecError, ParameterError
from benchlib.core.model import CROSS_CHECK_TOOLS, CrossCheck
from benchlib.loadgen.peers import ghz
from benchlib.store.records.peer import peer_report

DATA = Path(__file__).parent / "data"


def test_command_shape():
    cmd = ghz.ghz_command("/x/ghz", "127.0.0.1:50051", "SmallPayloadService/SendSmallPayload", proto="p.proto",
                          binary_file="m.bin", concurrency=50, connections=1, duration_s=5)
    assert cmd == ["/x/ghz", "--insecure", "--proto", "p.proto", "--call", "SmallPayloadService/SendSmallPayload",
                   "-B", "m.bin", "-c", "50", "--connections", "1", "-t", "20000ms", "-z", "5000ms",
                   "--duration-stop", "ignore", "-O", "json", "127.0.0.1:50051"]
    counted = ghz.ghz_command("g", "h:1", "a.B/C", proto="p", binary_file="b", concurrency=4, connections=2,
                              requests=100, rps=500, metadata={"x-a": "1"})
    assert counted[counted.index("-n") + 1] == "100" and "-z" not in counted
    assert counted[counted.index("-r") + 1] == "500" and json.loads(counted[counted.index("-m") + 1]) == {"x-a": "1"}


@pytest.mark.parametrize("kwargs", [
    {},  # neither a count nor a duration
    {"requests": 10, "duration_s": 1},
    {"requests": 0}, {"requests": 2.5}, {"duration_s": 0},
    {"requests": 10, "concurrency": 0},
    {"requests": 10, "concurrency": 2, "connections": 4},
    {"requests": 10, "rps": -1},
    {"requests": 10, "timeout_s": 0},
])
def test_command_refuses_bad_parameters(kwargs):
    with pytest.raises(ParameterError):
        ghz.ghz_command("g", "h:1", "a.B/C", proto="p", binary_file="b", **kwargs)


def test_url_is_a_loopback_grpc_method():
    assert ghz.split_grpc_url("http://127.0.0.1:50051/pkg.Svc/Call") == ("127.0.0.1:50051", "pkg.Svc/Call")
    assert ghz.split_grpc_url("http://[::1]:9/S/M") == ("[::1]:9", "S/M")
    with pytest.raises(ParameterError, match="package.Service/Method"):
        ghz.split_grpc_url("http://127.0.0.1:50051/")
    with pytest.raises(LoadSpecError, match="loopback"):
        ghz.split_grpc_url("http://10.1.2.3:50051/S/M")


def test_run_needs_the_proto():
    with pytest.raises(ParameterError, match=r"\.proto"):
        ghz.run_ghz("http://127.0.0.1:1/S/M", body=b"", requests=1)


def test_parse_captured_reports_and_the_adapter():
    r = ghz.parse_ghz((DATA / "ghz_c4_n200.json").read_text())
    assert (r["tool"], r["concurrency"], r["connections"], r["requests"]) == ("ghz", 4, 1, 200)
    assert r["status_counts"] == {"OK": 200} and r["non_ok"] == 0 and r["errors"] == {}
    assert r["requests_per_s"] == pytest.approx(2448.345360462665)
    assert r["latency_avg_ms"] == pytest.approx(1.401443)  # ghz reports nanoseconds
    assert r["latency_percentiles_ms"]["10"] == pytest.approx(0.287447)
    assert r["latency_percentiles_ms"]["50"] == pytest.approx(0.610328)
    p = peer_report(r)
    assert p.ok and p.requests == 200 and p.errors == 0 and p.figure("p50") == pytest.approx(0.610328)
    bad = ghz.parse_ghz(json.loads((DATA / "ghz_unavailable_c2_n20.json").read_text()))
    assert bad["status_counts"] == {"Unavailable": 20} and bad["non_ok"] == 20
    q = peer_report(bad)
    assert q.errors == 20 and q.error_kinds["Unavailable"] == 20
    with pytest.raises(LoadGenError, match="cannot parse ghz"):
        ghz.parse_ghz("Summary: not json")


def test_ghz_is_a_cross_check_tool():
    assert "ghz" in CROSS_CHECK_TOOLS and CrossCheck("ghz").tool == "ghz"
