"""Small HTTP/2 (h2c, prior knowledge) servers for testing the load generator's HTTP/2 and
gRPC engine, well-behaved and hostile.

Each runs in its own process (``python -m benchlib.loadgen.h2testservers MODE ...``) on
127.0.0.1; :func:`serve` starts one and yields ``(host, port)``. The server side is the
``h2`` package (so every frame the client sends is checked by a second, independent HTTP/2
implementation); the hostile modes write their bad frames by hand. A request with
``content-type: application/grpc`` is answered as a unary gRPC call (the message
``SmallResponse{Message="SmallResponse"}``, then trailers with ``grpc-status``), any other
with ``200 Hello, World!``. Modes:

``hello``      every request answered (``--grpc-status N``: gRPC calls end with status N).
Hostile modes (one misbehaviour each):
``rst``        RST_STREAM (INTERNAL_ERROR) on every second stream; the others answered.
``refuse``     RST_STREAM (REFUSED_STREAM, "not processed") on every second stream.
``goaway``     after ``--count`` answered streams on a connection: GOAWAY with the last
               answered stream as last-stream-id (the streams above it were not processed),
               then closes that connection.
``stall``      a flow-control stall: its SETTINGS say SETTINGS_INITIAL_WINDOW_SIZE 0, and no
               WINDOW_UPDATE ever follows; nothing is read or answered (request bodies can
               never be sent).
``garbage``    answers the preface with random bytes (the first frame header claims 16 MiB).
``bad-hpack``  answers every request with a HEADERS frame whose header block does not decode.
``oversized``  answers with a valid HEADERS frame, then a 20,000-byte DATA frame (over the
               16,384 bytes a client accepts unless it said otherwise).
``mute``       accepts connections, reads, never answers, not even the preface.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import signal
import struct
import sys
from collections.abc import Iterator, Sequence

__all__ = ["MODES", "serve", "main", "GRPC_RESPONSE"]

MODES = ("hello", "rst", "refuse", "goaway", "stall", "garbage", "bad-hpack", "oversized", "mute")

#: SmallResponse{Message="SmallResponse"}, serialized (seed 004's response message).
GRPC_RESPONSE = b"\x0a\x0dSmallResponse"
BODY = b"Hello, World!"
_FRAME = struct.Struct(">BHBBI")


def _frame(ftype: int, flags: int, sid: int, payload: bytes) -> bytes:
    n = len(payload)
    return _FRAME.pack(n >> 16, n & 0xFFFF, ftype, flags, sid) + payload


class _Proto(asyncio.Protocol):
    def __init__(self, args: argparse.Namespace) -> None:
        import h2.config
        import h2.connection

        self.args = args
        self.mode = args.mode
        self.transport: asyncio.Transport | None = None
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None))
        self.streams = 0
        self.answered = 0
        self.last_answered = 0
        self.grpc: dict[int, bool] = {}
        self.gone = False
        self.rng = random.Random(args.seed)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.mode in ("mute", "garbage"):
            return
        if self.mode == "stall":
            # written by hand: h2 applies a pending setting at the peer's first SETTINGS ACK,
            # whichever SETTINGS frame it acknowledges, and would then call a client that
            # rightly sent DATA under the old window a protocol breaker; this server reads
            # nothing anyway
            self.transport.write(_frame(4, 0, 0, struct.pack(">HI", 4, 0)))  # type: ignore[union-attr]
            return
        self.conn.initiate_connection()
        self._flush()

    def _flush(self) -> None:
        data = self.conn.data_to_send()
        if data and self.transport is not None and not self.gone:
            self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        if self.gone or self.transport is None:
            return
        if self.mode in ("mute", "stall"):
            return
        if self.mode == "garbage":
            # a frame header claiming 16 MiB, then noise
            self.transport.write(b"\xff\xff\xff\x00\x00\x00\x00\x00\x00" + self.rng.randbytes(1024))
            return
        import h2.events
        import h2.exceptions

        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            print(f"h2 test server: the client broke the protocol: {exc!r}", file=sys.stderr, flush=True)
            self._flush()
            self.transport.close()
            self.gone = True
            return
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived):
                headers = dict(ev.headers or [])
                self.grpc[ev.stream_id] = headers.get(b"content-type", b"").startswith(b"application/grpc")
                if ev.stream_ended:
                    self._request(ev.stream_id)
            elif isinstance(ev, h2.events.DataReceived):
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                if ev.stream_ended:
                    self._request(ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                pass
            if self.gone:
                return
        self._flush()

    def _request(self, sid: int) -> None:
        """The request on ``sid`` is complete: answer it as the mode says."""
        self.streams += 1
        mode = self.mode
        if mode in ("rst", "refuse") and self.streams % 2 == 0:
            self.conn.reset_stream(sid, error_code=2 if mode == "rst" else 7)
            return
        if mode == "bad-hpack":
            self._flush()
            # an indexed field whose index (2^28 + 126) no table has: COMPRESSION_ERROR
            self.transport.write(_frame(1, 0x4, sid, b"\xff\xff\xff\xff\x7f"))  # type: ignore[union-attr]
            return
        if mode == "oversized":
            self._flush()
            self.transport.write(_frame(1, 0x4, sid, b"\x88") + _frame(0, 0x1, sid, b"x" * 20_000))  # type: ignore[union-attr]
            return
        if self.grpc.pop(sid, False):
            self.conn.send_headers(sid, [(b":status", b"200"), (b"content-type", b"application/grpc")])
            if self.args.grpc_status == 0:
                self.conn.send_data(sid, b"\x00" + struct.pack(">I", len(GRPC_RESPONSE)) + GRPC_RESPONSE)
                trailers = [(b"grpc-status", b"0")]
            else:
                trailers = [(b"grpc-status", str(self.args.grpc_status).encode()), (b"grpc-message", b"test+status")]
            self.conn.send_headers(sid, trailers, end_stream=True)
        else:
            self.conn.send_headers(sid, [(b":status", b"200"), (b"content-type", b"text/plain"),
                                         (b"content-length", str(len(BODY)).encode())])
            self.conn.send_data(sid, BODY, end_stream=True)
        self.answered += 1
        self.last_answered = max(self.last_answered, sid)
        if mode == "goaway" and self.answered % self.args.count == 0:
            self.conn.close_connection(last_stream_id=self.last_answered)
            self._flush()
            self.gone = True
            self.transport.close()  # type: ignore[union-attr]

    def connection_lost(self, exc: Exception | None) -> None:
        self.gone = True


async def _amain(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Proto(args), args.host, args.port, backlog=1024, reuse_address=True)
    port = server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    stop = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    async with server:
        await stop


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="benchlib test HTTP/2 (h2c) server")
    ap.add_argument("mode", choices=MODES)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--grpc-status", type=int, default=0, help="hello: the grpc-status of gRPC calls")
    ap.add_argument("--count", type=int, default=5, help="goaway: streams answered per connection before GOAWAY")
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
    """Run an HTTP/2 test server in a subprocess; yield ``(host, port)``; stop it on exit.

    ``opts``: ``grpc_status``, ``count``, ``seed`` (see the module docstring).
    """
    if mode not in MODES:
        raise ValueError(f"unknown HTTP/2 test server mode {mode!r}; valid: {', '.join(MODES)}")
    from benchlib.loadgen.testservers import serve_process

    cmd = [sys.executable, "-m", "benchlib.loadgen.h2testservers", mode, "--host", host]
    for k, v in opts.items():
        cmd += [f"--{k.replace('_', '-')}", str(v)]
    with serve_process(cmd, mode, cpus=cpus) as port:
        yield host, port


if __name__ == "__main__":
    main()
