"""Peer tools: parsers on captured real reports, and real runs against a local server."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchlib.core.errors import LoadGenError, LoadSpecError
from benchlib.loadgen.peers import parse_ab, parse_h2load, parse_hey, parse_wrk, run_ab, run_h2load, run_hey, run_wrk
from benchlib.loadgen.peers.common import parse_count, parse_size_bytes, parse_time_ms
from benchlib.loadgen.testservers import serve

DATA = Path(__file__).parent / "data"


def test_units():
    assert parse_time_ms("459.14us") == pytest.approx(0.45914)
    assert parse_time_ms("1.20s") == pytest.approx(1200)
    assert parse_time_ms("2.00m") == pytest.approx(120_000)
    assert parse_size_bytes("31.43MB") == pytest.approx(31.43 * 1024**2)
    assert parse_count("51.01k") == pytest.approx(51010)
    with pytest.raises(ValueError):
        parse_time_ms("12 parsecs")


def test_parse_wrk_capture():
    r = parse_wrk((DATA / "wrk_t2_c10_latency.txt").read_text())
    assert r["threads"] == 2 and r["connections"] == 10
    assert r["requests_per_s"] == 15580.55 and r["requests"] == 15636 and r["duration_s"] == 1.0
    assert r["latency_avg_ms"] == 2.64 and r["latency_stdev_ms"] == 4.23 and r["latency_max_ms"] == 28.81
    assert r["latency_percentiles_ms"] == {"50": 0.355, "75": 3.77, "90": 8.56, "99": 18.94}
    assert r["transfer_bytes_per_s"] == pytest.approx(1.93 * 1024**2)
    assert r["errors"] == {"connect": 0, "read": 0, "write": 0, "timeout": 0, "non_2xx_3xx": 0}


def test_parse_wrk_errors_and_garbage():
    text = (DATA / "wrk_t2_c10_latency.txt").read_text().replace(
        "Requests/sec:", "  Socket errors: connect 1, read 2, write 3, timeout 4\n  Non-2xx or 3xx responses: 5\nRequests/sec:")
    assert parse_wrk(text)["errors"] == {"connect": 1, "read": 2, "write": 3, "timeout": 4, "non_2xx_3xx": 5}
    with pytest.raises(LoadGenError, match="cannot parse wrk"):
        parse_wrk("unable to connect to 127.0.0.1:1 Connection refused")


def test_parse_other_captures():
    hey = parse_hey((DATA / "hey_c10.txt").read_text())
    assert hey["requests_per_s"] == pytest.approx(14469.3763) and hey["status_counts"] == {"200": 14496}
    assert hey["latency_percentiles_ms"]["99"] == pytest.approx(10.3)
    ab = parse_ab((DATA / "ab_k_c10.txt").read_text())
    assert ab["requests_per_s"] == 7272.23 and ab["requests"] == 7284 and ab["failed"] == 0
    assert ab["latency_percentiles_ms"]["99"] == 8.0
    h2 = parse_h2load((DATA / "h2load_h1_c10.txt").read_text())
    assert h2["requests_per_s"] == 6101.0 and h2["requests"] == 6101 and h2["latency_max_ms"] == pytest.approx(84.31)


def test_parse_ab_without_keep_alive_with_failures():
    # ab -c 20 -n 400 (the seed's way: HTTP/1.0, no -k) against nginx-fastcgi keep-conn-on before
    # node-fastcgi 1.3.3, which closes kept connections: nginx answers 502 to some requests. ab
    # counts them as "Failed" only because their length differs from the first response's.
    ab = parse_ab((DATA / "ab_c20_nginx_502.txt").read_text())
    assert (ab["requests"], ab["concurrency"], ab["keep_alive_requests"]) == (400, 20, 0)
    assert ab["failed"] == ab["non_2xx"] == 129
    assert ab["failed_by_kind"] == {"connect": 0, "receive": 0, "length": 129, "exceptions": 0}
    assert ab["document_length_bytes"] == 62 and ab["http_version"] == "1.0"
    assert ab["latency_mean_ms"] == pytest.approx(20 * 1000 / ab["requests_per_s"], rel=1e-3)
    assert ab["latency_mean_across_ms"] == pytest.approx(1000 / ab["requests_per_s"], rel=1e-2)
    assert ab["longest_ms"] == ab["latency_percentiles_ms"]["100"]
    clean = parse_ab((DATA / "ab_k_c10.txt").read_text())
    assert clean["failed_by_kind"] == {} and clean["keep_alive_requests"] == 7284 and clean["longest_ms"] == 13.0
    assert clean["latency_mean_across_ms"] == 0.138 and clean["total_transferred_bytes"] == 1121736


def test_non_loopback_refused():
    with pytest.raises(LoadSpecError, match="loopback"):
        run_wrk("http://192.0.2.1/", duration_s=1)


@pytest.mark.skipif(not all(shutil.which(t) for t in ("wrk", "ab", "hey", "h2load", "taskset")),
                    reason="peer tools not installed (apt-get install wrk apache2-utils hey nghttp2-client)")
def test_real_runs_against_a_local_server():
    with serve("hello") as (host, port):
        url = f"http://{host}:{port}/"
        w = run_wrk(url, threads=1, connections=4, duration_s=1, cpus=[0])
        assert w["requests"] > 100 and w["requests_per_s"] > 100 and set(w["latency_percentiles_ms"]) == {"50", "75", "90", "99"}
        assert w["command"][:3] == ["taskset", "-c", "0"] and w["cpu_s"] > 0
        assert run_hey(url, connections=2, duration_s=1)["requests"] > 50
        assert run_ab(url, connections=2, requests=200)["requests"] == 200
        assert run_h2load(url, connections=2, duration_s=1)["requests"] > 50


def test_wrk_refuses_what_wrk_itself_would_reject():
    from benchlib.core.errors import ParameterError
    from benchlib.loadgen.peers.wrk import wrk_command

    with pytest.raises(ParameterError, match="whole number of seconds"):
        wrk_command("http://127.0.0.1:1/", duration_s=1.5)
    with pytest.raises(ParameterError, match="threads >= 1"):
        wrk_command("http://127.0.0.1:1/", threads=4, connections=2)
    assert wrk_command("http://127.0.0.1:1/", threads=2, connections=100, duration_s=30.0)[:4] == ["wrk", "-t2", "-c100", "-d30s"]
