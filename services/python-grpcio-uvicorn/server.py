"""python-grpcio-uvicorn: study 05's Python server (seed 004): the seed's two payloads as
gRPC (grpcio's asyncio server; variant ``grpc``) or as JSON over HTTP/1.1 (a minimal ASGI
application on uvicorn; variant ``json``). ``APP_VARIANT`` picks one; ``HOST``/``PORT`` give
the listen address.

* gRPC: ``/SmallPayloadService/SendSmallPayload`` and ``/HugePayloadService/SendHugePayload``,
  the message classes made at start from ``payloads.proto`` beside this file
  (``grpc.protos_and_services``, which compiles it with grpcio-tools' protoc: no generated
  code to keep in step). grpcio parses each request into its message; the handlers build the
  response per call, as the seed's server did.
* JSON: ``POST /small`` and ``POST /huge``: the body parsed with :func:`json.loads` and
  checked for the request's shape (else 400), the response built and serialized per call
  (compact, the seed's ASP.NET Core MVC camelCase), with Content-Type and Content-Length.
  One uvicorn process, uvloop event loop, httptools parser, no access log, no Server
  header. uvicorn speaks HTTP/1.1 only: this service has no h2c endpoint to offer.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, Awaitable, Callable

HERE = Path(__file__).resolve().parent
HUGE_COUNT = 150


def huge_lists() -> tuple[list[str], list[int]]:
    """The seed's HugeResponse lists: 150 x 25 'a', 150 x 123."""
    return ["a" * 25] * HUGE_COUNT, [123] * HUGE_COUNT


# -- gRPC ---------------------------------------------------------------------------------------

async def serve_grpc(host: str, port: int) -> None:
    import grpc

    sys.path.insert(0, str(HERE))
    protos, services = grpc.protos_and_services("payloads.proto")

    class Small(services.SmallPayloadServiceServicer):  # type: ignore[name-defined,misc]
        async def SendSmallPayload(self, request: Any, context: Any) -> Any:  # noqa: N802 (the .proto's name)
            return protos.SmallResponse(Message="SmallResponse")

    class Huge(services.HugePayloadServiceServicer):  # type: ignore[name-defined,misc]
        async def SendHugePayload(self, request: Any, context: Any) -> Any:  # noqa: N802
            strings, ints = huge_lists()
            return protos.HugeResponse(StringList=strings, IntList=ints)

    server = grpc.aio.server()
    services.add_SmallPayloadServiceServicer_to_server(Small(), server)
    services.add_HugePayloadServiceServicer_to_server(Huge(), server)
    server.add_insecure_port(f"{host}:{port}")
    await server.start()
    print(f"grpc server listening on {host}:{port}", file=sys.stderr, flush=True)
    await server.wait_for_termination()


# -- JSON over HTTP/1.1 -------------------------------------------------------------------------

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def _small(req: Any) -> dict[str, Any] | None:
    if not isinstance(req, dict) or not isinstance(req.get("Message"), str):
        return None
    return {"message": "SmallResponse"}


def _huge(req: Any) -> dict[str, Any] | None:
    if not isinstance(req, dict) or not isinstance(req.get("StringList"), list) or \
            not isinstance(req.get("IntList"), list):
        return None
    strings, ints = huge_lists()
    return {"stringList": strings, "intList": ints}


ROUTES: dict[str, Callable[[Any], dict[str, Any] | None]] = {"/small": _small, "/huge": _huge}


async def _answer(send: Send, status: int, body: bytes, ctype: bytes = b"text/plain; charset=utf-8") -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", ctype), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """The ASGI application: ``POST /small`` and ``POST /huge`` as described above."""
    if scope["type"] != "http":
        return
    route = ROUTES.get(scope["path"])
    if route is None:
        await _answer(send, 404, b"Not Found")
        return
    if scope["method"] != "POST":
        await _answer(send, 405, b"Method Not Allowed")
        return
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    try:
        out = route(json.loads(body))
    except ValueError:
        out = None
    if out is None:
        await _answer(send, 400, b"request is not JSON of the expected shape")
        return
    await _answer(send, 200, json.dumps(out, separators=(",", ":")).encode(), b"application/json; charset=utf-8")


def main() -> None:
    host, port = os.environ.get("HOST", "127.0.0.1"), int(os.environ.get("PORT", "8080"))
    variant = os.environ.get("APP_VARIANT", "")
    if variant == "grpc":
        asyncio.run(serve_grpc(host, port))
    elif variant == "json":
        import uvicorn

        uvicorn.run(app, host=host, port=port, loop="uvloop", http="httptools", access_log=False,
                    log_level="warning", server_header=False, lifespan="off")
    else:
        sys.exit(f"APP_VARIANT={variant!r}: valid: grpc, json")


if __name__ == "__main__":
    main()
