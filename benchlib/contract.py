"""Contract verification: does a running service answer as its manifest says?

Uses httpx (a low-rate probe, not the load generator). A mismatch raises
:class:`~benchlib.errors.ContractError` listing every difference found.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import httpx

from benchlib.errors import ContractError
from benchlib.manifest import Contract, Endpoint

__all__ = ["ContractReport", "check_response", "verify"]


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
    if contract.content_type is not None:
        got = headers.get("content-type")
        if contract.content_type == "":
            if got is not None:
                problems.append(f"Content-Type {got!r}, expected none")
        elif got is None or not got.lower().startswith(contract.content_type.lower()):
            problems.append(f"Content-Type {got!r}, expected {contract.content_type!r}...")
    for name, value in contract.headers:
        got = headers.get(name.lower())
        if got is None:
            problems.append(f"header {name!r} missing")
        elif value != "*" and got != value:
            problems.append(f"header {name!r} = {got!r}, expected {value!r}")
    return problems


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
    url = base_url.rstrip("/") + endpoint.path
    contract = endpoint.contract
    try:
        with httpx.Client(timeout=timeout_s, trust_env=False) as client:
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
