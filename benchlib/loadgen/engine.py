"""One worker process's load engine: sends a trial's requests on its connections, times each response.

A raw asyncio Protocol on uvloop. Runs inside a worker process (see :mod:`benchlib.loadgen.worker`),
never in the caller's event loop. One :class:`Engine` drives all of this worker's connections:

* **closed model**: ``N`` connection slots; a slot sends its next request as soon as its
  previous response is complete (``t_intended`` = that moment);
* **open model**: requests are due on a schedule (:mod:`benchlib.loadgen.schedule`); a due
  request takes a free connection, or opens one while fewer than ``M`` are in flight, or
  waits in a queue; its latency counts from the due time, so the wait is in it.

Keep-alive connections are asyncio transports (``loop.create_connection``). Without
keep-alive every request opens its own connection, and those are plain non-blocking
sockets on the engine's own epoll (:class:`_OneShot`, :class:`_Poller`): a transport per
connection cost about twice ab's client CPU time per request.

Recording: every request appends one packed record, laid out exactly as
:data:`benchlib.core.schema.ROW_DTYPE` (38 bytes), to one ``bytearray`` (growth slack at most
about 12 %), which becomes the rows without a copy at the end. No Python object survives
per request.

Misbehaviour of the server is recorded per request by kind (``connect``, ``reset``,
``timeout``, ``protocol``, ``truncated``, ``closed``) and never raises. Every request due is
one row, whatever the server does: also those still waiting for a connection, or still on a
connection being opened, at the trial's hard deadline, or when the engine itself fails.

What a server can do to the client is bounded:

* parsing work: a read's data is parsed a bounded number of heads, chunks or trailer lines
  at a time (:data:`benchlib.loadgen.http1.PAUSED`); the connection then stops reading and
  goes on in the next pass of the event loop, so timers (response timeouts, the hard
  deadline) and the other connections keep running;
* a keep-alive connection the server closed: an idempotent request that got no byte of
  response on a reused connection is sent again, once, on a new connection (as browsers,
  Go's ``net/http`` and curl do); its row keeps its intended time; ``retries`` counts them;
* bytes nobody asked for (on a connection with no request outstanding, or after a complete
  response in the same read): the connection is closed and never reused, ``unsolicited``
  counts them, and they are never read as a later request's response;
* except a ``408 Request Timeout`` on a connection with no request outstanding: a server's way of
  closing a connection it found idle too long (RFC 9110, 15.5.9; Node.js sends one on a
  connection that sent no request within its ``headersTimeout``, 60 s by default, which an
  open-model pool's spare connection can be in a trial over a minute long). Browsers read it as
  the connection's end, and so does the engine: the connection is closed, ``idle_timeouts``
  counts it, and the trial stays valid. (A 408 that crosses a request just sent is that
  request's answer, an HTTP error.)
"""

from __future__ import annotations

import asyncio
import collections
import errno
import itertools
import os
import select
import socket
import struct
import time
from _socket import socket as _socket_t  # the C type (socket.socket adds a Python __init__)
from array import array
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from benchlib.core.schema import ERROR_CODES, ROW_DTYPE
from benchlib.loadgen.http1 import _DONE as _P_DONE
from benchlib.loadgen.http1 import _HEAD as _P_HEAD
from benchlib.loadgen.http1 import _LENGTH as _P_LENGTH
from benchlib.loadgen.http1 import COMPLETE, IDEMPOTENT_METHODS, NEED_MORE, PAUSED, ResponseParser, build_request
from benchlib.loadgen.schedule import arrival_offsets_ns, segments_for

__all__ = ["Engine", "EngineConfig", "RECORD", "records_to_rows"]

#: One recorded request, packed exactly as :data:`benchlib.core.schema.ROW_DTYPE` (little-endian,
#: no padding), times absolute; appended to a ``bytearray`` with one ``struct.pack``.
RECORD = struct.Struct("<qqqiihBBH")
assert RECORD.size == ROW_DTYPE.itemsize and ROW_DTYPE.names == (
    "t_intended_ns", "t_sent_ns", "t_done_ns", "bytes", "conn", "status", "error", "phase", "worker"
), "RECORD must mirror ROW_DTYPE"
_MAX_I32 = 2**31 - 1

_clock = time.monotonic_ns
_cpu_clock = time.process_time_ns
_NEVER = 1 << 62

_E_NONE = ERROR_CODES["none"]
_E_CONNECT = ERROR_CODES["connect"]
_E_RESET = ERROR_CODES["reset"]
_E_TIMEOUT = ERROR_CODES["timeout"]
_E_PROTOCOL = ERROR_CODES["protocol"]
_E_TRUNCATED = ERROR_CODES.get("truncated", _E_PROTOCOL)
_E_CLOSED = ERROR_CODES.get("closed", _E_PROTOCOL)
_PARSER_ERRORS = {"protocol": _E_PROTOCOL, "truncated": _E_TRUNCATED, "closed": _E_CLOSED}

# _OneShot connections: states, epoll events, socket type, read size
_S_CONNECTING, _S_OPEN, _S_WRITING, _S_READING, _S_CLOSED = range(5)
_EPOLLIN = select.EPOLLIN
_EPOLLOUT = select.EPOLLOUT
_EPOLLERRHUP = select.EPOLLERR | select.EPOLLHUP
_SOCK_STREAM_NONBLOCK = socket.SOCK_STREAM | socket.SOCK_NONBLOCK
_RECV_BYTES = 64 * 1024
#: a request longer than this is sent with TCP_NODELAY (its last segment must not wait for
#: the server's ACK of the first): less than one Ethernet segment's payload
_NODELAY_ABOVE = 1200

#: After a failed connection attempt a closed-model slot (or the open model's opener) waits
#: this long before trying again, so a refusing server does not turn into a busy loop.
CONNECT_RETRY_NS = 10_000_000


def records_to_rows(buf: bytearray, t0_ns: int) -> np.ndarray:
    """The engine's packed records as :data:`ROW_DTYPE` rows, times made relative to ``t0_ns``.

    Works in place on ``buf``'s memory (no copy); the array keeps ``buf`` alive.
    """
    rows = np.frombuffer(buf, dtype=ROW_DTYPE) if len(buf) else np.zeros(0, ROW_DTYPE)
    if len(rows):
        for col in ("t_intended_ns", "t_sent_ns", "t_done_ns"):
            rows[col] -= t0_ns
    return rows


class EngineConfig:
    """Everything one worker needs, as plain picklable values.

    Built by :func:`benchlib.loadgen.launch.run_load` from a LoadSpec; see there.
    """

    def __init__(self, **kw: Any) -> None:
        self.host: str = kw["host"]
        self.port: int = kw["port"]
        self.model: str = kw["model"]
        self.connections: int = kw["connections"]  # this worker's share
        self.duration_s: float | None = kw.get("duration_s")
        self.requests: int | None = kw.get("requests")  # this worker's share
        self.warmup_s: float = kw.get("warmup_s", 0.0)
        self.warmup_requests: int | None = kw.get("warmup_requests")  # this worker's share
        self.rate_rps: float | None = kw.get("rate_rps")
        self.arrival: str = kw.get("arrival", "constant")
        self.stages: list[tuple[float, float]] = list(kw.get("stages", ()))
        self.keep_alive: bool = kw.get("keep_alive", True)
        self.http_version: str = kw.get("http_version", "1.1")
        self.method: str = kw.get("method", "GET")
        self.path: str = kw.get("path", "/")
        self.headers: list[tuple[str, str]] = list(kw.get("headers", ()))
        self.body: bytes = kw.get("body", b"")
        self.connect_timeout_s: float = kw.get("connect_timeout_s", 5.0)
        self.timeout_s: float = kw.get("timeout_s", 10.0)
        self.worker: int = kw.get("worker", 0)
        self.workers: int = kw.get("workers", 1)
        self.seed: int = kw.get("seed", 0)
        self.spin_s: float = kw.get("spin_s", 0.001)
        self.progress_every_s: float = kw.get("progress_every_s", 0.5)
        #: resend an idempotent request once when a reused connection ends before any byte
        self.retry_stale: bool = kw.get("retry_stale", True)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)



def _idle_timeout(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data``, arrived on a connection with no request outstanding, is a server's
    ``408 Request Timeout`` (the status line is enough: the connection is closed either way)."""
    head = bytes(data[:12])
    return head in (b"HTTP/1.1 408", b"HTTP/1.0 408")


class _Conn(asyncio.Protocol):
    """One connection. Carries at most one request at a time."""

    __slots__ = ("eng", "cid", "transport", "parser", "busy", "dead", "t_int", "t_sent", "opened_ns", "first_sent",
                 "due", "key", "t_try")

    def __init__(self, eng: Engine, cid: int, due: int | None = None, key: int = 0) -> None:
        self.eng = eng
        self.cid = cid
        self.transport: asyncio.Transport | None = None  # (a _OneShot is its own)
        self.parser = ResponseParser(head_request=eng.head_request)
        # while it is being opened: the request due on it (None: none), its key in
        # Engine.opening, and when the attempt began
        self.due = due
        self.key = key
        self.t_try = 0
        self.busy = False
        self.dead = False
        self.t_int = 0
        self.t_sent = 0
        self.opened_ns = 0
        self.first_sent = 0  # when its first request was sent: a later t_sent means it was reused

    # -- asyncio callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        parser = self.parser
        if parser._state == _P_HEAD and not parser._buf and self.busy:
            # The hot path, inlined from ResponseParser.feed: a whole Content-Length response
            # in one piece whose head the parser has seen before. The parser's state is left
            # untouched (ready for the next response).
            end = data.find(b"\r\n\r\n")
            if end > 0:
                hit = parser._cache.get(data[:end])
                if hit is not None and hit[1] == _P_LENGTH and len(data) - end - 4 == hit[2]:
                    now = _clock()
                    eng = self.eng
                    t_int = self.t_int
                    nb = len(data)
                    eng.rec(eng.pack(t_int, self.t_sent, now, nb if nb < _MAX_I32 else _MAX_I32, self.cid,
                                     hit[0], 0, t_int >= eng.t_measure, eng.worker))
                    if hit[3] and eng.closed_model and eng.keep_alive and (now < eng.t_simple_stop or eng.may_send(now)):
                        self.t_int = now
                        self.t_sent = _clock()
                        self.transport.write(eng.request)  # type: ignore[union-attr]
                        return
                    # not the closed model's next request: let the general path below finish
                    # the bookkeeping, from a parser that has consumed this response
                    parser.status = hit[0]
                    parser.keep_alive = hit[3]
                    parser.nbytes = nb
                    parser._state = _P_DONE
                    self._finish(now, recorded=True)
                    return
        eng = self.eng
        eng.reads += 1
        if not self.busy:
            if _idle_timeout(data):  # the server closing an idle connection, in words
                eng.idle_timeouts += 1
                eng.note_reason("idle_timeout", f"the server answered an idle connection with "
                                                f"{bytes(data[:40])!r} and closed it (a new one is opened when needed)")
            else:
                # bytes while no request is outstanding: nobody asked for them, and they must
                # not be read as the answer to a later request: the connection is poisoned
                eng.unsolicited += 1
                eng.note_reason("unsolicited", f"{len(data)} bytes arrived on a connection with no request "
                                               f"outstanding ({bytes(data[:40])!r}); the connection was closed")
            self._kill()
            eng.conn_gone(self, _clock())
            return
        r = parser.feed(data)
        if r == 0:  # NEED_MORE
            return
        self._parsed(r)

    def _parsed(self, r: int) -> None:
        """Act on the parser's verdict on new data: COMPLETE, FAILED or PAUSED."""
        if r == PAUSED:
            # the parser's work budget for one call is spent: stop reading this connection
            # and go on in the next pass of the loop, after timers and other connections
            self.transport.pause_reading()  # type: ignore[union-attr]
            self.eng.loop.call_soon(self._resume)  # type: ignore[union-attr]  # set: the engine is running
            return
        now = _clock()
        eng = self.eng
        if r == COMPLETE:
            self._finish(now, recorded=False)
            return
        # parse failure
        parser = self.parser
        self.busy = False
        eng.inflight -= 1
        eng.record(self.t_int, self.t_sent, now, parser.nbytes, self.cid, parser.status,
                   _PARSER_ERRORS.get(parser.error, _E_PROTOCOL))
        eng.note_reason(parser.error, parser.reason)
        if parser.surplus:
            # bytes beyond a complete response arrived with it: unsolicited as well
            eng.unsolicited += 1
            eng.note_reason("unsolicited", f"{parser.reason}: the connection was closed, the bytes were not "
                                           "read as a later request's response")
        self._kill()
        eng.conn_gone(self, now)

    def _resume(self) -> None:
        """Go on parsing data kept after PAUSED (a callback of the next loop pass)."""
        if self.dead or not self.busy:
            return
        eng = self.eng
        eng.reads += 1
        now = _clock()
        if now - self.t_sent > eng.timeout_ns:
            eng.time_out(self, now)
            return
        r = self.parser.resume()
        if r == PAUSED:
            eng.loop.call_soon(self._resume)  # type: ignore[union-attr]  # set: the engine is running
            return
        self.transport.resume_reading()  # type: ignore[union-attr]
        if r != NEED_MORE:
            self._parsed(r)

    def _finish(self, now: int, recorded: bool) -> None:
        """A complete response: record it (unless done), then send the next request,
        free the connection or close it."""
        parser = self.parser
        eng = self.eng
        t_int = self.t_int
        if not recorded:
            nb = parser.nbytes
            eng.rec(eng.pack(t_int, self.t_sent, now, nb if nb < _MAX_I32 else _MAX_I32, self.cid,
                             parser.status, 0, t_int >= eng.t_measure, eng.worker))
        if parser.keep_alive and eng.keep_alive:
            parser.restart()
            # the closed model's hot path: the next request goes out on this connection
            # now (still busy, still in flight: nothing else to update)
            if eng.closed_model and (now < eng.t_simple_stop or eng.may_send(now)):
                self.t_int = now
                self.t_sent = _clock()
                self.transport.write(eng.request)  # type: ignore[union-attr]
                return
            self.busy = False
            eng.inflight -= 1
            if eng.closed_model:
                eng.idle.append(self)
                eng.check_done()
            else:
                eng.conn_free(self, now)
            return
        self.busy = False
        eng.inflight -= 1
        parser.reset()
        self.dead = True
        self.transport.close()  # type: ignore[union-attr]
        eng.conn_gone(self, now)

    def eof_received(self) -> bool | None:
        return None  # let the transport close; connection_lost does the accounting

    def connection_lost(self, exc: Exception | None) -> None:
        if self.dead:
            return
        self.dead = True
        now = _clock()
        eng = self.eng
        eng.reads += 1
        if self.busy:
            parser = self.parser
            if (parser.nbytes == 0 and self.t_sent != self.first_sent and eng.resend_stale
                    and (exc is None or isinstance(exc, OSError))):
                # a reused keep-alive connection ended before any byte of the response: the
                # server had closed it (or reset it) before it saw the request; send it again
                eng.resend(self, now, "reset" if exc is not None else "closed")
                return
            self.busy = False
            eng.inflight -= 1
            if exc is None:
                r = parser.eof()
                err = _E_NONE if r == COMPLETE else _PARSER_ERRORS.get(parser.error, _E_PROTOCOL)
                if r != COMPLETE:
                    eng.note_reason(parser.error, parser.reason)
            else:
                err = _E_RESET
                eng.note_reason("reset", f"{type(exc).__name__}: {exc}")
            eng.record(self.t_int, self.t_sent, now, parser.nbytes, self.cid,
                       parser.status if err == _E_NONE else parser.status, err)
        eng.conn_gone(self, now)

    # -- engine side -------------------------------------------------------------------
    def send(self, t_int: int) -> None:
        """Send the request, due at ``t_int``."""
        self.t_int = t_int
        self.busy = True
        self.eng.inflight += 1
        self.t_sent = t_sent = _clock()
        if not self.first_sent:
            self.first_sent = t_sent
        self.transport.write(self.eng.request)  # type: ignore[union-attr]

    def _kill(self) -> None:
        self.dead = True
        self.busy = False
        if self.transport is not None:
            self.transport.abort()


class _OneShot(_Conn):
    """A connection that carries one request (no keep-alive, as ab without ``-k``): a
    non-blocking socket watched by the engine's own epoll (:class:`_Poller`), and its own
    transport (``write``, ``close``, ``abort``, ``pause_reading``, ``resume_reading``), so that
    :class:`_Conn`'s parsing and bookkeeping run unchanged.

    Why not ``loop.create_connection``: per connection that costs a coroutine, a future, a
    transport with its libuv handle, and a callback of the event loop for each of
    ``connection_made``, the coroutine's wake-up and ``connection_lost``; about twice the
    client's CPU time per request of ab in user space. Here a request costs the system calls
    ab makes (``socket``, ``connect``, ``epoll_ctl``, ``send``, ``recv``, ``close``) and one
    Python call per epoll event. The addresses are resolved once per trial
    (:meth:`Engine.resolve`); the connect timeout is checked by the engine's sweeper.
    """

    __slots__ = ("sock", "fd", "state", "out", "addr_i", "tried", "batch")

    def __init__(self, eng: Engine, cid: int, due: int | None, key: int) -> None:
        _Conn.__init__(self, eng, cid, due, key)
        self.sock: _socket_t | None = None
        self.fd = -1
        self.state = _S_CONNECTING
        self.out = b""  # the rest of a request the socket did not take at once
        self.addr_i = eng.addr_first  # which of the target's addresses it tries
        self.tried = 0
        self.batch = 0  # the poller's batch in which it was registered

    def connect(self) -> None:
        """Start the attempt (again, at the next address, after a failed one)."""
        eng = self.eng
        if not self.t_try:
            self.t_try = _clock()
            eng.connecting.add(self)
        if eng.resolve_error is not None:
            eng.loop.call_soon(self._failed, eng.resolve_error)  # type: ignore[union-attr]
            return
        family, sockaddr = eng.addrs[self.addr_i]
        try:
            sock = _socket_t(family, _SOCK_STREAM_NONBLOCK)
        except OSError as exc:  # out of descriptors, ...: a failed connection, a loop pass later
            eng.loop.call_soon(self._failed, exc)  # type: ignore[union-attr]
            return
        if eng.nodelay:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        err = sock.connect_ex(sockaddr)
        if err and err != errno.EINPROGRESS:
            sock.close()
            eng.loop.call_soon(self._failed, OSError(err, f"Connect call failed {sockaddr}: {os.strerror(err)}"))  # type: ignore[union-attr]
            return
        self.sock = sock
        self.fd = fd = sock.fileno()
        poller = eng.poller
        self.batch = poller.batch
        poller.conns[fd] = self
        poller.ep.register(fd, _EPOLLOUT)

    def event(self, ev: int) -> None:
        """The socket is ready (an epoll event ``ev``)."""
        state = self.state
        if state == _S_READING:
            try:
                data = self.sock.recv(_RECV_BYTES)  # type: ignore[union-attr]
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._lost(exc)
                return
            if data:
                self.data_received(data)
            else:
                self._lost(None)
        elif state == _S_CONNECTING:
            if ev & _EPOLLERRHUP:
                err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)  # type: ignore[union-attr]
                self._failed(OSError(err or errno.ECONNRESET, f"Connect call failed: {os.strerror(err or errno.ECONNRESET)}"))
                return
            self.state = _S_OPEN
            eng = self.eng
            eng.connecting.discard(self)
            self.transport = self  # type: ignore[assignment]
            eng.connected(self)
            if self.state == _S_OPEN and not self.dead:  # nothing sent: watch for the server's bytes or close
                self.state = _S_READING
                eng.poller.ep.modify(self.fd, _EPOLLIN)
        elif state == _S_WRITING:
            self._write_more()

    def _failed(self, exc: OSError | None) -> None:
        """The attempt failed (``exc``) or, when ``None``, timed out: try the target's next
        address within the same attempt and timeout, or give up (:meth:`Engine.connect_failed`)."""
        if self.dead:  # timed out already, or given up at the end of the trial
            return
        eng = self.eng
        self._close_sock()
        self.tried += 1
        if exc is not None and self.tried < len(eng.addrs) and not eng.abandoned and eng.resolve_error is None:
            self.addr_i = (self.addr_i + 1) % len(eng.addrs)
            eng.addr_first = self.addr_i  # later connections start there
            self.connect()
            return
        self.dead = True
        eng.connecting.discard(self)
        eng.connect_failed(self, exc)

    def _lost(self, exc: Exception | None) -> None:
        """The server closed the connection (``exc`` None) or it failed."""
        self._close_sock()
        self.connection_lost(exc)

    def _close_sock(self) -> None:
        sock = self.sock
        if sock is not None:
            self.sock = None
            self.transport = None
            self.eng.poller.conns.pop(self.fd, None)
            sock.close()  # also takes it out of the epoll set

    # -- its transport -----------------------------------------------------------------
    def write(self, data: bytes) -> None:
        try:
            n = self.sock.send(data)  # type: ignore[union-attr]
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError as exc:  # as a transport reports it: connection_lost, in a later callback
            self.state = _S_CLOSED
            self.eng.loop.call_soon(self._lost, exc)  # type: ignore[union-attr]
            return
        if n < len(data):
            self.out = data[n:]
            if self.state != _S_WRITING:
                self.state = _S_WRITING
                self.eng.poller.ep.modify(self.fd, _EPOLLOUT)
        elif self.state != _S_READING:
            self.state = _S_READING
            self.eng.poller.ep.modify(self.fd, _EPOLLIN)

    def _write_more(self) -> None:
        data, self.out = self.out, b""
        self.write(data)

    def pause_reading(self) -> None:
        self.eng.poller.ep.modify(self.fd, 0)

    def resume_reading(self) -> None:
        self.eng.poller.ep.modify(self.fd, _EPOLLIN)

    def close(self) -> None:
        self.state = _S_CLOSED
        self._close_sock()

    abort = close


class _Poller:
    """The engine's epoll for :class:`_OneShot` connections, itself watched by the event loop
    (one reader on the epoll's descriptor): a ready descriptor costs one ``epoll_wait`` entry
    and one Python call, not a libuv handle per connection."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.ep = select.epoll()
        self.conns: dict[int, _OneShot] = {}
        #: a number per pass: a descriptor registered during a pass may reuse the number of one
        #: closed in it, whose stale event must not reach the new connection
        self.batch = 1
        self.loop = loop
        loop.add_reader(self.ep.fileno(), self.ready)

    def ready(self) -> None:
        self.batch = batch = self.batch + 1
        conns = self.conns
        for fd, ev in self.ep.poll(0):
            conn = conns.get(fd)
            if conn is not None and conn.batch != batch:
                conn.event(ev)

    def close(self) -> None:
        """Close every connection still open and the epoll."""
        for conn in list(self.conns.values()):
            conn.dead = True
            conn.close()
        self.loop.remove_reader(self.ep.fileno())
        self.ep.close()


class Engine:
    """Drives one worker's connections; see the module docstring.

    Parameters
    ----------
    cfg: this worker's configuration.
    start_ns: absolute ``CLOCK_MONOTONIC`` time (ns) at which traffic starts.
    progress: called about every ``cfg.progress_every_s`` with a small dict.
    """

    def __init__(self, cfg: EngineConfig, start_ns: int, progress: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.cfg = cfg
        self.start_ns = start_ns
        self.progress = progress
        self.closed_model = cfg.model == "closed"
        self.keep_alive = cfg.keep_alive
        self.head_request = cfg.method.upper() == "HEAD"
        self.request = build_request(
            cfg.method, cfg.path, cfg.host, cfg.port, http_version=cfg.http_version,
            keep_alive=cfg.keep_alive, headers=cfg.headers, body=cfg.body,
        )
        self.records = bytearray()
        self.rec = self.records.extend
        self.pack = RECORD.pack
        self.worker = cfg.worker
        self.lags = array("q")  # open model: dispatch time - due time, ns, per arrival
        self.inflight = 0
        self.nconns = 0  # connections open or being opened
        self.next_cid = cfg.worker
        self.conns: set[_Conn] = set()
        self.idle: list[_Conn] = []
        self.pending: collections.deque[int] = collections.deque()
        #: requests on connections being opened: a serial number -> t_intended
        self.opening: dict[int, int] = {}
        self.open_serial = 0
        # connections that carry one request (no keep-alive): the epoll that watches them,
        # those being opened, the target's addresses (resolved once, in run(); or why not)
        # and the one a new connection tries first
        self.poller: _Poller = None  # type: ignore[assignment]  # made in run() when needed
        self.connecting: set[_OneShot] = set()
        self.addrs: list[tuple[int, Any]] = []
        self.resolve_error: OSError | None = None
        self.addr_first = 0
        self.nodelay = len(self.request) > _NODELAY_ABOVE
        self.unsolicited = 0  # connections closed because bytes arrived nobody asked for
        self.idle_timeouts = 0  # idle connections the server closed with a 408 Request Timeout
        self.retries = 0  # requests sent again after a reused connection ended before any byte
        self.reads = 0  # slow-path reads and connection events (not the hot path): activity
        self.idle_connect_failures = 0
        self.reasons: dict[str, str] = {}
        self.spin_ns = 0  # open model: CPU time (ns) spent spinning idle for precise dispatch
        self.timeout_ns = int(cfg.timeout_s * 1e9)
        self.resend_stale = cfg.retry_stale and cfg.method.upper() in IDEMPOTENT_METHODS
        self.stopping = False
        self.abandoned = False  # at the hard deadline or on a failure: nothing more is recorded
        self.dispatched = 0  # open model: arrivals handed to dispatch()
        self.traffic_cpu_ns = 0
        self.traffic_wall_ns = 0
        self.runqueue_wait_ns: int | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.done: asyncio.Future[None] | None = None
        self.warm_left = cfg.warmup_requests if cfg.warmup_requests else 0
        self.warm_by_count = bool(cfg.warmup_requests)
        self.meas_left = cfg.requests if cfg.requests is not None else -1
        self.set_start(start_ns)
        self.t_first_measured = _NEVER
        self.t_last_sendable = 0
        self.pool_open = False  # the open model's keep-alive pool was opened (open_pool)

    def set_start(self, start_ns: int) -> None:
        """Set the instant traffic starts (absolute ``CLOCK_MONOTONIC`` ns) and the phase
        boundaries that follow from it; before :meth:`run`."""
        cfg = self.cfg
        self.start_ns = start_ns
        self.t_measure = _NEVER if self.warm_by_count else start_ns + int(cfg.warmup_s * 1e9)
        if cfg.requests is None and cfg.model == "closed":
            self.t_stop = self.t_measure + int((cfg.duration_s or 0) * 1e9) if not self.warm_by_count else _NEVER
        else:
            self.t_stop = _NEVER
        # closed model by duration with a warm-up by time: "may send" is just now < t_stop
        self.t_simple_stop = self.t_stop if (cfg.requests is None and not self.warm_by_count) else -1

    # -- recording ---------------------------------------------------------------------
    def record(self, t_int: int, t_sent: int, t_done: int, nbytes: int, cid: int, status: int, err: int) -> None:
        self.rec(self.pack(t_int, t_sent, t_done, min(nbytes, _MAX_I32), cid, status, err,
                           t_int >= self.t_measure, self.worker))
        if self.stopping:
            self.check_done()

    def note_reason(self, kind: str, reason: str) -> None:
        if kind not in self.reasons:
            self.reasons[kind] = reason

    # -- closed model ------------------------------------------------------------------
    def may_send(self, now: int) -> bool:
        """Closed model: whether a slot free at ``now`` sends another request."""
        if now < self.t_measure:
            if not self.warm_by_count:
                return True
            if self.warm_left > 0:
                self.warm_left -= 1
                return True
            # warm-up by count is over: the measured phase starts now
            self.t_measure = now
            if self.cfg.requests is None:
                self.t_stop = now + int((self.cfg.duration_s or 0) * 1e9)
        if self.meas_left >= 0:
            if self.meas_left > 0:
                self.meas_left -= 1
                return True
            self.stopping = True
            return False
        if now < self.t_stop:
            return True
        self.stopping = True
        return False

    # -- connections -------------------------------------------------------------------
    def conn_free(self, conn: _Conn, now: int) -> None:
        """Open model: a keep-alive connection finished its response."""
        if self.pending:
            conn.send(self.pending.popleft())
        else:
            self.idle.append(conn)
            if self.stopping:
                self.check_done()

    def conn_gone(self, conn: _Conn, now: int) -> None:
        """A connection closed (either side) or was aborted."""
        if conn in self.conns:
            self.conns.discard(conn)
            self.nconns -= 1
        if self.closed_model:
            if self.may_send(now):
                self.open_conn(now)
            else:
                self.check_done()
        else:
            if self.pending and self.nconns < self.cfg.connections:
                self.open_conn(self.pending.popleft())
            elif self.stopping:
                self.check_done()

    def open_conn(self, t_int: int | None, delay_ns: int = 0) -> None:
        """Open a connection; send the request due at ``t_int`` on it (``None``: pool it).

        With keep-alive, through ``loop.create_connection`` (a transport, in a task). Without,
        the connection carries one request (:class:`_OneShot`): its ``connect`` system call is
        made before this returns, and its request goes out in the very callback that sees it
        established, as ab does (see ``docs/loadgen.md``, "A new connection per request").
        """
        self.nconns += 1
        key = 0
        if t_int is not None:
            # in flight from now on, not from when the connection is open: the trial must not
            # be declared over while this request waits for its connection, and it is a row
            # even if the trial is abandoned before the connection is open
            self.inflight += 1
            self.open_serial += 1
            key = self.open_serial
            self.opening[key] = t_int
        if self.keep_alive:
            self.loop.create_task(self._open(t_int, delay_ns, key))  # type: ignore[union-attr]
        elif delay_ns > 0:
            self.loop.call_later(delay_ns / 1e9, self._open_one_shot_later, t_int, key)  # type: ignore[union-attr]
        else:
            _OneShot(self, self._new_cid(), t_int, key).connect()

    def _new_cid(self) -> int:
        cid = self.next_cid
        self.next_cid += self.cfg.workers
        return cid

    def _due_after_delay(self, t_int: int | None, key: int) -> int | None:
        """A delayed opening (after a failed connection): a closed-model slot's request is due
        from now, when it may try again."""
        if self.closed_model and t_int is not None:
            t_int = _clock()
            self.opening[key] = t_int
        return t_int

    def _open_one_shot_later(self, t_int: int | None, key: int) -> None:
        if not self.abandoned:
            _OneShot(self, self._new_cid(), self._due_after_delay(t_int, key), key).connect()

    def resend(self, conn: _Conn, now: int, why: str) -> None:
        """Send ``conn``'s request again on a new connection (see :meth:`_Conn.connection_lost`)."""
        conn.busy = False
        self.inflight -= 1
        self.retries += 1
        self.note_reason("retried", f"a reused keep-alive connection was {why} before any byte of the response; "
                                    "the request was sent again on a new connection")
        if conn in self.conns:
            self.conns.discard(conn)
            self.nconns -= 1
        self.open_conn(conn.t_int)

    async def _open(self, t_int: int | None, delay_ns: int, key: int) -> None:
        """Open a keep-alive connection (a transport)."""
        if delay_ns > 0:
            await asyncio.sleep(delay_ns / 1e9)
            if self.abandoned:
                return
            t_int = self._due_after_delay(t_int, key)
        conn = _Conn(self, self._new_cid(), t_int, key)
        conn.t_try = _clock()
        try:
            await asyncio.wait_for(
                self.loop.create_connection(lambda: conn, self.cfg.host, self.cfg.port),  # type: ignore[union-attr]
                timeout=self.cfg.connect_timeout_s,
            )
        except (TimeoutError, OSError) as exc:
            # (TimeoutError is an OSError since Python 3.11: it is told apart first)
            self.connect_failed(conn, None if isinstance(exc, asyncio.TimeoutError) else exc)
            return
        if conn.dead and not self.abandoned:  # closed during the handshake
            self.opening.pop(key, None)
            if t_int is not None:
                self.inflight -= 1
                self.record(t_int, conn.t_try, _clock(), 0, conn.cid, 0, _E_RESET)
            self.nconns -= 1
            return
        self.connected(conn)

    def connected(self, conn: _Conn) -> None:
        """``conn`` is open: send the request due on it, or pool it."""
        if self.abandoned:  # the trial ended while this connection was being opened
            conn._kill()
            return
        self.opening.pop(conn.key, None)
        now = _clock()
        conn.opened_ns = now
        self.conns.add(conn)
        t_int = conn.due
        if t_int is not None:
            self.inflight -= 1  # send() counts it again
            conn.send(t_int)
        elif self.closed_model:
            if self.may_send(now):
                conn.send(now)
            else:
                self.idle.append(conn)
                self.check_done()
        else:
            self.conn_free(conn, now)

    def connect_failed(self, conn: _Conn, exc: OSError | None) -> None:
        """``conn`` could not be opened: ``exc`` (refused, unreachable, ...) or, when ``None``,
        not within ``connect_timeout_s``. Its request is a ``connect`` (or ``timeout``) row."""
        if self.abandoned:
            return
        now = _clock()
        self.opening.pop(conn.key, None)
        self.nconns -= 1
        if exc is None:
            kind = "connect_timeout"
            self.note_reason(kind, f"TimeoutError: no connection within {self.cfg.connect_timeout_s:g} s")
        else:
            kind = "connect"
            self.note_reason(kind, f"{type(exc).__name__}: {exc}")
        t_int = conn.due
        if t_int is None:
            self.idle_connect_failures += 1
            if self.closed_model:
                self._retry_slot(now)
            return
        self.inflight -= 1
        self.record(t_int, conn.t_try, now, 0, conn.cid, 0, _E_CONNECT if exc is not None else _E_TIMEOUT)
        if self.closed_model:
            self._retry_slot(now)
        elif self.pending and self.nconns < self.cfg.connections:
            self.open_conn(self.pending.popleft(), CONNECT_RETRY_NS)
        elif self.stopping:
            self.check_done()

    def _retry_slot(self, now: int) -> None:
        if self.may_send(now):
            self.open_conn(now, CONNECT_RETRY_NS)
        else:
            self.check_done()

    # -- open model --------------------------------------------------------------------
    def dispatch(self, t_int: int) -> None:
        """Open model: the request due at ``t_int`` is due now."""
        idle = self.idle
        while idle:
            conn = idle.pop()
            if not conn.dead:
                conn.send(t_int)
                return
        if self.nconns < self.cfg.connections:
            self.open_conn(t_int)
        else:
            self.pending.append(t_int)

    def _schedule_blocks(self) -> Any:
        cfg = self.cfg
        segs = segments_for(cfg.rate_rps, cfg.duration_s, cfg.stages, 0.0 if self.warm_by_count else cfg.warmup_s)
        if self.warm_by_count and cfg.warmup_requests:
            first_rate = segs[0][0]
            segs = [(first_rate, cfg.warmup_requests * cfg.workers / first_rate)] + segs
            self.t_measure = self.start_ns + int(segs[0][1] * 1e9)
        return arrival_offsets_ns(segs, arrival=cfg.arrival, worker=cfg.worker, workers=cfg.workers, seed=cfg.seed)

    def _first_blocks(self) -> Iterator[np.ndarray]:
        """The arrival schedule with its first block already computed: called before the
        start instant, since the first block's computation (numpy's random machinery on first
        use included) took 9 ms, by which every first arrival was late."""
        blocks = iter(self._schedule_blocks())
        first = next(blocks, None)
        return itertools.chain([] if first is None else [first], blocks)

    async def _run_open(self, blocks: Iterator[np.ndarray]) -> None:
        start = self.start_ns
        spin = int(self.cfg.spin_s * 1e9)
        lag_append = self.lags.append
        records = self.records
        for block in blocks:
            for off in (block + start).tolist():
                now = _clock()
                if off > now:
                    gap = off - now
                    if gap > spin:
                        await asyncio.sleep((gap - spin) / 1e9)
                        now = _clock()
                    if off > now:
                        # timers have 1 ms granularity: spin through the loop (I/O still
                        # runs) for the last stretch. The passes in which nothing else
                        # happened (no read, no response) are idle spinning, not "busy" for
                        # the guard; the stretch's CPU time is counted in that proportion.
                        cpu_spin = _cpu_clock()
                        t_spin = now
                        idle_ns = 0
                        while off > now:
                            act = len(records) + self.reads
                            t_pass = now
                            await asyncio.sleep(0)
                            now = _clock()
                            if len(records) + self.reads == act:
                                idle_ns += now - t_pass
                        if now > t_spin:
                            self.spin_ns += (_cpu_clock() - cpu_spin) * idle_ns // (now - t_spin)
                lag_append(now - off)
                self.dispatched += 1
                self.dispatch(off)
        self.stopping = True
        self.check_done()

    # -- life cycle --------------------------------------------------------------------
    def check_done(self) -> None:
        if self.stopping and self.inflight == 0 and not self.pending and self.done is not None and not self.done.done():
            self.done.set_result(None)

    async def _sweeper(self) -> None:
        """Time out responses that take longer than ``timeout_s`` (and connections that carry
        one request not open within ``connect_timeout_s``); report progress."""
        shortest = self.cfg.timeout_s if self.keep_alive else min(self.cfg.timeout_s, self.cfg.connect_timeout_s)
        every = min(0.1, max(0.01, shortest / 10))
        next_progress = _clock()
        prog_ns = int(self.cfg.progress_every_s * 1e9)
        while True:
            await asyncio.sleep(every)
            now = _clock()
            self.sweep(now)
            self.check_done()
            if self.progress is not None and now >= next_progress:
                next_progress = now + prog_ns
                self.progress(self.progress_info(now))

    def sweep(self, now: int) -> None:
        """Time out the responses that have taken longer than ``timeout_s`` since their send,
        and the one-request connections not open within ``connect_timeout_s``."""
        timeout_ns = self.timeout_ns
        for conn in list(self.conns):
            if conn.busy and now - conn.t_sent > timeout_ns:
                self.time_out(conn, now)
        if self.connecting:
            connect_timeout_ns = int(self.cfg.connect_timeout_s * 1e9)
            for one in [c for c in self.connecting if now - c.t_try > connect_timeout_ns]:
                one._failed(None)  # no connection within connect_timeout_s

    def time_out(self, conn: _Conn, now: int) -> None:
        """``conn``'s response took longer than ``timeout_s``: record it, close the connection."""
        conn.busy = False
        self.inflight -= 1
        self.record(conn.t_int, conn.t_sent, now, conn.parser.nbytes, conn.cid, 0, _E_TIMEOUT)
        self.note_reason("timeout", f"no complete response within {self.cfg.timeout_s:g} s")
        conn._kill()
        self.conn_gone(conn, now)

    def progress_info(self, now: int) -> dict[str, Any]:
        n = len(self.records) // RECORD.size
        return {
            "worker": self.cfg.worker,
            "elapsed_s": (now - self.start_ns) / 1e9,
            "requests": n,
            "inflight": self.inflight,
            "pending": len(self.pending),
            "phase": "measure" if now >= self.t_measure else "warmup",
        }

    def _attach(self) -> asyncio.AbstractEventLoop:
        """Bind the engine to the running loop (once): its done future and exception handler."""
        loop = asyncio.get_running_loop()
        if self.loop is loop:
            return loop
        self.loop = loop
        self.done = loop.create_future()

        def on_exception(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            # a bug of ours in a callback must end the trial with its traceback, not hang it
            exc = context.get("exception")
            if exc is None or isinstance(exc, OSError):
                return  # transport-level noise, already accounted for per request
            if self.done is not None and not self.done.done():
                self.done.set_exception(exc)

        loop.set_exception_handler(on_exception)
        return loop

    async def open_pool(self) -> None:
        """Open the open model's keep-alive pool (``connections`` connections) and wait until
        each is open or has failed (at most ``connect_timeout_s``); nothing for the closed
        model or one-request connections. The worker calls it before it reports ready, so
        that the start instant comes after the pool is open however large it is (100
        connections took 4-5 ms of one client CPU of a 2-core VM: a pool of several hundred
        would outlast the runner's start margin and delay the first arrivals)."""
        self._attach()
        await asyncio.gather(*self._start_pool())

    def _start_pool(self) -> list[asyncio.Task[None]]:
        """Start opening the open model's keep-alive pool (once); the tasks opening it."""
        if self.closed_model or not self.keep_alive or self.pool_open:
            return []
        self.pool_open = True
        self.nconns += self.cfg.connections
        return [self.loop.create_task(self._open(None, 0, 0))  # type: ignore[union-attr]
                for _ in range(self.cfg.connections)]

    async def run(self) -> None:
        """Run the trial to its end (all requests recorded)."""
        loop = self._attach()
        if not self.keep_alive:
            await self.resolve()
            self.poller = _Poller(loop)
        # the open model's keep-alive pool, when open_pool did not open it before, is opened
        # while waiting for the start, so that opening it does not delay the first arrivals
        self._start_pool()
        blocks = iter(()) if self.closed_model else self._first_blocks()
        wait = (self.start_ns - _clock()) / 1e9
        if wait > 0.002:
            await asyncio.sleep(wait - 0.002)
        while _clock() < self.start_ns:  # timers have 1 ms granularity: spin the last bit
            await asyncio.sleep(0)
        cpu_start = _cpu_clock()
        rq_start = _runqueue_wait_ns()
        sweeper = loop.create_task(self._sweeper())
        runner = None
        if self.closed_model:
            now = _clock()
            for _ in range(self.cfg.connections):
                if self.may_send(now):
                    self.open_conn(now)
            self.check_done()
        else:
            runner = loop.create_task(self._run_open(blocks))
        # hard deadline: the planned length plus the response timeout and some slack
        planned = self.cfg.warmup_s + (self.cfg.duration_s or 0) + sum(d for _, d in self.cfg.stages)
        deadline = None
        if self.cfg.requests is None and not self.warm_by_count:
            deadline = planned + self.cfg.timeout_s + self.cfg.connect_timeout_s + 5.0
        done = self.done
        assert done is not None  # _attach made it
        try:
            try:
                if deadline is None:
                    await asyncio.shield(done)
                else:
                    remaining = deadline - (_clock() - self.start_ns) / 1e9
                    await asyncio.wait_for(asyncio.shield(done), timeout=max(remaining, 0.1))
            except TimeoutError:
                if deadline is not None and not done.done():
                    self._abandon("still queued, in flight or being connected at the trial's hard deadline "
                                  f"({deadline:g} s after the start)")
            except Exception:  # noqa: BLE001 - the engine failed: handled just below
                pass
            if done.done() and done.exception() is not None:
                exc = done.exception()
                self._abandon(f"still queued, in flight or being connected when the load generator failed "
                              f"({type(exc).__name__}: {exc})")
                raise exc  # type: ignore[misc]
        finally:
            self.traffic_cpu_ns = _cpu_clock() - cpu_start
            self.traffic_wall_ns = _clock() - self.start_ns
            rq_end = _runqueue_wait_ns()
            if rq_start is not None and rq_end is not None:
                self.runqueue_wait_ns = rq_end - rq_start
            sweeper.cancel()
            if runner is not None:
                runner.cancel()
            for conn in list(self.conns):
                conn.dead = True
                if conn.transport is not None:
                    conn.transport.abort()
            for one in list(self.connecting):  # give up the attempts still under way
                one.dead = True
                one.close()
            self.connecting.clear()
            if self.poller is not None:
                self.poller.close()
            await asyncio.sleep(0)

    async def resolve(self) -> None:
        """Connections that carry one request: resolve the target's host once per trial, not
        per connection (an IP literal needs no lookup, but a name would be looked up again by
        every ``create_connection``, in a thread). The addresses keep the resolver's order; an
        attempt tries them in turn, as ``create_connection`` does. If the name does not
        resolve, every attempt fails with that error (``connect`` rows)."""
        try:
            infos = await self.loop.getaddrinfo(self.cfg.host, self.cfg.port, type=socket.SOCK_STREAM)  # type: ignore[union-attr]
        except OSError as exc:
            self.resolve_error = exc
            return
        self.addrs = list(dict.fromkeys((int(info[0]), info[4]) for info in infos))
        if not self.addrs:
            self.resolve_error = OSError(f"getaddrinfo({self.cfg.host!r}) returned no address")

    def _abandon(self, why: str) -> None:
        """At the hard deadline, or when the engine failed: every request due and not yet
        recorded (in flight, on a connection being opened, queued, or, in the open model,
        not yet dispatched) becomes a ``timeout`` row; nothing is recorded after this."""
        if self.abandoned:
            return
        now = _clock()
        self.stopping = True
        n0 = len(self.records)
        for conn in list(self.conns):
            if conn.busy:
                conn.busy = False
                self.inflight -= 1
                self.record(conn.t_int, conn.t_sent, now, conn.parser.nbytes, conn.cid, 0, _E_TIMEOUT)
        for t in self.opening.values():
            self.inflight -= 1
            self.record(t, now, now, 0, -1, 0, _E_TIMEOUT)
        self.opening.clear()
        while self.pending:
            t = self.pending.popleft()
            self.record(t, now, now, 0, -1, 0, _E_TIMEOUT)
        if not self.closed_model:
            self._record_undispatched(now)
        self.abandoned = True
        if len(self.records) > n0:
            self.note_reason("abandoned", f"{(len(self.records) - n0) // RECORD.size} requests {why}")

    def _record_undispatched(self, now: int) -> None:
        """Open model, at abandonment: the arrivals the dispatcher has not reached yet, as
        ``timeout`` rows (the schedule is regenerated: it is deterministic)."""
        skip = self.dispatched
        for block in self._schedule_blocks():
            if skip >= len(block):
                skip -= len(block)
                continue
            due = block[skip:] + self.start_ns
            skip = 0
            rows = np.zeros(len(due), dtype=ROW_DTYPE)
            rows["t_intended_ns"] = due
            rows["t_sent_ns"] = now
            rows["t_done_ns"] = now
            rows["conn"] = -1
            rows["error"] = _E_TIMEOUT
            rows["phase"] = (due >= self.t_measure).astype(np.uint8)
            rows["worker"] = self.worker
            self.rec(rows.tobytes())

    def stats(self) -> dict[str, Any]:
        """Worker-level facts for the trial's meta (JSON-able)."""
        return {
            "worker": self.cfg.worker,
            "t_measure_ns": self.t_measure if self.t_measure != _NEVER else None,
            "t_stop_ns": self.t_stop if self.t_stop != _NEVER else None,
            "unsolicited_responses": self.unsolicited,
            "idle_timeouts": self.idle_timeouts,
            "retries": self.retries,
            "idle_connect_failures": self.idle_connect_failures,
            "spin_ns": self.spin_ns,
            "traffic_cpu_s": self.traffic_cpu_ns / 1e9,
            "traffic_wall_s": self.traffic_wall_ns / 1e9,
            "runqueue_wait_s": self.runqueue_wait_ns / 1e9 if self.runqueue_wait_ns is not None else None,
            "abandoned": self.abandoned,
            "reasons": dict(self.reasons),
        }


def _runqueue_wait_ns() -> int | None:
    """Time (ns) this thread has spent runnable but waiting for a CPU (``/proc/self/schedstat``),
    or ``None`` where the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None


def tune_socket_limits(connections: int) -> None:
    """Raise this process's open-file soft limit (towards the hard limit) if ``connections``
    need more descriptors than it allows."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = connections + 64
    if soft == resource.RLIM_INFINITY or soft >= want:
        return
    new_soft = want if hard == resource.RLIM_INFINITY else min(hard, want)
    resource.setrlimit(resource.RLIMIT_NOFILE, (new_soft, hard))
