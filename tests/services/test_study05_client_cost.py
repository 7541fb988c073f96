"""Study 05's cost arms: the canned server answers with go-grpc-json's response bytes, and
the client-cost tables come from a real run.

* pure: the canned server's payloads and .proto are go-grpc-json's byte for byte; its
  manifest serves every study endpoint from one variant; the cost arms' names and pairs;
* real (``integration``; Go builds, cached): on one connection, three calls per endpoint,
  the canned server's responses are byte-identical to go-grpc-json's (HTTP/1.1: the whole
  response but the Date value; HTTP/2: every HEADERS and DATA frame of every stream, HPACK
  bytes included); a tiny run of two Go arms and their two cost arms gives the client-cost
  table and the ratio table.
"""

from __future__ import annotations

import os
import re
import socket
import struct
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from benchlib.analysis import client_cost as cost
from benchlib.analysis.studies import grpc_json as study
from benchlib.runtime import StartOptions, get_runtime, toolchains
from benchlib.runtime.local import free_port
from benchlib.runtime.manifest import Endpoint, find_services_dir, load_manifest

SERVICES_DIR = find_services_dir()
CANNED = SERVICES_DIR / study.CANNED_SERVICE
GO = SERVICES_DIR / study.LANGUAGES["go"]
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SERVER_CPUS = (1,) if (os.cpu_count() or 1) > 1 else (0,)
DATE = re.compile(rb"Date: [A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT\r\n")


def test_canned_payloads_and_manifest_are_go_grpc_jsons() -> None:
    names = sorted(p.name for p in (GO / "payloads").iterdir())
    assert names == sorted(p.name for p in (CANNED / "payloads").iterdir()) and len(names) == 8
    for n in names:
        assert (CANNED / "payloads" / n).read_bytes() == (GO / "payloads" / n).read_bytes(), n
    assert (CANNED / "payloads.proto").read_bytes() == (GO / "payloads.proto").read_bytes()
    m = load_manifest(CANNED)
    assert m.variants == ("canned",) and study.STUDY in m.studies and "payloads/*" in m.resolve().build_inputs
    canned = {e.name: e for e in m.resolve("canned").endpoints}
    for variant in ("grpc", "json"):
        for e in load_manifest(GO).resolve(variant).endpoints:
            c = canned[e.name]
            assert (c.protocol, c.method, c.path, c.body, c.headers) == (e.protocol, e.method, e.path, e.body,
                                                                          e.headers), e.name


def test_cost_arms_and_pairs() -> None:
    arms = study.client_cost_arms("json,grpc", "small")
    assert [(a.name, a.service, a.variant, a.endpoint) for a in arms] == [
        ("canned-grpc-small", study.CANNED_SERVICE, "canned", "small-grpc"),
        ("canned-json-small", study.CANNED_SERVICE, "canned", "small-json")]
    names = [a.name for a in study.study_arms("go,rust", "grpc,json", "small")] + [a.name for a in arms]
    assert study.split_arm("canned-h2c-huge") == ("canned", "h2c", "huge")
    assert study.client_paths(names) == {"canned-grpc-small": "gRPC, small",
                                         "canned-json-small": "JSON over HTTP/1.1, small"}
    assert [(p.group, p.a, p.b, p.cost_a, p.cost_b) for p in study.client_pairs(names)] == [
        ("go small", "go-grpc-small", "go-json-small", "canned-grpc-small", "canned-json-small"),
        ("rust small", "rust-grpc-small", "rust-json-small", "canned-grpc-small", "canned-json-small")]
    # the families never pair a cost arm
    rows = [c for f in study.families(names, ["c1"]) for c in f.rows()]
    assert rows and not any("canned" in c.arm or "canned" in c.baseline for c in rows)


# -- real servers ------------------------------------------------------------------------------

def _frame(ftype: int, flags: int, sid: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def _h2_responses(port: int, ep: Endpoint, calls: int = 3) -> dict[int, list[tuple[int, int, bytes]]]:
    """``calls`` requests of ``ep`` on one HTTP/2 connection, sent one after the other; each
    stream's response frames (type, flags, payload) in order."""
    import hpack

    enc = hpack.Encoder()
    grpc = ep.protocol == "grpc"
    body = b"\0" + struct.pack(">I", len(ep.body)) + ep.body if grpc else ep.body
    head = [(":method", "POST"), (":scheme", "http"), (":path", ep.path), (":authority", "127.0.0.1")]
    head += [("content-type", "application/grpc"), ("te", "trailers")] if grpc else [
        *((k.lower(), v) for k, v in ep.headers), ("content-length", str(len(body)))]
    out: dict[int, list[tuple[int, int, bytes]]] = {}
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(PREFACE + _frame(4, 0, 0, b""))
        buf = b""
        for i in range(calls):
            sid = 2 * i + 1
            s.sendall(_frame(1, 0x4, sid, enc.encode(head, huffman=False)) + _frame(0, 0x1, sid, body))
            done = False
            while not done:
                while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
                    chunk = s.recv(65536)
                    assert chunk, "connection closed"
                    buf += chunk
                n = int.from_bytes(buf[:3], "big")
                ftype, flags, fsid, payload = buf[3], buf[4], int.from_bytes(buf[5:9], "big"), buf[9:9 + n]
                buf = buf[9 + n:]
                if ftype == 4 and not flags & 1:
                    s.sendall(_frame(4, 1, 0, b""))
                if fsid == sid and ftype in (0, 1):
                    out.setdefault(sid, []).append((ftype, flags, payload))
                    done = bool(flags & 1)
    return out


def _h1_responses(port: int, ep: Endpoint, calls: int = 3) -> list[bytes]:
    """``calls`` requests of ``ep`` on one keep-alive connection; each raw response."""
    head = f"POST {ep.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in ep.headers)
    req = (head + f"Content-Length: {len(ep.body)}\r\n\r\n").encode() + ep.body
    out = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        for _ in range(calls):
            s.sendall(req)
            buf = b""
            while b"\r\n\r\n" not in buf or len(buf) < buf.index(b"\r\n\r\n") + 4 + int(
                    re.search(rb"Content-Length: (\d+)", buf).group(1)):  # type: ignore[union-attr]
                buf += s.recv(65536)
            out.append(buf)
    return out


@contextmanager
def _running(directory: Path, variant: str, log: Path) -> Iterator[int]:
    m = load_manifest(directory)
    ok, why = toolchains.availability(m)
    if not ok:
        pytest.skip(f"not run: {why}")
    rt = get_runtime("local")
    with rt.start(rt.prepare(m.resolve(variant)), StartOptions(port=free_port(), cpus=SERVER_CPUS, log_path=log)) as h:
        yield h.port


def _endpoints(protocols: Sequence[str]) -> list[Endpoint]:
    return [e for e in load_manifest(CANNED).resolve().endpoints if e.protocol in protocols]


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_canned_responses_are_byte_identical_to_go_grpc_jsons(tmp_path: Path) -> None:
    with _running(CANNED, "canned", tmp_path / "canned.log") as canned:
        ours = {e.name: (_h2_responses(canned, e) if e.protocol != "http1" else _h1_responses(canned, e))
                for e in _endpoints(("grpc", "http1", "h2c"))}
    theirs = {}
    with _running(GO, "grpc", tmp_path / "grpc.log") as port:
        theirs.update({e.name: _h2_responses(port, e) for e in _endpoints(("grpc",))})
    with _running(GO, "json", tmp_path / "json.log") as port:
        theirs.update({e.name: (_h2_responses(port, e) if e.protocol == "h2c" else _h1_responses(port, e))
                       for e in _endpoints(("http1", "h2c"))})
    assert set(ours) == set(theirs) == {f"{p}-{k}" for p in study.PAYLOADS for k in ("grpc", "json", "h2c")}
    for name, want in theirs.items():
        got = ours[name]
        if name.endswith("-json"):  # HTTP/1.1: the whole response, the Date value aside
            assert [DATE.sub(b"Date: -\r\n", r) for r in got] == [DATE.sub(b"Date: -\r\n", r) for r in want], name
            assert all(len(a) == len(b) for a, b in zip(got, want, strict=True)) and len(DATE.findall(got[0])) == 1
        elif name.endswith("-h2c"):  # the date is the block's only literal that may differ within a second
            assert [[(t, f, len(p)) for t, f, p in v] for v in got.values()] == [
                [(t, f, len(p)) for t, f, p in v] for v in want.values()], name
            assert [[p for t, _, p in v if t == 0] for v in got.values()] == [
                [p for t, _, p in v if t == 0] for v in want.values()], name
            assert [v[0][2] for v in got.values()][1:] == [v[0][2] for v in want.values()][1:] == [b"\x88\xc0\xbf\xbe"] * 2
        else:  # gRPC: every frame, HPACK bytes included
            assert got == want, name
            assert [f[2] for f in got[3]] == [b"\x88\xc0", want[3][1][2], b"\xbf\xbe"]


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_client_cost_tables_come_from_a_tiny_real_run() -> None:
    from benchlib.core.model import Experiment
    from benchlib.run.runner import run_experiment

    arms = study.study_arms("go", "grpc,json", "small") + study.client_cost_arms("grpc,json", "small")
    exp = Experiment(study=study.STUDY, arms=arms, conditions=study.study_conditions("1", 0.3, 0.1), trials=2,
                     seed=3, runtime="local")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as out:
        run = run_experiment(exp, out_dir=out, progress=False)
        summaries = run.summaries()
        trials = cost.client_trials(run, summaries)
    print(f"\nrun: {time.monotonic() - t0:.1f} s")
    assert len(trials) == 8 and (trials["client_us"] > 0).all() and (trials["p50_us"] > 0).all()
    names = [a.name for a in arms]
    table = cost.client_cost_table(trials, study.client_paths(names))
    assert list(table["arm"]) and set(table["arm"]) == {"canned-grpc-small", "canned-json-small"}
    assert (table["trials"] == 2).all() and (table["client CPU per call (µs)"] > 0).all()
    ratios = cost.ratio_table(trials, study.client_pairs(names), "c1", label="gRPC / JSON")
    row = ratios.iloc[0]
    assert (row["group"], row["blocks"]) == ("go small", 2) and row["gRPC / JSON"] > 0
    # every figure comes from the run: the ratio is the blocks' measured medians
    p = trials.set_index(["arm", "block"])["p50_us"]
    per_block = [p[("go-grpc-small", b)] / p[("go-json-small", b)] for b in (0, 1)]
    assert min(per_block) - 1e-3 <= row["gRPC / JSON"] <= max(per_block) + 1e-3
