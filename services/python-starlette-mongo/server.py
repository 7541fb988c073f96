"""python-starlette-mongo: study 01's API in Python (an extra row beyond the seed).

* ``GET /helloWorld`` answers ``{"message":"Hello world!"}`` (application/json);
* ``GET /users/{id}`` answers ``{"id":1,"name":"Arthur","surname":"Morgan","email":"..."}``
  read from MongoDB (db ``mongo``, collection ``users``), 404 for an unknown id, 500 on a
  database error.

Starlette on uvicorn (uvloop event loop, httptools parser), one process, no access log, and
one ``pymongo.AsyncMongoClient`` (pymongo's native asyncio API, the successor of motor)
created at start-up, whose pool serves every request: the shared ``fair`` contract of the
study's implementations. ``HOST``/``PORT`` give the listen address; ``CONNECTION_STRING`` the
MongoDB URL.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, AsyncIterator

import uvicorn
from pymongo import AsyncMongoClient
from pymongo.errors import PyMongoError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

HELLO = {"message": "Hello world!"}


async def hello_world(request: Request) -> JSONResponse:
    return JSONResponse(HELLO)


async def get_user(request: Request) -> JSONResponse:
    users = request.app.state.users
    try:
        doc: dict[str, Any] | None = await users.find_one({"_id": request.path_params["id"]})
    except PyMongoError as exc:
        return JSONResponse({"error": str(exc)}, status_code=500)
    if doc is None:
        return JSONResponse({"error": "user not found"}, status_code=404)
    return JSONResponse({"id": doc["_id"], "name": doc["name"], "surname": doc["surname"], "email": doc["email"]})


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    url = os.environ.get("CONNECTION_STRING")
    if not url:
        sys.exit("CONNECTION_STRING not set")
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url)
    await client.admin.command("ping")
    app.state.users = client["mongo"]["users"]
    try:
        yield
    finally:
        await client.close()


app = Starlette(
    routes=[Route("/helloWorld", hello_world), Route("/users/{id:int}", get_user)],
    lifespan=lifespan,
)


def main() -> None:
    uvicorn.run(app, host=os.environ.get("HOST", "127.0.0.1"), port=int(os.environ.get("PORT", "8080")),
                loop="uvloop", http="httptools", access_log=False, log_level="warning", workers=None)


if __name__ == "__main__":
    main()
