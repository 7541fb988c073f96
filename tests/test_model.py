"""LoadSpec, Arm, Condition and Experiment validation: clear errors naming valid choices."""

from __future__ import annotations

import pytest

from benchlib.core.errors import LoadSpecError, ParameterError
from benchlib.core.model import Arm, Condition, Experiment, Limits, LoadSpec, Stage


def test_defaults_are_a_valid_closed_spec_and_describe_reads_well() -> None:
    spec = LoadSpec()
    assert spec.model == "closed" and spec.measured_duration_s == 10.0 and spec.offered_rps is None
    assert spec.describe().startswith("closed, 16 connections, 10 s")


@pytest.mark.parametrize("kwargs,match", [
    ({"model": "bursty"}, "valid: closed, open"),
    ({"connections": 0}, "connections"),
    ({"model": "open", "rate_rps": 0}, "rate_rps > 0"),
    ({"model": "open", "rate_rps": -5}, "rate_rps > 0"),
    ({"model": "open", "rate_rps": 10, "requests": 5}, "closed model only"),
    ({"rate_rps": 100}, "open model only"),
    ({"duration_s": None}, "duration_s or requests"),
    ({"http_version": "2"}, "valid: 1.1, 1.0"),
    ({"path": "x"}, "start with '/'"),
    ({"workers": 3, "connections": 2}, "cannot exceed"),
])
def test_bad_loadspecs_are_refused_with_the_reason(kwargs: dict, match: str) -> None:
    with pytest.raises(LoadSpecError, match=match):
        LoadSpec(**kwargs)


def test_open_model_stages_give_the_mean_offered_rate() -> None:
    spec = LoadSpec(model="open", stages=(Stage(100, 10), Stage(300, 10)), duration_s=None)
    assert spec.offered_rps == 200 and spec.measured_duration_s == 20


def test_with_refuses_unknown_fields_listing_valid_ones() -> None:
    with pytest.raises(ParameterError, match="valid: .*connections"):
        LoadSpec().with_(conections=3)


def test_arm_and_condition_names_must_be_file_safe() -> None:
    with pytest.raises(ParameterError, match="must match"):
        Arm("a/b", "svc")
    with pytest.raises(ParameterError, match="valid: pipe, file, discard"):
        Arm("a", "svc", log_sink="tty")
    with pytest.raises(ParameterError, match="must match"):
        Condition("x y", LoadSpec())


def test_experiment_validates_runtime_arms_and_baseline() -> None:
    arms = (Arm("a", "s1"), Arm("b", "s2"))
    cond = (Condition("main", LoadSpec()),)
    with pytest.raises(ParameterError, match="valid: local, docker"):
        Experiment("s", arms, cond, runtime="podman")
    with pytest.raises(ParameterError, match="unique"):
        Experiment("s", (Arm("a", "s1"), Arm("a", "s2")), cond)
    with pytest.raises(ParameterError, match="valid: a, b"):
        Experiment("s", arms, cond, baseline="c")
    assert Experiment("s", arms, cond).baseline_arm == "a"
    with pytest.raises(ParameterError, match="Limits.cpus"):
        Limits(cpus=0)


def test_service_starts_is_trial_unless_asked_and_names_its_choices() -> None:
    arms, cond = (Arm("a", "svc"),), (Condition("c", LoadSpec()),)
    assert Experiment("s", arms, cond).service_starts == "trial"
    assert Experiment("s", arms, cond, service_starts="cell").service_starts == "cell"
    with pytest.raises(ParameterError, match="service_starts 'run'; valid: trial, cell"):
        Experiment("s", arms, cond, service_starts="run")
