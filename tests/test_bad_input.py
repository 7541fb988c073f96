"""The bad-input table: every bad value is refused before any traffic, with one line naming
the field, the value and what is valid (docs/reliability.md, "Bad input").

The first part builds each bad object directly (``LoadSpec``, ``Stage``, ``Target``,
``Limits``, ``Arm``, ``Condition``, ``Experiment``, ``RunStore``); the second passes bad
notebook parameters to ``benchlib run`` (``-p NAME VALUE``), which must exit with status 2 and
one line on stderr, whether the value is refused by the parameter check or inside the
notebook. Everything is bounded and local: no request is ever sent.

``python tests/test_bad_input.py`` prints the table as Markdown (for the docs page), each
row with the message benchlib gives today.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from benchlib.core.errors import LoadSpecError, ParameterError, UserError
from benchlib.core.model import Arm, Condition, Experiment, Limits, LoadSpec, Stage, Target

REPO = Path(__file__).resolve().parent.parent
PROBE = REPO / "tests" / "notebooks" / "stop_probe.ipynb"
nan, inf = math.nan, math.inf


@dataclass(frozen=True)
class Case:
    """One bad input: how it is written, how to make it, what must be raised and mentioned."""

    written: str
    make: Callable[[], Any]
    error: type[Exception]
    mentions: tuple[str, ...]


def _store(run_id: str) -> Callable[[], Any]:
    def make() -> Any:
        import tempfile

        from benchlib.store.runstore import RunStore

        with tempfile.TemporaryDirectory() as root:
            return RunStore.open("study", run_id, root=root)

    return make


def _rvg() -> Any:
    from benchlib.analysis.studies import rust_vs_go

    return rust_vs_go


def _params() -> Any:
    from benchlib.analysis import params

    return params


def _exp(**kw: Any) -> Callable[[], Any]:
    return lambda: Experiment("study", (Arm("a", "svc"),), (Condition("main", LoadSpec()),), **kw)


CASES = [
    # a trial that never ends, or never times out
    Case("LoadSpec(timeout_s=inf)", lambda: LoadSpec(timeout_s=inf), LoadSpecError, ("timeout_s", "inf", "<= 86400")),
    Case("LoadSpec(timeout_s=nan)", lambda: LoadSpec(timeout_s=nan), LoadSpecError, ("timeout_s", "nan", "finite")),
    Case("LoadSpec(connect_timeout_s=nan)", lambda: LoadSpec(connect_timeout_s=nan), LoadSpecError,
         ("connect_timeout_s", "nan")),
    Case("LoadSpec(duration_s=inf)", lambda: LoadSpec(duration_s=inf), LoadSpecError, ("duration_s", "inf")),
    Case("LoadSpec(duration_s='abc')", lambda: LoadSpec(duration_s="abc"), LoadSpecError,
         ("duration_s", "'abc'", "str", "finite number of seconds")),
    Case("LoadSpec(warmup_s=nan)", lambda: LoadSpec(warmup_s=nan), LoadSpecError, ("warmup_s", "nan", ">= 0")),
    Case("LoadSpec(warmup_requests=2.5)", lambda: LoadSpec(warmup_requests=2.5), LoadSpecError,
         ("warmup_requests", "2.5", "integer >= 0")),
    Case("LoadSpec(connections=True)", lambda: LoadSpec(connections=True), LoadSpecError,
         ("connections", "True", "bool", "integer >= 1")),
    Case("LoadSpec(connections=2.5)", lambda: LoadSpec(connections=2.5), LoadSpecError, ("connections", "2.5")),
    Case("LoadSpec(connections='16')", lambda: LoadSpec(connections="16"), LoadSpecError,
         ("connections", "'16'", "str")),
    Case("LoadSpec(requests=True)", lambda: LoadSpec(requests=True), LoadSpecError, ("requests", "True")),
    Case("LoadSpec(workers=1.0)", lambda: LoadSpec(workers=1.0), LoadSpecError, ("workers", "1.0", "integer")),
    Case("LoadSpec(model='open', rate_rps=nan)", lambda: LoadSpec(model="open", rate_rps=nan), LoadSpecError,
         ("rate_rps", "nan", "finite")),
    Case("LoadSpec(model='open', rate_rps=inf)", lambda: LoadSpec(model="open", rate_rps=inf), LoadSpecError,
         ("rate_rps", "inf")),
    Case("Stage(rate_rps=100, duration_s=inf)", lambda: Stage(100, inf), LoadSpecError, ("duration_s", "inf")),
    Case("Stage(rate_rps='100', duration_s=1)", lambda: Stage("100", 1), LoadSpecError, ("rate_rps", "'100'")),
    Case("LoadSpec(keep_alive='no')", lambda: LoadSpec(keep_alive="no"), LoadSpecError,
         ("keep_alive", "'no'", "True or False")),
    Case("LoadSpec(model='bursty')", lambda: LoadSpec(model="bursty"), LoadSpecError, ("model", "bursty", "closed, open")),
    # the request: nothing that could smuggle a second request, all latin-1
    Case("LoadSpec(method='GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\nGET')",
         lambda: LoadSpec(method="GET / HTTP/1.1\r\nHost: x\r\n\r\nGET"), LoadSpecError,
         ("method", "\\r\\n", "token", "GET, POST")),
    Case("LoadSpec(method='GE T')", lambda: LoadSpec(method="GE T"), LoadSpecError, ("method", "'GE T'")),
    Case("LoadSpec(path='/a\\r\\nX-Injected: 1')", lambda: LoadSpec(path="/a\r\nX-Injected: 1"), LoadSpecError,
         ("path", "\\r\\n", "printable ASCII", "percent-encode")),
    Case("LoadSpec(path='/a b')", lambda: LoadSpec(path="/a b"), LoadSpecError, ("path", "'/a b'", "without spaces")),
    Case("LoadSpec(path='/€')", lambda: LoadSpec(path="/€"), LoadSpecError, ("path", "'/€'", "percent-encode")),
    Case("LoadSpec(path='x')", lambda: LoadSpec(path="x"), LoadSpecError, ("path", "start with '/'")),
    Case("LoadSpec(headers=(('X-A', '1\\r\\nX-B: 2'),))", lambda: LoadSpec(headers=(("X-A", "1\r\nX-B: 2"),)),
         LoadSpecError, ("headers", "X-A", "\\r\\nX-B", "control character")),
    Case("LoadSpec(headers=(('X-A', 'a\\x00b'),))", lambda: LoadSpec(headers=(("X-A", "a\0b"),)), LoadSpecError,
         ("headers", "X-A", "\\x00", "control character")),
    Case("LoadSpec(headers=(('X A', '1'),))", lambda: LoadSpec(headers=(("X A", "1"),)), LoadSpecError,
         ("headers", "'X A'", "token")),
    Case("LoadSpec(headers=(('X-A', '€'),))", lambda: LoadSpec(headers=(("X-A", "€"),)), LoadSpecError,
         ("headers", "'€'", "outside latin-1")),
    Case("LoadSpec(headers=(('X-A', 1),))", lambda: LoadSpec(headers=(("X-A", 1),)), LoadSpecError,
         ("headers", "X-A", "string", "int")),
    Case("LoadSpec(body='text')", lambda: LoadSpec(body="text"), LoadSpecError, ("body", "bytes", "'text'")),
    # HTTP/2 and gRPC
    Case("LoadSpec(protocol='http2')", lambda: LoadSpec(protocol="http2"), LoadSpecError,
         ("protocol", "'http2'", "http1, h2c, grpc")),
    Case("LoadSpec(streams=50)", lambda: LoadSpec(streams=50), LoadSpecError, ("streams=50", "'h2c' or 'grpc'")),
    Case("LoadSpec(protocol='h2c', streams=0)", lambda: LoadSpec(protocol="h2c", streams=0), LoadSpecError,
         ("streams", "0", "integer >= 1")),
    Case("LoadSpec(protocol='h2c', streams=20000)", lambda: LoadSpec(protocol="h2c", streams=20_000), LoadSpecError,
         ("streams", "20000", "at most 10,000")),
    Case("LoadSpec(protocol='h2c', keep_alive=False)", lambda: LoadSpec(protocol="h2c", keep_alive=False),
         LoadSpecError, ("keep_alive=False", "HTTP/1 only", "keep_alive=True")),
    Case("LoadSpec(protocol='h2c', headers=(('Connection', 'close'),))",
         lambda: LoadSpec(protocol="h2c", headers=(("Connection", "close"),)), LoadSpecError,
         ("headers", "'Connection'", "HTTP/2")),
    Case("LoadSpec(protocol='grpc', method='GET')", lambda: LoadSpec(protocol="grpc", method="GET", path="/a.B/C"),
         LoadSpecError, ("method", "'GET'", "method='POST'")),
    Case("LoadSpec(protocol='grpc', method='POST', path='/hello')",
         lambda: LoadSpec(protocol="grpc", method="POST", path="/hello"), LoadSpecError,
         ("path", "'/hello'", "'/package.Service/Method'")),
    Case("LoadSpec(protocol='grpc', method='POST', path='/a.B/C', headers=(('grpc-timeout', '1S'),))",
         lambda: LoadSpec(protocol="grpc", method="POST", path="/a.B/C", headers=(("grpc-timeout", "1S"),)),
         LoadSpecError, ("headers", "'grpc-timeout'", "valid metadata")),
    Case("LoadSpec(protocol='grpc', method='POST', path='/a.B/C', body=5 MiB)",
         lambda: LoadSpec(protocol="grpc", method="POST", path="/a.B/C", body=b"x" * 5 * 2**20), LoadSpecError,
         ("body", "5,242,880 bytes", "at most 4,194,304")),
    # where the load goes
    Case("Target('127.0.0.1', 8080.0)", lambda: Target("127.0.0.1", 8080.0), LoadSpecError,
         ("port", "8080.0", "float", "1 to 65535")),
    Case("Target('127.0.0.1', '8080')", lambda: Target("127.0.0.1", "8080"), LoadSpecError, ("port", "'8080'", "str")),
    Case("Target('127.0.0.1', True)", lambda: Target("127.0.0.1", True), LoadSpecError, ("port", "True", "bool")),
    Case("Target('127.0.0.1', 70000)", lambda: Target("127.0.0.1", 70000), LoadSpecError, ("port", "70000")),
    Case("Target('', 8080)", lambda: Target("", 8080), LoadSpecError, ("host", "''", "host name or IP")),
    Case("Target('127.0.0.1\\r\\n', 8080)", lambda: Target("127.0.0.1\r\n", 8080), LoadSpecError,
         ("host", "\\r\\n")),
    # limits, arms, experiments, stored runs
    Case("Limits(cpus=nan)", lambda: Limits(cpus=nan), ParameterError, ("cpus", "nan", "finite")),
    Case("Limits(memory_mb=512.5)", lambda: Limits(memory_mb=512.5), ParameterError, ("memory_mb", "512.5", "integer")),
    Case("Experiment(trials=True)", _exp(trials=True), ParameterError, ("trials", "True", "integer >= 1")),
    Case("Experiment(trials=2.5)", _exp(trials=2.5), ParameterError, ("trials", "2.5")),
    Case("Experiment(between_trials_s=nan)", _exp(between_trials_s=nan), ParameterError, ("between_trials_s", "nan")),
    Case("Experiment(seed='1')", _exp(seed="1"), ParameterError, ("seed", "'1'", "integer")),
    Case("Experiment(cross_check_blocks=0)", _exp(cross_check_blocks=0), ParameterError,
         ("cross_check_blocks", "0", "'all'", "number of blocks >= 1", "fraction")),
    Case("Experiment(cross_check_blocks=1.5)", _exp(cross_check_blocks=1.5), ParameterError,
         ("cross_check_blocks", "1.5", "(0, 1]")),
    Case("Experiment(cross_check_blocks='some')", _exp(cross_check_blocks="some"), ParameterError,
         ("cross_check_blocks", "'some'", "'all'")),
    Case("sweep_rates='0.5,1.5'", lambda: _rvg().parse_fractions("0.5,1.5"), ParameterError,
         ("sweep rate", "'1.5'", "fractions of capacity in (0, 1)")),
    Case("extras='maybe'", lambda: _params().yes_no("extras", "maybe"), ParameterError,
         ("extras", "'maybe'", "yes, no, auto")),
    Case("full='yes' (design_values)", lambda: _params().design_values("yes", {}, default={}, full_scale={}),
         ParameterError, ("full", "'yes'", "True or False")),
    Case("Experiment(cross_check_blocks=True)", _exp(cross_check_blocks=True), ParameterError,
         ("cross_check_blocks", "True", "valid:")),
    Case("Experiment(study='../x')", lambda: Experiment("../x", (Arm("a", "s"),), (Condition("c", LoadSpec()),)),
         ParameterError, ("study name", "'../x'", "plain folder name")),
    Case("Arm('a', '../ferretdb')", lambda: Arm("a", "../ferretdb"), ParameterError,
         ("service", "'../ferretdb'", "plain folder name")),
    Case("Arm('..', 'svc')", lambda: Arm("..", "svc"), ParameterError, ("arm name", "'..'", "not '.' or '..'")),
    Case("Condition('.', LoadSpec())", lambda: Condition(".", LoadSpec()), ParameterError, ("condition name", "'.'")),
    Case("RunStore.open('study', '..')", _store(".."), ParameterError, ("run id", "'..'", "plain folder name")),
    Case("RunStore.open('study', 'a/b')", _store("a/b"), ParameterError, ("run id", "'a/b'", "no '/'")),
]


def refusal(case: Case) -> BaseException:
    """What ``case`` raises (an ``AssertionError`` if nothing is raised)."""
    try:
        case.make()
    except Exception as exc:  # noqa: BLE001 - the table reports what is raised
        return exc
    raise AssertionError(f"{case.written} was accepted")


@pytest.mark.parametrize("case", CASES, ids=[c.written for c in CASES])
def test_every_bad_value_is_one_line_naming_field_value_and_what_is_valid(case: Case) -> None:
    exc = refusal(case)
    assert type(exc) is case.error, f"{case.written}: {type(exc).__name__}: {exc}"
    text = str(exc)
    assert "\n" not in text and "\r" not in text, text
    for m in case.mentions:
        assert m in text, f"{case.written}: {m!r} not in {text!r}"
    assert any(w in text for w in ("must", "valid", "expected", "not an", "contains")), text


def test_valid_values_of_other_numeric_types_are_stored_as_plain_numbers() -> None:
    import numpy as np

    spec = LoadSpec(connections=np.int64(8), duration_s=np.float32(2.5), headers=[["X-A", "1"]], body=bytearray(b"x"))
    assert type(spec.connections) is int and type(spec.duration_s) is float
    assert spec.headers == (("X-A", "1"),) and spec.body == b"x"
    assert Target("::1", np.int32(8080)).port == 8080 and hash(spec)


# ----------------------------------------------------------------------------- through the CLI

#: refused by the parameter check, before the notebook starts (no kernel: these run in the
#: parallel part of the suite)
CLI_EARLY = [
    (("duration_s", "abc"), "parameter 'duration_s' is declared float; cannot use 'abc'"),
    (("duration_s", "inf"), "parameter 'duration_s' is declared float; cannot use 'inf' (expected a finite number)"),
    (("duration_s", "nan"), "cannot use 'nan' (expected a finite number)"),
    (("connections", "2.5"), "parameter 'connections' is declared int; cannot use '2.5'"),
    (("connections", "true"), "parameter 'connections' is declared int; cannot use 'true'"),
    (("run_id", ".."), "stop_probe: run id '..' must match"),
]
#: refused inside the notebook (a kernel starts), before any traffic
CLI_IN_NOTEBOOK = [
    (("connections", "0"), "LoadSpecError: LoadSpec.connections must be an integer >= 1; got 0 (int)"),
    (("service", "../ferretdb"), "ParameterError: arm 'a': service (a folder under services/) '../ferretdb' must match"),
]
CLI_CASES = CLI_EARLY + CLI_IN_NOTEBOOK


def cli_refusal(param: tuple[str, str], tmp: Path) -> subprocess.CompletedProcess[str]:
    """``benchlib run`` of the probe notebook with one bad parameter (runs go under ``tmp``)."""
    return subprocess.run(
        [sys.executable, "-m", "benchlib.cli", "run", str(PROBE), "-p", *param, "-p", "out_dir", str(tmp / "runs"),
         "--reports-dir", str(tmp / "reports"), "--no-html", "-q"],
        capture_output=True, text=True, timeout=300, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


def _assert_one_line_status_2(out: subprocess.CompletedProcess[str], expected: str, tmp_path: Path) -> None:
    assert out.returncode == 2, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benchlib: error: ") and expected in lines[0], out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("*.parquet"))


@pytest.mark.parametrize("param,expected", CLI_EARLY, ids=[f"{p}={v}" for (p, v), _ in CLI_EARLY])
def test_a_bad_parameter_is_refused_in_one_line_before_a_kernel_starts(param: tuple[str, str], expected: str,
                                                                       tmp_path: Path) -> None:
    out = cli_refusal(param, tmp_path)
    _assert_one_line_status_2(out, expected, tmp_path)
    assert not (tmp_path / "reports").exists()  # refused before the notebook's execution was set up


@pytest.mark.notebook
@pytest.mark.parametrize("param,expected", CLI_IN_NOTEBOOK, ids=[f"{p}={v}" for (p, v), _ in CLI_IN_NOTEBOOK])
def test_a_bad_notebook_parameter_is_one_line_and_status_2(param: tuple[str, str], expected: str,
                                                            tmp_path: Path) -> None:
    _assert_one_line_status_2(cli_refusal(param, tmp_path), expected, tmp_path)


def markdown_table() -> str:
    """The table for docs/reliability.md: each bad input and the line benchlib answers with."""
    rows = ["| bad input | refused with (one line) |", "|---|---|"]
    for c in CASES:
        exc = refusal(c)
        rows.append(f"| `{c.written}` | {type(exc).__name__}: {_cell(str(exc))} |")
    import tempfile

    for param, _ in CLI_CASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = cli_refusal(param, Path(tmp))
        line = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "(nothing)"
        rows.append(f"| `benchlib run ... -p {' '.join(param)}` | exit status {out.returncode}: {_cell(line)} |")
    return "\n".join(rows)


def _cell(text: str) -> str:
    return text.replace("|", "&#124;").replace("`", "\\`")


if __name__ == "__main__":
    assert all(issubclass(c.error, UserError) for c in CASES)
    print(markdown_table())
