"""A peer load tool beside benchlib, for any tool: per trial, per arm, and in words.

When a condition has a :class:`~benchlib.core.model.CrossCheck`, the peer tool (wrk, k6, ab, hey,
h2load, and tools to come) runs on the same service instance in the same trial, first in
odd blocks and second in even ones; its report is stored in the trial and read as a
:class:`~benchlib.store.records.PeerReport`. Here the same figures are set side by side:

* :func:`peer_beside`: one row per trial, the tool's figure, benchlib's and their ratio
  (tool / benchlib) for each of ``figures`` (``rps``, ``p50``, ``p95``, ``p99``, ``max``...);
  benchlib's from the per-trial summaries (``since="summary"``) or from the trial's rows,
  timed from the send time as the tools time (``since="sent"``) or from the due time;
* :func:`peer_summary`: medians over the trials of each group (by arm, or by condition, arm
  and order), the ratio's range and its median when the tool ran first and second;
* :func:`peer_view`: columns picked and labelled for display (``wrk p50 (ms)``...);
* :func:`peer_notes`: where the two agree within a tolerance, and for the others what the
  run measured that bears on why (the order, each client's CPU);
* :func:`peer_tables`: all of the above for one tool, the columns a report shows;
* :func:`peer_setup`: before a run, the tool built if missing (Go tools: k6, bombardier) and
  the arms it will cross-check, in a sentence.

The tool runs in a subset of the blocks (``Experiment.cross_check_blocks``: 3 spread over the
run by default, all at full scale); ``peer_blocks`` in the summaries says in how many
(``3 of 10``).

Column names: ``peer_<figure>``, ``bl_<figure>``, ``<figure>_ratio``, plus ``order``
(``first``/``second``), ``peer_blocks``, ``blocks_run`` (blocks of the arm in the run), ``peer_error``,
``peer_requests``, ``peer_dropped``, ``peer_errors``,
``peer_cpu``, ``peer_bytes``, ``bl_requests``, ``bl_client_cpu`` and, with ``since="sent"``,
``bl_p50_due`` (benchlib's median from the due time, what the verdicts use).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from benchlib.analysis.formats import signed_pct
from benchlib.stats.quantiles import quantile_of
from benchlib.store.records import rows as R
from benchlib.store.results import Run

__all__ = ["peer_beside", "peer_labels", "peer_notes", "peer_setup", "peer_summary", "peer_tables", "peer_view"]

_EXTRA = ("requests", "dropped", "errors", "cpu", "bytes")
_WORDS = {"rps": "requests/s", "requests": "requests", "mean": "mean", "min": "min", "max": "max"}


def _latency(fig: str) -> bool:
    return quantile_of(fig) is not None or fig in ("min", "mean", "max")


def _from_summary(s: Any, fig: str) -> float:
    from benchlib.stats.quantiles import quantile_column

    q = quantile_of(fig)
    col = {"rps": "throughput_rps", "requests": "n_ok", "mean": "mean_ms", "max": "max_ms"}.get(
        fig, quantile_column(q) if q is not None else fig)
    return float(s[col]) if s is not None and col in s.index and s[col] == s[col] else math.nan


def peer_beside(run: Run, *, summaries: Any = None, figures: Sequence[str] = ("rps", "p50", "p99"),
                since: str = "summary", tool: str | None = None, unit: str = "ms") -> Any:
    """One row per trial that ran a peer tool: its figures beside benchlib's for the same
    service instance (see the module docstring for the columns).

    Parameters
    ----------
    run: the run (:func:`benchlib.store.results.open_run`).
    summaries: the per-trial summaries (needed for ``since="summary"``).
    figures: what to set side by side: ``rps``, ``p<percentile>``, ``min``, ``mean``, ``max``.
    since: benchlib's latencies from the summaries (due time, the summaries' quantiles), or
        from the rows since the send time (``"sent"``, as peer tools time) or the due time
        (``"intended"``), with linear quantiles as the tools compute theirs.
    tool: only this tool's reports (default: every tool).
    unit: ``ms`` or ``µs`` for the latency figures.
    """
    import pandas as pd

    scale = {"ms": 1.0, "µs": 1e3, "us": 1e3}[unit]
    index = summaries.set_index(["condition", "arm", "block"]) if summaries is not None and len(summaries) else None
    qs = tuple(q for q in (quantile_of(f) for f in figures) if q is not None)
    blocks_run: dict[tuple[str, str], set[int]] = {}
    for t in run.trials:
        blocks_run.setdefault((t.condition, t.arm), set()).add(t.block)
    out = []
    for t in run.trials:
        p = t.peer
        if p is None or (tool is not None and p.tool != tool):
            continue
        row: dict[str, Any] = {"condition": t.condition, "arm": t.arm, "block": t.block, "status": t.status,
                               "tool": p.tool, "order": "first" if p.order == "before" else "second",
                               "peer_error": p.failure or None,
                               "blocks_run": len(blocks_run.get((t.condition, t.arm), ()))}
        if since == "summary":
            key = (t.condition, t.arm, t.block)
            s = index.loc[key] if index is not None and key in index.index else None
            bl = {f: _from_summary(s, f) for f in (*figures, "requests")}
        else:
            rows = t.rows()
            bl = {k: float(v) for k, v in R.figures(rows, since=since, quantiles=qs or (0.5,), method="linear",
                                                    supported_only=False).items()}
            dur = t.load.measured_duration_s if t.load is not None else math.nan
            bl.update(requests=bl["n"], rps=bl["n"] / dur if dur == dur and dur > 0 else math.nan)
            if since == "sent":
                due = R.latency_ms(R.ok_measured(rows), "intended")
                row["bl_p50_due"] = float(pd.Series(due).quantile(0.5)) * scale if len(due) else math.nan
        for f in figures:
            k = 1.0 if not _latency(f) else scale
            row[f"peer_{f}"] = p.figure(f) * k
            row[f"bl_{f}"] = bl.get(f, math.nan) * k
        row.update({f"peer_{f}": p.figure(f) for f in _EXTRA})
        row.update(bl_requests=bl.get("requests", math.nan), bl_client_cpu=t.client_cpu)
        out.append(row)
    df = pd.DataFrame(out)
    if len(df):
        for f in figures:
            df[f"{f}_ratio"] = df[f"peer_{f}"].astype(float) / df[f"bl_{f}"].astype(float)
        for c in ("peer_requests", "peer_dropped", "peer_errors", "bl_requests"):
            if (df[c].dropna() % 1 == 0).all():
                df[c] = df[c].astype("Int64")
    return df


def peer_summary(beside: Any, *, by: Sequence[str] = ("arm",), main: str = "rps") -> Any:
    """Per group of ``by``: the blocks the tool ran in out of the arm's blocks in the run
    (``peer_blocks``, e.g. ``3 of 10``), the trials whose benchlib load was valid and whose tool ran
    (``trials``), the tool's failures (``peer_failed``, its first ``peer_error``), the medians
    of every figure and ratio over those trials, the range of the ``main`` figure's ratio and,
    unless ``by`` holds ``order``, its median when the tool ran first and second."""
    import pandas as pd

    if beside is None or not len(beside):
        return pd.DataFrame()
    num = [c for c in beside.columns if c.startswith(("peer_", "bl_")) or c.endswith("_ratio")]
    num = [c for c in num if c not in ("peer_error", "peer_blocks")]
    out = []
    for key, all_g in beside.groupby(list(by), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        failed = all_g[all_g["peer_error"].notna()]
        g = all_g[(all_g["status"] == "ok") & all_g["peer_error"].isna()]
        row: dict[str, Any] = dict(zip(by, key, strict=True))
        run_blocks = int(all_g["blocks_run"].max()) if "blocks_run" in all_g.columns else all_g["block"].nunique()
        row["peer_blocks"] = f"{all_g['block'].nunique()} of {run_blocks}"
        row.update(trials=len(g), peer_failed=len(failed),
                   peer_error=str(failed["peer_error"].iloc[0]).splitlines()[0][:300] if len(failed) else None)
        row.update({c: pd.to_numeric(g[c], errors="coerce").median() for c in num})
        r = f"{main}_ratio"
        if r in g.columns:
            row[f"{r}_range"] = f"{g[r].min():.3f}-{g[r].max():.3f}" if len(g) else "–"
            if "order" not in by:
                for o in ("first", "second"):
                    row[f"{r}_{o}"] = g.loc[g["order"] == o, r].median()
        out.append(row)
    return pd.DataFrame(out)


def peer_labels(tool: str, *, since: str = "summary", unit: str = "ms") -> dict[str, str]:
    """Display labels of :func:`peer_beside` and :func:`peer_summary` columns for ``tool``."""
    frm = {"sent": ", from send", "intended": ", from due time"}.get(since, "")

    def fig(f: str) -> tuple[str, str]:
        name = "req/s" if f == "rps" else f
        return (name, "") if f == "rps" else (name, f" ({unit}{frm})" if _latency(f) else "")

    labels = {"order": f"{tool} ran", "trials": f"trials ({tool} ok)", "peer_blocks": f"blocks with {tool}",
              "blocks_run": "blocks in the run", "peer_failed": f"{tool} failed",
              "peer_error": f"{tool} error", "peer_cpu": f"{tool} CPU (share of 1 CPU)",
              "bl_client_cpu": "benchlib client CPU (share of 1 CPU)", "peer_errors": f"{tool} errors",
              "peer_bytes": f"{tool} bytes/response", "peer_requests": f"{tool} requests",
              "peer_dropped": f"{tool} dropped", "bl_requests": "benchlib requests",
              "bl_p50_due": f"benchlib p50 ({unit}, from due time)"}
    for f in ("rps", "min", "mean", "max", "p50", "p90", "p95", "p99", "p999"):
        name, suffix = fig(f)
        labels.update({f"peer_{f}": f"{tool} {name}" + (f" ({unit})" if _latency(f) else ""),
                       f"bl_{f}": f"benchlib {name}{suffix}", f"{f}_ratio": f"{tool} / benchlib {name}",
                       f"{f}_ratio_range": f"{tool} / benchlib {name} (min-max)",
                       f"{f}_ratio_first": f"{tool} / benchlib {name}, {tool} first",
                       f"{f}_ratio_second": f"{tool} / benchlib {name}, {tool} second"})
    return labels


def peer_view(df: Any, columns: Sequence[str], tool: str, *, since: str = "summary", unit: str = "ms",
              index: str | None = None, digits: int | None = 3) -> Any:
    """``df``'s ``columns`` (those present; the tool's failures only when it failed), labelled
    for ``tool``, rounded to ``digits`` decimals (``None``: not rounded, for
    :func:`benchlib.analysis.display.table`, which formats the numbers itself); ``index``: a
    column to make the index."""
    if df is None or not len(df):
        import pandas as pd

        return pd.DataFrame()
    cols = [c for c in columns if c in df.columns and (c not in ("peer_error", "peer_failed") or df[c].any())]
    out = df[cols].rename(columns=peer_labels(tool, since=since, unit=unit))
    if index is not None:
        out = out.set_index(peer_labels(tool, since=since, unit=unit).get(index, index))
    return out.round(digits) if digits is not None else out


def peer_notes(summary: Any, tool: str, *, figures: Sequence[str] = ("rps", "p50", "p99"), tolerance: float = 0.03,
               why: str = "", why_latency: str = "", absent: str = "") -> str:
    """Markdown: the arms where ``tool`` and benchlib agree within ``tolerance`` (median
    per-trial ratios of ``figures``; a summary by condition or order names them beside the
    arm: ``go (c20)``), and for each arm where they do not, what this run
    measured that bears on why: the order of the two tools in the trial, each client's CPU.
    ``why`` (and ``why_latency``, when a latency figure differs) explain the mechanisms once,
    after the list; ``absent`` is the text when the tool did not run."""
    if summary is None or not len(summary):
        return absent or f"_{tool} did not run in this run._"
    lines: list[str] = []
    agree: list[str] = []
    latency_off = False
    for _, r in summary.iterrows():
        name = str(r["arm"]) + "".join(f" ({r[k]})" for k in ("condition", "order") if k in r.index)
        if r.get("peer_failed"):
            lines.append(f"- **{name}**: {tool} failed in {int(r['peer_failed'])} trial(s): {r['peer_error']}")
        diffs = {f: r[f"{f}_ratio"] for f in figures if r[f"{f}_ratio"] == r[f"{f}_ratio"]}
        if not diffs:
            continue
        off = {f: v for f, v in diffs.items() if abs(v - 1) > tolerance}
        if not off:
            agree.append(name)
            continue
        latency_off |= any(_latency(f) for f in off)
        parts = [f"**{name}**: {tool}'s " + ", ".join(f"{_WORDS.get(f, f)} {signed_pct(v)}" for f, v in off.items())
                 + f" against benchlib's (median per-trial ratio, {int(r['trials'])} trials)."]
        b, a = r.get("rps_ratio_first", math.nan), r.get("rps_ratio_second", math.nan)
        if "rps" in off and b == b and a == a:
            parts.append(f"Requests/s ratio {b:.3f} when {tool} ran first in the trial, {a:.3f} when it ran second"
                         + (": the order accounts for part of it." if abs(b - a) > tolerance
                            else ": the order does not explain it."))
        cw, cb = r.get("peer_cpu", math.nan), r.get("bl_client_cpu", math.nan)
        if "rps" in off and cw == cw and cb == cb:
            near = [n for n, c in ((tool, cw), ("benchlib", cb)) if c >= 0.8]
            parts.append(f"Client CPU: {tool} {cw:.0%}, benchlib's workers {cb:.0%}"
                         + (f"; {' and '.join(near)} came near the limit, so the client may have set the rate."
                            if near else "; neither was CPU-bound."))
        lines.append("- " + " ".join(parts))
    head = []
    if agree:
        names = [_WORDS.get(f, f) for f in figures]
        what = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        head.append(f"- Within ±{tolerance:.0%} on {what} (median per-trial ratios): "
                    + ", ".join(f"**{a}**" for a in agree) + ".")
    tail = ["", why + (" " + why_latency if latency_off and why_latency else "")] if lines and why else []
    return "\n".join(head + lines + tail)


#: The per-arm and per-trial columns :func:`peer_tables` shows.
RATE_COLUMNS = ("arm", "trials", "bl_rps", "peer_rps", "rps_ratio", "rps_ratio_range", "rps_ratio_first",
                "rps_ratio_second", "bl_p50", "peer_p50", "bl_p99", "peer_p99", "bl_client_cpu", "peer_cpu",
                "peer_bytes", "peer_failed", "peer_error")
TRIAL_COLUMNS = ("arm", "block", "order", "status", "bl_rps", "peer_rps", "rps_ratio", "bl_p99", "peer_p99",
                 "peer_cpu", "bl_client_cpu", "peer_errors")


def peer_tables(run: Run, summaries: Any, tool: str, *, why: str = "", why_latency: str = "",
                absent: str = "") -> dict[str, Any]:
    """A peer tool beside benchlib as a report shows it, benchlib's figures from the
    summaries: ``beside`` (:func:`peer_beside`, per trial), ``by_arm`` (:func:`peer_summary`,
    medians per arm), ``rate`` (per arm) and ``trials`` (per trial) labelled for
    :func:`benchlib.analysis.display.table` (:data:`RATE_COLUMNS`, :data:`TRIAL_COLUMNS`), and
    ``notes`` (:func:`peer_notes` with ``why``, ``why_latency`` and ``absent``)."""
    beside = peer_beside(run, summaries=summaries, tool=tool)
    by_arm = peer_summary(beside)
    return {"beside": beside, "by_arm": by_arm, "rate": peer_view(by_arm, RATE_COLUMNS, tool, digits=None),
            "trials": peer_view(beside, TRIAL_COLUMNS, tool, digits=None),
            "notes": peer_notes(by_arm, tool, why=why, why_latency=why_latency, absent=absent)}


def peer_setup(tool: str, arms: Sequence[str], enabled: bool = True, *, flag: str = "") -> tuple[tuple[str, ...], str]:
    """The arms ``tool`` will cross-check and a sentence saying so, for a notebook to call
    before its run: the tool is built here if missing (``benchlib.loadgen.peers.<tool>.ensure_<tool>``,
    e.g. k6 or bombardier from the Go module proxy), so no trial waits for a build, and the
    sentence names its version (``<tool>_version``). When ``enabled`` is false (the
    notebook's parameter ``flag``, or ``flag`` as written when it holds ``=``), or the tool cannot be built, no arm
    is cross-checked and
    the sentence says why."""
    if not enabled:
        return (), f"{tool} cross-check off (`{flag if '=' in flag else (flag or tool) + '=False'}`)."
    import importlib

    from benchlib.core.errors import BuildError, ToolchainMissing

    module = importlib.import_module(f"benchlib.loadgen.peers.{tool}")
    try:
        version = getattr(module, f"{tool}_version")(getattr(module, f"ensure_{tool}")()) or tool
    except (ToolchainMissing, BuildError) as exc:
        return (), f"{tool} cross-check not run: {exc}"
    chosen = tuple(arms)
    return chosen, f"{version} on {', '.join(chosen)}" if chosen else f"{tool}: no arm to cross-check"
