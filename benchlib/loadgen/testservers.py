"""Small HTTP/1.1 servers for testing and benchmarking the load generator.

Each runs in its own process (``python -m benchlib.loadgen.testservers MODE ...``), on
127.0.0.1, optionally pinned with ``taskset``; :func:`serve` starts one and yields its
:class:`~benchlib.core.model.Target`. Modes:

``hello``      200 with ``Hello, World!`` (Content-Length), keep-alive; echoes a POST body length.
``echo``       200 whose body is the request head and body as received.
``chunked``    200 with a chunked body of ``--chunks`` chunks.
``close``      200 with ``Connection: close`` and a body delimited by closing the connection.
``stall``      like ``hello``, but the server freezes for ``--stall-s`` at the start of every
               ``--period-s`` (anchored at the server's start): every response due in a frozen
               window leaves when the window ends (Gil Tene's ^Z experiment, on a schedule).
``slow``       like ``hello`` but every response waits ``--delay-s``.
Hostile modes (one misbehaviour each):
``garbage``    answers random bytes.
``truncated``  sends half a response head, then closes.
``huge``       sends a response head larger than 1 MiB.
``short``      ``Content-Length: 100`` but only 10 body bytes, then closes (closed mid-body).
``long``       ``Content-Length: 5`` but 12 body bytes (bytes after the end).
``trickle``    a valid response, one byte at a time (``--delay-s`` between bytes).
``reset``      resets the connection (RST) on the first request.
``silent``     reads requests and never answers (timeouts).
``mixed``      cycles, request by request, through hello, garbage, truncated, short, reset, trickle.
Hostile modes that are cheap for the server and costly for a client (the probes of issue 10):
``continue-flood``   ``--count`` ``HTTP/1.1 100 Continue`` heads, then the ``hello`` response,
                     all in one write.
``chunk-drip``       a chunked response that never ends: ``1\r\na\r\n`` chunks, as fast as the
                     client reads them.
``trailer-drip``     a chunked response whose last chunk is followed by trailer lines that never
                     end, as fast as the client reads them.
``stale-keepalive``  the ``hello`` response (no ``Connection: close``), then closes the connection
                     (``--after-s`` later; at once by default): a keep-alive connection the
                     server has given up on.
``unsolicited``      the ``hello`` response, then a second one nobody asked for, in a separate
                     write (``--after-s`` later; in the next pass of its loop by default).
``idle-408``         the ``hello`` response, then (``--after-s`` later, unless another request came
                     first) ``408 Request Timeout`` and a close, as Node.js does to a connection
                     that sent no request within its ``headersTimeout``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence

__all__ = ["MODES", "serve", "serve_process", "main"]

MODES = (
    "hello", "echo", "chunked", "close", "stall", "slow",
    "garbage", "truncated", "huge", "short", "long", "trickle", "reset", "silent", "mixed",
    "continue-flood", "chunk-drip", "trailer-drip", "stale-keepalive", "unsolicited", "idle-408",
)

#: The endless modes' data: one write's worth of the repeated unit.
_DRIP = {"chunk-drip": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"1\r\na\r\n"),
         "trailer-drip": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n", b"X-T: 1\r\n")}
_DRIP_WRITE = 65536

BODY = b"Hello, World!"
_HELLO = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 13\r\n\r\n" + BODY
)
#: What Node.js 20 writes to a connection that sent no request within its ``headersTimeout`` (then it
#: closes it).
_IDLE_408 = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n"


class _Proto(asyncio.Protocol):
    def __init__(self, srv: _Server) -> None:
        self.srv = srv
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.need_body = 0
        self.http10 = False
        self.ka10 = False
        self.writable: asyncio.Event | None = None
        self.answered = 0  # responses written (idle-408: a request since cancels the 408)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def pause_writing(self) -> None:
        if self.writable is not None:
            self.writable.clear()

    def resume_writing(self) -> None:
        if self.writable is not None:
            self.writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.writable is not None:
            self.writable.set()  # an endless writer sees the end and stops

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data
        while True:
            if self.need_body:
                take = min(self.need_body, len(buf))
                buf = buf[take:]
                self.need_body -= take
                if self.need_body:
                    break
                self.srv.respond(self, self._body_len)
                continue
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                break
            self.raw_head = buf[: end + 4]
            head = buf[:end].lower()
            line_end = head.find(b"\r\n")
            self.http10 = head[:line_end if line_end >= 0 else len(head)].endswith(b"http/1.0")
            self.ka10 = self.http10 and b"\r\nconnection: keep-alive" in head
            buf = buf[end + 4 :]
            length = int(head.split(b"content-length:")[1].split(b"\r\n")[0].strip() or 0) if b"content-length:" in head else 0
            self.raw_body = buf[:length] if b"content-length:" in head else b""
            n = 0
            i = head.find(b"\r\ncontent-length:")
            if i >= 0:
                j = head.find(b"\r\n", i + 2)
                n = int(head[i + 17 : j if j >= 0 else len(head)].strip() or 0)
            self._body_len = n
            if n:
                self.need_body = n
                continue
            self.srv.respond(self, 0)
        self.buf = buf

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)


class _Server:
    def __init__(self, args: argparse.Namespace) -> None:
        self.mode = args.mode
        self.args = args
        self.t_start = time.monotonic()
        self.counter = 0
        self.rng = random.Random(args.seed)
        self.loop = asyncio.get_event_loop()

    def hello(self, body_len: int) -> bytes:
        if body_len:
            body = b"received %d bytes" % body_len
            return b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        return _HELLO

    async def _endless(self, p: _Proto, first: bytes, unit: bytes) -> None:
        """Write ``first``, then ``unit`` repeated, forever, as fast as the peer reads."""
        p.writable = asyncio.Event()
        p.writable.set()
        p.write(first)
        block = unit * (_DRIP_WRITE // len(unit))
        while p.transport is not None and not p.transport.is_closing():
            await p.writable.wait()
            p.write(block)
            await asyncio.sleep(0)

    @staticmethod
    def _idle_408(p: _Proto, answered: int) -> None:
        """idle-408: the connection is still idle after its ``answered``-th response: 408, close."""
        if p.answered == answered and not p.buf and p.transport is not None and not p.transport.is_closing():
            p.write(_IDLE_408)
            p.transport.close()

    async def _trickle(self, p: _Proto, data: bytes) -> None:
        for k in range(len(data)):
            p.write(data[k : k + 1])
            await asyncio.sleep(self.args.delay_s)

    def respond(self, p: _Proto, body_len: int) -> None:
        mode = self.mode
        if mode == "mixed":
            mode = ("hello", "garbage", "truncated", "short", "reset", "trickle")[self.counter % 6]
            self.counter += 1
        tr = p.transport
        assert tr is not None
        if mode == "hello":
            if p.http10:
                # HTTP/1.0: keep the connection only when asked, and say so (ab -k needs it)
                resp = self.hello(body_len)
                if p.ka10:
                    p.write(resp.replace(b"\r\n\r\n", b"\r\nConnection: keep-alive\r\n\r\n", 1))
                else:
                    p.write(resp)
                    tr.close()
            else:
                p.write(self.hello(body_len))
        elif mode == "echo":
            body = p.raw_head + p.raw_body
            p.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        elif mode == "chunked":
            parts = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"]
            for k in range(self.args.chunks):
                piece = b"chunk %d;" % k
                parts.append(b"%x\r\n%s\r\n" % (len(piece), piece))
            parts.append(b"0\r\nX-Trailer: yes\r\n\r\n")
            p.write(b"".join(parts))
        elif mode == "close":
            p.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + BODY)
            tr.close()
        elif mode == "stall":
            now = time.monotonic() - self.t_start
            period, stall = self.args.period_s, self.args.stall_s
            in_period = now % period
            if in_period < stall:
                self.loop.call_later(stall - in_period, p.write, self.hello(body_len))
            else:
                p.write(self.hello(body_len))
        elif mode == "slow":
            self.loop.call_later(self.args.delay_s, p.write, self.hello(body_len))
        elif mode == "garbage":
            p.write(bytes(self.rng.getrandbits(8) for _ in range(200)))
            tr.close()
        elif mode == "truncated":
            p.write(b"HTTP/1.1 200 OK\r\nContent-Ty")
            tr.close()
        elif mode == "huge":
            p.write(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (1 << 20) + b"\r\nContent-Length: 0\r\n\r\n")
        elif mode == "short":
            p.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
            tr.close()
        elif mode == "long":
            p.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHello, World")
        elif mode == "trickle":
            self.loop.create_task(self._trickle(p, self.hello(body_len)))
        elif mode == "reset":
            sock = tr.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            tr.abort()
        elif mode == "silent":
            pass
        elif mode == "continue-flood":
            p.write(b"HTTP/1.1 100 Continue\r\n\r\n" * self.args.count + self.hello(body_len))
        elif mode in _DRIP:
            if p.writable is None:  # one endless response per connection
                self.loop.create_task(self._endless(p, *_DRIP[mode]))
        elif mode == "stale-keepalive":
            p.write(self.hello(body_len))
            if self.args.after_s > 0:
                self.loop.call_later(self.args.after_s, tr.close)
            else:
                tr.close()
        elif mode == "idle-408":
            p.write(self.hello(body_len))
            p.answered += 1
            self.loop.call_later(max(self.args.after_s, 0.0), self._idle_408, p, p.answered)
        elif mode == "unsolicited":
            p.write(self.hello(body_len))
            if self.args.after_s > 0:
                self.loop.call_later(self.args.after_s, p.write, _HELLO)
            else:
                self.loop.call_soon(p.write, _HELLO)


async def _amain(args: argparse.Namespace) -> None:
    srv = _Server(args)
    server = await asyncio.get_running_loop().create_server(
        lambda: _Proto(srv), args.host, args.port, backlog=4096, reuse_address=True
    )
    port = server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    stop = asyncio.get_running_loop().create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    async with server:
        await stop


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="benchlib test HTTP server")
    ap.add_argument("mode", choices=MODES)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--stall-s", type=float, default=1.0)
    ap.add_argument("--period-s", type=float, default=5.0)
    ap.add_argument("--delay-s", type=float, default=0.001)
    ap.add_argument("--chunks", type=int, default=3)
    ap.add_argument("--count", type=int, default=1000, help="continue-flood: 1xx heads per response")
    ap.add_argument("--after-s", type=float, default=0.0,
                    help="stale-keepalive: close, unsolicited: the second response, this long after a response")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        import uvloop

        uvloop.run(_amain(args))
    except ImportError:  # pragma: no cover
        asyncio.run(_amain(args))


@contextlib.contextmanager
def serve(mode: str = "hello", *, cpus: Sequence[int] | None = None, host: str = "127.0.0.1",
          **opts: float | int) -> Iterator[tuple[str, int]]:
    """Run a test server in a subprocess; yield ``(host, port)``; stop it on exit.

    Parameters
    ----------
    mode: one of :data:`MODES`.
    cpus: pin the server with ``taskset`` to these CPUs.
    opts: ``stall_s``, ``period_s``, ``delay_s``, ``chunks``, ``count``, ``after_s``, ``seed``.
    """
    if mode not in MODES:
        raise ValueError(f"unknown test server mode {mode!r}; valid: {', '.join(MODES)}")
    cmd = [sys.executable, "-m", "benchlib.loadgen.testservers", mode, "--host", host]
    for k, v in opts.items():
        cmd += [f"--{k.replace('_', '-')}", str(v)]
    with serve_process(cmd, mode, cpus=cpus) as port:
        yield host, port


@contextlib.contextmanager
def serve_process(cmd: Sequence[str], what: str, *, cpus: Sequence[int] | None = None) -> Iterator[int]:
    """Run a test server command that prints ``PORT N`` once it listens; yield ``N``; stop
    it (SIGTERM, then SIGKILL after 5 s) on exit. ``cpus``: pin it with ``taskset``."""
    cmd = list(cmd)
    if cpus:
        cmd = ["taskset", "-c", ",".join(map(str, cpus))] + cmd
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()
        if not line.startswith("PORT "):
            proc.kill()
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise RuntimeError(f"test server {what} did not start: {line!r} {err[-2000:]}")
        yield int(line.split()[1])
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()

if __name__ == "__main__":
    main()

