"""Display helpers shared by the study notebooks, so the notebooks stay thin.

Each function returns a pandas DataFrame or a Markdown string built from a run's stored
data; :func:`show` renders either in a notebook (and prints it elsewhere).
"""

from __future__ import annotations

from typing import Any, Iterable

from benchlib.runner import ExperimentResult

__all__ = ["design_markdown", "contracts_table", "provenance_markdown", "show", "status_table"]


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


def design_markdown(result: ExperimentResult) -> str:
    """How the run was measured: arms, load, design, runtime, CPUs, limits, where stored."""
    from benchlib.manifest import get_manifest

    exp = result.experiment
    run = result.store.read_run()
    cpus = run.get("cpus", {})
    lines = [f"**Run** `{result.run_id}` of study `{exp.study}`, stored in `{result.store.path}`.", ""]
    lines.append("| arm | service | variant | language | framework | log sink |")
    lines.append("|---|---|---|---|---|---|")
    for arm in exp.arms:
        m = get_manifest(arm.service)
        variant = arm.variant or m.default_variant
        lines.append(f"| {arm.name} | `{arm.service}` | {variant} | {m.language} | {m.framework} | {arm.log_sink} |")
    lines.append("")
    for c in exp.conditions:
        lines.append(f"- condition **{c.name}**: {c.load.describe()}" + (f", endpoint `{c.endpoint}`" if c.endpoint else ""))
    lim = exp.limits
    limits = ", ".join(x for x in (f"{lim.cpus:g} CPU" if lim.cpus else "", f"{lim.memory_mb} MB" if lim.memory_mb else "") if x)
    lines += [
        f"- design: {exp.trials} randomized, counterbalanced blocks per condition; each trial is a fresh service "
        "start with a fresh client and its own warm-up; the analysis pairs trials by block",
        f"- runtime: `{exp.runtime}`; service on CPU {_fmt_cpus(cpus.get('server', []))}, load generator on CPU "
        f"{_fmt_cpus(cpus.get('client', []))}" + (f"; limits: {limits}" if limits else "; no CPU quota or memory cap"),
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
    return pd.DataFrame(out)


def provenance_markdown(result: ExperimentResult) -> str:
    """The machine and software facts of the run, from run.json."""
    run = result.store.read_run()
    p = run.get("provenance", {})
    git = p.get("git", {})
    tools = ", ".join(f"{k}: {v}" for k, v in p.get("toolchains", {}).items()) or "none"
    pk = p.get("packages", {})
    pkgs = ", ".join(f"{k} {pk[k]}" for k in ("benchlib", "numpy", "scipy", "pandas", "uvloop") if k in pk)
    rt = run.get("runtime", {})
    return "\n".join([
        f"- machine: {p.get('cpu_model')} x {p.get('cpu_count')} CPUs, {p.get('memory_gb')} GB, kernel "
        f"{p.get('kernel')}, {p.get('os')}; governor {sorted(set(p.get('governor', {}).values()))}; "
        f"load average at start {p.get('loadavg_at_start')}",
        f"- runtime: {rt.get('runtime')}; cgroups {p.get('cgroups')}"
        + (f"; engine {rt.get('engine_version')}" if rt.get("engine_version") else ""),
        f"- toolchains: {tools}",
        f"- Python {p.get('python')}; {pkgs}",
        f"- benchlib git {str(git.get('sha'))[:12]}" + (" (uncommitted changes)" if git.get("dirty") else ""),
        f"- run started {p.get('collected_utc')}, finished {run.get('finished_utc', 'not finished')}",
    ])
