"""Every study's ``side_by_side`` parameter: side by side where the design allows it, one arm per
trial otherwise with the reason, and ``yes`` / ``no`` as asked (pure: designs and manifests)."""

from __future__ import annotations

import pytest

from benchlib.analysis.interleaved import side_by_side_refusal
from benchlib.analysis.planned import side_by_side
from benchlib.analysis.studies.registry import STUDIES, study
from benchlib.core.errors import ParameterError
from benchlib.core.model import Interleave


def _experiment(name: str, **given: object):  # type: ignore[no-untyped-def]
    entry = study(name)
    return entry.design(entry.parameters.read(**given)).experiment


REPORT = [s for s in STUDIES if s.in_report]  # the A/B notebook needs its sides given


@pytest.mark.parametrize("entry", REPORT, ids=[s.id for s in REPORT])
def test_auto_runs_side_by_side_where_the_design_allows_it_and_says_why_not(entry) -> None:  # type: ignore[no-untyped-def]
    exp = _experiment(entry.id)
    chosen = side_by_side(exp, "auto")
    why = side_by_side_refusal(exp)
    # the default design: side by side except for gRPC (05) and request counts (03)
    expected_side = entry.id not in ("03_fastcgi_nginx", "05_grpc_vs_json")
    assert (chosen.interleave is not None) is expected_side, why
    assert bool(why) is not expected_side
    if not expected_side:
        assert chosen.interleave is None and ("grpc" in why or "request count" in why)
    assert side_by_side(exp, "no").interleave is None


def test_yes_insists_no_declines_and_a_bad_value_is_one_line() -> None:
    grpc = _experiment("05")
    with pytest.raises(ParameterError, match=r"^side_by_side yes: condition 'c1': arm '\S+-grpc-small' speaks grpc"):
        side_by_side(grpc, "yes")
    quick = _experiment("00")
    assert side_by_side(quick, "yes").interleave == Interleave()
    with pytest.raises(ParameterError, match=r"^side_by_side 'maybe' is not valid; valid: auto, yes, no$"):
        side_by_side(quick, "maybe")
    # the full scale of 02 measures the seed's request count: one arm per trial
    assert side_by_side(_experiment("02", full=True), "auto").interleave is None
    assert side_by_side(_experiment("02"), "auto").interleave is not None
    # a study parameter that does not fit is refused before anything runs
    with pytest.raises(ParameterError, match=r"^side_by_side 'maybe' is not valid; valid: auto, yes, no$"):
        study("00").parameters.read(side_by_side="maybe")
