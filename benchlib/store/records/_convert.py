"""Reading stored values that may be missing or malformed (pure)."""

from __future__ import annotations

import math
from typing import Any


def as_float(v: Any) -> float:
    """``v`` as a float; NaN when it is ``None`` or not a number."""
    try:
        return math.nan if v is None else float(v)
    except (TypeError, ValueError):
        return math.nan


def as_float_or_none(v: Any) -> float | None:
    """``v`` as a float; ``None`` when it is ``None`` or not a number."""
    f = as_float(v)
    return None if f != f else f
