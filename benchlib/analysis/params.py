"""Notebook parameters: one parser for lists of names, one check for positive numbers, and
the default and full-scale designs of a study (pure).

Every study parameter that names several things (``variants="faithful,fair"``,
``sinks="pipe, discard"``, ``sweep_arms=...``) goes through :func:`choices`: comma-separated
text or a list; blanks and repeats dropped; an unknown name or an empty list is one
:class:`~benchlib.core.errors.ParameterError` line naming the valid choices.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from benchlib.core.placement import INSTALL_HINT, parse_cluster, ray_installed
from benchlib.core.errors import ParameterError

__all__ = ["AUTO", "as_asked", "budget", "choices", "cluster", "design_values", "positive", "yes_no"]


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


#: what a notebook parameter holds when the chosen design (default or full scale) decides it
AUTO = "auto"


def design_values(full: bool, given: Mapping[str, Any], *, default: Mapping[str, Any],
                  full_scale: Mapping[str, Any]) -> dict[str, Any]:
    """The study's design: each parameter of ``given`` that is unset (``0``, ``""`` or
    ``"auto"``) takes its value from ``full_scale`` when ``full`` else from ``default``; a value
    the user set stays. So a notebook's default run is short (about 5 minutes) and its full scale
    is one parameter away (``-p full true``), and either can still be changed item by item."""
    if not isinstance(full, bool):
        raise ParameterError(f"full must be True or False; got {full!r}")
    design = full_scale if full else default
    out = {}
    for name, value in given.items():
        unset = value is None or (isinstance(value, str) and value.strip() in ("", AUTO)) or (
            not isinstance(value, bool) and isinstance(value, (int, float)) and value == 0)
        out[name] = design[name] if unset and name in design else value
    return out


def yes_no(name: str, value: str | bool) -> bool:
    """A yes/no parameter given as text (``yes``, ``no``, ``true``, ``false``) or a bool, as
    :func:`design_values` leaves it; anything else is one line naming the valid choices."""
    if isinstance(value, bool):
        return value
    low = str(value).strip().lower()
    if low in ("yes", "true", "1"):
        return True
    if low in ("no", "false", "0"):
        return False
    raise ParameterError(f"{name} {value!r} is not valid; valid: yes, no, auto (the design's)")


def budget(budget_min: float, target_mde: float) -> tuple[float | None, float | None]:
    """A notebook's ``budget_min`` (minutes, the pilot included) and ``target_mde`` (percent)
    as :func:`benchlib.analysis.planned.run_study` takes them: ``(None, None)`` when
    ``budget_min`` is 0 (no budget: the fixed design), else both positive numbers.

    Raises
    ------
    ParameterError  a negative or non-numeric budget, or a budget without a positive target.
    """
    if isinstance(budget_min, (int, float)) and not isinstance(budget_min, bool) and budget_min == 0:
        return None, None
    b = positive("budget_min", budget_min, "minutes for the whole study, its pilot included; 0: no budget")
    t = positive("target_mde", target_mde, "percent, the smallest change every row should detect; e.g. 5")
    return b, t


def as_asked(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A notebook's parameters as they are asked for again (``benchlib run -p name value``):
    a ``budget_min`` of ``None`` (what :func:`budget` makes of "no budget") is the notebook's
    ``0``, and a ``target_mde`` of ``None`` (no budget: no target) is left out, so the
    notebook's default stands; every other value is kept as given. A run stores its notebook's
    parameters this way (:func:`benchlib.analysis.planned.run_study`), and the report's
    commands that rebuild and measure a run again read them so (``None`` is no valid value of
    a number parameter)."""
    out = dict(parameters)
    if "budget_min" in out and out["budget_min"] is None:
        out["budget_min"] = 0.0
    if "target_mde" in out and out["target_mde"] is None:
        del out["target_mde"]
    return out
def cluster(value: str | None) -> str | None:
    """A notebook's ``cluster`` (where the load runs) as :class:`~benchlib.core.model.Experiment`
    takes it: ``None`` (or ``""``) for this machine, else the value, checked
    (:func:`benchlib.core.placement.parse_cluster`: ``"local:N"``, ``"auto"``, ``"ray://host:port"``).

    Raises
    ------
    ParameterError  any other value (the message names the valid forms), or a cluster asked
        for without Ray installed (one line naming ``pip install 'benchlib[cluster]'``).
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    spec = parse_cluster(value)
    if spec is not None and not ray_installed():
        raise ParameterError(INSTALL_HINT)
    return value.strip() if isinstance(value, str) else value
