"""The public surface is curated: every name in benchlib.__all__ resolves, and nothing else."""

from __future__ import annotations

import benchlib


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert benchlib.__all__ == sorted(benchlib.__all__)
    for name in benchlib.__all__:
        assert getattr(benchlib, name) is not None, name


def test_unknown_attribute_raises_attribute_error() -> None:
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        benchlib.nope  # noqa: B018
