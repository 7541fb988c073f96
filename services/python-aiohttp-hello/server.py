"""python-aiohttp-hello: the quickstart's Python service (aiohttp on uvloop).

GET / answers 200 with a short plain-text body. The port comes from $PORT, the bind
address from $HOST (default 127.0.0.1).
"""

from __future__ import annotations

import os

from aiohttp import web

BODY = b"Hello, World!"


async def hello(request: web.Request) -> web.Response:
    return web.Response(body=BODY, content_type="text/plain", charset="utf-8")


def main() -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency
        pass
    app = web.Application()
    app.router.add_get("/", hello)
    web.run_app(app, host=os.environ.get("HOST", "127.0.0.1"), port=int(os.environ.get("PORT", "8080")),
                access_log=None, print=None)


if __name__ == "__main__":
    main()
