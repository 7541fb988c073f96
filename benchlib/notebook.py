"""Display helpers shared by the study notebooks, so the notebooks stay thin.

Each function returns a pandas DataFrame or a Markdown string built from a run's stored
data; :func:`show` renders either in a notebook (and prints it elsewhere).
"""

from __future__ import annotations

from typing import Any, Iterable

from benchlib.runner import ExperimentResult

__all__ = ["compare_valid", "contracts_table", "design_markdown", "provenance_markdown", "show", "footnotes_markdown", "status_table", "verdict_sentences", "verdict_table"]


def show(obj: Any) -> None:
    """Render a Markdown string or a DataFrame in a notebook; print it elsewhere."""
    try:
        from IPython.display import Markdown, display
    except ImportError:  # pragma: no cover - IPython comes with jupyterlab
        print(obj)
        return
    if isinstance(obj, str):
        display(Markdown(obj))
    else:
        display(obj)


def _fmt_cpus(cpus: Iterable[int]) -> str:
    return ",".join(str(c) for c in cpus)


def _limits_text(lim: Any) -> str:
    parts = [f"{lim.cpus:g} CPU" if lim.cpus else "", f"{lim.memory_mb} MB" if lim.memory_mb else ""]
    return ", ".join(p for p in parts if p) or "none requested"


def _enforced_text(enforced: dict[str, Any]) -> str:
    """One line of what a runtime recorded as enforced (CPU set, quota, memory cap)."""
    keys = [("cpuset", "CPU set"), ("cpu", "CPU quota"), ("memory", "memory")]
    bits = [f"{label} {enforced[k]}" for k, label in keys if k in enforced]
    if "cpus" in enforced:
        bits.insert(0, f"CPUs {_fmt_cpus(enforced['cpus'])}")
    if enforced.get("memory_mb"):
        bits.append(f"cap {enforced['memory_mb']} MB")
    if enforced.get("cpu_quota"):
        bits.append(f"quota {enforced['cpu_quota']:g} CPU")
    return "; ".join(str(b) for b in bits) or "nothing recorded"


def design_markdown(result: ExperimentResult) -> str:
    """How the run was measured: arms (runtime, limits as requested and as enforced), load,
    design, CPUs, where stored."""
    from benchlib.manifest import get_manifest

    exp = result.experiment
    run = result.store.read_run()
    cpus = run.get("cpus", {})
    enforced: dict[str, dict[str, Any]] = {}
    for t in result.trials():
        if t.arm not in enforced and t.meta.get("enforced"):
            enforced[t.arm] = dict(t.meta["enforced"])
    lines = [f"**Run** `{result.run_id}` of study `{exp.study}`, stored in `{result.store.path}`.", ""]
    lines.append("| arm | service | variant | language | framework | log sink | runtime | limits asked | enforced (read back) |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for arm in exp.arms:
        m = get_manifest(arm.service)
        variant = arm.variant or m.default_variant
        lim = arm.limits or exp.limits
        enf = _enforced_text(enforced[arm.name]) if arm.name in enforced else (
            f"not run: {result.unavailable[arm.name]}" if arm.name in result.unavailable else "–")
        lines.append(f"| {arm.name} | `{arm.service}` | {variant} | {m.language} | {m.framework} | {arm.log_sink} | "
                     f"{arm.runtime or exp.runtime} | {_limits_text(lim)} | {enf} |")
    lines.append("")
    for c in exp.conditions:
        lines.append(f"- condition **{c.name}**: {c.load.describe()}" + (f", endpoint `{c.endpoint}`" if c.endpoint else "")
                     + (f"; cross-check: {c.cross_check.tool}" if c.cross_check else ""))
    lines += [
        f"- design: {exp.trials} randomized, counterbalanced blocks per condition; each trial is a fresh service "
        "start with a fresh client and its own warm-up; the analysis pairs trials by block",
        f"- CPUs: service on {_fmt_cpus(cpus.get('server', []))}, load generator on "
        f"{_fmt_cpus(cpus.get('client', []))}, dependencies on {_fmt_cpus(cpus.get('dependencies', []))}",
        f"- baseline: **{exp.baseline_arm}**; seed {exp.seed}",
    ]
    return "\n".join(lines)


def status_table(result: ExperimentResult) -> Any:
    """Per arm and condition: trials ok / failed / invalid (with reasons), and arms not run."""
    import pandas as pd

    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for t in result.trials():
        key = (t.condition, t.arm)
        r = rows.setdefault(key, {"condition": t.condition, "arm": t.arm, "ok": 0, "failed": 0, "invalid": 0,
                                  "reasons": set()})
        status = str(t.meta.get("status"))
        r[status] = r.get(status, 0) + 1
        if status != "ok" and t.meta.get("reason"):
            r["reasons"].add(str(t.meta["reason"])[:160])
    out = [{**r, "reasons": "; ".join(sorted(r["reasons"]))} for r in rows.values()]
    for arm, why in result.unavailable.items():
        for c in result.experiment.conditions:
            out.append({"condition": c.name, "arm": arm, "ok": 0, "failed": 0, "invalid": 0,
                        "reasons": f"not run: {why}"})
    return pd.DataFrame(out, columns=["condition", "arm", "ok", "failed", "invalid", "reasons"])


def contracts_table(result: ExperimentResult) -> Any:
    """What each arm answered at its contract check (first stored trial per arm and condition)."""
    import pandas as pd

    seen = set()
    out = []
    for t in result.trials():
        key = (t.condition, t.arm)
        c = t.meta.get("contract")
        if key in seen or not c:
            continue
        seen.add(key)
        out.append({"condition": t.condition, "arm": t.arm, "endpoint": c.get("url", "").split("/", 3)[-1],
                    "status": c.get("status"), "content_type": c.get("content_type"),
                    "body": c.get("body_head"), "bytes": c.get("body_bytes"),
                    "contract": "ok" if c.get("ok") else "; ".join(c.get("problems", []))})
    for arm, why in result.unavailable.items():
        out.append({"condition": "-", "arm": arm, "contract": f"not run: {why}"})
    return pd.DataFrame(out).fillna("")


def provenance_markdown(result: ExperimentResult) -> str:
    """The machine and software facts of the run, from run.json."""
    run = result.store.read_run()
    p = run.get("provenance", {})
    git = p.get("git", {})
    tools = ", ".join(f"{k}: {v}" for k, v in p.get("toolchains", {}).items()) or "none"
    pk = p.get("packages", {})
    pkgs = ", ".join(f"{k} {pk[k]}" for k in ("benchlib", "numpy", "scipy", "pandas", "uvloop") if k in pk)
    rt = run.get("runtime", {})
    default = rt.get("runtime")
    own = {}
    for arm in result.experiment.arms:
        if arm.runtime and arm.runtime != default:
            own.setdefault(arm.runtime, []).append(arm.name)
    per_arm = "".join(f", arms {', '.join(names)} on {name}" for name, names in own.items())
    return "\n".join([
        f"- machine: {p.get('cpu_model')} x {p.get('cpu_count')} CPUs, {p.get('memory_gb')} GB, kernel "
        f"{p.get('kernel')}, {p.get('os')}; governor {sorted(set(p.get('governor', {}).values()))}; "
        f"load average at start {p.get('loadavg_at_start')}",
        f"- runtime: {default}" + (f" (the default{per_arm})" if per_arm else "") + f"; cgroups {p.get('cgroups')}"
        + (f"; engine {rt.get('engine_version')}" if rt.get("engine_version") else ""),
        f"- toolchains: {tools}",
        f"- Python {p.get('python')}; {pkgs}",
        f"- benchlib git {str(git.get('sha'))[:12]}" + (" (uncommitted changes)" if git.get("dirty") else ""),
        f"- run started {p.get('collected_utc')}, finished {run.get('finished_utc', 'not finished')}",
    ])


_METRIC_WORDS = {
    "p50_ms": "median latency (p50)", "p90_ms": "p90 latency", "p99_ms": "p99 latency", "p999_ms": "p99.9 latency",
    "mean_ms": "mean latency", "throughput_rps": "throughput", "error_rate": "error rate",
    "service_p50_ms": "median service time",
}


def verdict_sentences(comparison: Any, *, metrics: Iterable[str] | None = None) -> str:
    """The comparison's verdicts in words, one bullet per row, every figure from the table.

    Example: "go vs py, median latency (p50): ratio 0.40 [0.32, 0.51] (-60%), exact
    Wilcoxon signed-rank p = 0.031, Holm-adjusted 0.094 over 3 rows: insufficient trials".
    """
    from benchlib.stats.verdict import VerdictKind

    if comparison is None:
        return "_No comparison could be made in this run (see the status table: arms not run or without valid trials)._"
    table = comparison.table
    if metrics is not None:
        table = table[table["metric"].isin(list(metrics))]
    lines = []
    for _, r in table.iterrows():
        what = _METRIC_WORDS.get(str(r["metric"]), str(r["metric"]))
        cond = f" [{r['condition']}]" if "condition" in r and r["condition"] not in (None, "main") else ""
        if r.get("effect") == "ratio" and r.get("ratio") == r.get("ratio"):
            eff = (f"ratio {r['ratio']:.2f} [{r['ci_lo']:.2f}, {r['ci_hi']:.2f}] "
                   f"({r['pct_change']:+.0f}%, {r['better']} is better)")
        elif r.get("diff") == r.get("diff") and r.get("diff") is not None:
            eff = f"difference {r['diff']:+.3g} [{r['diff_lo']:+.3g}, {r['diff_hi']:+.3g}]"
        else:
            eff = "no estimate"
        p = r.get("p_raw")
        ptxt = (f"{r.get('test', 'test')} p = {p:.3g}, {r.get('correction', '')}-adjusted {r['p_adj']:.3g} over "
                f"{int(r.get('family_size', 1))} rows" if p == p and p is not None else "no test")
        mde = r.get("mde_pct")
        mde_txt = f"; smallest effect this design detects with 80% power: {mde:.1f}%" if (
            isinstance(mde, float) and mde == mde and mde != float("inf")
            and r.get("verdict_kind") == VerdictKind.NO_DIFFERENCE) else ""
        lines.append(f"- **{r['arm']} vs {r['baseline']}**{cond}, {what}: {eff}; {ptxt} → **{r['verdict']}**{mde_txt}")
    return "\n".join(lines) if lines else "_No comparison rows (fewer than two arms ran)._"


def verdict_table(comparison: Any, result: ExperimentResult | None = None) -> Any:
    """The comparison as a readable table for HTML reports (formatted strings), one row per
    condition x metric x arm; footnote marks refer to ``comparison.footnotes``. With
    ``result``, arms that did not run are added as rows "not run: <why>" (never dropped)."""
    import pandas as pd

    from benchlib.stats.report import fmt_centre, fmt_p, fmt_pct
    from benchlib.stats.verdict import Verdict, render

    rows = []
    table = comparison.table if comparison is not None else pd.DataFrame()
    for _, r in table.iterrows():
        unit = str(r.get("unit", ""))
        if r.get("effect") == "ratio":
            eff = f"{r['ratio']:.3g} [{r['ci_lo']:.3g}, {r['ci_hi']:.3g}]" if r["ratio"] == r["ratio"] else "–"
            change = fmt_pct(r["pct_change"], signed=True) if r["pct_change"] == r["pct_change"] else "–"
        else:
            eff = f"{r['diff']:+.3g} [{r['diff_lo']:+.3g}, {r['diff_hi']:+.3g}]" if r["diff"] == r["diff"] else "–"
            change = "–"
        rows.append({
            "condition": r.get("condition", ""),
            "metric": f"{_METRIC_WORDS.get(str(r['metric']), r['metric'])} ({r['better']} is better)",
            "baseline": f"{r['baseline']}: " + fmt_centre(r["centre_baseline"], r["pm_baseline"], unit,
                                                          r.get("pm_confidence_baseline")),
            "arm": f"{r['arm']}: " + fmt_centre(r["centre_arm"], r["pm_arm"], unit, r.get("pm_confidence_arm")),
            "arm / baseline [95% CI]": eff,
            "change": change,
            "p (raw)": fmt_p(r["p_raw"]),
            f"p ({r.get('correction', 'adj')})": fmt_p(r["p_adj"]),
            "verdict": str(r["verdict"]) + (f" ({r['notes']})" if r.get("notes") else ""),
        })
    if result is not None:
        for arm, why in result.unavailable.items():
            for c in result.experiment.conditions:
                v = Verdict.not_run(why, arm=arm, labels={"condition": c.name})
                rows.append({"condition": c.name, "metric": v.metric, "arm": arm, "verdict": render(v)})
    return pd.DataFrame(rows).fillna("")


def footnotes_markdown(comparison: Any) -> str:
    """The comparison's diagnostic footnotes as a Markdown list ("" when there are none)."""
    notes = list(comparison.footnotes) if comparison is not None else []
    return "**Notes**\n\n" + "\n".join(f"- {n}" for n in notes) if notes else ""


def compare_valid(result: ExperimentResult, summaries: Any, *, baseline: str | None = None, **kwargs: Any) -> Any:
    """:func:`benchlib.stats.compare` over the conditions where the baseline and at least one
    other arm have valid trials. Conditions where that is not so are shown with the reason
    (arms not run, trials failed or invalid) and left out; returns ``None`` when none is left.

    ``kwargs`` go to ``compare`` unchanged (metrics, seed, correction, ...).
    """
    from benchlib import stats

    base = baseline or result.experiment.baseline_arm
    valid = summaries[summaries["valid"].astype(bool)] if len(summaries) else summaries
    keep = []
    for cond in [c.name for c in result.experiment.conditions]:
        arms = sorted(set(valid.loc[valid["condition"] == cond, "arm"])) if len(valid) else []
        if base in arms and len(arms) >= 2:
            keep.append(cond)
            continue
        why = [f"{a}: not run ({r})" for a, r in result.unavailable.items()]
        bad = summaries[(summaries["condition"] == cond) & ~summaries["valid"].astype(bool)] if len(summaries) else summaries
        for arm, g in (bad.groupby("arm") if len(bad) else []):
            why.append(f"{arm}: {len(g)} trial(s) {', '.join(sorted(set(g['status'].astype(str))))}")
        show(f"**No comparison in condition `{cond}`**: arms with valid trials there: {arms or 'none'} "
             f"(baseline `{base}`). " + ("; ".join(why) if why else ""))
    if not keep:
        return None
    return stats.compare(summaries[summaries["condition"].isin(keep)], baseline=base, **kwargs)
