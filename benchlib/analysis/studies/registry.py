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
    """

    id: str
    module: str
    title: str
    seed: str = ""
    source: str = ""
    seed_stacks: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

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

#: Every study, in the order of its notebooks.
STUDIES: tuple[Study, ...] = (
    Study("00_quickstart", f"{_PACKAGE}.quickstart",
          "Quickstart: is Go's net/http faster than Python's aiohttp here?"),
    Study("01_rest_mongo_go_dotnet_rust", f"{_PACKAGE}.rest_mongo",
          "the same REST API in Go, .NET and Rust with MongoDB",
          "000_317109363e0847ee.txt", "ArturMarekNowak/DotnetGoRustBenchmark (April 2024)",
          {"Go (gin)": ("go-",), ".NET (ASP.NET Core MVC)": ("dotnet-",), "Rust (Rocket)": ("rust-",)}),
    Study("02_iris_vs_kestrel", f"{_PACKAGE}.iris_kestrel",
          "Iris vs Kestrel, a 1 KB random string per request",
          "001_9e7a3e1f62b7b9a1.txt", "malekpour's gist answering kataras' Iris vs Kestrel post (August 2017)",
          {"Iris (Go)": ("iris-",), "Kestrel (.NET)": ("kestrel-",)}),
    Study("03_fastcgi_nginx", f"{_PACKAGE}.fastcgi_nginx",
          '"FastCGI-Bench - NodeJS vs .NET Core" (FastCGI behind nginx)',
          "002_ba498fe75adf4f40.txt", "bolner/FastCGI-bench (March 2019)",
          {"AsyncFastCGI.NET behind nginx (.NET)": ("dotnet-nginx",),
           "node-fastcgi behind nginx (Node.js)": ("node-nginx",)}),
    Study("04_rust_vs_go_logging", f"{_PACKAGE}.rust_vs_go",
          '"Rust vs. Go: the benchmark" (actix-web vs net/http, every request logged)',
          "003_3713cf587d986c7b.txt", "Zane Pearton on dev.to; ZanePearton/Rust-serve and ZanePearton/Go-Serve",
          {"actix-web with Logger (Rust)": ("actix-",), "net/http with logging (Go)": ("go-",)}),
    Study("05_grpc_vs_json", f"{_PACKAGE}.grpc_json",
          "gRPC vs JSON (seed 004, .NET Core 2.0, BenchmarkDotNet)",
          "004_45b1100cee62b2fb.txt", "peterdeme/Grpc.Json.PerformanceTest (August 2017)",
          {".NET Core gRPC and JSON (the seed ran .NET only)": ("dotnet-",)}),
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
