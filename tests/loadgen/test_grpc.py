"""Unary gRPC calls (and h2c) from the load generator against a real grpc-go server.

The server is ``benchlib/loadgen/grpcserver`` (grpc-go, default options), built once into
the build cache; every call is one row, closed and open model, 1 and 50 streams per
connection; non-OK gRPC statuses land in the rows as error kind ``grpc``.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

from benchlib.core.model import LoadSpec, Target
from benchlib.core.schema import ERROR_CODES, PHASE_CODES
from benchlib.loadgen.grpcgo import PROTO, SMALL_METHOD, SMALL_REQUEST, SMALL_RESPONSE, serve_grpc
from benchlib.loadgen.launch import run_load

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("go") is None, reason="no go to build the grpc-go test server")]

_OK = ERROR_CODES["none"]
_GRPC = ERROR_CODES["grpc"]


@pytest.fixture(scope="module")
def server():
    with serve_grpc() as hp:
        yield hp


def _spec(model: str, streams: int, **kw) -> LoadSpec:
    bound = dict(requests=600, duration_s=None) if model == "closed" else dict(rate_rps=300, duration_s=1.0)
    base = dict(model=model, connections=1, streams=streams, protocol="grpc", method="POST", path=SMALL_METHOD,
                body=SMALL_REQUEST, warmup_s=0, timeout_s=10)
    return LoadSpec(**{**base, **bound, **kw})


def _max_in_flight(rows: np.ndarray) -> int:
    """The most calls in flight at once (from their send and completion times)."""
    ev = np.concatenate([np.stack([rows["t_sent_ns"], np.ones(len(rows), np.int64)], 1),
                         np.stack([rows["t_done_ns"], -np.ones(len(rows), np.int64)], 1)])
    ev = ev[np.lexsort((ev[:, 1], ev[:, 0]))]  # at equal times, completions first
    return int(np.cumsum(ev[:, 1]).max())


@pytest.mark.parametrize("model", ["closed", "open"])
@pytest.mark.parametrize("streams", [1, 50])
def test_unary_calls_one_row_each(server, model, streams):
    spec = _spec(model, streams)
    res = run_load(spec, Target(*server))
    rows = res.rows
    expected = 600 if model == "closed" else 300
    assert len(rows) == expected, "every call is one row"
    assert set(rows["error"].tolist()) == {_OK} and set(rows["status"].tolist()) == {200}
    assert (rows["phase"] == PHASE_CODES["measure"]).all()
    assert (rows["t_done_ns"] >= rows["t_sent_ns"]).all() and (rows["t_sent_ns"] >= rows["t_intended_ns"]).all()
    # one connection; HEADERS + DATA (5-byte prefix + message) + trailers, each with a 9-byte frame header
    assert set(rows["conn"].tolist()) == {0}
    assert (rows["bytes"] >= 3 * 9 + 5 + len(SMALL_RESPONSE)).all()
    in_flight = _max_in_flight(rows)
    assert in_flight <= streams
    if model == "closed" and streams == 50:
        assert in_flight > 1, "50 streams on one connection run concurrently"
    assert res.meta["requests"]["measure"] == expected and res.meta["errors"]["grpc"] == 0


def test_non_ok_status_is_a_grpc_row(server):
    """A request the server cannot parse: INVALID_ARGUMENT (3) in every row."""
    res = run_load(_spec("closed", 4, requests=50, body=b"\xff\xff\xff"), Target(*server))
    rows = res.rows
    assert len(rows) == 50 and set(rows["error"].tolist()) == {_GRPC} and set(rows["status"].tolist()) == {3}
    assert "grpc-status 3" in res.meta["error_examples"]["grpc"]


def test_unknown_method_is_unimplemented(server):
    res = run_load(_spec("closed", 2, requests=20, path="/SmallPayloadService/NoSuchMethod"), Target(*server))
    assert set(res.rows["error"].tolist()) == {_GRPC} and set(res.rows["status"].tolist()) == {12}


def test_grpc_manifest_contract_and_cross_check(server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A gRPC endpoint from a manifest: the request from JSON via the .proto, the contract
    checked with grpcio (status and decoded response), ghz as the cross-check tool."""
    from benchlib.core.errors import ParameterError
    from benchlib.core.model import CrossCheck
    from benchlib.run.runner import cross_check_for, request_for, run_cross_check
    from benchlib.runtime.contract import verify
    from benchlib.runtime.manifest import load_manifest

    d = tmp_path / "grpc-test"
    d.mkdir()
    shutil.copy(PROTO, d / "payloads.proto")
    (d / "service.toml").write_text(textwrap.dedent("""
        name = "grpc-test"
        language = "go"
        framework = "grpc-go"
        toolchains = ["go"]
        [run]
        command = ["true"]
        port_env = "PORT"
        [health]
        kind = "grpc"
        [[endpoints]]
        name = "small"
        protocol = "grpc"
        path = "/SmallPayloadService/SendSmallPayload"
        proto = "payloads.proto"
        request_json = { Message = "SmallRequest" }
        request_type = "SmallRequest"
        [endpoints.contract]
        grpc_status = 0
        response_json = { Message = "SmallResponse" }
        response_type = "SmallResponse"
        varies = false
        [[endpoints]]
        name = "wrong"
        protocol = "grpc"
        path = "/SmallPayloadService/SendSmallPayload"
        proto = "payloads.proto"
        request_json = '{"Message": "SmallRequest"}'
        request_type = "SmallRequest"
        [endpoints.contract]
        response_json = { Message = "Other" }
        response_type = "SmallResponse"
    """))
    svc = load_manifest(d / "service.toml").resolve()
    ep = svc.endpoint("small")
    assert ep.protocol == "grpc" and ep.body == SMALL_REQUEST and ep.proto == d / "payloads.proto"
    base = f"http://{server[0]}:{server[1]}"
    report = verify(base, ep)
    assert report.ok and report.status == 0 and report.body == SMALL_RESPONSE
    bad = verify(base, svc.endpoint("wrong"), raise_on_error=False)
    assert not bad.ok and any("field Message" in p and "Other" in p for p in bad.problems)
    spec = request_for(LoadSpec(connections=1, requests=10, duration_s=None, warmup_s=0), ep)
    assert spec.protocol == "grpc" and spec.path == ep.path and spec.body == SMALL_REQUEST
    fitted = cross_check_for(CrossCheck("ghz", (("requests", 200), ("concurrency", 4))), ep)
    assert dict(fitted.options)["body"] == SMALL_REQUEST and dict(fitted.options)["proto"] == str(ep.proto)
    x = run_cross_check(fitted, base + ep.path, [], order="after")
    assert "error" not in x, x.get("error")
    assert x["tool"] == "ghz" and x["requests"] == 200 and x["status_counts"] == {"OK": 200}
    with pytest.raises(ParameterError, match="cross-check it with ghz"):
        cross_check_for(CrossCheck("wrk"), ep)


def test_a_grpc_service_runs_through_run_experiment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A service whose endpoint is gRPC: health kind grpc, the contract via grpcio, the load
    through the HTTP/2 engine (closed model, 8 streams on 2 connections), ghz beside it."""
    from benchlib.core.model import Arm, Condition, CrossCheck, Experiment
    from benchlib.loadgen.grpcgo import build_grpc_server
    from benchlib.run.runner import run_experiment

    binary = build_grpc_server()
    d = tmp_path / "services" / "grpc-go-test"
    d.mkdir(parents=True)
    shutil.copy(PROTO, d / "payloads.proto")
    (d / "service.toml").write_text(textwrap.dedent(f"""
        name = "grpc-go-test"
        language = "go"
        framework = "grpc-go"
        toolchains = ["go"]
        [run]
        command = ["{binary}", "-addr", "{{host}}:{{port}}"]
        [health]
        kind = "grpc"
        [[endpoints]]
        name = "small"
        protocol = "grpc"
        path = "/SmallPayloadService/SendSmallPayload"
        proto = "payloads.proto"
        request_file = "small.bin"
        [endpoints.contract]
        grpc_status = 0
        response_json = {{ Message = "SmallResponse" }}
        response_type = "SmallResponse"
    """))
    (d / "small.bin").write_bytes(SMALL_REQUEST)
    monkeypatch.setenv("BENCHLIB_SERVICES", str(d.parent))
    # HTTP/2 with 8 streams per connection; the gRPC endpoint makes it protocol "grpc"
    load = LoadSpec(protocol="h2c", connections=2, streams=8, duration_s=0.6, warmup_s=0.2)
    check = CrossCheck("ghz", (("duration_s", 0.5), ("concurrency", 8), ("connections", 2)))
    exp = Experiment("t-grpc", (Arm("go", "grpc-go-test"),), (Condition("main", load, cross_check=check),),
                     trials=1, between_trials_s=0)
    res = run_experiment(exp, run_id="r1", out_dir=tmp_path / "runs", progress=False)
    (trial,) = res.trials
    meta = trial.meta
    assert meta["status"] in ("ok", "invalid"), meta.get("reason")  # invalid only if the guard saw a busy client
    assert meta["endpoint"]["protocol"] == "grpc" and meta["contract"]["problems"] == []
    assert meta["load"]["loadspec"]["protocol"] == "grpc" and meta["load"]["loadspec"]["streams"] == 8
    rows = trial.rows()
    assert len(rows) > 0 and set(rows["error"].tolist()) == {_OK} and set(rows["status"].tolist()) == {200}
    x = meta["cross_check"]
    assert x["tool"] == "ghz" and "error" not in x and x["status_counts"].get("OK", 0) > 0
    s = res.summaries()
    assert s["xcheck_tool"].tolist() == ["ghz"] and s["xcheck_rps"].iloc[0] > 0


@pytest.mark.parametrize("model", ["closed", "open"])
def test_h2c_requests_against_an_h2_server(model):
    """Plain HTTP/2 (h2c, prior knowledge) against the h2-package test server: every request
    one row with the HTTP status; bodies counted in bytes."""
    from benchlib.loadgen.h2testservers import BODY, serve

    bound = dict(requests=300, duration_s=None) if model == "closed" else dict(rate_rps=200, duration_s=1.0)
    spec = LoadSpec(model=model, protocol="h2c", connections=2, streams=10, warmup_s=0, path="/hello", **bound)
    with serve("hello") as (host, port):
        res = run_load(spec, Target(host, port))
    rows = res.rows
    assert len(rows) == (300 if model == "closed" else 200)
    assert set(rows["error"].tolist()) == {_OK} and set(rows["status"].tolist()) == {200}
    assert (rows["bytes"] >= 2 * 9 + len(BODY)).all() and _max_in_flight(rows) <= 20


def test_two_workers_share_the_calls_and_number_connections_uniquely(server):
    spec = _spec("closed", 10, requests=1000, workers=2, connections=4)
    rows = run_load(spec, Target(*server)).rows
    assert len(rows) == 1000 and set(rows["error"].tolist()) == {_OK}
    assert sorted(set(rows["worker"].tolist())) == [0, 1]
    for w in (0, 1):  # connection ids are unique across workers (worker w numbers w, w+2, ...)
        assert {c % 2 for c in set(rows["conn"][rows["worker"] == w].tolist())} == {w}
