"""Open-model sweeps at fractions of the slowest arm's measured capacity."""

from __future__ import annotations

import pandas as pd
import pytest

from benchlib.core.errors import ParameterError
from benchlib.core.model import LoadSpec
from benchlib.core.sweep import capacity, sweep_conditions


def test_capacity_is_the_median_of_valid_trials_and_sweep_uses_the_slowest() -> None:
    s = pd.DataFrame({"arm": ["a", "a", "a", "b", "b"], "throughput_rps": [100, 120, 999, 50, 70],
                      "valid": [True, True, False, True, True], "condition": "closed"})
    caps = capacity(s)
    assert caps == {"a": 110.0, "b": 60.0}
    conds = sweep_conditions(caps, (0.25, 0.9), LoadSpec(connections=64, duration_s=5))
    assert [c.name for c in conds] == ["open-25", "open-90"]
    assert [c.load.rate_rps for c in conds] == [15.0, 54.0] and all(c.load.model == "open" for c in conds)
    assert conds[0].load.connections == 64
    assert sweep_conditions(caps, (0.5,), LoadSpec(), basis="a")[0].load.rate_rps == 55.0


def test_bad_inputs_are_named() -> None:
    s = pd.DataFrame({"arm": ["a"], "throughput_rps": [1.0], "valid": [False]})
    with pytest.raises(ParameterError, match="no valid trial"):
        capacity(s)
    with pytest.raises(ParameterError, match="valid: slowest, a"):
        sweep_conditions({"a": 1.0}, (0.5,), LoadSpec(), basis="z")
    with pytest.raises(ParameterError, match=r"\(0, 1\]"):
        sweep_conditions({"a": 1.0}, (1.5,), LoadSpec())
