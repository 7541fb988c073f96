"""Notebook parameters: each study's typed record of them, one parser for lists of names, one
check for positive numbers, and the default and full-scale designs of a study (pure).

A study's parameters are one frozen record, a subclass of :class:`StudyParameters` (the
parameters every study takes) in its module (``benchlib/analysis/studies/<name>.py``), whose
fields are the notebook's ``parameters`` cell: the same names, types and defaults
(``tests/analysis/test_registry.py``). :meth:`StudyParameters.read` takes them once from the
notebook's namespace (after papermill's injected cell), checks each value against its field's
type (one :class:`~benchlib.core.errors.ParameterError` line naming the parameter and the
valid values) and fills in what the design decides (:meth:`StudyParameters.resolved`).

Every study parameter that names several things (``variants="faithful,fair"``,
``sinks="pipe, discard"``, ``sweep_arms=...``) goes through :func:`choices`: comma-separated
text or a list; blanks and repeats dropped; an unknown name or an empty list is one
:class:`~benchlib.core.errors.ParameterError` line naming the valid choices.
"""

from __future__ import annotations

import math
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, Literal, Self, Union, get_args, get_origin, get_type_hints

from benchlib.core.errors import ParameterError
from benchlib.core.placement import INSTALL_HINT, parse_cluster, ray_installed

__all__ = ["AUTO", "NOT_STORED", "Runtime", "Sequential", "SideBySide", "StudyParameters", "as_asked", "budget", "check_value",
           "choices", "cluster", "design_values", "positive", "yes_no"]

#: The runtimes a study's services run on (``benchlib.runtime.RUNTIMES``; ``local``: processes).
Runtime = Literal["local", "docker"]
#: A study's ``sequential`` parameter: stop a question at a planned look once settled
#: (:func:`benchlib.analysis.stopping.stopping_rule`).
Sequential = Literal["auto", "yes", "no"]
#: A study's ``side_by_side`` parameter: measure a block's arms inside one trial, alternating in
#: short slices (:class:`benchlib.core.model.Interleave`): ``auto`` where the design's loads
#: allow it (:meth:`benchlib.core.model.Experiment.side_by_side_refusal`), else one arm per trial.
SideBySide = Literal["auto", "yes", "no"]
#: The parameters that say where a run is stored and how it is shown, not what it measures:
#: left out of what a run stores as asked (:meth:`StudyParameters.asked`).
NOT_STORED: tuple[str, ...] = ("out_dir", "run_id", "progress")


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
    as :func:`benchlib.analysis.planned.run_design` takes them: ``(None, None)`` when
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
    parameters this way (:meth:`StudyParameters.asked`, :func:`benchlib.analysis.planned.run_design`), and the report's
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


_TYPE_WORDS: dict[type, str] = {bool: "True or False", int: "a whole number", float: "a number", str: "text"}


def check_value(name: str, value: Any, hint: Any) -> None:
    """Refuse ``value`` for the parameter ``name`` unless it fits ``hint`` (``bool``, ``int``,
    ``float``, ``str``, a ``Literal`` of choices, or a union of those with ``None``).

    Raises
    ------
    ParameterError  one line naming the parameter, the value and the valid values
        (``runtime 'podman' is not valid; valid: local, docker``).
    """
    options = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
    for option in options:
        if option is type(None) and value is None:
            return
        if get_origin(option) is Literal and value in get_args(option) and isinstance(value, str):
            return
        if option is bool and isinstance(value, bool):
            return
        if option is int and isinstance(value, int) and not isinstance(value, bool):
            return
        if option is float and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return
        if option is str and isinstance(value, str):
            return
    words = [", ".join(map(str, get_args(o))) if get_origin(o) is Literal else "None" if o is type(None)
             else _TYPE_WORDS.get(o, getattr(o, "__name__", str(o))) for o in options]
    raise ParameterError(f"{name} {value!r} is not valid; valid: {' or '.join(words)}")


def _as_field(value: Any, hint: Any) -> Any:
    """A design's value (:data:`StudyParameters.DEFAULT_DESIGN`) in its field's type: a number
    for a ``str`` field as text (``cross_check_blocks`` 3 -> ``"3"``), an ``int`` for a
    ``float`` field as a float; anything else as it is."""
    if hint is str and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


@dataclass(frozen=True, kw_only=True)
class StudyParameters:
    """The parameters every study notebook takes; a study's record (``Parameters`` in its
    module) adds its own fields and redeclares a default where its notebook's differs.

    Attributes
    ----------
    full: run the full scale (the original's load and durations, every extra row) instead of
        the short default design.
    trials: randomized blocks (each runs every arm once, in a counterbalanced order); ``0``:
        the design's.
    seed: seeds the block orders and the load schedules.
    cluster: where benchlib's load comes from: ``None`` (this machine), ``"local:N"``,
        ``"auto"`` or ``"ray://host:port"`` (:func:`cluster`).
    side_by_side: ``auto`` (default): every arm of a block measured inside one trial,
        alternating in 50 ms slices, where the study's loads allow it (HTTP/1.1, bounded by
        time, load from this machine), else one arm per trial; ``yes``: side by side or one
        error line saying why not; ``no``: one arm per trial (the sequential design).
    budget_min: minutes for the whole study, its pilot included; ``0``: no budget (the fixed
        design).
    target_mde: percent, the smallest change every row should detect at 80% power within the
        budget.
    out_dir: where runs are stored (``""``: ``data/runs`` in the project).
    run_id: ``""`` starts a new run; an existing run id resumes it.
    progress: show the run's progress (a bar in JupyterLab).
    """

    full: bool = False
    trials: int = 0
    seed: int = 1
    cluster: str | None = None
    side_by_side: SideBySide = "auto"
    budget_min: float = 0.0
    target_mde: float = 5.0
    out_dir: str = ""
    run_id: str = ""
    progress: bool = True

    #: The values the design gives the parameters left unset (``0``, ``""`` or ``"auto"``;
    #: :func:`design_values`): by default, and with ``full``.
    DEFAULT_DESIGN: ClassVar[Mapping[str, Any]] = {}
    FULL_DESIGN: ClassVar[Mapping[str, Any]] = {}
    #: The values ``full`` sets whatever was given (the original's size).
    FULL_SCALE: ClassVar[Mapping[str, Any]] = {}

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The parameters' names, in field order."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def read(cls, namespace: Mapping[str, Any] | None = None, /, **given: Any) -> Self:
        """The parameters from ``namespace`` (a notebook's ``globals()``: its parameters cell
        and papermill's injected one; names it lacks keep their default), then ``given`` over
        them, each checked (:func:`check_value`, :func:`cluster`, :func:`budget`), with the
        design's values filled in (:meth:`resolved`).

        Raises
        ------
        ParameterError  an unknown name in ``given``, or a value that does not fit (one line
            naming the parameter and the valid values).
        """
        names = cls.names()
        unknown = [n for n in given if n not in names]
        if unknown:
            raise ParameterError(f"unknown parameter {unknown[0]!r}; valid: {', '.join(names)}")
        values = {n: namespace[n] for n in names if namespace is not None and n in namespace}
        values.update(given)
        hints = get_type_hints(cls)
        for name, value in values.items():
            check_value(name, value, hints[name])
        values["cluster"] = cluster(values.get("cluster"))
        out = cls(**values)
        budget(out.budget_min, out.target_mde)
        return out.resolved()

    def resolved(self) -> Self:
        """The parameters with the design's values where they were left unset
        (:data:`DEFAULT_DESIGN`, or :data:`FULL_DESIGN` with ``full``) and, with ``full``,
        :data:`FULL_SCALE` over them."""
        hints = get_type_hints(type(self))
        given = {n: getattr(self, n) for n in self.names() if n in self.DEFAULT_DESIGN or n in self.FULL_DESIGN}
        chosen = design_values(self.full, given, default=self.DEFAULT_DESIGN, full_scale=self.FULL_DESIGN)
        if self.full:
            chosen.update({n: v for n, v in self.FULL_SCALE.items() if n in hints})
        return replace(self, **{n: _as_field(v, hints[n]) for n, v in chosen.items()})

    @property
    def budget_target(self) -> tuple[float | None, float | None]:
        """``(budget_min, target_mde)`` as :func:`benchlib.analysis.planned.run_design` takes
        them: ``(None, None)`` without a budget (:func:`budget`)."""
        return budget(self.budget_min, self.target_mde)

    def asked(self) -> dict[str, Any]:
        """What a run stores as its notebook's parameters (run.json's ``notebook_parameters``),
        as ``benchlib run -p name value`` takes them again: every parameter but
        :data:`NOT_STORED`, the design's values filled in, and no ``target_mde`` without a
        budget (:func:`as_asked`)."""
        out = {n: getattr(self, n) for n in self.names() if n not in NOT_STORED}
        return as_asked({**out, "target_mde": out["target_mde"] if self.budget_min else None})
