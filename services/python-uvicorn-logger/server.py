"""python-uvicorn-logger: study 04's extra Python row (not in the seed).

``GET /`` answers 200 with the seed's 38-byte body ``Hello, World! This is a cool web test!``
(``text/plain; charset=utf-8``); any other path or method answers 404 (as actix does; the
seed's Go server answers 200 everywhere).

A minimal ASGI application on uvicorn (one process, uvloop event loop, httptools parser) with
uvicorn's **access log on**: one line per request, ``INFO:     127.0.0.1:PORT - "GET /
HTTP/1.1" 200 OK``, written by the ``uvicorn.access`` logger to stdout (uvicorn's own
start-up messages go to stderr). ``HOST``/``PORT`` give the listen address.
"""

from __future__ import annotations

import os
from typing import Any, Awaitable, Callable

import uvicorn

BODY = b"Hello, World! This is a cool web test!"
_OK_HEADERS = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(BODY)).encode())]
_NOT_FOUND_HEADERS = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"9")]

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """The ASGI application: ``GET /`` -> 200 and the body; anything else -> 404."""
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
    if scope["method"] == "GET" and scope["path"] == "/":
        await send({"type": "http.response.start", "status": 200, "headers": _OK_HEADERS})
        await send({"type": "http.response.body", "body": BODY})
    else:
        await send({"type": "http.response.start", "status": 404, "headers": _NOT_FOUND_HEADERS})
        await send({"type": "http.response.body", "body": b"Not Found"})


def main() -> None:
    uvicorn.run(app, host=os.environ.get("HOST", "127.0.0.1"), port=int(os.environ.get("PORT", "8080")),
                loop="uvloop", http="httptools", access_log=True, log_level="info", workers=None)


if __name__ == "__main__":
    main()
