"""h2load sends the request it is given: method, body and headers (issue 24, study 05's JSON
arms), and the runner fits an HTTP endpoint's request to it.

* real: a recording HTTP/1.1 server on 127.0.0.1 (a thread) receives exactly the body,
  method and header h2load was given; the percentiles come from h2load's per-request log;
* pure: bad requests are refused with one clear error naming the valid choices; the log
  parser; the runner's fitting (h2load gets the endpoint's POST, wrk is refused for it); a
  condition with one cross-check per group of arms.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from benchlib.core.errors import LoadGenError, ParameterError
from benchlib.core.model import Condition, CrossCheck, LoadSpec
from benchlib.loadgen.peers.h2load import h2load_command, parse_h2load_log, run_h2load
from benchlib.run.runner import cross_check_for
from benchlib.runtime.manifest import Contract, Endpoint
from benchlib.store.records import peer_report

BODY = b'{"Message":"SmallRequest"}'
JSON = "application/json; charset=utf-8"


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str, bytes, str]] = []

    def _answer(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        self.seen.append((self.command, self.path, body, self.headers.get("Content-Type", "")))
        out = b'{"message":"SmallResponse"}'
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(out), out))  # one write

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def recorder() -> Iterator[tuple[str, list[tuple[str, str, bytes, str]]]]:
    _Recorder.seen = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", _Recorder.seen
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.skipif(shutil.which("h2load") is None, reason="h2load not installed (apt-get install nghttp2-client)")
def test_h2load_posts_exactly_the_body_method_and_headers(recorder) -> None:
    url, seen = recorder
    res = run_h2load(url + "/small", connections=1, duration_s=0.3, method="post", body=BODY,
                     headers=(("Content-Type", JSON),))
    assert res["requests"] > 0 and len(seen) >= res["requests"]
    assert {s[:2] for s in seen} == {("POST", "/small")}
    assert {s[2] for s in seen} == {BODY} and {s[3] for s in seen} == {JSON}
    assert (res["method"], res["body_bytes"], res["non_2xx"]) == ("POST", len(BODY), 0)
    assert res["status_counts"]["2xx"] >= res["requests"]  # a last answer may come after the count
    assert "-d" in res["command"] and "-D" in res["command"] and "300ms" in res["command"]
    # percentiles from the per-request log, one line per request
    assert res["logged"] >= res["requests"]
    p = res["latency_percentiles_ms"]
    assert 0 < p["50"] <= p["99"] <= res["latency_max_ms"] + 1e-3
    report = peer_report(res)
    assert report.figure("p50") == p["50"] and report.errors == 0
    # without a body: GET, as before
    seen.clear()
    run_h2load(url + "/get", connections=1, duration_s=0.2, latencies=False)
    assert seen and {(m, path, b) for m, path, b, _ in seen} == {("GET", "/get", b"")}


def test_bad_requests_are_refused_naming_the_choices() -> None:
    url = "http://127.0.0.1:9/"
    with pytest.raises(ParameterError, match=r"got method 'PUT'; valid: GET, POST"):
        run_h2load(url, method="PUT", body=BODY)
    with pytest.raises(ParameterError, match="a body only with POST"):
        run_h2load(url, method="GET", body=BODY)
    with pytest.raises(ParameterError, match="body must be bytes"):
        run_h2load(url, method="POST", body=BODY.decode())  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="not a valid HTTP field name"):
        run_h2load(url, method="POST", body=BODY, headers=(("Content Type", JSON),))
    with pytest.raises(ParameterError, match="holds CR, LF or NUL"):
        run_h2load(url, method="POST", body=BODY, headers=(("X-A", "1\r\nX-B: 2"),))
    with pytest.raises(ParameterError, match=r"\(name, value\) pairs"):
        run_h2load(url, method="POST", body=BODY, headers=("Content-Type",))  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="method POST needs body_file"):
        h2load_command(url, method="POST")
    with pytest.raises(ParameterError, match="threads >= 1 and connections >= threads"):
        h2load_command(url, connections=1, threads=2)
    assert h2load_command(url, connections=2, duration_s=0.8, method="POST", body_file="b",
                          headers=(("A", "1"),)) == [
        "h2load", "-t", "1", "-c", "2", "-D", "800ms", "--h1", "-d", "b", "-H", "A: 1", url]


def test_the_request_log_gives_percentiles() -> None:
    log = "".join(f"{1700000000000000 + i}\t200\t{us}\n" for i, us in enumerate(range(100, 1100, 10)))
    out = parse_h2load_log(log)
    assert out["logged"] == 100 and out["latency_percentiles_ms"]["50"] == pytest.approx(0.595)
    assert out["latency_percentiles_ms"]["99"] == pytest.approx(1.0801)
    assert parse_h2load_log("") == {"logged": 0, "latency_percentiles_ms": {}}
    with pytest.raises(LoadGenError, match="line 2"):
        parse_h2load_log("1\t200\t5\nnot a line\n")


def _endpoint(method: str = "POST", body: bytes = BODY) -> Endpoint:
    return Endpoint(name="small-json", method=method, path="/small", contract=Contract(), body=body,
                    headers=(("Content-Type", JSON),))


def test_the_runner_gives_h2load_the_endpoints_request_and_refuses_bodyless_tools() -> None:
    fitted = dict(cross_check_for(CrossCheck("h2load", (("connections", 1),)), _endpoint()).options)
    assert fitted == {"connections": 1, "method": "POST", "body": BODY, "headers": (("Content-Type", JSON),)}
    kept = dict(cross_check_for(CrossCheck("h2load", (("method", "GET"),)), _endpoint()).options)
    assert kept["method"] == "GET"  # the check's own options win
    with pytest.raises(ParameterError, match=r"wrk sends GET requests without a body; endpoint 'small-json' is "
                                             r"POST with a 26-byte body: cross-check it with h2load"):
        cross_check_for(CrossCheck("wrk"), _endpoint())
    assert cross_check_for(CrossCheck("wrk"), _endpoint("GET", b"")) == CrossCheck("wrk")  # unchanged for a GET


def test_a_condition_holds_one_cross_check_per_group_of_arms() -> None:
    load = LoadSpec(model="closed", connections=1, duration_s=1, warmup_s=0)
    ghz, h2 = CrossCheck("ghz", arms=("go-grpc-small",)), CrossCheck("h2load", arms=("go-json-small",))
    c = Condition("c1", load, cross_check=(ghz, h2))
    assert c.cross_checks == (ghz, h2) and c.cross_check_of("go-json-small") is h2
    assert c.cross_check_of("go-grpc-small") is ghz and c.cross_check_of("rust-json-small") is None
    assert Condition("c1", load, cross_check=ghz).cross_checks == (ghz,)
    with pytest.raises(ParameterError, match="arm 'go-json-small' has two cross-checks"):
        Condition("c1", load, cross_check=(h2, CrossCheck("wrk", arms=("go-json-small",))))
    with pytest.raises(ParameterError, match="each names its arms"):
        Condition("c1", load, cross_check=(ghz, CrossCheck("wrk")))
    with pytest.raises(ParameterError, match="must be a CrossCheck"):
        Condition("c1", load, cross_check="ghz")  # type: ignore[arg-type]
    # stored in run.json and read back as they were
    from benchlib.core.model import Arm, Experiment
    from benchlib.run.runner import experiment_parameters
    from benchlib.store.results import experiment_from_parameters

    exp = Experiment(study="s", arms=(Arm("go-grpc-small", "go-grpc-json", "grpc"),), conditions=(c,), trials=2)
    assert experiment_from_parameters(experiment_parameters(exp)).conditions == (c,)
