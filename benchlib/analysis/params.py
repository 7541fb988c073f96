"""Notebook parameters: one parser for lists of names, one check for positive numbers (pure).

Every study parameter that names several things (``variants="faithful,fair"``,
``sinks="pipe, discard"``, ``sweep_arms=...``) goes through :func:`choices`: comma-separated
text or a list; blanks and repeats dropped; an unknown name or an empty list is one
:class:`~benchlib.errors.ParameterError` line naming the valid choices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from benchlib.errors import ParameterError

__all__ = ["choices", "positive"]


def choices(text: str | Sequence[str], valid: Sequence[str], what: str, *, canonical: bool = False) -> tuple[str, ...]:
    """``"pipe, discard,pipe"`` (or a list) -> ``("pipe", "discard")``.

    Parameters
    ----------
    text: comma-separated names, or a sequence of names.
    valid: the names allowed, in their canonical order.
    what: what the names are, for the error (``"log sink(s)"``).
    canonical: return them in the order of ``valid`` instead of the order given.

    Raises
    ------
    ParameterError
        For a name not in ``valid``, or no name at all (the message lists the valid names).
    """
    items = [s.strip() for s in text.split(",")] if isinstance(text, str) else [str(s).strip() for s in text]
    items = [s for s in items if s]
    bad = [s for s in items if s not in valid]
    if bad:
        raise ParameterError(f"unknown {what} {bad}; valid: {', '.join(valid)}")
    if not items:
        raise ParameterError(f"no {what} given; valid: {', '.join(valid)}")
    if canonical:
        return tuple(v for v in valid if v in items)
    return tuple(dict.fromkeys(items))


def positive(name: str, value: Any, meaning: str = "") -> float:
    """``value`` as a float when it is a finite number above 0.

    Raises
    ------
    ParameterError  otherwise, naming the parameter (and what it means).
    """
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if not ok:
        raise ParameterError(f"{name} must be a positive number{f' ({meaning})' if meaning else ''}, got {value!r}")
    return float(value)
