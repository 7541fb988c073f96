"""Comparisons and answers as report tables and text: the verdict table, the family's
heading, the verdicts in words, the footnotes.

Every row shows its typed verdict rendered by :func:`benchlib.stats.verdict.render`; rows an
:class:`~benchlib.analysis.questions.Answer` could not compare stay in its tables as
``not run: why`` or ``no valid trial: ...`` (metric ``all``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from benchlib.analysis import conclusion as say
from benchlib.analysis.display import metric_words
from benchlib.analysis.questions import Answer
from benchlib.stats.verdict import Verdict, VerdictKind, render
from benchlib.store.results import Run

__all__ = ["answer_table", "answer_tables", "family_markdown", "footnotes_markdown", "verdict_sentences",
           "verdict_table"]


def verdict_table(comparison: Any, run: Run | None = None) -> Any:
    """The comparison as a readable table for HTML reports (formatted strings), one row per
    condition x metric x arm; footnote marks refer to ``comparison.footnotes``. With
    ``run``, arms that did not run are added as rows "not run: <why>" (never dropped)."""
    import pandas as pd

    from benchlib.analysis.formats import fmt_centre, fmt_p, fmt_pct, within_run

    rows = []
    table = comparison.table if comparison is not None else pd.DataFrame()
    for _, r in table.iterrows():
        unit = str(r.get("unit", ""))
        if r.get("effect") == "ratio":
            eff = (f"{r['ratio']:.3g} [{r['ci_lo']:.3g}, {r['ci_hi']:.3g}]"
                   + within_run(bool(r.get("between_run_variance_estimated", True)))) if r["ratio"] == r["ratio"] else "–"
            change = fmt_pct(r["pct_change"], signed=True) if r["pct_change"] == r["pct_change"] else "–"
        else:
            eff = f"{r['diff']:+.3g} [{r['diff_lo']:+.3g}, {r['diff_hi']:+.3g}]" if r["diff"] == r["diff"] else "–"
            change = "–"
        rows.append({
            "condition": r.get("condition", ""),
            "metric": f"{metric_words(str(r['metric']))} ({r['better']} is better)",
            "baseline": f"{r['baseline']}: " + fmt_centre(r["centre_baseline"], r["pm_baseline"], unit,
                                                          r.get("pm_confidence_baseline")),
            "arm": f"{r['arm']}: " + fmt_centre(r["centre_arm"], r["pm_arm"], unit, r.get("pm_confidence_arm")),
            "arm / baseline [95% CI]": eff,
            "change": change,
            "p (raw)": fmt_p(r["p_raw"]),
            f"p ({r.get('correction', 'adj')})": fmt_p(r["p_adj"]),
            "verdict": str(r["verdict"]) + (f" ({r['notes']})" if r.get("notes") else ""),
        })
    if run is not None:
        for arm, why in run.unavailable.items():
            for c in run.conditions:
                v = Verdict.not_run(why, arm=arm, labels={"condition": c})
                rows.append({"condition": c, "metric": v.metric, "arm": arm, "verdict": render(v)})
    return pd.DataFrame(rows).fillna("")


def _missing_row(answer: Answer, v: Verdict) -> dict[str, Any]:
    group = v.labels.get("condition", "")

    def mark(label: str) -> str:
        why = answer.absent.get((group, label))
        return f"{label} ({why})" if why else label

    return {"condition": group, "metric": v.metric, "baseline": mark(v.baseline), "arm": mark(v.arm),
            "verdict": render(v)}


def answer_table(answer: Answer, *, drop_omitted: bool = False, group_column: str = "group") -> Any:
    """The family's verdict table: the compared rows (:func:`verdict_table`) and one row per
    contrast that could not be compared (``not run`` / ``no valid trial``), with a
    ``question`` column first when the family has sub-questions (rows in their order), and
    the group column named ``group_column``. ``drop_omitted`` leaves out rows of metrics no
    trial supported (the caller says so in words)."""
    import pandas as pd

    cmp = answer.comparison
    base = verdict_table(cmp) if cmp is not None else pd.DataFrame()
    keys = [] if cmp is None else list(zip(cmp.table["condition"], cmp.table["baseline"], cmp.table["arm"], strict=True))
    if len(base) and drop_omitted and cmp is not None:
        keep = (cmp.table["verdict_kind"] != VerdictKind.OMITTED).to_numpy()
        base, keys = base[keep], [k for k, ok in zip(keys, keep, strict=True) if ok]
    keys += [(v.labels.get("condition"), v.baseline, v.arm) for v in answer.missing]
    table = pd.concat([base, pd.DataFrame([_missing_row(answer, v) for v in answer.missing])], ignore_index=True)
    if not len(table):
        return table
    if answer.family.questions:
        order = {q: i for i, q in enumerate(answer.family.questions.values())}
        table.insert(0, "question", [answer.question_of(str(g), str(b), str(a)) for g, b, a in keys])
        table = table.sort_values("question", key=lambda s: s.map(order), kind="stable")
    else:
        order = {g: i for i, g in enumerate(dict.fromkeys(str(c.group) for c in answer.family.rows()))}
        table = table.sort_values("condition", key=lambda s: s.map(order), kind="stable")
    return table.reset_index(drop=True).rename(columns={"condition": group_column}).fillna("")


def answer_tables(answer: Answer, *, drop_omitted: bool = False) -> dict[str, Any]:
    """:func:`answer_table` split by group (each without the group column), every group of
    the family present (an empty table when it has no row)."""
    table = answer_table(answer, drop_omitted=drop_omitted)
    out = {}
    for g in dict.fromkeys(str(c.group) for c in answer.family.rows()):
        out[g] = (table[table["group"] == g].drop(columns=["group"]).reset_index(drop=True) if len(table)
                  else table)
    return out


def family_markdown(answer: Answer) -> str:
    """The family's heading, question, and what its correction covers (from the table)."""
    f = answer.family
    lines = [f"### {f.title}", "", f.text, ""]
    if answer.comparison is None:
        lines.append("**Not compared**: " + "; ".join(answer.notes))
        return "\n".join(lines)
    t = answer.comparison.table
    n = len(t)
    corr = str(t["correction"].iloc[0]) if "correction" in t.columns else "holm"
    corr_name = {"holm": "Holm", "bh": "Benjamini-Hochberg", "by": "Benjamini-Yekutieli"}.get(corr, corr)
    pairs = t[["condition", "arm"]].drop_duplicates().shape[0]
    text = (f"*Family*: the {n} rows of this table ({pairs} comparison(s) × {t['metric'].nunique()} metrics); "
            f"p-values are {corr_name}-adjusted over these {n} rows and no others; intervals are 95% per row; "
            "practical margin ±2%.")
    blocks = t["n_blocks"].max() if "n_blocks" in t.columns else 0
    min_p = t["min_p"].min() if "min_p" in t.columns else math.nan
    if blocks and blocks == blocks and min_p == min_p:
        text += (f" Trials are paired by block ({int(blocks)} blocks): the smallest p-value the signed-rank test "
                 f"can give is {min_p:.2g}, " + ("so every row can reach significance after the correction."
                                                 if min_p * n < 0.05 else
                                                 f"too large for {corr_name} over {n} rows: more blocks are needed."))
    lines.append(text)
    if answer.notes:
        lines += ["", "Left out: " + "; ".join(answer.notes)]
    return "\n".join(lines)


def verdict_sentences(comparison: Any, *, metrics: Iterable[str] | None = None) -> str:
    """The comparison's verdicts in words, one bullet per row, each written by the template of
    its verdict's kind (:func:`benchlib.analysis.conclusion.sentence`): a direction and a
    ratio only from a faster/slower row, "no difference beyond ±2%" only from an equivalent
    row, "not decided at this design (MDE x%)" from a "~" row.

    Example: "go-nethttp's median latency (p50) was 0.40× [0.32, 0.51] python-aiohttp's
    (Holm-adjusted p = 0.0039 over 3 rows): **faster**".
    """
    if comparison is None:
        return "_No comparison could be made in this run (see the status table: arms not run or without valid trials)._"
    keep = set(metrics) if metrics is not None else None
    lines = []
    for v in comparison.verdicts:
        if keep is not None and v.metric not in keep:
            continue
        cond = v.labels.get("condition")
        where = f"*{cond}*: " if cond not in (None, "", "main") else ""
        lines.append(f"- {where}{say.sentence(v, f'**{v.arm}**', f'**{v.baseline}**')}")
    return "\n".join(lines) if lines else "_No comparison rows (fewer than two arms ran)._"


def footnotes_markdown(comparison: Any) -> str:
    """The comparison's diagnostic footnotes as a Markdown list ("" when there are none)."""
    notes = list(comparison.footnotes) if comparison is not None else []
    return "**Notes**\n\n" + "\n".join(f"- {n}" for n in notes) if notes else ""
