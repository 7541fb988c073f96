"""The registry of studies: the one list of them, each entry with what only it knows.

A study is three things, named here once: this entry, its module
(``benchlib/analysis/studies/<name>.py``: its ``Parameters`` record, a subclass of
:class:`~benchlib.analysis.params.StudyParameters`, and ``design(parameters)`` -> its
:class:`~benchlib.analysis.planned.StudyDesign`, the experiment and the questions) and its
notebook (``notebooks/<id>.ipynb``, whose ``parameters`` cell declares the record's fields).
Everything that lists the studies reads :data:`STUDIES`: :func:`benchlib.analysis.notebook.run_study`,
the study pages' generated lines (``benchlib._project.studypages``), the conclusion rule's test
and ``bench/variance_sources.py``; ``tests/analysis/test_registry.py`` checks that each entry,
its module and its notebook agree.

An entry is data (a frozen record; the module is named, imported when first asked for), so a
field about the original (e.g. the ratios its seed claimed) is one more field with a default.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING

from benchlib.analysis.claims import Claim
from benchlib.core.errors import ParameterError

if TYPE_CHECKING:  # pragma: no cover
    from benchlib.analysis.params import StudyParameters
    from benchlib.analysis.planned import StudyDesign

__all__ = ["STUDIES", "Study", "study"]


@dataclass(frozen=True)
class Study:
    """One study.

    Attributes
    ----------
    id: the study's name: its notebook's file name (``notebooks/<id>.ipynb``), its runs'
        folder (``data/runs/<id>/``) and its experiments' ``study``.
    module: the dotted name of its module, which defines ``Parameters`` and ``design``.
    title: what it asks, as its notebook's first heading says (after ``Study NN:``).
    seed: the seed file of the published claim it re-runs (``""``: a study of benchlib's own).
    source: where the original was published.
    seed_stacks: the seed's stacks in words -> the prefixes of the arm names that run them
        here (the report's first lines say which ran: ``seed_stacks_markdown``).
    in_report: run by ``make report`` / ``benchlib report`` without names (``False``: a study
        that needs the user's own input, such as ``10_ab``'s two services; it runs when named,
        and ``benchlib publish`` shows its runs like any other).
    claims: the seed's claims as typed questions (:class:`~benchlib.analysis.claims.Claim`),
        each asked of every run and answered first on its report ("The claim, re-run").
    """

    id: str
    module: str
    title: str
    seed: str = ""
    source: str = ""
    seed_stacks: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    in_report: bool = True
    claims: tuple[Claim, ...] = ()

    def load(self) -> ModuleType:
        """The study's module (imported on first use)."""
        return importlib.import_module(self.module)

    @property
    def parameters(self) -> type[StudyParameters]:
        """The study's parameters record (its module's ``Parameters``)."""
        cls: type[StudyParameters] = self.load().Parameters
        return cls

    @property
    def design(self) -> Callable[[StudyParameters], StudyDesign]:
        """What builds the study's experiment and questions from its parameters (its module's
        ``design``)."""
        build: Callable[[StudyParameters], StudyDesign] = self.load().design
        return build


_PACKAGE = "benchlib.analysis.studies"
_REF = "data/reference/"


def _rest_mongo_claims() -> tuple[Claim, ...]:
    """Seed 000 printed k6's p50 per endpoint and stated no conclusion: its table's Rust / Go."""
    out = []
    for cond, path, rust, go in (("helloWorld", "/helloWorld", 2.05, 1.46), ("users", "/users/1", 26.82, 30.39)):
        for variant in ("faithful", "fair"):
            out.append(Claim(
                f"{cond}-{variant}", f"Rust / Go, p50 at {path}",
                f"Rust's p50 {rust} ms against Go's {go} ms at {path}",
                rust / go, f"{_REF}01_rest_mongo.csv: p50_ms, Rust {rust} / Go {go}", f"rust-{variant}",
                f"go-{variant}", "p50_ms", cond, variant, invites=True))  # type: ignore[arg-type]
    return tuple(out)


def _grpc_json_claims() -> tuple[Claim, ...]:
    """Seed 004 printed BenchmarkDotNet's means for .NET only: its table's JSON / gRPC per payload."""
    out = []
    why = ("the seed ran .NET only; the same two calls over gRPC and over JSON, served by {lang}'s own gRPC and "
           "HTTP frameworks to one sequential caller, ask its question on a stack that runs here")
    for lang, label, variant in (("dotnet", ".NET", "faithful"), ("go", "Go", "nearest"), ("rust", "Rust", "nearest"),
                                 ("python", "Python", "nearest")):
        for pl, js, grpc in (("small", 613.5, 138.7), ("huge", 964.1, 277.9)):
            out.append(Claim(
                f"{lang}-{pl}", f"JSON / gRPC, p50 of a {pl} call, {label}",
                f"JSON's mean {js} µs against gRPC's {grpc} µs ({pl} request, .NET Core 2.0)", js / grpc,
                f"{_REF}05_grpc_vs_json.csv: mean_us, JSON {js} / gRPC {grpc}",
                f"{lang}-json-{pl}", f"{lang}-grpc-{pl}",
                "p50_us", "c1", variant, invites=True,  # type: ignore[arg-type]
                nearest=why.format(lang=label) if variant == "nearest" else ""))
    return tuple(out)


def _fastcgi_claims() -> tuple[Claim, ...]:
    """Seed 002: .NET behind nginx "can reach the performance of" Node.js (a claim of parity)."""
    words = "\"a .NET Core web application can reach the performance of a NodeJS one if it uses only async techniques\""
    ref = f"{_REF}03_fastcgi_nginx.csv: requests_per_s, AsyncFastCGI.NET {{d}} / NodeJS {{n}} (best of 10)"
    nearest = ("it keeps nginx as the seed configured it, the seed's ab load and node-fastcgi, and replaces only the "
               ".NET library, which does not run here, with another compiled FastCGI library (Go's net/http/fcgi) "
               "behind the same nginx")
    out = []
    for cond, d, n in (("c20", "19,494.64", "19,453.72"), ("c400", "19,893.88", "21,411.16")):
        out.append(Claim(f"dotnet-{cond}", f"AsyncFastCGI.NET / node-fastcgi goodput, {cond}", words, 1.0,
                         ref.format(d=d, n=n), "dotnet-nginx-off", "node-nginx-off", "goodput_rps", cond, "faithful",
                         parity=True))
        out.append(Claim(f"go-{cond}", f"Go fcgi / node-fastcgi goodput, {cond}", words, 1.0, ref.format(d=d, n=n),
                         "go-nginx-off", "node-nginx-off", "goodput_rps", cond, "nearest", nearest=nearest,
                         parity=True))
    return tuple(out)


_IRIS_KESTREL_CLAIMS = (
    Claim("kestrel", "Kestrel / Iris throughput, 1 KB random string", "\"Kestrel does the job 10+ times faster\"",
          99891.0 / 7501.0, f"{_REF}02_iris_kestrel.csv: reqs_per_s_avg, Kestrel 99,891 / Iris 7,501",
          "kestrel-faithful-random", "iris-faithful-random", "throughput_rps", "closed", "faithful"),
    Claim("actix", "actix-web / Iris throughput, 1 KB random string", "\"Kestrel does the job 10+ times faster\"",
          99891.0 / 7501.0, f"{_REF}02_iris_kestrel.csv: reqs_per_s_avg, Kestrel 99,891 / Iris 7,501",
          "actix-random", "iris-faithful-random", "throughput_rps", "closed", "nearest",
          nearest="it keeps the post's Iris handler, its request and its load, and replaces only Kestrel, which does "
                  "not run here, with the fastest fair compiled server that does (Rust actix-web, release build)"),
)

_RUST_GO_CLAIMS = (
    Claim("faithful", "Go / actix-web throughput, every request logged",
          "wrk output 3 (Go, inferred) 36,021.81 req/s against output 1 (actix-web, inferred) 15,004.41 req/s",
          36021.81 / 15004.41, f"{_REF}04_rust_vs_go_logging.csv: requests_per_s, output 3 / output 1", "go-pipe",
          "actix-debug-pipe", "throughput_rps", "closed", "faithful", invites=True),
    Claim("fair", "Go / actix-web (release) throughput, every request logged",
          "wrk output 3 (Go, inferred) 36,021.81 req/s against output 2 (actix-web, inferred) 18,838.67 req/s",
          36021.81 / 18838.67, f"{_REF}04_rust_vs_go_logging.csv: requests_per_s, output 3 / output 2", "go-pipe",
          "actix-release-pipe", "throughput_rps", "closed", "fair", invites=True),
)

#: Every study, in the order of its notebooks.
STUDIES: tuple[Study, ...] = (
    Study("00_quickstart", f"{_PACKAGE}.quickstart",
          "Quickstart: is Go's net/http faster than Python's aiohttp here?"),
    Study("01_rest_mongo_go_dotnet_rust", f"{_PACKAGE}.rest_mongo",
          "the same REST API in Go, .NET and Rust with MongoDB",
          "000_317109363e0847ee.txt", "ArturMarekNowak/DotnetGoRustBenchmark (April 2024)",
          {"Go (gin)": ("go-",), ".NET (ASP.NET Core MVC)": ("dotnet-",), "Rust (Rocket)": ("rust-",)},
          claims=_rest_mongo_claims()),
    Study("02_iris_vs_kestrel", f"{_PACKAGE}.iris_kestrel",
          "Iris vs Kestrel, a 1 KB random string per request",
          "001_9e7a3e1f62b7b9a1.txt", "malekpour's gist answering kataras' Iris vs Kestrel post (August 2017)",
          {"Iris (Go)": ("iris-",), "Kestrel (.NET)": ("kestrel-",)}, claims=_IRIS_KESTREL_CLAIMS),
    Study("03_fastcgi_nginx", f"{_PACKAGE}.fastcgi_nginx",
          '"FastCGI-Bench - NodeJS vs .NET Core" (FastCGI behind nginx)',
          "002_ba498fe75adf4f40.txt", "bolner/FastCGI-bench (March 2019)",
          {"AsyncFastCGI.NET behind nginx (.NET)": ("dotnet-nginx",),
           "node-fastcgi behind nginx (Node.js)": ("node-nginx",)}, claims=_fastcgi_claims()),
    Study("04_rust_vs_go_logging", f"{_PACKAGE}.rust_vs_go",
          '"Rust vs. Go: the benchmark" (actix-web vs net/http, every request logged)',
          "003_3713cf587d986c7b.txt", "Zane Pearton on dev.to; ZanePearton/Rust-serve and ZanePearton/Go-Serve",
          {"actix-web with Logger (Rust)": ("actix-",), "net/http with logging (Go)": ("go-",)},
          claims=_RUST_GO_CLAIMS),
    Study("05_grpc_vs_json", f"{_PACKAGE}.grpc_json",
          "gRPC vs JSON (seed 004, .NET Core 2.0, BenchmarkDotNet)",
          "004_45b1100cee62b2fb.txt", "peterdeme/Grpc.Json.PerformanceTest (August 2017)",
          {".NET Core gRPC and JSON (the seed ran .NET only)": ("dotnet-",)}, claims=_grpc_json_claims()),
    Study("10_ab", f"{_PACKAGE}.a_vs_b", "your own A against B", in_report=False),
    Study("90_harness_overhead", f"{_PACKAGE}.harness_overhead",
          "Harness overhead: does running the service in Docker change what we measure?"),
)


def study(name: str) -> Study:
    """The study called ``name`` (its id, e.g. ``04_rust_vs_go_logging``, or its number, ``04``).

    Raises
    ------
    ParameterError  for any other name, listing the studies.
    """
    for s in STUDIES:
        if name in (s.id, s.id.split("_", 1)[0]):
            return s
    raise ParameterError(f"unknown study {name!r}; valid: {', '.join(s.id for s in STUDIES)}")
