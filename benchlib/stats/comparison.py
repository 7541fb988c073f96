"""The result of :func:`benchlib.stats.compare` and its text and JSON forms (pure).

Text follows the statistics reference, section 5.9: one block per condition and pair of
arms, a header line with the design, a line with the level, correction and margin, one
line per metric, and the footnotes that concern the block.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from benchlib.core.errors import ParameterError
from benchlib.stats.fmt import fmt_centre, fmt_level, fmt_p, fmt_pct, fmt_ratio, fmt_value, within_run
from benchlib.stats.metrics import metric_info
from benchlib.stats.multiplicity import CORRECTION_LABELS
from benchlib.stats.verdict import Verdict, fmt_mde

__all__ = ["Comparison", "PairInfo", "jsonable", "fmt_value", "fmt_p", "fmt_pct", "fmt_centre", "fmt_level",
           "JSON_FORMAT_VERSION"]

#: Version of the JSON layout written by :meth:`Comparison.to_json` (2: typed verdicts,
#: the achieved level of each ``±``).
JSON_FORMAT_VERSION = 2

_SUP = str.maketrans("0123456789,", "⁰¹²³⁴⁵⁶⁷⁸⁹˒")


@dataclass(frozen=True)
class PairInfo:
    """One baseline/arm pair within one group (condition)."""

    labels: dict[str, Any]
    baseline: str
    arm: str
    paired: bool
    n_baseline: int
    n_arm: int
    rows: list[int]
    context: dict[str, Any] = field(default_factory=dict)


def jsonable(v: Any) -> Any:
    """``v`` as strict JSON values: NaN as ``null``, infinities as ``"inf"``/``"-inf"``, numpy
    scalars as Python ones, tuples as lists, anything else as its ``str``."""
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if math.isnan(f):
            return None
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return f
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if v is None or isinstance(v, (str, int)):
        return v
    if isinstance(v, pd.Timestamp):
        return v.isoformat()
    return str(v)


@dataclass(frozen=True)
class Comparison:
    """Everything :func:`~benchlib.stats.compare` found.

    Attributes
    ----------
    table:
        One row per (group, metric, arm vs baseline); columns documented in
        ``docs/statistics.md`` (centres with ``pm_*``, ``ratio``, ``ci_lo``, ``ci_hi``,
        ``achieved_confidence``, ``pct_change``, ``p_raw``, ``p_adj``, ``verdict``,
        ``mde_pct``, ``n_baseline``, ``n_arm``, ``method``, ``test``, ``notes``...).
    notes:
        The footnotes (diagnostics); ``table.notes`` holds each row's note numbers.
    shift:
        The shift function across deciles (one row per group, arm and decile), or None.
    params:
        The parameters of the comparison.
    pairs:
        The baseline/arm pairs, for the text layout.
    """

    table: pd.DataFrame
    notes: list[Any]
    shift: pd.DataFrame | None
    params: dict[str, Any]
    pairs: list[PairInfo]
    verdicts: list[Verdict] = field(default_factory=list)

    def verdict(self, arm: str, metric: str, *, baseline: str | None = None, **labels: Any) -> Verdict | None:
        """The verdict of ``arm`` on ``metric`` (against ``baseline``, in the group named by
        ``labels``, e.g. ``condition="2000rps"``); ``None`` when no row matches.

        Raises
        ------
        ParameterError
            When several rows match (name the baseline or the group), or a label is not one
            of the comparison's ``by`` columns.
        """
        unknown = [k for k in labels if k not in self.params.get("by", [])]
        if unknown:
            raise ParameterError(f"verdict(): {unknown} are not group columns of this comparison; "
                                 f"its by= columns are {list(self.params.get('by', []))}")
        hits = [
            v for v in self.verdicts
            if v.arm == str(arm) and v.metric == metric and (baseline is None or v.baseline == str(baseline))
            and all(v.labels.get(k) == val for k, val in labels.items())
        ]
        if len(hits) > 1:
            where = sorted({(v.baseline, tuple(sorted(v.labels.items()))) for v in hits})
            raise ParameterError(f"verdict(): {len(hits)} rows of {arm!r} on {metric!r} match; name baseline= "
                                 f"or the group ({', '.join(map(str, self.params.get('by', [])))}): {where}")
        return hits[0] if hits else None

    @property
    def footnotes(self) -> list[str]:
        """The footnotes as numbered strings (``"1. ..."``)."""
        return [f"{n.id}. {n.text}" for n in self.notes]

    # ------------------------------------------------------------------ text

    def _header(self, p: PairInfo) -> list[str]:
        t = self.table
        parts = [f"{p.arm} vs {p.baseline} (baseline)"]
        if p.labels:
            parts.append(", ".join(f"{k}={v}" for k, v in p.labels.items()))
        if p.paired:
            parts.append(f"{p.n_baseline} trials/arm in {p.n_baseline} blocks (paired)")
        elif p.n_baseline == p.n_arm:
            parts.append(f"{p.n_baseline} trials/arm (unpaired)")
        else:
            parts.append(f"{p.n_baseline} + {p.n_arm} trials (unpaired)")
        ctx = p.context
        if ctx.get("load"):
            parts.append(str(ctx["load"]))
        if ctx.get("duration"):
            parts.append(str(ctx["duration"]))
        pr = self.params
        fam = int(t.loc[p.rows[0], "family_size"]) if len(p.rows) else 0
        corr = CORRECTION_LABELS[pr["correction"]]
        line2 = (
            f"α={pr['alpha']:g}, {corr} over {fam} row{'s' if fam != 1 else ''}, "
            f"{pr['confidence']:.0%} CIs, practical margin ±{100 * pr['margin']:g}%, method {pr['method']}"
        )
        lines = ["  ·  ".join(parts), line2]
        seq = pr.get("sequential")
        if seq:
            looks = ", ".join(map(str, seq["looks"]))
            runs = sorted({int(t.loc[i, "blocks_run"]) for i in p.rows if "blocks_run" in t.columns
                           and np.isfinite(t.loc[i, "blocks_run"])})
            at = f"analysed after {runs[0]} of {seq['looks'][-1]} blocks" if runs else ""
            lines.append(f"group-sequential: looks at {looks} blocks (Wang-Tsiatis shape {seq['shape']:g}); {at}; "
                         "p-values and intervals hold over all looks (sequential p, repeated CIs)")
        return lines

    def _levels(self, p: PairInfo, side: str) -> set[float]:
        """The achieved levels of the ``±`` intervals of one side's centres in a block."""
        col = f"pm_confidence_{side}"
        if col not in self.table.columns:
            return set()
        vals = self.table.loc[p.rows, col].to_numpy(dtype=float)
        return {round(float(v), 4) for v in vals if np.isfinite(v)}

    def _lines(self, p: PairInfo) -> list[list[str]]:
        t = self.table
        corr = {"holm": "Holm", "bh": "BH", "by": "BY", "none": "adj"}[self.params["correction"]]
        heads = []
        per_cell = {}
        for side, name, lead in (("baseline", p.baseline, "median "), ("arm", p.arm, "")):
            levels = self._levels(p, side)
            per_cell[side] = len(levels) > 1
            if not levels:
                heads.append(f"{name} (median of trials)" if lead else name)
            elif len(levels) == 1:
                heads.append(f"{name} ({lead}± {fmt_level(next(iter(levels)))} CI)")
            else:
                heads.append(f"{name} ({lead}± CI at the level shown)")
        head = ["metric", "better", *heads,
                f"{p.arm}/{p.baseline} [{self.params['confidence']:.0%} CI]", "Δ%", "p (raw)", f"p ({corr})", "verdict"]
        out = [head]
        for i in p.rows:
            r = t.loc[i]
            unit = str(r["unit"])
            def centre(side: str, r: pd.Series = r, unit: str = unit) -> str:
                level = r.get(f"pm_confidence_{side}") if per_cell[side] else None
                return fmt_centre(r[f"centre_{side}"], r[f"pm_{side}"], unit, level)
            if r["effect"] == "ratio":
                eff = fmt_ratio(r["ratio"], r["ci_lo"], r["ci_hi"])
                if np.isfinite(r["ratio"]):
                    eff += within_run(bool(r.get("between_run_variance_estimated", True)))
                delta = fmt_pct(r["pct_change"], signed=True)
            else:
                d = r["diff"]
                eff = (f"{100 * d:+.2g} pp [{100 * r['diff_lo']:+.2g}, {100 * r['diff_hi']:+.2g}]"
                       if np.isfinite(d) else "–")
                delta = "–"
            verdict = str(r["verdict"])
            if r["notes"]:
                verdict += " " + str(r["notes"]).translate(_SUP)
            label = metric_info(str(r["metric"]), {str(r["metric"]): str(r["better"])}).label
            out.append([label, str(r["better"]), centre("baseline"), centre("arm"), eff, delta,
                        fmt_p(r["p_raw"]), fmt_p(r["p_adj"]), verdict])
        return out

    def to_text(self) -> str:
        """The report as plain text (section 5.9 of the statistics reference)."""
        blocks = []
        for p in self.pairs:
            lines = self._header(p) + [""]
            cells = self._lines(p)
            widths = [max(len(row[j]) for row in cells) for j in range(len(cells[0]))]
            for row in cells:
                lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
            ids = sorted({n.id for n in self.notes if set(n.rows) & set(p.rows)})
            if ids:
                lines.append("Notes:")
                for n in self.notes:
                    if n.id in ids:
                        lines.append(f" {str(n.id).translate(_SUP)} {n.text}.")
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks) + "\n"

    def one_line(self, row: int) -> str:
        """One row in one line, for CI logs and pull-request comments."""
        r = self.table.loc[row]
        labels = ", ".join(str(r[c]) for c in self.params["by"])
        head = f"{r['arm']} vs {r['baseline']}" + (f", {labels}" if labels else "") + f" {r['metric']}"
        if r["effect"] == "ratio" and np.isfinite(r["ratio"]):
            eff = (f"ratio {fmt_ratio(r['ratio'], r['ci_lo'], r['ci_hi'])}"
                   f"{within_run(bool(r.get('between_run_variance_estimated', True)))} "
                   f"({fmt_pct(r['pct_change'], True)})")
        elif np.isfinite(r["diff"]):
            eff = f"difference {100 * r['diff']:+.2g} pp [{100 * r['diff_lo']:+.2g}, {100 * r['diff_hi']:+.2g}]"
        else:
            return f"{head}: {r['verdict']}"
        n_txt = f"{int(r['n_blocks'])} blocks" if r["design"] == "paired" else f"{int(r['n_baseline'])}+{int(r['n_arm'])} trials"
        corr = CORRECTION_LABELS[self.params["correction"]]
        mde_txt = ""
        v = self.verdicts[row] if row < len(self.verdicts) else None
        if v is not None and math.isfinite(v.mde) and not v.mde_in_text:
            mde_txt = f"; MDE({self.params['power']:.0%})={fmt_mde(v)}"
        return (
            f"{head}: {eff}, p={fmt_p(r['p_raw'])} ({r['test']} on {n_txt} of per-trial {r['metric']}; "
            f"{corr}-adjusted p={fmt_p(r['p_adj'])} over {int(r['family_size'])} comparisons) → {r['verdict']}{mde_txt}"
        )

    # ------------------------------------------------------------------ JSON

    def to_dict(self) -> dict[str, Any]:
        """Everything as plain Python objects (NaN -> None, infinity -> "inf")."""
        import scipy

        from benchlib.core.version import VERSION

        doc: dict[str, Any] = {
            "format": JSON_FORMAT_VERSION,
            "params": self.params,
            "versions": {"benchlib": VERSION, "numpy": np.__version__, "scipy": scipy.__version__},
            "rows": self.table.to_dict(orient="records"),
            "footnotes": [{"id": n.id, "kind": n.kind, "text": n.text, "rows": list(n.rows)} for n in self.notes],
            "comparisons": [
                {"labels": p.labels, "baseline": p.baseline, "arm": p.arm, "paired": p.paired,
                 "n_baseline": p.n_baseline, "n_arm": p.n_arm, "rows": p.rows, "context": p.context}
                for p in self.pairs
            ],
            "shift": None if self.shift is None else self.shift.to_dict(orient="records"),
            "verdicts": [v.to_dict() for v in self.verdicts],
        }
        return jsonable(doc)

    def to_json(self, path: str | None = None) -> str:
        """JSON text (sorted keys; byte-identical for the same data and seed); written to
        ``path`` too when given."""
        text = json.dumps(self.to_dict(), sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
        if path is not None:
            from pathlib import Path

            Path(path).write_text(text, encoding="utf-8")
        return text

    def _repr_html_(self) -> str:  # pragma: no cover - notebook display
        import html

        return "<pre>" + html.escape(self.to_text()) + "</pre>"

    def __str__(self) -> str:
        return self.to_text()
