"""HTTP/2 framing for the load generator's h2c and gRPC engine: only what unary calls need.

Pure (no I/O). The client side of RFC 9113 that :mod:`benchlib.loadgen.h2engine` uses:

* the connection preface and the client's SETTINGS (server push off, a 16 MiB stream
  window, the connection window raised to 1 GiB);
* one request as bytes: a HEADERS frame whose header block is encoded **once** per trial
  (HPACK literals "without indexing", so the block never depends on the dynamic table and
  is the same for every request) and, with a body, DATA frames of at most 16,384 bytes
  (the size every peer must accept) with END_STREAM on the last;
* control frames: SETTINGS ACK, PING ACK, WINDOW_UPDATE, RST_STREAM, GOAWAY;
* the response side's header blocks are decoded with the ``hpack`` package's decoder (one
  per connection: the server's dynamic table is per connection), behind a cache: a block
  made only of indexed fields leaves the dynamic table as it was, so while the table does
  not change, the same bytes mean the same headers (a server repeats its responses' header
  blocks, e.g. grpc-go's ``\\x88\\xc0`` after the first response).

gRPC (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md): a request is
``POST /Service/Method`` with ``content-type: application/grpc`` and ``te: trailers``; its
body is one length-prefixed message (1 byte compressed flag = 0, 4 bytes big-endian length,
the serialized protobuf message).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

__all__ = [
    "PREFACE",
    "FRAME_HEADER",
    "MAX_FRAME",
    "client_start",
    "grpc_frame",
    "request_template",
    "data_prefix",
    "header_block",
    "settings_ack",
    "ping_ack",
    "window_update",
    "rst_stream",
    "goaway",
    "parse_settings",
    "HeaderDecoder",
    "HeaderBlockError",
    "GRPC_STATUS_NAMES",
    "http_status_to_grpc",
]

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

#: The 9-byte frame header: length (24 bits, as a 1-byte high part and a 2-byte low part),
#: type, flags, stream id (31 bits).
FRAME_HEADER = struct.Struct(">BHBBI")

# frame types
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
# flags
END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20
# settings
S_HEADER_TABLE_SIZE, S_ENABLE_PUSH, S_MAX_CONCURRENT_STREAMS, S_INITIAL_WINDOW_SIZE, S_MAX_FRAME_SIZE, \
    S_MAX_HEADER_LIST_SIZE = range(1, 7)
# error codes (RFC 9113 section 7)
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR, SETTINGS_TIMEOUT, STREAM_CLOSED, FRAME_SIZE_ERROR, \
    REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, CONNECT_ERROR, ENHANCE_YOUR_CALM, INADEQUATE_SECURITY, \
    HTTP_1_1_REQUIRED = range(14)
ERROR_CODE_NAMES = ("NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
                    "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR",
                    "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED")

#: The largest frame payload this client accepts and sends (the protocol's minimum maximum;
#: the client never raises SETTINGS_MAX_FRAME_SIZE, so a larger frame is a FRAME_SIZE_ERROR).
MAX_FRAME = 16_384
#: The client's initial stream receive window (bytes) and its connection receive window.
STREAM_WINDOW = 1 << 24
CONN_WINDOW = 1 << 30
#: The most a header block (HEADERS + CONTINUATION frames) may hold before the connection
#: is given up as hostile (bytes).
MAX_HEADER_BLOCK = 65_536

#: gRPC status codes by number.
GRPC_STATUS_NAMES = ("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
                     "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
                     "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED")


def http_status_to_grpc(status: int) -> int:
    """The gRPC status a client derives from an HTTP status without ``grpc-status``
    (gRPC's ``http-grpc-status-mapping.md``)."""
    return {400: 13, 401: 16, 403: 7, 404: 12, 429: 14, 502: 14, 503: 14, 504: 14}.get(status, 2)


def _frame(ftype: int, flags: int, sid: int, payload: bytes) -> bytes:
    n = len(payload)
    return FRAME_HEADER.pack(n >> 16, n & 0xFFFF, ftype, flags, sid) + payload


def client_start() -> bytes:
    """The connection preface, the client's SETTINGS and the connection window update."""
    settings = struct.pack(">HIHI", S_ENABLE_PUSH, 0, S_INITIAL_WINDOW_SIZE, STREAM_WINDOW)
    return PREFACE + _frame(SETTINGS, 0, 0, settings) + window_update(0, CONN_WINDOW - 65_535)


def settings_ack() -> bytes:
    return _frame(SETTINGS, ACK, 0, b"")


def ping_ack(payload: bytes) -> bytes:
    return _frame(PING, ACK, 0, payload)


def window_update(sid: int, increment: int) -> bytes:
    return _frame(WINDOW_UPDATE, 0, sid, struct.pack(">I", increment))


def rst_stream(sid: int, code: int = CANCEL) -> bytes:
    return _frame(RST_STREAM, 0, sid, struct.pack(">I", code))


def goaway(last_sid: int, code: int = NO_ERROR) -> bytes:
    return _frame(GOAWAY, 0, 0, struct.pack(">II", last_sid, code))


def parse_settings(payload: bytes) -> list[tuple[int, int]]:
    """(identifier, value) pairs of a SETTINGS payload (its length a multiple of 6)."""
    return [struct.unpack_from(">HI", payload, i) for i in range(0, len(payload) - len(payload) % 6, 6)]


# -- HPACK, encoder side (RFC 7541): literals without indexing, never Huffman -------------------
def _hint(value: int, prefix: int, first: int) -> bytes:
    """An HPACK integer with a ``prefix``-bit prefix, the first byte's high bits ``first``."""
    top = (1 << prefix) - 1
    if value < top:
        return bytes([first | value])
    out = bytearray([first | top])
    value -= top
    while value >= 128:
        out.append((value & 127) | 128)
        value >>= 7
    out.append(value)
    return bytes(out)


def _hstr(s: bytes) -> bytes:
    return _hint(len(s), 7, 0) + s


#: Static-table indices (RFC 7541 appendix A) of the names the request block uses.
_STATIC_NAME = {":authority": 1, ":method": 2, ":path": 4, ":scheme": 6, "content-type": 31,
                "content-length": 28, "user-agent": 58, "accept": 19}
_INDEXED = {(":method", "GET"): 2, (":method", "POST"): 3, (":scheme", "http"): 6}


def _field(name: str, value: str) -> bytes:
    """One header field: indexed when the static table has the pair, else a literal without
    indexing (with an indexed name where the static table has the name)."""
    idx = _INDEXED.get((name, value))
    if idx is not None:
        return _hint(idx, 7, 0x80)
    v = value.encode("latin-1")
    nidx = _STATIC_NAME.get(name)
    if nidx is not None:
        return _hint(nidx, 4, 0) + _hstr(v)
    return b"\x00" + _hstr(name.encode("latin-1")) + _hstr(v)


def header_block(fields: Sequence[tuple[str, str]]) -> bytes:
    """The HPACK block of ``fields`` (names lower-case), independent of any dynamic table."""
    return b"".join(_field(n, v) for n, v in fields)


def grpc_frame(message: bytes) -> bytes:
    """A gRPC length-prefixed message (uncompressed)."""
    return b"\x00" + struct.pack(">I", len(message)) + message


def request_template(*, method: str, path: str, authority: str, headers: Sequence[tuple[str, str]] = (),
                     body: bytes = b"", grpc: bool = False) -> tuple[bytes, bytes, bytes]:
    """The parts of one request, ready to be stamped with a stream id.

    Returns ``(headers_prefix, block, body)``: the HEADERS frame is ``headers_prefix`` (its
    first 5 header bytes) + the 4-byte stream id + ``block``; ``body`` (the gRPC-framed
    message with ``grpc``) goes in DATA frames (:func:`data_prefix`). With ``grpc`` the gRPC
    headers are added.
    """
    fields = [(":method", method), (":scheme", "http"), (":path", path), (":authority", authority)]
    if grpc:
        body = grpc_frame(body)
        fields += [("content-type", "application/grpc"), ("te", "trailers")]
    fields += [(n.lower(), v) for n, v in headers if n.lower() not in ("host", "content-length")]
    if body and not grpc:
        fields.append(("content-length", str(len(body))))
    block = header_block(fields)
    if len(block) > MAX_FRAME:
        raise ValueError(f"the request's header block is {len(block)} bytes; at most {MAX_FRAME} fit one frame")
    flags = END_HEADERS | (0 if body else END_STREAM)
    n = len(block)
    hprefix = FRAME_HEADER.pack(n >> 16, n & 0xFFFF, HEADERS, flags, 0)[:5]
    return hprefix, block, body


def data_prefix(length: int, end_stream: bool) -> bytes:
    """The first 5 bytes of a DATA frame's header (the stream id follows)."""
    return FRAME_HEADER.pack(length >> 16, length & 0xFFFF, DATA, END_STREAM if end_stream else 0, 0)[:5]


# -- HPACK, decoder side ------------------------------------------------------------------------
class HeaderBlockError(Exception):
    """A header block that does not decode (a COMPRESSION_ERROR: the connection is lost)."""


def _indexed_only(block: bytes) -> bool:
    """Whether ``block`` is made only of indexed fields (RFC 7541 6.1), which leave the
    dynamic table as it was."""
    i, n = 0, len(block)
    while i < n:
        b = block[i]
        if not b & 0x80:
            return False
        i += 1
        if b & 0x7F == 0x7F:  # a multi-byte index
            while i < n and block[i] & 0x80:
                i += 1
            i += 1
    return i == n


class HeaderDecoder:
    """Decodes one connection's response header blocks to what a row needs:
    ``(status, grpc_status, grpc_message)`` (``-1`` where a field is absent).

    A cache maps blocks of indexed fields only to their result; it is emptied whenever a
    block changes the dynamic table (any other block), so a cached answer is always what
    the decoder would say.
    """

    __slots__ = ("_dec", "_cache")

    def __init__(self) -> None:
        import hpack

        self._dec = hpack.Decoder()
        self._dec.max_header_list_size = MAX_HEADER_BLOCK
        self._cache: dict[bytes, tuple[int, int, str]] = {}

    def decode(self, block: bytes) -> tuple[int, int, str]:
        hit = self._cache.get(block)
        if hit is not None:
            return hit
        import hpack

        try:
            fields = self._dec.decode(block, raw=True)
        except (hpack.HPACKError, ValueError, IndexError, UnicodeError) as exc:
            raise HeaderBlockError(f"{type(exc).__name__}: {exc}") from None
        status = gstatus = -1
        gmsg = ""
        for name, value in fields:
            if name == b":status":
                status = int(value) if value.isdigit() and len(value) == 3 else 0
            elif name == b"grpc-status":
                gstatus = int(value) if value.isdigit() and len(value) <= 2 else 2
            elif name == b"grpc-message":
                gmsg = value[:200].decode("latin-1")
        out = (status, gstatus, gmsg)
        if _indexed_only(block):
            if len(self._cache) < 64:
                self._cache[block] = out
        else:
            self._cache.clear()
        return out
