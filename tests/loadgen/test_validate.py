"""Bad specs are refused before any traffic, with the reason."""

from __future__ import annotations

import socket

import pytest

from benchlib.core.errors import LoadSpecError
from benchlib.core.model import LoadSpec, Stage, Target
from benchlib.loadgen import run_load, validate
from benchlib.loadgen.preflight import FD_RESERVE, fd_limit


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_target_refused():
    with pytest.raises(LoadSpecError, match="unreachable"):
        run_load(LoadSpec(duration_s=1, warmup_s=0), Target("127.0.0.1", _free_port()))


def test_non_loopback_refused(hello_target, monkeypatch):
    monkeypatch.delenv("BENCHLIB_ALLOW_REMOTE_TARGET", raising=False)
    with pytest.raises(LoadSpecError, match="not a loopback"):
        validate(LoadSpec(), Target("192.0.2.1", 80))


def test_rates_refused():
    with pytest.raises(LoadSpecError):
        LoadSpec(model="open", rate_rps=0, duration_s=1)
    with pytest.raises(LoadSpecError):
        LoadSpec(model="open", rate_rps=-5, duration_s=1)
    with pytest.raises(LoadSpecError):
        Stage(rate_rps=0, duration_s=1)


def test_too_few_arrivals_and_absurd_rate(hello_target):
    with pytest.raises(LoadSpecError, match="arrivals"):
        validate(LoadSpec(model="open", rate_rps=0.5, duration_s=1), hello_target)
    with pytest.raises(LoadSpecError, match="per worker"):
        validate(LoadSpec(model="open", rate_rps=5e6, duration_s=1), hello_target)


def test_fd_limit(hello_target):
    too_many = fd_limit() - FD_RESERVE + 1
    with pytest.raises(LoadSpecError, match="file descriptors"):
        validate(LoadSpec(connections=too_many), hello_target)


def test_bad_client_cpus(hello_target):
    with pytest.raises(LoadSpecError, match="valid CPUs"):
        run_load(LoadSpec(duration_s=0.1, warmup_s=0), hello_target, client_cpus=[9999])


def test_valid_spec_passes(hello_target):
    validate(LoadSpec(connections=10), hello_target)
