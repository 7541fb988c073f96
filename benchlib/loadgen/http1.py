"""HTTP/1.x on the wire: request bytes and an incremental response parser.

Pure Python, no I/O: the engine feeds the parser whatever ``data_received`` got, and the
property tests (``tests/loadgen/test_http1_props.py``) feed it arbitrary splits of valid and
hostile responses.

The parser handles one response at a time (the engine never pipelines): ``Content-Length``
bodies, ``Transfer-Encoding: chunked`` bodies (with trailers), bodies delimited by the end of
the connection (no length, HTTP/1.0 style), responses without a body (1xx is skipped, 204,
304, and any response to ``HEAD``), and ``Connection: close`` / ``keep-alive``.

A server can send data that is cheap to produce and costly to parse (thousands of ``1xx``
heads, endless 1-byte chunks, endless trailers). The parser bounds both its memory and its
work: ``1xx`` heads count towards the head limit (:data:`DEFAULT_MAX_HEADER_BYTES`), and so do
trailers; and one :meth:`ResponseParser.feed` call handles at most ``max_steps`` heads,
chunks or trailer lines, then returns :data:`PAUSED` with the rest kept, so that the caller
can let other work run before :meth:`ResponseParser.resume`.

A response that cannot be parsed is an error of one of these kinds (names as in
:data:`benchlib.core.schema.ERROR_NAMES`):

* ``protocol``: malformed status line, header line, ``Content-Length`` or chunk size;
  headers larger than the limit; bytes after the end of a response.
* ``truncated``: the connection ended before the headers were complete (also: before any
  byte of the response).
* ``closed``: the connection ended after the headers, in the middle of the body.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "DEFAULT_MAX_HEADER_BYTES",
    "NEED_MORE",
    "COMPLETE",
    "FAILED",
    "PAUSED",
    "IDEMPOTENT_METHODS",
    "ResponseParser",
    "build_request",
]

#: The largest response head (status line and headers) accepted, in bytes.
DEFAULT_MAX_HEADER_BYTES = 65536

#: The most heads, chunks or trailer lines one :meth:`ResponseParser.feed` call parses.
DEFAULT_MAX_STEPS = 256

NEED_MORE = 0
COMPLETE = 1
FAILED = -1
#: The step budget of one call is spent: call :meth:`ResponseParser.resume` (later) to go on.
PAUSED = 2

#: Methods a client may send again after a connection failed before any response byte
#: (RFC 9110, section 9.2.2: the safe methods, PUT and DELETE).
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})

# Parser states.
_HEAD = 0  # reading status line and headers
_LENGTH = 1  # reading a Content-Length body
_CHUNK_SIZE = 2  # reading a chunk-size line
_CHUNK_DATA = 3  # reading chunk data (and its CRLF)
_TRAILERS = 4  # reading trailers after the last chunk
_UNTIL_CLOSE = 5  # reading a body delimited by the end of the connection
_DONE = 6
_ERROR = 7
_CHUNK_CRLF = 8  # reading the CRLF after chunk data

_MAX_CHUNK_LINE = 4096

#: Parsed response heads, shared by the parsers of a process, keyed by their settings;
#: each maps a head's bytes to (status, state, remaining, keep_alive).
_HEAD_CACHE_SIZE = 256


class _Caches(dict):  # type: ignore[type-arg]
    def __missing__(self, key: tuple[bool, int]) -> dict[bytes, tuple[int, int, int, bool]]:
        self[key] = {}
        return self[key]


_HEAD_CACHES: dict[tuple[bool, int], dict[bytes, tuple[int, int, int, bool]]] = _Caches()

#: Header lines: a name (no control characters, spaces or colons), a colon, a value.
_HEADER_LINES = re.compile(rb"(?:[^\x00-\x20:\x7f]+:[^\r\n]*\r\n)*[^\x00-\x20:\x7f]+:[^\r\n]*")


def build_request(
    method: str,
    path: str,
    host: str,
    port: int,
    *,
    http_version: str = "1.1",
    keep_alive: bool = True,
    headers: Sequence[tuple[str, str]] = (),
    body: bytes = b"",
) -> bytes:
    """The bytes of one request, built once per trial.

    Parameters
    ----------
    method, path: request line.
    host, port: for the ``Host`` header (IPv6 literals are bracketed).
    http_version: ``"1.1"`` or ``"1.0"``.
    keep_alive: HTTP/1.1 sends ``Connection: close`` when false; HTTP/1.0 sends
        ``Connection: keep-alive`` when true.
    headers: extra headers; a user ``Host``, ``Connection`` or ``Content-Length`` replaces ours.
    body: request body; ``Content-Length`` is added when it is non-empty or the method is
        ``POST``/``PUT``/``PATCH``.
    """
    hostname = f"[{host}]" if ":" in host else host
    given = {k.lower() for k, _ in headers}
    lines = [f"{method} {path} HTTP/{http_version}"]
    if "host" not in given:
        lines.append(f"Host: {hostname}:{port}")
    if "connection" not in given:
        if http_version == "1.1" and not keep_alive:
            lines.append("Connection: close")
        elif http_version == "1.0" and keep_alive:
            lines.append("Connection: keep-alive")
    for k, v in headers:
        if any(c in k + v for c in "\r\n"):
            raise ValueError(f"header {k!r} contains CR or LF")
        lines.append(f"{k}: {v}")
    if "content-length" not in given and (body or method.upper() in ("POST", "PUT", "PATCH")):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + bytes(body)


class ResponseParser:
    """Incremental parser of one HTTP/1.x response at a time.

    Use :meth:`feed` with each piece of data received; it returns :data:`NEED_MORE`,
    :data:`COMPLETE`, :data:`FAILED` or :data:`PAUSED` (``max_steps`` heads, chunks or
    trailer lines parsed, the rest kept: call :meth:`resume` to go on). At the end of the
    connection call :meth:`eof`. After a complete or failed response, :meth:`reset` readies it
    for the next one.

    Attributes
    ----------
    status: the HTTP status (0 until the head is parsed).
    nbytes: bytes of this response received so far (head and body).
    keep_alive: whether the connection may carry another request after this response.
    error: on failure, the error kind (``protocol``, ``truncated``, ``closed``).
    reason: on failure, a short human explanation.
    surplus: on failure, whether it was bytes beyond the end of a complete response.
    """

    __slots__ = (
        "max_header_bytes",
        "max_steps",
        "head_request",
        "http10_request",
        "status",
        "nbytes",
        "keep_alive",
        "error",
        "reason",
        "_state",
        "_buf",
        "_remaining",
        "_info",
        "_cache",
        "surplus",
    )

    def __init__(self, *, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES, head_request: bool = False,
                 max_steps: int = DEFAULT_MAX_STEPS) -> None:
        self.max_header_bytes = max_header_bytes
        self.max_steps = max_steps
        self.head_request = head_request
        self._cache = _HEAD_CACHES[(head_request, max_header_bytes)]
        self.reset()

    def reset(self) -> None:
        """Forget the last response; ready for the next one."""
        self.status = 0
        self.nbytes = 0
        self.keep_alive = True
        self.error = ""
        self.reason = ""
        self.surplus = False
        self._state = _HEAD
        self._buf = b""
        self._remaining = 0
        self._info = 0  # bytes of 1xx heads before this response's final head

    @property
    def started(self) -> bool:
        """Whether any byte of the current response has arrived."""
        return self.nbytes > 0

    def _fail(self, kind: str, reason: str) -> int:
        self._state = _ERROR
        self.error = kind
        self.reason = reason
        self.keep_alive = False
        return FAILED

    def restart(self) -> None:
        """Ready for the next response after a complete one (cheaper than :meth:`reset`)."""
        self.nbytes = 0
        self.status = 0
        self._state = _HEAD
        self._info = 0

    def resume(self) -> int:
        """Go on parsing the data kept after :data:`PAUSED`; returns as :meth:`feed`."""
        return self.feed(b"")

    def feed(self, data: bytes) -> int:
        """Consume ``data``; return :data:`NEED_MORE`, :data:`COMPLETE`, :data:`FAILED` or
        :data:`PAUSED` (then :meth:`resume` goes on with the rest)."""
        state = self._state
        if state == _HEAD and not self._buf:
            # fast path: a whole Content-Length response in one piece, head seen before
            end = data.find(b"\r\n\r\n")
            if end > 0:
                hit = self._cache.get(data[:end])
                if hit is not None and hit[1] == _LENGTH and len(data) - end - 4 == hit[2]:
                    self.nbytes += len(data)
                    self.status = hit[0]
                    self.keep_alive = hit[3]
                    self._state = _DONE
                    return COMPLETE
        self.nbytes += len(data)
        if state == _HEAD:
            buf = self._buf + data if self._buf else data
            pos = 0  # start of the head being parsed (after skipped 1xx heads)
            steps = self.max_steps
            cache = self._cache
            while True:
                end = buf.find(b"\r\n\r\n", pos)
                if end < 0:
                    rest = buf[pos:] if pos else buf
                    if rest[:7] != b"HTTP/1."[: len(rest)]:
                        return self._fail("protocol", f"response does not start with HTTP/1.: {rest[:60]!r}")
                    if len(rest) > self.max_header_bytes - self._info:
                        return self._head_too_large()
                    self._buf = rest
                    return NEED_MORE
                if end + 4 - pos > self.max_header_bytes - self._info:
                    return self._head_too_large()
                # A server sends the same head again and again (bar its Date header, once a
                # second): a head parsed before is looked up instead of parsed again.
                head = buf[pos:end]
                hit = cache.get(head)
                if hit is None:
                    r = self._parse_head(buf, pos, end)
                    if r != NEED_MORE:
                        return r
                    if len(cache) >= _HEAD_CACHE_SIZE:
                        cache.clear()
                    hit = cache[head] = (self.status, self._state, self._remaining, self.keep_alive)
                if hit[0] >= 200:
                    self.status, self._state, self._remaining, self.keep_alive = hit
                    break
                # 1xx informational: skip it (its bytes count towards the head limit) and
                # parse the head that follows, a bounded number per call
                self._info += end + 4 - pos
                self.status = 0
                self._state = _HEAD
                pos = end + 4
                steps -= 1
                if pos == len(buf):
                    self._buf = b""
                    return NEED_MORE
                if steps <= 0:
                    self._buf = buf[pos:]
                    return PAUSED
            self._buf = b""
            state = self._state
            n = len(buf) - end - 4
            if state == _LENGTH:
                remaining = self._remaining
                if n == remaining:
                    self._remaining = 0
                    self._state = _DONE
                    return COMPLETE
                if n < remaining:
                    self._remaining = remaining - n
                    return NEED_MORE
                return self._beyond(f"{n - remaining} bytes more than Content-Length")
            if n == 0:
                return COMPLETE if state == _DONE else NEED_MORE
            data = buf[end + 4 :]
        elif state == _DONE:
            return self._beyond("bytes received after the end of the response")
        elif state == _ERROR:
            return FAILED

        if state == _LENGTH:
            n = len(data)
            remaining = self._remaining
            if n < remaining:
                self._remaining = remaining - n
                return NEED_MORE
            if n == remaining:
                self._remaining = 0
                self._state = _DONE
                return COMPLETE
            return self._beyond(f"{n - remaining} bytes more than Content-Length")
        if state == _UNTIL_CLOSE:
            return NEED_MORE
        if state == _DONE:
            return self._beyond("bytes received after the end of the response")
        return self._chunked(data)

    def _beyond(self, what: str) -> int:
        """Bytes arrived beyond the end of the response (a ``protocol`` error)."""
        self.surplus = True
        return self._fail("protocol", what)

    def _head_too_large(self) -> int:
        if self._info:
            return self._fail("protocol", f"response head (with {self._info} bytes of 1xx responses before it) "
                                          f"larger than {self.max_header_bytes} bytes")
        return self._fail("protocol", f"response head larger than {self.max_header_bytes} bytes")

    def _parse_head(self, buf: bytes, start: int, end: int) -> int:
        # Status line: HTTP/1.x SP 3DIGIT [SP reason]
        line_end = buf.find(b"\r\n", start, end + 2)
        line = buf[start:line_end]
        if len(line) < 12 or line[:7] != b"HTTP/1." or line[8:9] != b" " or line[7:8] not in (b"0", b"1"):
            return self._fail("protocol", f"malformed status line {line[:60]!r}")
        code = line[9:12]
        if not code.isdigit() or (len(line) > 12 and line[12:13] != b" "):
            return self._fail("protocol", f"malformed status code in {line[:60]!r}")
        status = int(code)
        if status < 100:
            return self._fail("protocol", f"status {status} out of range")
        self.status = status
        http10 = line[7:8] == b"0"
        length = -1
        chunked = False
        conn_close = http10
        if line_end < end:
            head = buf[line_end + 2 : end].lower()
            if _HEADER_LINES.fullmatch(head) is None:
                return self._fail("protocol", f"malformed header line in {head[:60]!r}")
            i = head.find(b"content-length:")
            # fast path: no Transfer-Encoding, no Connection, one Content-Length at a line start
            if (
                b"transfer-encoding" not in head
                and b"connection" not in head
                and (i == 0 or (i > 0 and head[i - 2 : i] == b"\r\n"))
                and head.find(b"content-length:", i + 15) < 0
            ):
                j = head.find(b"\r\n", i)
                v = (head[i + 15 : j] if j >= 0 else head[i + 15 :]).strip()
                if not v.isdigit() or len(v) > 18:
                    return self._fail("protocol", f"invalid Content-Length {v[:40]!r}")
                length = int(v)
                head = b""
            for h in head.split(b"\r\n") if head else ():
                colon = h.find(b":")
                if colon <= 0 or h[colon - 1 : colon] in (b" ", b"\t") or h[:1] in (b" ", b"\t"):
                    return self._fail("protocol", f"malformed header line {h[:60]!r}")
                name = h[:colon]
                if name == b"content-length":
                    v = h[colon + 1 :].strip()
                    if not v.isdigit() or len(v) > 18:
                        return self._fail("protocol", f"invalid Content-Length {v[:40]!r}")
                    n = int(v)
                    if length >= 0 and n != length:
                        return self._fail("protocol", "conflicting Content-Length headers")
                    length = n
                elif name == b"transfer-encoding":
                    codings = [c.strip() for c in h[colon + 1 :].split(b",")]
                    if codings and codings[-1] == b"chunked":
                        chunked = True
                    elif codings != [b"identity"]:
                        return self._fail("protocol", f"unsupported Transfer-Encoding {h[colon + 1:][:40]!r}")
                elif name == b"connection":
                    tokens = {t.strip() for t in h[colon + 1 :].split(b",")}
                    if b"close" in tokens:
                        conn_close = True
                    elif b"keep-alive" in tokens:
                        conn_close = False
        if status < 200:
            return NEED_MORE
        self.keep_alive = not conn_close
        if self.head_request or status == 204 or status == 304:
            self._state = _DONE
        elif chunked:
            if length >= 0:
                return self._fail("protocol", "both Content-Length and chunked Transfer-Encoding")
            self._state = _CHUNK_SIZE
        elif length >= 0:
            if length == 0:
                self._state = _DONE
            else:
                self._state = _LENGTH
                self._remaining = length
        else:
            self._state = _UNTIL_CLOSE
            self.keep_alive = False
        return NEED_MORE

    def _chunked(self, data: bytes) -> int:
        buf = self._buf + data if self._buf else data
        pos = 0
        n = len(buf)
        steps = self.max_steps
        while True:
            state = self._state
            if (state == _CHUNK_SIZE or state == _TRAILERS) and pos < n:
                # one step per chunk or trailer line: a bounded number per call
                steps -= 1
                if steps < 0:
                    self._buf = buf[pos:]
                    return PAUSED
            if state == _CHUNK_SIZE:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    if n - pos > _MAX_CHUNK_LINE:
                        return self._fail("protocol", "chunk-size line too long")
                    self._buf = buf[pos:]
                    return NEED_MORE
                size_field = buf[pos:eol].split(b";", 1)[0].strip()
                if not size_field or len(size_field) > 16 or any(c not in b"0123456789abcdefABCDEF" for c in size_field):
                    return self._fail("protocol", f"invalid chunk size {buf[pos:eol][:40]!r}")
                size = int(size_field, 16)
                pos = eol + 2
                if size == 0:
                    self._state = _TRAILERS
                    self._remaining = 0  # trailer bytes so far
                else:
                    self._state = _CHUNK_DATA
                    self._remaining = size
            elif state == _CHUNK_DATA:
                avail = n - pos
                rem = self._remaining
                if avail < rem:
                    self._remaining = rem - avail
                    self._buf = b""
                    return NEED_MORE
                pos += rem
                self._remaining = 0
                self._state = _CHUNK_CRLF
            elif state == _CHUNK_CRLF:
                if n - pos < 2:
                    if buf[pos:n] not in (b"", b"\r"):
                        return self._fail("protocol", "chunk data not followed by CRLF")
                    self._buf = buf[pos:]
                    return NEED_MORE
                if buf[pos : pos + 2] != b"\r\n":
                    return self._fail("protocol", "chunk data not followed by CRLF")
                pos += 2
                self._state = _CHUNK_SIZE
            elif state == _TRAILERS:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    if self._remaining + n - pos > self.max_header_bytes:
                        return self._fail("protocol", f"trailers larger than {self.max_header_bytes} bytes")
                    self._buf = buf[pos:]
                    return NEED_MORE
                if eol == pos:
                    pos += 2
                    self._buf = b""
                    self._state = _DONE
                    if pos != n:
                        return self._beyond("bytes received after the end of the response")
                    return COMPLETE
                self._remaining += eol + 2 - pos
                if self._remaining > self.max_header_bytes:
                    return self._fail("protocol", f"trailers larger than {self.max_header_bytes} bytes")
                pos = eol + 2
            else:  # pragma: no cover - defensive
                return self._fail("protocol", "parser in an invalid state")

    def eof(self) -> int:
        """The connection ended: :data:`COMPLETE` if that ends a body delimited by the
        connection's end, :data:`FAILED` otherwise (``truncated`` or ``closed``)."""
        state = self._state
        if state == _UNTIL_CLOSE:
            self._state = _DONE
            self.keep_alive = False
            return COMPLETE
        if state == _DONE:
            return COMPLETE
        if state == _ERROR:
            return FAILED
        if state == _HEAD:
            return self._fail("truncated", "connection closed before the response head was complete"
                              if self.nbytes else "connection closed before any response byte")
        return self._fail("closed", "connection closed in the middle of the body")
