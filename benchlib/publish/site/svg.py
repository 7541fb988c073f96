"""The study page's history plot: one question's ratio and interval across runs, laid out as
an inline SVG (like asv's graphs, one point per run). Pure geometry; the template draws it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["HistoryPlot", "PlotPoint", "RatioPoint", "history_plot"]

#: Plot size in SVG user units (px): width, height, and the margins around the axes.
WIDTH, HEIGHT = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 12, 28


@dataclass(frozen=True)
class PlotPoint:
    """One run's point: the ratio at ``(x, y)``, its interval from ``y_hi`` (top) to ``y_lo``
    (bottom), each end ``open`` when the interval is unbounded or leaves the axes there.

    Attributes
    ----------
    run_id, title: the run and its hover text (date, commit, machine, ratio, verdict).
    kind: the verdict kind (colours the point).
    missing: the run has no ratio for the question (not run, omitted, not asked): a hollow
    marker on the line ``ratio = 1``, no interval.
    """

    run_id: str
    x: float
    y: float
    y_lo: float
    y_hi: float
    lo_open: bool
    hi_open: bool
    title: str
    kind: str
    missing: bool = False


@dataclass(frozen=True)
class HistoryPlot:
    """A history plot: its points, the y ticks ``(y, label)`` and the line ``ratio = 1`` at ``y_one``."""

    points: tuple[PlotPoint, ...]
    ticks: tuple[tuple[float, str], ...]
    y_one: float
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = RIGHT
    top: int = TOP
    bottom: int = BOTTOM


@dataclass(frozen=True)
class RatioPoint:
    """The plot's input for one run: its ratio (``None``: none, e.g. not run) and interval
    (``None`` ends: unbounded), hover text and verdict kind."""

    run_id: str
    ratio: float | None
    lo: float | None
    hi: float | None
    title: str
    kind: str


def history_plot(runs: Sequence[RatioPoint]) -> HistoryPlot:
    """Lay out ``runs`` (oldest first) on a log ratio axis: runs evenly spaced left to right,
    the axis spanning every finite ratio and interval end and 1 (padded); a run without a ratio
    is marked at 1 (:attr:`PlotPoint.missing`)."""
    values = [v for r in runs for v in (r.ratio, r.lo, r.hi) if v is not None and v > 0]
    lo_v, hi_v = min(values + [1.0]), max(values + [1.0])
    a, b = math.log(lo_v) - 0.15, math.log(hi_v) + 0.15
    inner_h = HEIGHT - TOP - BOTTOM
    inner_w = WIDTH - LEFT - RIGHT

    def y_of(v: float) -> float:
        return TOP + inner_h * (1 - (math.log(v) - a) / (b - a))

    n = len(runs)
    points = []
    for i, r in enumerate(runs):
        x = LEFT + inner_w * ((i + 0.5) / n if n else 0.5)
        ratio = r.ratio if r.ratio is not None and r.ratio > 0 else 1.0
        lo_open = r.lo is None or r.lo <= 0 or r.ratio is None
        hi_open = r.hi is None or r.ratio is None
        points.append(PlotPoint(r.run_id, round(x, 1), round(y_of(ratio), 1),
                                round(HEIGHT - BOTTOM if lo_open else y_of(max(r.lo or 1.0, lo_v)), 1),
                                round(TOP if hi_open else y_of(min(r.hi or 1.0, hi_v)), 1),
                                lo_open, hi_open, r.title, r.kind, r.ratio is None))
    ticks = []
    for exp10 in range(math.floor(a / math.log(10)) - 1, math.ceil(b / math.log(10)) + 2):
        for m in (1, 2, 3, 5):
            v = m * 10.0 ** exp10
            if a <= math.log(v) <= b:
                ticks.append((round(y_of(v), 1), f"{v:g}"))
    return HistoryPlot(tuple(points), tuple(ticks), round(y_of(1.0), 1))
