"""Study 05, "gRPC vs JSON" (seed 004, peterdeme/Grpc.Json.PerformanceTest): what is its own
in ``notebooks/05_grpc_vs_json.ipynb``: the payloads, the arms, the loads, the questions,
the seed's numbers beside ours, and the conclusion. Everything generic comes from
:mod:`benchlib.analysis`.

Arms are named ``<language>-<protocol>-<payload>``: a language of :data:`LANGUAGES` (its
service folder), a protocol of :data:`PROTOCOLS` (``grpc``; ``json``: JSON over HTTP/1.1
keep-alive; ``h2c``: JSON over HTTP/2 with prior knowledge) and a payload of
:data:`PAYLOADS` (the seed's SmallRequest and HugeRequest). Conditions are the number of
concurrent callers (:data:`CONCURRENCY`): ``c1`` is the seed's one sequential caller.
"""

from __future__ import annotations

from collections.abc import Sequence

from benchlib.analysis import params
from benchlib.errors import ParameterError
from benchlib.manifest import find_services_dir
from benchlib.model import Arm

__all__ = ["LANGUAGES", "PAYLOADS", "PROTOCOLS", "STUDY", "arm_name", "endpoint_of", "split_arm", "study_arms"]

STUDY = "05_grpc_vs_json"
#: language -> its service folder
LANGUAGES: dict[str, str] = {"go": "go-grpc-json", "rust": "rust-tonic-axum", "python": "python-grpcio-uvicorn",
                             "dotnet": "dotnet-grpc-json"}
PROTOCOLS: tuple[str, ...] = ("grpc", "json", "h2c")
PAYLOADS: tuple[str, ...] = ("small", "huge")
#: (language, protocol) -> the manifest variant serving it; absent: the framework does not offer it
VARIANTS: dict[tuple[str, str], str] = {
    **{(lang, "grpc"): "grpc" for lang in LANGUAGES}, **{(lang, "json"): "json" for lang in LANGUAGES},
    ("go", "h2c"): "json", ("rust", "h2c"): "json", ("dotnet", "h2c"): "json-h2c"}
#: Why a (language, protocol) pair has no arm.
NOT_OFFERED: dict[tuple[str, str], str] = {
    ("python", "h2c"): "uvicorn speaks HTTP/1.1 only (no HTTP/2)"}


def arm_name(language: str, protocol: str, payload: str) -> str:
    """``("go", "grpc", "small")`` -> ``"go-grpc-small"``."""
    return f"{language}-{protocol}-{payload}"


def split_arm(name: str) -> tuple[str, str, str]:
    """``"go-grpc-small"`` -> ``("go", "grpc", "small")``; anything else is one error line."""
    parts = tuple(name.split("-"))
    if len(parts) != 3 or parts[0] not in LANGUAGES or parts[1] not in PROTOCOLS or parts[2] not in PAYLOADS:
        raise ParameterError(f"{name!r} is not a study 05 arm name (<language>-<protocol>-<payload>, language in "
                             f"{list(LANGUAGES)}, protocol in {list(PROTOCOLS)}, payload in {list(PAYLOADS)})")
    return parts  # type: ignore[return-value]


def endpoint_of(protocol: str, payload: str) -> str:
    """The manifest endpoint of a protocol and payload (``small-grpc``, ``huge-json``, ``small-h2c``)."""
    return f"{payload}-{protocol}"


def study_arms(languages: str | Sequence[str] = "go,rust,python,dotnet", protocols: str | Sequence[str] = "grpc,json",
               payloads: str | Sequence[str] = "small,huge") -> tuple[Arm, ...]:
    """Every offered (language, protocol, payload) of the lists (comma-separated), ordered by
    language, protocol, payload; a pair a framework does not offer (:data:`NOT_OFFERED`) is left out."""
    langs = params.choices(languages, tuple(LANGUAGES), "language(s)", canonical=True)
    protos = params.choices(protocols, PROTOCOLS, "protocol(s)", canonical=True)
    loads = params.choices(payloads, PAYLOADS, "payload(s)", canonical=True)
    return tuple(Arm(arm_name(lang, proto, pl), LANGUAGES[lang], VARIANTS[(lang, proto)],
                     endpoint=endpoint_of(proto, pl))
                 for lang in langs for proto in protos if (lang, proto) in VARIANTS for pl in loads)


def payload_file(payload: str, kind: str) -> bytes:
    """The seed's message as the services send it: ``kind`` is ``request.json``,
    ``request.bin`` (protobuf), ``response.json`` or ``response.bin``."""
    return (find_services_dir() / LANGUAGES["go"] / "payloads" / f"{payload}-{kind}").read_bytes()
