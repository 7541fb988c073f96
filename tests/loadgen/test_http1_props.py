"""Property tests of the response parser: any split of a valid response parses to the same
result; arbitrary bytes never raise."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchlib.loadgen.http1 import COMPLETE, FAILED, NEED_MORE, PAUSED, ResponseParser, build_request

token = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-", min_size=1, max_size=20)
header_value = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40).map(str.strip)
reserved = {"content-length", "transfer-encoding", "connection"}
extra_headers = st.lists(st.tuples(token, header_value).filter(lambda kv: kv[0].lower() not in reserved), max_size=6)


@st.composite
def responses(draw):
    """(wire bytes, status, keep_alive, framing) for a valid response."""
    status = draw(st.sampled_from([200, 201, 204, 301, 304, 404, 500, 503]))
    version = draw(st.sampled_from(["1.1", "1.0"]))
    body = draw(st.binary(max_size=300))
    framing = draw(st.sampled_from(["length", "chunked", "close"]))
    conn = draw(st.sampled_from([None, "close", "keep-alive"]))
    name_case = draw(st.sampled_from([str.lower, str.title, str.upper]))
    headers = list(draw(extra_headers))
    if status in (204, 304):
        body, framing = b"", "length"
    payload = body
    if framing == "length":
        headers.append((name_case("content-length"), str(len(body))))
    elif framing == "chunked":
        headers.append((name_case("transfer-encoding"), "chunked"))
        cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=4)))
        pieces, prev = [], 0
        for c in cuts + [len(body)]:
            if c > prev:
                pieces.append(body[prev:c])
                prev = c
        payload = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n"
        if draw(st.booleans()):
            payload += b"X-Trailer: 1\r\n"
        payload += b"\r\n"
    if conn:
        headers.append((name_case("connection"), conn))
    draw(st.randoms()).shuffle(headers)
    head = f"HTTP/{version} {status} Whatever\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    if status in (204, 304):
        keep = not (conn == "close" or (version == "1.0" and conn != "keep-alive"))
    elif framing == "close":
        keep = False
    else:
        keep = not (conn == "close" or (version == "1.0" and conn != "keep-alive"))
    return head.encode("latin-1") + payload, status, keep, framing


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    pts = sorted({c % (len(data) + 1) for c in cuts})
    out, prev = [], 0
    for p in pts + [len(data)]:
        if p > prev:
            out.append(data[prev:p])
            prev = p
    return out


def feed(parser: ResponseParser, data: bytes) -> int:
    """Feed ``data``, resuming while the parser pauses; the final verdict."""
    r = parser.feed(data)
    while r == PAUSED:
        r = parser.resume()
    return r


@settings(max_examples=400, deadline=None)
@given(responses(), st.lists(st.integers(0, 10_000), max_size=12), st.sampled_from([1, 2, 256]))
def test_any_split_parses_the_same(resp, cuts, max_steps):
    wire, status, keep, framing = resp
    parser = ResponseParser(max_steps=max_steps)
    pieces = _split(wire, cuts)
    results = [feed(parser, p) for p in pieces]
    if framing == "close" and status not in (204, 304):
        assert all(r == NEED_MORE for r in results)
        assert parser.eof() == COMPLETE
    else:
        assert results[-1] == COMPLETE, (results, parser.reason)
        assert all(r == NEED_MORE for r in results[:-1])
    assert parser.status == status
    assert parser.nbytes == len(wire)
    assert parser.keep_alive == keep
    # bytes after a complete response are an error, not a crash
    if framing != "close":
        assert parser.feed(b"X") == FAILED and parser.error == "protocol"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.lists(st.integers(0, 1000), max_size=8))
def test_arbitrary_bytes_never_raise(data, cuts):
    parser = ResponseParser(max_header_bytes=256, max_steps=2)
    for piece in _split(data, cuts):
        r = feed(parser, piece)
        assert r in (NEED_MORE, COMPLETE, FAILED)
        if r != NEED_MORE:
            break
    r = parser.eof()
    assert r in (COMPLETE, FAILED)
    if r == FAILED:
        assert parser.error in ("protocol", "truncated", "closed") and parser.reason


@settings(max_examples=200, deadline=None)
@given(responses(), st.integers(1, 10_000))
def test_truncation_is_never_complete(resp, cut):
    wire, status, keep, framing = resp
    if framing == "close":
        return
    cut = cut % len(wire)
    parser = ResponseParser()
    r = parser.feed(wire[:cut]) if cut else NEED_MORE
    assert r == NEED_MORE
    assert parser.eof() == FAILED
    head_end = wire.find(b"\r\n\r\n") + 4
    assert parser.error == ("truncated" if cut < head_end else "closed")


def test_reset_reuses_the_parser():
    p = ResponseParser()
    one = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"
    for _ in range(3):
        assert p.feed(one) == COMPLETE and p.status == 200
        p.reset()


def test_informational_responses_are_skipped():
    p = ResponseParser()
    assert p.feed(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n") == COMPLETE
    assert p.status == 201


CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
HELLO = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"


def test_a_flood_of_1xx_heads_is_parsed_without_recursion_in_bounded_steps():
    # issue 10, item 1: 1,000 heads in one piece raised RecursionError (one recursion per head)
    wire = CONTINUE * 1000 + HELLO
    p = ResponseParser(max_steps=100)
    r, calls = p.feed(wire), 1
    while r == PAUSED:
        r, calls = p.resume(), calls + 1
    assert r == COMPLETE and p.status == 200 and p.nbytes == len(wire)
    assert calls == 11, "1,000 heads at most 100 per call, then the response"
    # split at every byte, too
    p = ResponseParser()
    assert [feed(p, wire[i : i + 1]) for i in range(len(wire))][-1] == COMPLETE and p.status == 200


def test_1xx_heads_count_towards_the_head_limit():
    p = ResponseParser()
    endless = CONTINUE * (65536 // len(CONTINUE) + 1) + HELLO
    assert feed(p, endless) == FAILED and p.error == "protocol" and "1xx" in p.reason


def test_trailers_are_bounded_in_total():
    # issue 10, item 2: endless short trailer lines never failed (only one line was bounded)
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n"
    p = ResponseParser()
    r = feed(p, head)
    for _ in range(10_000):
        if r != NEED_MORE:
            break
        r = feed(p, b"X-T: 1\r\n" * 100)
    assert r == FAILED and p.error == "protocol" and "trailers larger than 65536 bytes" in p.reason
    assert p.nbytes < 65536 + 2000


def test_an_endless_chunk_stream_is_parsed_in_bounded_steps():
    p = ResponseParser(max_steps=64)
    assert p.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n") == NEED_MORE
    r, calls = p.feed(b"1\r\na\r\n" * 1000), 1
    while r == PAUSED:
        r, calls = p.resume(), calls + 1
    assert r == NEED_MORE and calls == 16  # 1000 chunks, 64 per call


def test_bytes_beyond_a_complete_response_are_marked_surplus():
    p = ResponseParser()
    assert p.feed(HELLO + HELLO) == FAILED and p.error == "protocol" and p.surplus
    p.reset()
    assert p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n") == NEED_MORE
    assert p.feed(b"hi!") == FAILED and p.surplus
    p.reset()
    assert p.feed(b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n") == FAILED and not p.surplus


def test_head_response_has_no_body():
    p = ResponseParser(head_request=True)
    assert p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n") == COMPLETE


@pytest.mark.parametrize("bad", [
    b"HTTP/1.1 2x0 OK\r\n\r\n",
    b"HTTP/2.0 200 OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
])
def test_malformed_is_protocol(bad):
    p = ResponseParser()
    assert p.feed(bad) == FAILED and p.error == "protocol"


def test_build_request():
    r = build_request("GET", "/", "::1", 8080, http_version="1.0", keep_alive=False)
    assert r == b"GET / HTTP/1.0\r\nHost: [::1]:8080\r\n\r\n"
    r = build_request("POST", "/p", "127.0.0.1", 80, body=b"xy", headers=(("Host", "example"),))
    assert r == b"POST /p HTTP/1.1\r\nHost: example\r\nContent-Length: 2\r\n\r\nxy"
    with pytest.raises(ValueError):
        build_request("GET", "/", "h", 1, headers=(("X", "a\r\nb"),))
