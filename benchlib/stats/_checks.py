"""Small input checks shared by the statistics modules (pure)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

import numpy as np

from benchlib.core.errors import ParameterError

T = TypeVar("T")


def choose(name: str, value: T, choices: Iterable[T]) -> T:
    """Return ``value`` if it is one of ``choices``; else raise :class:`ParameterError`.

    The message names the parameter, the value given and every valid choice.
    """
    options = tuple(choices)
    if value not in options:
        valid = ", ".join(repr(c) for c in options)
        raise ParameterError(f"{name}={value!r} is not valid; choose one of {valid}")
    return value


def probability(name: str, value: float, *, open_low: bool = True) -> float:
    """Check that ``value`` lies in (0, 1) and return it as a float."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a number in (0, 1), got {value!r}") from None
    if not (0.0 < v < 1.0) or not np.isfinite(v):
        raise ParameterError(f"{name} must lie strictly between 0 and 1, got {value!r}")
    return v


def finite_1d(name: str, values: object, *, min_n: int = 1) -> np.ndarray:
    """A 1-D float array with no NaN or infinity and at least ``min_n`` values."""
    x = np.asarray(values, dtype=float).ravel()
    if x.size < min_n:
        raise ParameterError(f"{name} needs at least {min_n} values, got {x.size}")
    if not np.all(np.isfinite(x)):
        bad = int(np.count_nonzero(~np.isfinite(x)))
        raise ParameterError(f"{name} holds {bad} NaN or infinite value(s); remove or explain them first")
    return x
