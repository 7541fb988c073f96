"""The HTTP/2 (h2c, prior knowledge) and unary gRPC engine of one worker process.

Same design as the HTTP/1 engine (:mod:`benchlib.loadgen.engine`, whose
:class:`~benchlib.loadgen.engine.Engine` it extends: the closed and open models, the
schedule and its dispatcher, the phases, the hard deadline, the packed 38-byte records,
abandonment): only the connections differ. Each connection is a raw asyncio ``Protocol``
that speaks the client side of HTTP/2 with the hand-written framer of
:mod:`benchlib.loadgen.h2frames` and carries up to ``streams`` concurrent requests (streams):

* **closed model**: ``connections × streams`` slots; a slot sends its next call as soon as
  its previous one is complete (on the same connection while it can take streams);
* **open model**: at most ``connections × streams`` calls in flight; a due call takes a free
  stream on an open connection, or opens a connection while fewer than ``connections`` are
  open, or waits in the queue (the wait is in its latency).

The request's header block is encoded once (HPACK literals without indexing) and stamped
with each stream id; the response header blocks are decoded per connection, through a
cache of the blocks the server repeats. Writes made while a read is processed are joined
into one ``write`` at its end (a response that frees a stream and the next call's frames
leave in the same system call).

Rows (:data:`benchlib.core.schema.ROW_DTYPE`, unchanged): h2c: ``status`` = the HTTP status,
``error`` as for HTTP/1. gRPC: a call with ``grpc-status: 0`` is ``error = none`` with
``status`` = 200 (the HTTP status); a call that ended with another grpc-status is
``error = grpc`` with ``status`` = that grpc-status (1-16); a response whose HTTP status is
not 200 and that has no grpc-status is ``error = grpc`` with ``status`` = the HTTP status
(>= 100, so the two never collide); a 200 response that ends without a grpc-status is
``protocol``.

What a server can do, and the row it gets (every call is one row, always):

* RST_STREAM on a stream: that call is ``reset`` (REFUSED_STREAM: the server did not
  process it, so it is sent again, once, on another stream; ``retries`` counts it);
* GOAWAY: no new streams on that connection; calls on streams above its last-stream-id were
  not processed and are sent again, once, on another connection (a call that meets a second
  GOAWAY is ``reset``); the others finish on the old connection, which then closes;
* a frame that breaks the protocol (an undecodable header block, a frame over 16,384 bytes,
  garbage, a DATA frame on a stream that was never opened, a push): every call on the
  connection is ``protocol``; the connection is closed (GOAWAY) and replaced;
* the connection ends with calls in flight: ``reset`` (by a reset), ``truncated`` (no
  response headers yet) or ``closed`` (in the middle of the response);
* a flow-control window that never opens, or a server that never answers (not even the
  preface): ``timeout`` after ``timeout_s`` from the send; the stream is cancelled
  (RST_STREAM CANCEL) and the connection kept.

Bounded parsing: one read is parsed at most :data:`FRAME_BUDGET` frames at a time; the
connection then stops reading until the next pass of the event loop (as the HTTP/1
parser's ``PAUSED``). A connection buffers at most one frame (16,393 bytes) and one header
block (64 KiB).
"""

from __future__ import annotations

import asyncio
import collections
import struct
from collections.abc import Callable
from typing import Any

from benchlib.core.schema import ERROR_CODES
from benchlib.loadgen import h2frames as f
from benchlib.loadgen.engine import CONNECT_RETRY_NS, Engine, EngineConfig, _clock

__all__ = ["H2Engine", "H2EngineConfig", "FRAME_BUDGET"]

#: Frames parsed per read before the connection yields to the event loop.
FRAME_BUDGET = 512

_E_NONE = ERROR_CODES["none"]
_E_RESET = ERROR_CODES["reset"]
_E_TIMEOUT = ERROR_CODES["timeout"]
_E_PROTOCOL = ERROR_CODES["protocol"]
_E_TRUNCATED = ERROR_CODES["truncated"]
_E_CLOSED = ERROR_CODES["closed"]
_E_GRPC = ERROR_CODES["grpc"]
_MAX_I32 = 2**31 - 1
_MAX_SID = 2**31 - 1
_unpack_header = f.FRAME_HEADER.unpack_from
_U32 = struct.Struct(">I").unpack_from

# per-stream state, one list per call in flight (indices)
_T_INT, _T_SENT, _NBYTES, _STATUS, _GSTATUS, _GMSG, _HEADERS, _RECV, _SWIN, _OFF = range(10)


class H2EngineConfig(EngineConfig):
    """:class:`~benchlib.loadgen.engine.EngineConfig` plus ``protocol`` (``"h2c"`` or
    ``"grpc"``) and ``streams`` (the most concurrent streams per connection)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.protocol: str = kw.get("protocol", "h2c")
        self.streams: int = int(kw.get("streams", 1))


class _H2Conn(asyncio.Protocol):
    """One HTTP/2 connection and its streams."""

    #: never "busy" as an HTTP/1 connection is: its calls are in :attr:`streams`
    busy = False

    def __init__(self, eng: H2Engine, cid: int) -> None:
        self.eng = eng
        self.cid = cid
        self.transport: asyncio.Transport | None = None
        self.dead = False
        self.goaway = False  # no new streams (GOAWAY received, or stream ids exhausted)
        self.counted = True  # counted in eng.nconns (a draining connection is not)
        self.in_idle = False
        self.opened_ns = 0
        self.streams: dict[int, list[Any]] = {}
        self.next_sid = 1
        self.cap = eng.streams  # min(streams, the server's SETTINGS_MAX_CONCURRENT_STREAMS)
        self.buf = b""
        self.out: list[bytes] | None = None  # writes joined while a read is processed
        self.send_window = 65_535
        self.peer_window = 65_535  # the server's initial stream window
        self.blocked: collections.deque[int] = collections.deque()  # streams with DATA waiting for a window
        self.recv_unacked = 0
        self.dec = f.HeaderDecoder()
        self.cont: tuple[int, int, bytearray] | None = None  # a header block continued in CONTINUATION
        self.paused = False

    # -- asyncio callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(f.client_start())  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        if self.dead:
            return
        if self.buf:
            data = self.buf + data
            self.buf = b""
        self.out = []
        try:
            self._frames(data)
        finally:
            out = self.out
            self.out = None
            if out and not self.dead:
                self.transport.write(b"".join(out))  # type: ignore[union-attr]

    def _frames(self, data: bytes) -> None:
        eng = self.eng
        n = len(data)
        pos = 0
        budget = FRAME_BUDGET
        streams = self.streams
        while n - pos >= 9:
            hi, lo, ftype, flags, sid = _unpack_header(data, pos)
            length = (hi << 16) | lo
            if length > f.MAX_FRAME:
                self.conn_error(f"a frame of {length:,} bytes (type {ftype}), over the {f.MAX_FRAME:,} this client "
                                "accepts (FRAME_SIZE_ERROR)", f.FRAME_SIZE_ERROR)
                return
            end = pos + 9 + length
            if end > n:
                break
            sid &= 0x7FFFFFFF
            if self.cont is not None and ftype != f.CONTINUATION:
                self.conn_error(f"a frame of type {ftype} inside a header block (CONTINUATION expected)")
                return
            if ftype == f.DATA:
                payload_len = length
                st = streams.get(sid)
                if st is None:
                    if sid == 0 or not sid & 1 or sid >= self.next_sid:
                        self.conn_error(f"DATA on stream {sid}, which this client never opened")
                        return
                else:
                    if flags & f.PADDED:
                        if length == 0 or data[pos + 9] >= length:
                            self.conn_error("DATA with padding longer than the frame")
                            return
                    st[_NBYTES] += length + 9
                    st[_RECV] += length
                    if st[_RECV] > f.STREAM_WINDOW // 2:
                        self._w(f.window_update(sid, st[_RECV]))
                        st[_RECV] = 0
                self.recv_unacked += payload_len
                if self.recv_unacked > f.CONN_WINDOW // 2:
                    self._w(f.window_update(0, self.recv_unacked))
                    self.recv_unacked = 0
                if st is not None and flags & f.END_STREAM:
                    self._complete(sid, st, _clock())
            elif ftype == f.HEADERS:
                if sid == 0 or not sid & 1:
                    self.conn_error(f"HEADERS on stream {sid} (push or stream 0)")
                    return
                start = pos + 9
                stop = end
                if flags & f.PADDED:
                    if length == 0 or data[start] >= length:
                        self.conn_error("HEADERS with padding longer than the frame")
                        return
                    stop -= data[start]
                    start += 1
                if flags & f.PRIORITY_FLAG:
                    start += 5
                if start > stop:
                    self.conn_error("HEADERS shorter than its priority fields")
                    return
                if flags & f.END_HEADERS:
                    if not self._headers(sid, flags, data[start:stop], length):
                        return
                else:
                    self.cont = (sid, flags, bytearray(data[start:stop]))
            elif ftype == f.CONTINUATION:
                cont = self.cont
                if cont is None or cont[0] != sid:
                    self.conn_error(f"CONTINUATION on stream {sid} without a header block to continue")
                    return
                cont[2].extend(data[pos + 9:end])
                if len(cont[2]) > f.MAX_HEADER_BLOCK:
                    self.conn_error(f"a header block over {f.MAX_HEADER_BLOCK:,} bytes")
                    return
                if flags & f.END_HEADERS:
                    self.cont = None
                    if not self._headers(sid, cont[1], bytes(cont[2]), len(cont[2])):
                        return
            elif ftype == f.SETTINGS:
                if sid != 0 or (flags & f.ACK and length) or length % 6:
                    self.conn_error(f"a malformed SETTINGS frame ({length} bytes, stream {sid})")
                    return
                if not flags & f.ACK and not self._settings(data[pos + 9:end]):
                    return
            elif ftype == f.PING:
                if sid != 0 or length != 8:
                    self.conn_error(f"a malformed PING frame ({length} bytes, stream {sid})")
                    return
                if not flags & f.ACK:
                    self._w(f.ping_ack(data[pos + 9:end]))
            elif ftype == f.WINDOW_UPDATE:
                if length != 4:
                    self.conn_error(f"a WINDOW_UPDATE of {length} bytes")
                    return
                inc = _U32(data, pos + 9)[0] & 0x7FFFFFFF
                if inc == 0:
                    self.conn_error(f"a WINDOW_UPDATE of 0 on stream {sid}")
                    return
                if sid == 0:
                    self.send_window += inc
                    if self.send_window > _MAX_SID:
                        self.conn_error("the connection's send window over 2^31-1 (FLOW_CONTROL_ERROR)")
                        return
                else:
                    st = streams.get(sid)
                    if st is not None:
                        st[_SWIN] += inc
                if self.blocked:
                    self._flush_blocked()
            elif ftype == f.RST_STREAM:
                if length != 4 or sid == 0:
                    self.conn_error(f"a malformed RST_STREAM ({length} bytes, stream {sid})")
                    return
                st = streams.pop(sid, None)
                if st is not None:
                    code = _U32(data, pos + 9)[0]
                    self._stream_reset(sid, st, code)
            elif ftype == f.GOAWAY:
                if length < 8 or sid != 0:
                    self.conn_error(f"a malformed GOAWAY ({length} bytes, stream {sid})")
                    return
                last = _U32(data, pos + 9)[0] & 0x7FFFFFFF
                code = _U32(data, pos + 13)[0]
                self._goaway(last, code)
                if self.dead:
                    return
            elif ftype == f.PUSH_PROMISE:
                self.conn_error("a PUSH_PROMISE, although this client disabled server push")
                return
            # PRIORITY and unknown frame types are ignored (RFC 9113 sections 5.5, 6.3)
            if self.dead:
                return
            pos = end
            budget -= 1
            if budget == 0 and n - pos >= 9:
                # the work budget of one pass is spent: go on in the next pass of the loop
                self.buf = data[pos:]
                self.transport.pause_reading()  # type: ignore[union-attr]
                self.paused = True
                eng.loop.call_soon(self._resume)  # type: ignore[union-attr]
                return
        if pos < n:
            self.buf = data[pos:]

    def _resume(self) -> None:
        self.paused = False
        if self.dead:
            return
        self.eng.reads += 1
        data, self.buf = self.buf, b""
        self.transport.resume_reading()  # type: ignore[union-attr]
        self.data_received(data)

    def _headers(self, sid: int, flags: int, block: bytes, length: int) -> bool:
        """A complete header block on ``sid``; ``False`` when the connection was lost over it."""
        try:
            status, gstatus, gmsg = self.dec.decode(block)
        except f.HeaderBlockError as exc:
            self.conn_error(f"a header block that does not decode (COMPRESSION_ERROR: {exc})", f.COMPRESSION_ERROR)
            return False
        st = self.streams.get(sid)
        if st is None:
            if sid >= self.next_sid:
                self.conn_error(f"HEADERS on stream {sid}, which this client never opened")
                return False
            return True  # a stream this client cancelled: decoded only to keep the table in step
        st[_NBYTES] += length + 9
        if not st[_HEADERS]:
            if 100 <= status < 200 and not flags & f.END_STREAM:
                return True  # an informational response: the real one follows
            st[_HEADERS] = True
            st[_STATUS] = status
        if gstatus >= 0:
            st[_GSTATUS] = gstatus
            st[_GMSG] = gmsg
        if flags & f.END_STREAM:
            self._complete(sid, st, _clock())
        return True

    def _settings(self, payload: bytes) -> bool:
        for ident, value in f.parse_settings(payload):
            if ident == f.S_MAX_CONCURRENT_STREAMS:
                self.cap = max(0, min(self.eng.streams, value))
            elif ident == f.S_INITIAL_WINDOW_SIZE:
                if value > _MAX_SID:
                    self.conn_error(f"SETTINGS_INITIAL_WINDOW_SIZE {value} over 2^31-1 (FLOW_CONTROL_ERROR)")
                    return False
                delta = value - self.peer_window
                self.peer_window = value
                for st in self.streams.values():
                    st[_SWIN] += delta
        self._w(f.settings_ack())
        if self.blocked:
            self._flush_blocked()
        if not self.in_idle and self.has_room():
            self.eng.fill(self, _clock())
        return True

    # -- writing -----------------------------------------------------------------------
    def _w(self, data: bytes) -> None:
        if self.out is not None:
            self.out.append(data)
        else:
            self.transport.write(data)  # type: ignore[union-attr]

    def has_room(self) -> bool:
        return not self.dead and not self.goaway and len(self.streams) < self.cap

    def send(self, t_int: int) -> None:
        """Send the call due at ``t_int`` on a new stream."""
        eng = self.eng
        sid = self.next_sid
        self.next_sid = sid + 2
        if self.next_sid > _MAX_SID:
            self.goaway = True  # stream ids exhausted: this connection takes no more
            eng.conn_draining(self)
        eng.inflight += 1
        body_len = eng.body_len
        st = [t_int, _clock(), 0, -1, -1, "", False, 0, self.peer_window - body_len, body_len]
        self.streams[sid] = st
        sidb = sid.to_bytes(4, "big")
        if body_len == 0:
            self._w(eng.hprefix + sidb + eng.block)
        elif eng.data_frames is not None and body_len <= self.send_window and st[_SWIN] >= 0 and not self.blocked:
            self.send_window -= body_len
            self._w(eng.hprefix + sidb + eng.block + sidb.join(eng.data_frames))
        else:
            st[_SWIN] += body_len
            st[_OFF] = 0
            self._w(eng.hprefix + sidb + eng.block)
            self.blocked.append(sid)
            self._flush_blocked()

    def _flush_blocked(self) -> None:
        """Send what the flow-control windows allow of the bodies waiting for them."""
        body = self.eng.body
        keep: collections.deque[int] = collections.deque()
        while self.blocked:
            sid = self.blocked.popleft()
            st = self.streams.get(sid)
            if st is None:
                continue
            sidb = sid.to_bytes(4, "big")
            while st[_OFF] < len(body):
                room = min(self.send_window, st[_SWIN], f.MAX_FRAME, len(body) - st[_OFF])
                if room <= 0:
                    break
                off = st[_OFF]
                last = off + room >= len(body)
                self._w(f.data_prefix(room, last) + sidb + body[off:off + room])
                st[_OFF] = off + room
                st[_SWIN] -= room
                self.send_window -= room
            if st[_OFF] < len(body):
                keep.append(sid)
        self.blocked = keep

    # -- stream endings ----------------------------------------------------------------
    def _complete(self, sid: int, st: list[Any], now: int) -> None:
        """The response on ``sid`` is complete (END_STREAM): record it, go on."""
        del self.streams[sid]
        eng = self.eng
        status = st[_STATUS]
        err = _E_NONE
        if eng.grpc:
            if status != 200:
                if status >= 100:
                    err = _E_GRPC
                    eng.note_reason("grpc", f"HTTP status {status} without a gRPC response "
                                            f"(a client maps it to {f.GRPC_STATUS_NAMES[f.http_status_to_grpc(status)]})")
                else:
                    err = _E_PROTOCOL
                    eng.note_reason("protocol", "a response without a valid :status")
            elif st[_GSTATUS] < 0:
                err = _E_PROTOCOL
                status = 0
                eng.note_reason("protocol", "a gRPC response that ended without grpc-status")
            elif st[_GSTATUS]:
                err = _E_GRPC
                status = st[_GSTATUS]
                eng.note_reason("grpc", f"grpc-status {status} "
                                        f"({f.GRPC_STATUS_NAMES[status] if status < 17 else '?'}): {st[_GMSG]!r}")
        elif status < 100:
            err = _E_PROTOCOL
            status = 0
            eng.note_reason("protocol", "a response without a valid :status")
        nb = st[_NBYTES]
        t_int = st[_T_INT]
        eng.rec(eng.pack(t_int, st[_T_SENT], now, nb if nb < _MAX_I32 else _MAX_I32, self.cid, status, err,
                         t_int >= eng.t_measure, eng.worker))
        eng.inflight -= 1
        if eng.retried:
            eng.retried.discard(t_int)
        eng.stream_done(self, now)

    def _stream_reset(self, sid: int, st: list[Any], code: int) -> None:
        """The server reset stream ``sid`` (already removed from :attr:`streams`)."""
        eng = self.eng
        name = f.ERROR_CODE_NAMES[code] if code < len(f.ERROR_CODE_NAMES) else str(code)
        eng.rst_streams += 1
        now = _clock()
        eng.inflight -= 1
        if code == f.REFUSED_STREAM and not st[_HEADERS]:
            if eng.retry(st[_T_INT], now, f"RST_STREAM REFUSED_STREAM on stream {sid}", st[_T_SENT], st[_NBYTES],
                         self.cid):
                # the call goes on elsewhere, its slot with it; when it had to wait in the
                # queue, this connection's free stream takes it (or the queue's head)
                if eng.pending and self.has_room():
                    eng.fill(self, now)
                return
        else:
            eng.note_reason("reset", f"RST_STREAM {name} on stream {sid}")
            eng.record(st[_T_INT], st[_T_SENT], now, st[_NBYTES], self.cid, st[_STATUS] if st[_HEADERS] else 0,
                       _E_RESET)
            eng.retried.discard(st[_T_INT])
        eng.stream_done(self, now)

    def _goaway(self, last: int, code: int) -> None:
        eng = self.eng
        eng.goaways += 1
        name = f.ERROR_CODE_NAMES[code] if code < len(f.ERROR_CODE_NAMES) else str(code)
        if code != f.NO_ERROR:
            eng.note_reason("goaway", f"GOAWAY {name} (last stream {last})")
        if not self.goaway:
            self.goaway = True
            eng.conn_draining(self)
        now = _clock()
        for sid in [s for s in self.streams if s > last]:
            st = self.streams.pop(sid)
            eng.inflight -= 1
            if not eng.retry(st[_T_INT], now, f"GOAWAY {name} with last stream {last} (stream {sid} not processed)",
                             st[_T_SENT], st[_NBYTES], self.cid):
                eng.stream_done(self, now)  # recorded: its slot takes the next call
        if not self.streams:
            self.close(now)

    def conn_error(self, why: str, code: int = f.PROTOCOL_ERROR) -> None:
        """A connection error: every call on it is ``protocol``; the connection is closed."""
        if self.dead:
            return
        eng = self.eng
        eng.note_reason("protocol", why)
        eng.conn_errors += 1
        now = _clock()
        self._w(f.goaway(self.next_sid - 2 if self.next_sid > 1 else 0, code))
        lost = self._fail_all(now, _E_PROTOCOL)
        self._kill()
        eng.conn_gone(self, now, lost)

    def _fail_all(self, now: int, err: int) -> int:
        eng = self.eng
        streams = self.streams
        for st in streams.values():
            e = err
            if err == _E_TRUNCATED and st[_HEADERS]:
                e = _E_CLOSED
            eng.inflight -= 1
            eng.record(st[_T_INT], st[_T_SENT], now, st[_NBYTES], self.cid, st[_STATUS] if st[_HEADERS] else 0, e)
            if eng.retried:
                eng.retried.discard(st[_T_INT])
        lost = len(streams)
        streams.clear()
        self.blocked.clear()
        return lost

    def time_out(self, sid: int, now: int) -> None:
        """The call on ``sid`` took longer than ``timeout_s``: record it, cancel the stream."""
        st = self.streams.pop(sid)
        eng = self.eng
        eng.inflight -= 1
        eng.record(st[_T_INT], st[_T_SENT], now, st[_NBYTES], self.cid, 0, _E_TIMEOUT)
        eng.note_reason("timeout", f"no complete response within {eng.cfg.timeout_s:g} s")
        if eng.retried:
            eng.retried.discard(st[_T_INT])
        self._w(f.rst_stream(sid, f.CANCEL))
        eng.stream_done(self, now)

    def close(self, now: int) -> None:
        """Close a connection that has no streams left (after GOAWAY)."""
        if self.dead:
            return
        self.dead = True
        if self.out:
            self.transport.write(b"".join(self.out))  # type: ignore[union-attr]
            self.out = []
        if self.transport is not None:
            self.transport.close()
        self.eng.conn_gone(self, now, 0)

    def _kill(self) -> None:
        self.dead = True
        if self.transport is not None:
            if self.out:
                try:
                    self.transport.write(b"".join(self.out))
                except (OSError, RuntimeError):
                    pass
                self.out = []
            self.transport.abort()

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.dead:
            return
        self.dead = True
        now = _clock()
        eng = self.eng
        eng.reads += 1
        if self.streams:
            if exc is not None:
                eng.note_reason("reset", f"{type(exc).__name__}: {exc}")
                lost = self._fail_all(now, _E_RESET)
            else:
                eng.note_reason("truncated" if not any(st[_HEADERS] for st in self.streams.values()) else "closed",
                                "the connection ended with calls in flight")
                lost = self._fail_all(now, _E_TRUNCATED)
        else:
            lost = 0
        eng.conn_gone(self, now, lost)


class H2Engine(Engine):
    """Drives one worker's HTTP/2 connections (see the module docstring)."""

    def __init__(self, cfg: H2EngineConfig, start_ns: int,
                 progress: Callable[[dict[str, Any]], None] | None = None) -> None:
        super().__init__(cfg, start_ns, progress)
        self.streams = cfg.streams
        self.grpc = cfg.protocol == "grpc"
        host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
        self.hprefix, self.block, self.body = f.request_template(
            method="POST" if self.grpc else cfg.method.upper(), path=cfg.path, authority=f"{host}:{cfg.port}",
            headers=cfg.headers, body=cfg.body, grpc=self.grpc)
        self.body_len = len(self.body)
        # the body's DATA frames with the stream id left out (joined with it as separator)
        self.data_frames: list[bytes] | None = None
        if self.body:
            parts = [self.body[i:i + f.MAX_FRAME] for i in range(0, len(self.body), f.MAX_FRAME)]
            frames = [f.data_prefix(len(p), i == len(parts) - 1) for i, p in enumerate(parts)]
            # hprefix+sid+block + [DATA1 prefix] sid [payload1 + DATA2 prefix] sid [payload2]...
            self.data_frames = [frames[0]] + [parts[i] + frames[i + 1] for i in range(len(parts) - 1)] + [parts[-1]]
        self.slots = cfg.connections * cfg.streams
        self.idle_h2: list[_H2Conn] = []
        self.retried: set[int] = set()  # intended times of calls already sent again once
        self.goaways = 0
        self.rst_streams = 0
        self.conn_errors = 0

    # -- placing calls -----------------------------------------------------------------
    def place(self, t_int: int, conn: _H2Conn | None = None, front: bool = False) -> None:
        """Send the call due at ``t_int``: on ``conn`` if it has room, else on a connection
        with a free stream, else on a new connection (fewer than ``connections`` open), else
        queue it (at the ``front`` for a call sent again)."""
        if conn is not None and conn.has_room():
            conn.send(t_int)
            return
        idle = self.idle_h2
        while idle:
            c = idle[-1]
            if not c.has_room():
                idle.pop()
                c.in_idle = False
                continue
            c.send(t_int)
            if not c.has_room():
                idle.pop()
                c.in_idle = False
            return
        if self.nconns < self.cfg.connections:
            self.open_conn(t_int)
        elif front:
            self.pending.appendleft(t_int)
        else:
            self.pending.append(t_int)

    def dispatch(self, t_int: int) -> None:
        """Open model: the call due at ``t_int`` is due now."""
        self.place(t_int)

    def fill(self, conn: _H2Conn, now: int) -> None:
        """``conn`` has free streams: give it queued calls, and (closed model) new ones up to
        the slots; then list it as having room."""
        pending = self.pending
        while conn.has_room():
            if pending:
                conn.send(pending.popleft())
            elif self.closed_model and self.inflight < self.slots and self.may_send(now):
                conn.send(now)
            else:
                break
        if conn.has_room() and not conn.in_idle:
            conn.in_idle = True
            self.idle_h2.append(conn)
        if self.stopping:
            self.check_done()

    def stream_done(self, conn: _H2Conn, now: int) -> None:
        """A stream of ``conn`` ended (any way): its slot takes the next call."""
        if self.pending:
            self.place(self.pending.popleft(), conn, front=True)
        elif self.closed_model:
            if now < self.t_simple_stop or self.may_send(now):
                self.place(now, conn)
            else:
                self.check_done()
        elif conn.has_room():
            if not conn.in_idle:
                conn.in_idle = True
                self.idle_h2.append(conn)
            if self.stopping:
                self.check_done()
        elif self.stopping:
            self.check_done()
        if conn.goaway and not conn.streams and not conn.dead:
            conn.close(now)

    def retry(self, t_int: int, now: int, why: str, t_sent: int, nbytes: int, cid: int) -> bool:
        """A call the server did not process (GOAWAY, REFUSED_STREAM): send it again, once
        (``True``); the second time it is recorded as a ``reset`` row (``False``)."""
        if t_int in self.retried:
            self.retried.discard(t_int)
            self.note_reason("reset", f"{why}, a second time: not sent again")
            self.record(t_int, t_sent, now, nbytes, cid, 0, _E_RESET)
            return False
        self.retried.add(t_int)
        self.retries += 1
        self.note_reason("retried", f"{why}: the call was sent again")
        self.place(t_int, front=True)
        return True

    # -- connections -------------------------------------------------------------------
    def conn_draining(self, conn: _H2Conn) -> None:
        """``conn`` takes no new streams: it no longer counts against ``connections``."""
        if conn.counted:
            conn.counted = False
            self.nconns -= 1

    def conn_gone(self, conn: _H2Conn, now: int, lost: int = 0) -> None:  # type: ignore[override]
        """``conn`` closed; ``lost`` calls on it were recorded as errors: their slots (closed
        model) and the queue go on elsewhere."""
        self.conns.discard(conn)
        if conn.counted:
            conn.counted = False
            self.nconns -= 1
        if self.abandoned:
            return
        if self.closed_model:
            for _ in range(lost):
                if now < self.t_simple_stop or self.may_send(now):
                    self.place(now)
        if self.pending and self.nconns < self.cfg.connections:
            self.open_conn(self.pending.popleft())
        self.check_done()

    async def _open(self, t_int: int | None, delay_ns: int, key: int) -> None:
        if delay_ns > 0:
            await asyncio.sleep(delay_ns / 1e9)
            if self.abandoned:
                return
            if self.closed_model and t_int is not None:
                t_int = _clock()
                self.opening[key] = t_int
        cid = self.next_cid
        self.next_cid += self.cfg.workers
        conn = _H2Conn(self, cid)
        loop = asyncio.get_running_loop()
        t_try = _clock()
        try:
            await asyncio.wait_for(loop.create_connection(lambda: conn, self.cfg.host, self.cfg.port),
                                   timeout=self.cfg.connect_timeout_s)
        except (TimeoutError, OSError) as exc:
            if self.abandoned:
                return
            now = _clock()
            self.opening.pop(key, None)
            self.nconns -= 1
            kind = "connect_timeout" if isinstance(exc, asyncio.TimeoutError) else "connect"
            self.note_reason(kind, f"{type(exc).__name__}: {exc}")
            if t_int is None:
                self.idle_connect_failures += 1
            else:
                self.inflight -= 1
                self.record(t_int, t_try, now, 0, cid, 0, ERROR_CODES["connect"] if kind == "connect" else _E_TIMEOUT)
                self.retried.discard(t_int)
            if self.pending and self.nconns < self.cfg.connections:
                # the queue goes on through a new attempt (and, closed model, the slot too)
                self.open_conn(self.pending.popleft(), CONNECT_RETRY_NS)
                if self.closed_model and self.may_send(now):
                    self.place(now)
            elif self.closed_model and t_int is not None:
                self._retry_slot(now)
            self.check_done()
            return
        if self.abandoned:
            conn.dead = True
            if conn.transport is not None:
                conn.transport.abort()
            return
        self.opening.pop(key, None)
        conn.opened_ns = now = _clock()
        self.conns.add(conn)
        if conn.dead:  # closed during the handshake
            if t_int is not None:
                self.inflight -= 1
                self.record(t_int, t_try, now, 0, cid, 0, _E_RESET)
                self.retried.discard(t_int)
            self.conn_gone(conn, now, 0 if t_int is None else 1)
            return
        if t_int is not None:
            self.inflight -= 1  # send() counts it again
            conn.send(t_int)
        self.fill(conn, now)

    # -- timeouts and the end -----------------------------------------------------------
    def sweep(self, now: int) -> None:
        """Time out the calls that have waited longer than ``timeout_s`` since their send."""
        limit = now - self.timeout_ns
        for conn in list(self.conns):
            if conn.dead:
                continue
            late = [sid for sid, st in conn.streams.items() if st[_T_SENT] < limit]
            if late:
                for sid in late:
                    if sid in conn.streams and not conn.dead:
                        conn.time_out(sid, now)
                if conn.blocked:
                    conn.blocked = collections.deque(s for s in conn.blocked if s in conn.streams)

    def _abandon(self, why: str) -> None:
        if self.abandoned:
            return
        now = _clock()
        self.stopping = True
        n = 0
        for conn in list(self.conns):
            for st in conn.streams.values():
                self.inflight -= 1
                n += 1
                self.record(st[_T_INT], st[_T_SENT], now, st[_NBYTES], conn.cid, 0, _E_TIMEOUT)
            conn.streams.clear()
        super()._abandon(why)
        if n:
            self.note_reason("abandoned", f"{n} calls in flight, and others, {why}")

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out.update({"goaways": self.goaways, "rst_streams": self.rst_streams, "connection_errors": self.conn_errors})
        return out
