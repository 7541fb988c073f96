"""Seed a MongoDB wire-protocol server with study 01's data, or report what server it is.

Usage::

    python seed.py seed --port PORT [--host 127.0.0.1] [--user admin --password admin]
    python seed.py reset --port PORT [...]         # drop the collection, then seed: fresh data
    python seed.py info --port PORT [...]          # JSON: server identity, for provenance

``seed`` writes the study's single user document (the original's
``docker/mongo/mongo-init.js``: db ``mongo``, collection ``users``)::

    {_id: 1, name: "Arthur", surname: "Morgan", email: "ArthurMorgan@mail.com"}

``_id`` is a 32-bit integer, as ``mongosh`` stores ``1``. Seeding is idempotent (an existing
document with the same contents is kept), then the document is read back with a ``find`` and
compared field by field; any difference exits non-zero with the reason. ``reset`` (the
manifest's ``[run] reset`` step: fresh data for each trial when the runner shares one FerretDB
among a block's trials) drops the collection first, then seeds as ``seed`` does.

When the server has no user yet (a plain ``mongod --auth``, through its localhost
exception) ``seed`` first creates the root user ``admin``/``admin`` in ``admin`` — what the
official ``mongo`` image does from ``MONGO_INITDB_ROOT_USERNAME/PASSWORD``. FerretDB creates
that user itself at start (see ``launch.py``).

``info`` prints one JSON object: ``buildInfo`` (``version``, the MongoDB version the server
claims; ``ferretdbVersion`` on FerretDB), the backend from ``getLog startupWarnings``
(FerretDB: "Powered by FerretDB v1.24.2 and SQLite 3.x"), and which server it is
(``ferretdb`` or ``mongodb``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from typing import Any

from pymongo import MongoClient
from pymongo.errors import OperationFailure, PyMongoError

USER_DOC: dict[str, Any] = {"_id": 1, "name": "Arthur", "surname": "Morgan", "email": "ArthurMorgan@mail.com"}
DB_NAME = "mongo"
COLLECTION = "users"


def connect(host: str, port: int, user: str | None, password: str | None, timeout_s: float = 10.0) -> MongoClient:
    """A client with ``directConnection=true`` (as the study's URLs), authenticated if a user is given."""
    kwargs: dict[str, Any] = {"directConnection": True, "serverSelectionTimeoutMS": int(timeout_s * 1000),
                              "connectTimeoutMS": int(timeout_s * 1000)}
    if user:
        kwargs.update(username=user, password=password, authSource="admin")
    return MongoClient(host, port, **kwargs)


def _ensure_root_user(host: str, port: int, user: str, password: str) -> bool:
    """Create the root user through the localhost exception if the server has none (mongod).

    Returns ``True`` if a user was created.
    """
    with connect(host, port, None, None) as client:
        try:
            info = client.admin.command("usersInfo")
        except OperationFailure:
            return False  # auth required already: a user exists (or the server does it itself)
        if info.get("users"):
            return False
        try:
            client.admin.command("createUser", user, pwd=password, roles=[{"role": "root", "db": "admin"}])
        except OperationFailure:
            return False
        return True


def seed(host: str, port: int, user: str | None, password: str | None, *, fresh: bool = False) -> dict[str, Any]:
    """Insert the study's user document (idempotent) and verify it with a find; with ``fresh``,
    drop the collection first (whatever an earlier trial left is gone)."""
    created_user = False
    if user:
        created_user = _ensure_root_user(host, port, user, password or "")
    with connect(host, port, user, password) as client:
        coll = client[DB_NAME][COLLECTION]
        if fresh:
            coll.drop()
        existing = coll.find_one({"_id": USER_DOC["_id"]})
        if existing is None:
            coll.insert_one(dict(USER_DOC))
        elif existing != USER_DOC:
            raise SystemExit(f"{DB_NAME}.{COLLECTION} holds a different _id 1 document: {existing!r}")
        found = list(coll.find({"_id": 1}))
        count = coll.count_documents({})
    if found != [USER_DOC]:
        raise SystemExit(f"find({{_id: 1}}) returned {found!r}, expected [{USER_DOC!r}]")
    if count != 1:
        raise SystemExit(f"{DB_NAME}.{COLLECTION} holds {count} documents, expected exactly 1 (as the study)")
    return {"seeded": True, "created_user": created_user, "document": found[0], "count": count}


def server_info(host: str, port: int, user: str | None, password: str | None) -> dict[str, Any]:
    """The server's identity for provenance (buildInfo, backend, kind)."""
    with connect(host, port, user, password) as client:
        build = client.admin.command("buildInfo")
        try:
            warnings = client.admin.command("getLog", "startupWarnings").get("log", [])
        except PyMongoError:
            warnings = []
    lines = [str(x) for x in warnings]
    backend = None
    for line in lines:
        m = re.search(r"Powered by FerretDB (\S+) and (.+?)\.?\"", line)
        if m:
            backend = m.group(2).strip()
            break
    ferret = build.get("ferretdbVersion")
    return {
        "server": "ferretdb" if ferret else "mongodb",
        "ferretdb_version": ferret,
        "mongodb_compat_version": build.get("version"),
        "backend": backend if ferret else "mongod (WiredTiger)",
        "git_version": build.get("gitVersion"),
        "debug_build": build.get("debug"),
        "build_environment": build.get("buildEnvironment"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["seed", "reset", "info"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--user", default="admin", help="'' for a server without authentication")
    parser.add_argument("--password", default="admin")
    parser.add_argument("--retries-s", type=float, default=20.0, help="keep retrying a refused connection this long")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.retries_s
    while True:
        try:
            if args.action == "seed":
                out = seed(args.host, args.port, args.user or None, args.password)
                out["server"] = server_info(args.host, args.port, args.user or None, args.password)
            elif args.action == "reset":
                out = seed(args.host, args.port, args.user or None, args.password, fresh=True)
            else:
                out = server_info(args.host, args.port, args.user or None, args.password)
            break
        except PyMongoError as exc:
            if time.monotonic() > deadline:
                print(f"seed.py {args.action}: {type(exc).__name__}: {exc}", file=sys.stderr)
                return 1
            time.sleep(0.2)
    print(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    code = main()
    # Every client is closed by now; what is left is pymongo's exit handler joining its monitor
    # threads, about 0.5 s of a 0.7 s seeding step on this machine. Skip it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
