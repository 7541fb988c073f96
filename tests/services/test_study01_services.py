"""Study 01 (DotnetGoRustBenchmark): the MongoDB server and the services, for real.

* FerretDB (a MongoDB wire-protocol server) builds, starts, is seeded with the study's user
  document, answers a ``find`` for ``_id`` 1, enforces the study's admin/admin SCRAM
  authentication and tells which server and backend it is (for provenance).
* Every buildable service and variant starts against it and meets its manifest contract:
  the faithful variants their published quirks, the fair ones one shared contract.
* The faithful variants open a new MongoDB connection (and authenticate) for every request
  and log every request; the fair ones reuse one pool and log nothing per request: checked
  from FerretDB's own command counters and the services' log files.
* The .NET service is reported unavailable, with the reason, where no .NET SDK exists.

The manifest checks at the top are pure and fast; the rest is marked ``integration``. Cold
builds are costly (FerretDB ~2 min, Rocket debug and release several minutes each on 2
cores); they land in the build cache (``$BENCHLIB_CACHE``), so later runs take seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from benchlib.core.errors import ToolchainMissing
from benchlib.runtime import StartOptions, contract, get_runtime, toolchains
from benchlib.runtime.local import free_port
from benchlib.runtime.manifest import find_services_dir, load_manifest

SERVICES_DIR = find_services_dir()
FERRETDB_DIR = SERVICES_DIR / "ferretdb"
STUDY_SERVICES = {
    "go-gin-mongo": ("faithful", "fair"),
    "rust-rocket-mongo": ("faithful", "fair"),
    "dotnet-mvc-mongo": ("faithful", "fair"),
    "python-starlette-mongo": ("fair",),
    "node-fastify-mongo": ("fair",),
}
USER_DOC = {"_id": 1, "name": "Arthur", "surname": "Morgan", "email": "ArthurMorgan@mail.com"}
SHARED_HELLO = '{"message":"Hello world!"}'
SHARED_USER = '{"id":1,"name":"Arthur","surname":"Morgan","email":"ArthurMorgan@mail.com"}'
#: The published quirks of the faithful variants: (helloWorld body, content type), (users body, content type).
FAITHFUL = {
    "go-gin-mongo": (('{"message":"Hello World!"}', "application/json; charset=utf-8"),
                     ('{"Id":1,"Name":"Arthur","Surname":"Morgan","Email":"ArthurMorgan@mail.com"}',
                      "application/json; charset=utf-8")),
    "rust-rocket-mongo": (('{"message:" "Hello world!"}', "text/plain; charset=utf-8"),
                          ('{"_id":1,"name":"Arthur","surname":"Morgan","email":"ArthurMorgan@mail.com"}',
                           "application/json")),
    "dotnet-mvc-mongo": (('{"message": "Hello World!"}', "text/plain; charset=utf-8"),
                         (SHARED_USER, "application/json")),
}
CASES = [(s, v) for s, vs in STUDY_SERVICES.items() for v in vs]
SERVER_CPUS = (1,) if (os.cpu_count() or 1) > 1 else (0,)
DB_CPUS = (0,)


# -- the manifests (pure) ----------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(STUDY_SERVICES))
def test_manifest_declares_study01_and_needs_ferretdb(name: str) -> None:
    m = load_manifest(SERVICES_DIR / name)
    assert "01_rest_mongo" in m.studies and m.requires == ("ferretdb",)
    assert m.variants == STUDY_SERVICES[name] and m.default_variant == "fair"
    assert m.health_path == "/helloWorld" and m.dockerfile == "Dockerfile"
    for v in m.variants:
        r = m.resolve(v)
        assert any("{dep.ferretdb.port}" in val and "admin:admin@" in val for val in r.run_env.values())
        if r.build_command:  # build outputs go to the cache, never into the clone
            assert any("{build_dir}" in a or "{cargo_target_dir}" in a for a in r.build_command) or any(
                "{build_dir}" in val for val in r.build_env.values())
        assert [e.name for e in r.endpoints] == ["helloWorld", "users"]


def test_fair_variants_share_one_contract() -> None:
    for name in STUDY_SERVICES:
        hello, users = load_manifest(SERVICES_DIR / name).resolve("fair").endpoints
        assert (hello.path, hello.contract.body, hello.contract.content_type) == (
            "/helloWorld", SHARED_HELLO, "application/json"), name
        assert (users.path, users.contract.body, users.contract.content_type) == (
            "/users/1", SHARED_USER, "application/json"), name
    assert json.loads(SHARED_USER)["id"] == USER_DOC["_id"]


@pytest.mark.parametrize("name", sorted(FAITHFUL))
def test_faithful_contracts_are_the_published_quirks(name: str) -> None:
    hello, users = load_manifest(SERVICES_DIR / name).resolve("faithful").endpoints
    (hb, hct), (ub, uct) = FAITHFUL[name]
    assert (hello.contract.body, hello.contract.content_type) == (hb, hct)
    assert (users.contract.body, users.contract.content_type) == (ub, uct)


def test_rust_faithful_hello_is_not_json() -> None:
    with pytest.raises(json.JSONDecodeError):
        json.loads(FAITHFUL["rust-rocket-mongo"][0][0])


def test_ferretdb_manifest() -> None:
    m = load_manifest(FERRETDB_DIR)
    assert m.health_kind == "tcp" and m.variants == ("sqlite", "mongo-official")
    r = m.resolve()
    assert r.post_start and r.post_start[0][1:3] == ("{service_dir}/seed.py", "seed")
    assert "{build_dir}" in " ".join(r.build_command or ())
    assert m.resolve("mongo-official").docker_build_args == {} and (FERRETDB_DIR / "Dockerfile.mongo").is_file()


@pytest.mark.skipif(shutil.which("dotnet") is not None, reason="a .NET SDK is installed here: the service runs")
def test_dotnet_is_reported_unavailable_with_the_reason() -> None:
    m = load_manifest(SERVICES_DIR / "dotnet-mvc-mongo")
    ok, why = toolchains.availability(m)
    assert not ok and "dotnet" in why and ".NET 8 SDK" in why
    with pytest.raises(ToolchainMissing) as err:
        get_runtime("local").prepare(m.resolve("faithful"))
    assert err.value.toolchain == "dotnet" and "docker" in err.value.hint


# -- real servers ------------------------------------------------------------------------------

def _seed_py(action: str, port: int, *extra: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, str(FERRETDB_DIR / "seed.py"), action, "--port", str(port), *extra],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def clone_state(untracked_in_services: Callable[[Iterable[str]], set[str]]) -> set[str]:
    return untracked_in_services([*STUDY_SERVICES, "ferretdb"])


@pytest.fixture(scope="module")
def ferretdb(clone_state: set[str], tmp_path_factory: pytest.TempPathFactory):
    rt = get_runtime("local")
    prepared = rt.prepare(load_manifest(FERRETDB_DIR).resolve("sqlite"))
    log = tmp_path_factory.mktemp("ferretdb") / "ferretdb.log"
    with rt.start(prepared, StartOptions(port=free_port(), cpus=DB_CPUS, log_path=log)) as handle:
        yield handle


@pytest.fixture(scope="module")
def db_admin(ferretdb):
    """One authenticated client for reading FerretDB's counters (so reading adds no conversation)."""
    from pymongo import MongoClient

    with MongoClient(ferretdb.host, ferretdb.port, username="admin", password="admin", directConnection=True,
                     maxPoolSize=1) as client:
        client.admin.command("ping")
        yield client


def _command_total(client: Any, command: str) -> int:
    """How often FerretDB has run ``command`` since it started (its serverStatus counters)."""
    status = client.admin.command("serverStatus")
    return int(status["metrics"]["commands"].get(command, {}).get("total", 0))


@pytest.mark.integration
def test_ferretdb_is_seeded_answers_a_find_and_enforces_auth(ferretdb) -> None:
    from pymongo import MongoClient
    from pymongo.errors import OperationFailure

    with MongoClient(ferretdb.host, ferretdb.port, username="admin", password="admin", directConnection=True) as c:
        assert list(c["mongo"]["users"].find({"_id": 1})) == [USER_DOC]
        assert c["mongo"]["users"].count_documents({}) == 1
        assert isinstance(c["mongo"]["users"].find_one()["_id"], int)
    with MongoClient(ferretdb.host, ferretdb.port, directConnection=True) as anonymous:
        with pytest.raises(OperationFailure) as err:
            anonymous["mongo"]["users"].find_one({"_id": 1})
        assert err.value.code == 13  # Unauthorized
    with MongoClient(ferretdb.host, ferretdb.port, username="admin", password="wrong", directConnection=True) as bad:
        with pytest.raises(OperationFailure) as err:
            bad["mongo"]["users"].find_one({"_id": 1})
        assert err.value.code == 18  # AuthenticationFailed
    # seeding is idempotent: a second run keeps exactly one document
    assert _seed_py("seed", ferretdb.port)["count"] == 1


@pytest.mark.integration
def test_ferretdb_reset_gives_fresh_data(ferretdb) -> None:
    """The manifest's [run] reset step (what the runner runs before each later trial of a block
    that shares FerretDB): whatever a trial left in the collection is gone, the study's document
    is back, read back with a find."""
    from pymongo import MongoClient

    from benchlib.runtime.base import reset_service

    svc = load_manifest(FERRETDB_DIR).resolve("sqlite")
    assert svc.reset and "reset" in svc.reset[0]
    with MongoClient(ferretdb.host, ferretdb.port, username="admin", password="admin", directConnection=True) as c:
        users = c["mongo"]["users"]
        users.insert_one({"_id": 2, "name": "left by a trial"})
        users.update_one({"_id": 1}, {"$set": {"name": "changed"}})
        reset_service(svc, ferretdb)
        assert list(users.find({})) == [USER_DOC]
    assert _seed_py("reset", ferretdb.port)["count"] == 1


@pytest.mark.integration
def test_ferretdb_identity_for_provenance(ferretdb) -> None:
    info = _seed_py("info", ferretdb.port)
    assert info["server"] == "ferretdb" and info["ferretdb_version"] == "v1.24.2"
    assert info["backend"].startswith("SQLite 3.") and info["debug_build"] is False
    assert info["mongodb_compat_version"].startswith("7.0.")


@pytest.mark.integration
@pytest.mark.timeout(3600)
@pytest.mark.parametrize(("name", "variant"), CASES, ids=[f"{s}-{v}" for s, v in CASES])
def test_service_meets_its_contract(ferretdb, db_admin, name: str, variant: str, tmp_path: Path) -> None:
    manifest = load_manifest(SERVICES_DIR / name)
    ok, why = toolchains.availability(manifest)
    if not ok:
        pytest.skip(f"not run: {why}")
    rt = get_runtime("local")
    service = manifest.resolve(variant)
    prepared = rt.prepare(service)
    log = tmp_path / "service.log"
    sasl_before = _command_total(db_admin, "saslContinue")
    with rt.start(prepared, StartOptions(port=free_port(), cpus=SERVER_CPUS, log_sink="file", log_path=log,
                                         deps={"ferretdb": ferretdb})) as h:
        base = f"http://{h.host}:{h.port}"
        for endpoint in service.endpoints:
            report = contract.verify(base, endpoint)  # raises ContractError listing every difference
            assert report.ok
        import httpx

        lines_before = len(log.read_bytes().splitlines())
        sasl_mid = _command_total(db_admin, "saslContinue")
        n = 10
        with httpx.Client(base_url=base, trust_env=False, timeout=30) as client:
            for _ in range(n):
                assert client.get("/users/1").status_code == 200
                assert client.get("/helloWorld").status_code == 200
        sasl_after = _command_total(db_admin, "saslContinue")
        lines_after = len(log.read_bytes().splitlines())
        assert h.alive()
    new_auths = sasl_after - sasl_mid
    new_log_lines = lines_after - lines_before
    if variant == "faithful" and name in ("go-gin-mongo", "rust-rocket-mongo"):
        # a new client per request: a new connection and a SCRAM conversation every time (the
        # drivers start it inside the handshake, speculativeAuthenticate, and finish it with two
        # saslContinue commands)
        assert new_auths >= 2 * n
        # one (Gin) or several (Rocket debug) log lines per request
        assert new_log_lines >= 2 * n
    elif variant == "fair":
        # one pool, authenticated at start (or on first use): no new conversation per request
        assert new_auths == 0 and sasl_mid - sasl_before <= 8
        assert new_log_lines == 0, log.read_text()[-2000:]


@pytest.mark.integration
def test_nothing_was_written_inside_the_clone(
        ferretdb, clone_state: set[str], untracked_in_services: Callable[[Iterable[str]], set[str]]) -> None:
    # runs after the service tests of this module (pytest keeps the file's order)
    assert untracked_in_services([*STUDY_SERVICES, "ferretdb"]) == clone_state


def _seed_tables() -> list[list[list[str]]] | None:
    seed = SERVICES_DIR.parent.parent / "shared" / "seeds" / "000_317109363e0847ee.txt"
    if not seed.is_file():
        return None
    readme = json.loads(seed.read_text())["readme"]
    tables, current = [], []
    for line in readme.splitlines():
        if line.startswith("|"):
            if "---" not in line:  # the separator row belongs to the table but holds no cells
                current.append([c.strip() for c in line.strip("|").split("|")])
        elif current:
            tables.append(current)
            current = []
    return tables


def test_reference_csv_holds_the_seed_tables() -> None:
    """data/reference/01_rest_mongo.csv equals the two tables in the seed's README."""
    from benchlib.analysis.reference import load_reference

    tables = _seed_tables()
    if tables is None:
        pytest.skip("the seed file (shared/seeds/000_317109363e0847ee.txt) is not beside the clone")
    df = load_reference("01_rest_mongo")
    assert len(tables) == 2 and len(df) == 6
    cols = ["min_ms", "avg_ms", "med_ms", "max_ms", "p50_ms", "p95_ms", "p99_ms"]
    for table, endpoint in zip(tables, ["/helloWorld", "/users/1"]):
        header, *rows = table
        assert header[1:] == ["min [ms]", "avg [ms]", "med [ms]", "max [ms]", "p(50) [ms]", "p(95) [ms]", "p(99) [ms]"]
        for row in rows:
            ours = df[(df.endpoint == endpoint) & (df.impl == row[0])]
            assert len(ours) == 1, (endpoint, row[0])
            assert [float(x.replace(",", ".")) for x in row[1:]] == ours[cols].iloc[0].tolist()
    assert df.requests_offered.tolist() == [1000, 1000, 1000, 100, 100, 100]


def _docker_unavailable() -> str | None:
    try:
        from benchlib.core.errors import RuntimeUnavailable
        from benchlib.runtime.docker import connect
    except ImportError as exc:  # pragma: no cover - docker is a dependency
        return f"the Docker SDK is not importable: {exc}"
    try:
        connect(timeout_s=10).close()
    except RuntimeUnavailable as exc:
        return str(exc)
    return None


@pytest.mark.docker
@pytest.mark.integration
@pytest.mark.timeout(3600)
def test_docker_ferretdb_and_go_services_meet_their_contracts() -> None:
    """The Docker path on this machine: FerretDB and the Go API built from their Dockerfiles
    on the locally bootstrapped debian:bookworm-slim (Go toolchain and modules through the Go
    module proxy), seeded from the host, both variants checked against their contracts."""
    why = _docker_unavailable()
    if why is not None:
        pytest.skip(f"no Docker engine: {why}")
    rt = get_runtime("docker")
    db_prepared = rt.prepare(load_manifest(FERRETDB_DIR).resolve("sqlite"))
    with rt.start(db_prepared, StartOptions(port=free_port(), cpus=DB_CPUS)) as db:
        assert _seed_py("info", db.port)["ferretdb_version"] == "v1.24.2"
        for variant in ("faithful", "fair"):
            service = load_manifest(SERVICES_DIR / "go-gin-mongo").resolve(variant)
            prepared = rt.prepare(service)
            with rt.start(prepared, StartOptions(port=free_port(), cpus=SERVER_CPUS, deps={"ferretdb": db})) as h:
                for endpoint in service.endpoints:
                    assert contract.verify(f"http://{h.host}:{h.port}", endpoint).ok


@pytest.mark.docker
@pytest.mark.integration
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("name", ["python-starlette-mongo", "node-fastify-mongo", "rust-rocket-mongo"])
def test_docker_fair_images_meet_the_shared_contract(ferretdb, name: str) -> None:
    """The Python and Node.js images (Debian's python3 / nodejs + npm, packages from PyPI and
    npm) and the Rust one (built in rust:1.95.0-slim-bookworm, made from the host's toolchain
    when it cannot be pulled) against the local FerretDB: containers use the host's network,
    so a local dependency serves them as well."""
    why = _docker_unavailable()
    if why is not None:
        pytest.skip(f"no Docker engine: {why}")
    rt = get_runtime("docker")
    service = load_manifest(SERVICES_DIR / name).resolve("fair")
    prepared = rt.prepare(service)
    with rt.start(prepared, StartOptions(port=free_port(), cpus=SERVER_CPUS, deps={"ferretdb": ferretdb})) as h:
        for endpoint in service.endpoints:
            assert contract.verify(f"http://{h.host}:{h.port}", endpoint).ok


def _launch_module() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("ferretdb_launch", FERRETDB_DIR / "launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_launch_command_lines(tmp_path: Path) -> None:
    launch = _launch_module()
    assert launch.normalize_listen("::1:27017") == "[::1]:27017"
    assert launch.normalize_listen("127.0.0.1:5") == "127.0.0.1:5"
    with pytest.raises(SystemExit, match="HOST:PORT"):
        launch.normalize_listen("localhost")
    argv = launch.ferretdb_argv("/b/ferretdb", "127.0.0.1:9", tmp_path, auth=True, user="admin", password="admin",
                                log_level="info")
    assert f"--sqlite-url=file:{tmp_path}/" in argv and f"--state-dir={tmp_path}" in argv
    assert {"--handler=sqlite", "--debug-addr=-", "--telemetry=disable", "--test-enable-new-auth",
            "--setup-database=admin", "--setup-username=admin", "--setup-password=admin"} <= set(argv)
    assert "--test-enable-new-auth" not in launch.ferretdb_argv("/b/f", "h:1", tmp_path, auth=False, user="",
                                                                password="", log_level="info")
    assert launch.mongod_argv("mongod", "127.0.0.1:9", tmp_path)[:6] == ["mongod", "--auth", "--bind_ip",
                                                                         "127.0.0.1", "--port", "9"]
    stale = tmp_path / f"{launch.PREFIX}999999999-x"  # no such pid
    stale.mkdir()
    mine = tmp_path / f"{launch.PREFIX}{os.getpid()}-y"
    mine.mkdir()
    assert launch.remove_stale(tmp_path) == [stale] and mine.is_dir()


@pytest.mark.integration
def test_launcher_removes_its_data_directory(tmp_path: Path) -> None:
    import signal
    import socket
    import time

    prepared = get_runtime("local").prepare(load_manifest(FERRETDB_DIR).resolve("sqlite"))
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(FERRETDB_DIR / "launch.py"), "--binary",
                             str(prepared.build_dir / "ferretdb"), "--listen", f"127.0.0.1:{port}",
                             "--data-root", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        dirs = list(tmp_path.iterdir())
        assert len(dirs) == 1 and (dirs[0] / "state.json").is_file()  # FerretDB's state is in there too
        assert any(p.suffix == ".sqlite" for p in dirs[0].iterdir())
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    assert list(tmp_path.iterdir()) == []
