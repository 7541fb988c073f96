"""Exceptions raised by benchlib.

One root, so callers can catch everything benchlib raises on purpose::

    BenchlibError
     ├── UserError                 bad input from the user; the CLI prints it as one line
     │    ├── ParameterError       unknown or invalid parameter (names the valid choices)
     │    ├── ManifestError        a service.toml that does not validate (file, field, expected)
     │    └── LoadSpecError        a LoadSpec that cannot run (reason given before any traffic)
     ├── ToolchainMissing          a service needs go/cargo/node/dotnet/... that is not installed
     ├── BuildError                a service's build command failed (tail of the build log attached)
     ├── ServiceStartError         a service did not start or never became healthy (log tail attached)
     ├── ContractError             a service answered, but not as its contract says
     ├── RuntimeUnavailable        a runtime (e.g. Docker) cannot be reached; says how to fix it
     ├── LoadGenError              the load generator failed for a reason of its own (not the server's)
     ├── HostLost                  a host of the run's cluster was lost (its node died); names it and what happened
     └── StorageError              a stored run or trial is unreadable or of an unknown schema

Errors carry evidence: log tails and build output are attached as exception notes
(:pep:`678`), so a traceback, a notebook cell and the CLI all show them.
"""

from __future__ import annotations

__all__ = [
    "BenchlibError",
    "BuildError",
    "ContractError",
    "HostLost",
    "LoadGenError",
    "LoadSpecError",
    "ManifestError",
    "ParameterError",
    "PythonPackageMissing",
    "RuntimeUnavailable",
    "ServiceStartError",
    "StorageError",
    "ToolchainMissing",
    "UserError",
]


class BenchlibError(Exception):
    """Root of every exception benchlib raises on purpose."""


class UserError(BenchlibError):
    """The user asked for something that cannot be done as asked."""


class ParameterError(UserError):
    """An unknown or invalid parameter; the message names the valid choices."""


class ManifestError(UserError):
    """A service manifest (``services/<name>/service.toml``) is invalid.

    The message names the file, the field and what was expected.
    """


class LoadSpecError(UserError):
    """A load specification that is refused before any request is sent."""


class ToolchainMissing(BenchlibError):
    """A service's toolchain (``go``, ``cargo``, ``node``, ``dotnet``...) is not installed.

    Attributes
    ----------
    toolchain:
        The missing command.
    hint:
        How to install it.
    """

    def __init__(self, toolchain: str, service: str, hint: str) -> None:
        self.toolchain = toolchain
        self.service = service
        self.hint = hint
        super().__init__(f"service {service!r} needs {toolchain!r}, which is not installed; {hint}")

    @property
    def missing(self) -> str:
        """What is missing, as the runner's "not run" reason starts: ``no go toolchain``."""
        return f"no {self.toolchain} toolchain"


class PythonPackageMissing(ToolchainMissing):
    """A service run by benchlib's own interpreter (``{python}``) needs a Python package that
    interpreter cannot import (the services' packages are the ``[services]`` extra).

    Attributes
    ----------
    package:
        The import name (its manifest's ``python_packages``).
    """

    def __init__(self, package: str, service: str, hint: str) -> None:
        self.package = package
        self.toolchain = "python"
        self.service = service
        self.hint = hint
        BenchlibError.__init__(self, f"service {service!r} needs the Python package {package!r}, which this "
                                     f"interpreter cannot import; {hint}")

    @property
    def missing(self) -> str:
        return f"no Python package {self.package!r}"


class BuildError(BenchlibError):
    """A service's build command failed; the build log's tail is attached as a note."""


class ServiceStartError(BenchlibError):
    """A service exited early or never became healthy; its log tail is attached as a note."""


class ContractError(BenchlibError):
    """A service's response does not satisfy its endpoint contract."""


class RuntimeUnavailable(BenchlibError):
    """A runtime cannot be used here (for example no Docker engine answers)."""


class LoadGenError(BenchlibError):
    """The load generator itself failed (not a server misbehaviour, which is recorded per request)."""


class HostLost(BenchlibError):
    """A host of the run's Ray cluster was lost (its node died, or the service node's actor did):
    raised before a trial's load started on it, or to stop a run that cannot go on (fewer load
    hosts left than ``min_hosts``, the service node lost). The message is one line naming the
    host and what happened; Ray's full text is in the run's log (``logs/run.log``)."""


class StorageError(BenchlibError):
    """A stored run or trial cannot be read: missing, corrupt or of an unknown schema version."""
