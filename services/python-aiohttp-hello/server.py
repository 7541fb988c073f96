"""python-aiohttp-hello: the quickstart's Python service (aiohttp on uvloop).

GET / answers 200 with a short plain-text body. The port comes from $PORT, the bind
address from $HOST (default 127.0.0.1).

$EXTRA_WORK_US (default 0: none) plants a slowdown: each request first busy-waits that many
microseconds of wall time in the handler (the event loop is held, as by real work), so a run
can be made measurably slower than another without changing anything else (``benchlib
compare``'s validation, ``bench/compare_validation.py``).
"""

from __future__ import annotations

import os
import time

from aiohttp import web

BODY = b"Hello, World!"
EXTRA_WORK_NS = int(float(os.environ.get("EXTRA_WORK_US") or 0) * 1000)


async def hello(request: web.Request) -> web.Response:
    return web.Response(body=BODY, content_type="text/plain", charset="utf-8")


async def hello_slowed(request: web.Request) -> web.Response:
    end = time.perf_counter_ns() + EXTRA_WORK_NS
    while time.perf_counter_ns() < end:
        pass
    return web.Response(body=BODY, content_type="text/plain", charset="utf-8")


def main() -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency
        pass
    app = web.Application()
    app.router.add_get("/", hello_slowed if EXTRA_WORK_NS > 0 else hello)
    web.run_app(app, host=os.environ.get("HOST", "127.0.0.1"), port=int(os.environ.get("PORT", "8080")),
                access_log=None, print=None)


if __name__ == "__main__":
    main()
