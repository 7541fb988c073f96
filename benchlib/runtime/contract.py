"""Contract verification: does a running service answer as its manifest says?

HTTP endpoints are probed with httpx (HTTP/1.1, or HTTP/2 with prior knowledge for ``h2c``
endpoints), gRPC endpoints with grpcio (a generic unary call whose request and response
are the serialized messages as bytes): a low-rate probe, not the load generator. A
mismatch raises :class:`~benchlib.core.errors.ContractError` listing every difference found.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import httpx

from benchlib.core.errors import ContractError
from benchlib.runtime.manifest import Contract, Endpoint

__all__ = ["ContractReport", "check_grpc_response", "check_response", "go_sniffed_type", "verify"]

#: Go's ``http.DetectContentType`` signatures that a body of letters, digits and spaces can
#: match, in net/http's sniff.go order (the others need bytes outside that alphabet). ``BM`` at
#: the start, or ``LP`` at bytes 34-35, each come once in 3,969 random bodies of 63 symbols
#: (seen on the wire: image/bmp and application/vnd.ms-fontobject in 12,000 responses of study
#: 02's verbatim Iris).
_GO_SNIFF_SIGNATURES: tuple[tuple[re.Pattern[bytes], str], ...] = (
    (re.compile(rb"BM"), "image/bmp"), (re.compile(rb"GIF8[79]a"), "image/gif"),
    (re.compile(rb"RIFF....WEBPVP", re.S), "image/webp"), (re.compile(rb"FORM....AIFF", re.S), "audio/aiff"),
    (re.compile(rb"ID3"), "audio/mpeg"), (re.compile(rb"RIFF....AVI ", re.S), "video/avi"),
    (re.compile(rb"RIFF....WAVE", re.S), "audio/wave"),
    (re.compile(rb".{34}LP", re.S), "application/vnd.ms-fontobject"),
    (re.compile(rb"OTTO"), "font/otf"), (re.compile(rb"ttcf"), "font/collection"),
    (re.compile(rb"wOFF"), "font/woff"), (re.compile(rb"wOF2"), "font/woff2"),
)
#: What Go's net/http sends for such a body matching none of them.
GO_TEXT_PLAIN = "text/plain; charset=utf-8"


def go_sniffed_type(body: bytes) -> str:
    """The Content-Type Go's net/http sniffs for a body of letters, digits and spaces (a
    handler that writes without setting one)."""
    return next((t for sig, t in _GO_SNIFF_SIGNATURES if sig.match(body)), GO_TEXT_PLAIN)


@dataclass(frozen=True)
class ContractReport:
    """What one contract check saw: status, headers and body of the probe response."""

    endpoint: str
    url: str
    status: int
    headers: dict[str, str]
    body: bytes
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        body = self.body[:200].decode("utf-8", "replace")
        return {"endpoint": self.endpoint, "url": self.url, "status": self.status,
                "content_type": self.headers.get("content-type"), "body_head": body,
                "body_bytes": len(self.body), "ok": self.ok, "problems": list(self.problems)}


def check_response(contract: Contract, status: int, headers: dict[str, str], body: bytes) -> list[str]:
    """The list of ways a response violates ``contract`` (empty when it satisfies it).

    ``headers`` keys must be lower-case.
    """
    problems: list[str] = []
    if status != contract.status:
        problems.append(f"status {status}, expected {contract.status}")
    text = body.decode("utf-8", "replace")
    if contract.body is not None and text != contract.body:
        problems.append(f"body {text[:120]!r}, expected {contract.body[:120]!r}")
    if contract.body_regex is not None and re.fullmatch(contract.body_regex, text, re.S) is None:
        problems.append(f"body {text[:120]!r} does not match /{contract.body_regex}/")
    if contract.json is not None:
        try:
            parsed = json.loads(text)
        except ValueError:
            problems.append(f"body {text[:120]!r} is not valid JSON, expected {json.dumps(contract.json)}")
        else:
            if parsed != contract.json:
                problems.append(f"JSON body {json.dumps(parsed)[:160]}, expected {json.dumps(contract.json)[:160]}")
    if contract.json_fields:
        problems += _json_field_problems(contract.json_fields, text)
    if contract.content_type is not None:
        got = headers.get("content-type")
        if contract.content_type == "":
            if got is not None:
                problems.append(f"Content-Type {got!r}, expected none")
        elif got is None or not got.lower().startswith(contract.content_type.lower()):
            sniffed = go_sniffed_type(body) if contract.content_type_sniffed == "go" else None
            if sniffed is None or got is None or got.lower() != sniffed:
                problems.append(f"Content-Type {got!r}, expected {contract.content_type!r}..."
                                + (f" (or {sniffed!r}, Go's sniffing of this body)" if sniffed else ""))
    for name, value in contract.headers:
        got = headers.get(name.lower())
        if got is None:
            problems.append(f"header {name!r} missing")
        elif value != "*" and got != value:
            problems.append(f"header {name!r} = {got!r}, expected {value!r}")
    return problems


def _json_field_problems(wanted: tuple[tuple[str, Any], ...], text: str) -> list[str]:
    """What is wrong with a JSON body under ``Contract.json_fields`` (dotted paths -> values)."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return [f"body {text[:120]!r} is not valid JSON, expected fields {', '.join(k for k, _ in wanted)}"]
    problems = []
    for path, value in wanted:
        got: Any = parsed
        for key in path.split("."):
            got = got.get(key, _MISSING) if isinstance(got, dict) else _MISSING
        if got is _MISSING:
            problems.append(f"JSON field {path!r} missing in {text[:120]!r}")
        elif got != value:
            problems.append(f"JSON field {path!r} = {json.dumps(got)[:80]}, expected {json.dumps(value)[:80]}")
    return problems


_MISSING = object()


def _variation_problems(varies: bool | None, first: bytes, second: bytes) -> list[str]:
    """What is wrong with two consecutive bodies under ``Contract.varies`` (empty when right)."""
    if varies is True and first == second:
        return [f"two consecutive responses have the same body {first[:60].decode('utf-8', 'replace')!r}..., "
                "expected a new body per request (varies = true)"]
    if varies is False and first != second:
        return [f"two consecutive responses differ ({first[:40].decode('utf-8', 'replace')!r}... then "
                f"{second[:40].decode('utf-8', 'replace')!r}...), expected the same body (varies = false)"]
    return []


def verify(base_url: str, endpoint: Endpoint, *, timeout_s: float = 10.0, raise_on_error: bool = True) -> ContractReport:
    """Send one request to ``endpoint`` at ``base_url`` and check its contract (two, on one
    keep-alive connection, when the contract says whether bodies vary: ``Contract.varies``).

    Parameters
    ----------
    base_url: e.g. ``http://127.0.0.1:8080``.
    endpoint: the manifest endpoint (method, path, body, headers, contract).
    timeout_s: seconds for the whole request.
    raise_on_error: raise :class:`ContractError` on a mismatch (else return the report).
    """
    if endpoint.protocol == "grpc":
        return _verify_grpc(base_url, endpoint, timeout_s=timeout_s, raise_on_error=raise_on_error)
    url = base_url.rstrip("/") + endpoint.path
    contract = endpoint.contract
    h2 = endpoint.protocol == "h2c"
    try:
        with httpx.Client(timeout=timeout_s, trust_env=False, http1=not h2, http2=h2) as client:
            resp = client.request(endpoint.method, url, content=endpoint.body or None,
                                  headers=dict(endpoint.headers))
            # a second request on the same keep-alive connection, when the contract says
            # whether bodies differ per request
            again = None if contract.varies is None else client.request(
                endpoint.method, url, content=endpoint.body or None, headers=dict(endpoint.headers))
    except httpx.HTTPError as exc:
        raise ContractError(f"{endpoint.name}: {endpoint.method} {url} failed: {type(exc).__name__}: {exc}") from None
    headers = {k.lower(): v for k, v in resp.headers.items()}
    problems = check_response(contract, resp.status_code, headers, resp.content)
    if again is not None:
        problems += [f"second response: {p}" for p in check_response(
            contract, again.status_code, {k.lower(): v for k, v in again.headers.items()}, again.content)]
        problems += _variation_problems(contract.varies, resp.content, again.content)
    report = ContractReport(endpoint=endpoint.name, url=url, status=resp.status_code, headers=headers,
                            body=resp.content, problems=tuple(problems))
    if problems and raise_on_error:
        raise ContractError(f"{endpoint.name}: {endpoint.method} {url}: " + "; ".join(problems))
    return report


def check_grpc_response(contract: Contract, code: int, message: bytes) -> list[str]:
    """The list of ways a gRPC call's outcome (its grpc-status ``code`` and response
    ``message``) violates ``contract`` (empty when it satisfies it)."""
    from benchlib.loadgen.h2frames import GRPC_STATUS_NAMES

    def name(c: int) -> str:
        return GRPC_STATUS_NAMES[c] if 0 <= c < len(GRPC_STATUS_NAMES) else "?"

    if code != contract.grpc_status:
        return [f"grpc-status {code} ({name(code)}), expected {contract.grpc_status} ({name(contract.grpc_status)})"]
    problems: list[str] = []
    if contract.message is not None and message != contract.message:
        problems.append(f"response message {message[:40]!r} ({len(message)} bytes), expected "
                        f"{contract.message[:40]!r} ({len(contract.message)} bytes)")
    if contract.message_json is not None and contract.proto is not None and contract.message_type is not None:
        from benchlib.core.errors import ParameterError
        from benchlib.runtime.protos import decode_to_dict

        try:
            got = decode_to_dict(contract.proto, contract.message_type, message)
        except ParameterError as exc:
            return problems + [str(exc)]
        want = contract.message_json
        for key in sorted(set(got) | set(want)):
            if key in want and got.get(key) != want[key]:
                problems.append(f"field {key}: {json.dumps(got.get(key))[:100]}, expected {json.dumps(want[key])[:100]}")
    return problems


def _verify_grpc(base_url: str, endpoint: Endpoint, *, timeout_s: float, raise_on_error: bool) -> ContractReport:
    """:func:`verify` for a gRPC endpoint: one call (two when ``varies`` is set) on one channel."""
    import grpc

    hostport = base_url.split("://", 1)[-1].rstrip("/")
    url = f"grpc://{hostport}{endpoint.path}"
    contract = endpoint.contract
    metadata = tuple((k.lower(), v) for k, v in endpoint.headers)

    def call_once(stub: object) -> tuple[int, bytes, dict[str, str]]:
        try:
            resp, call = stub.with_call(endpoint.body, timeout=timeout_s, metadata=metadata)  # type: ignore[attr-defined]
            return 0, bytes(resp), {k: str(v) for k, v in (call.trailing_metadata() or ())}
        except grpc.RpcError as exc:
            code = exc.code()  # type: ignore[attr-defined]
            return int(code.value[0]), b"", {"grpc-message": str(exc.details())}  # type: ignore[attr-defined]

    with grpc.insecure_channel(hostport, options=[("grpc.enable_http_proxy", 0)]) as channel:
        stub = channel.unary_unary(endpoint.path)  # no serializers: the messages as bytes
        code, message, trailers = call_once(stub)
        again = call_once(stub) if contract.varies is not None else None
    problems = check_grpc_response(contract, code, message)
    if code and "grpc-message" in trailers:
        problems = [f"{p} ({trailers['grpc-message'][:120]})" if p.startswith("grpc-status") else p for p in problems]
    if again is not None:
        problems += [f"second call: {p}" for p in check_grpc_response(contract, again[0], again[1])]
        problems += _variation_problems(contract.varies, message, again[1])
    report = ContractReport(endpoint=endpoint.name, url=url, status=code, headers=trailers, body=message,
                            problems=tuple(problems))
    if problems and raise_on_error:
        raise ContractError(f"{endpoint.name}: gRPC {url}: " + "; ".join(problems))
    return report
