"""Fixtures of the statistics tests.

``figures``: the validation tests record the rates they assert on; with the environment
variable ``BENCHLIB_VALIDATION_REPORT`` set to a path, all recorded figures are written
there as JSON at the end of the session (that is how the report's numbers are produced:
``BENCHLIB_VALIDATION_REPORT=val.json pytest -m slow tests/stats/test_validation.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

_FIGURES: dict[str, Any] = {}


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """A dict into which a test puts the figures it checked (keyed by the test id)."""
    rec: dict[str, Any] = {}
    yield rec
    if rec:
        _FIGURES[request.node.nodeid.split("::")[-1]] = rec


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from benchlib.core.settings import VALIDATION_REPORT

    path = VALIDATION_REPORT.get()
    if path is not None and _FIGURES:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(_FIGURES, fh, indent=1, sort_keys=True, default=float)
