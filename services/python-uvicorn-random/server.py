"""python-uvicorn-random: study 02's Python row, the shared contract of the study's fair rows.

* ``GET /api/values/{id}``: a fresh 1,024-character string per request from the seed's
  63-character alphabet;
* ``GET /api/values/fixed``: 1,024 characters generated once at start.

Both answer 200 with ``Content-Type: text/plain; charset=utf-8`` and ``Content-Length: 1024``
(uvicorn adds ``date``; its ``server`` header is switched off, as no other row sends one);
other paths answer 404, other methods 405.

The string: ``random.randbytes`` (the Mersenne Twister, in C) mapped onto the alphabet with
``bytes.translate``, dropping the bytes 252-255 so that each of the 63 characters has
probability 4/252 (uniform, as the other rows' per-character draws). Drawing per character
in Python (``random.choices``) costs about 145 us per response against about 8 us for this on
our machine, and would make the row measure the interpreter's loop rather than the server.

A minimal ASGI application on uvicorn: one process, uvloop event loop, httptools parser, no
access log. ``HOST``/``PORT`` give the listen address.
"""

from __future__ import annotations

import os
import random
from typing import Any, Awaitable, Callable

import uvicorn

ALPHABET = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
SIZE = 1024
_KEEP = 252  # 4 * 63: random bytes below it map uniformly onto the alphabet
_TABLE = bytes(ALPHABET[b % len(ALPHABET)] if b < _KEEP else 0 for b in range(256))
_DROP = bytes(range(_KEEP, 256))
PREFIX = "/api/values/"


def random_text(n: int) -> bytes:
    """``n`` characters drawn uniformly and independently from :data:`ALPHABET`."""
    out = b""
    while len(out) < n:  # 1,100 bytes keep on average 1,083 (sd 4): one round almost always
        out += random.randbytes(n + 76).translate(_TABLE, _DROP)
    return out[:n]


FIXED = random_text(SIZE)
_OK_HEADERS = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(SIZE).encode())]

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def _plain(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """The ASGI application: ``/api/values/{id}`` as described above."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    path = scope["path"]
    ident = path[len(PREFIX):] if path.startswith(PREFIX) else ""
    if not ident or "/" in ident:
        await _plain(send, 404, b"Not Found")
    elif scope["method"] != "GET":
        await _plain(send, 405, b"Method Not Allowed")
    else:
        await send({"type": "http.response.start", "status": 200, "headers": _OK_HEADERS})
        await send({"type": "http.response.body", "body": FIXED if ident == "fixed" else random_text(SIZE)})


def main() -> None:
    uvicorn.run(app, host=os.environ.get("HOST", "127.0.0.1"), port=int(os.environ.get("PORT", "5000")),
                loop="uvloop", http="httptools", access_log=False, log_level="info", server_header=False,
                workers=None)


if __name__ == "__main__":
    main()
