"""How a run was measured and on what, as Markdown for the report: the design (arms, limits
asked and enforced, loads, blocks, CPUs) and the provenance (machine, runtime, toolchains,
packages, git)."""

from __future__ import annotations

from typing import Any

from benchlib.results import Run

__all__ = ["design_markdown", "provenance_markdown", "stored_where"]


def _cpus(cpus: Any) -> str:
    return ",".join(str(c) for c in cpus)


def _limits_text(lim: Any) -> str:
    parts = [f"{lim.cpus:g} CPU" if lim.cpus else "", f"{lim.memory_mb} MB" if lim.memory_mb else ""]
    return ", ".join(p for p in parts if p) or "none requested"


def stored_where(run: Run) -> str:
    """Where the run is stored, relative to the project (``data/runs/<study>/<run_id>``); a run
    stored outside the project is named ``<runs folder>/<study>/<run_id>``, so that no absolute
    path of the machine that measured it reaches a report."""
    from benchlib.manifest import find_services_dir

    try:
        return run.path.resolve().relative_to(find_services_dir().parent.resolve()).as_posix()
    except (ValueError, OSError):
        return f"<runs folder>/{run.path.parent.name}/{run.path.name}"


def design_markdown(run: Run) -> str:
    """How the run was measured: arms (runtime, limits as requested and as enforced), load,
    design, CPUs, where stored."""
    from benchlib.manifest import get_manifest

    exp = run.require_experiment()
    enforced = {}
    for t in run.trials:
        if t.arm not in enforced and t.enforced is not None:
            enforced[t.arm] = t.enforced.describe()
    cpus = run.cpus
    lines = [f"**Run** `{run.run_id}` of study `{exp.study}`, stored in `{stored_where(run)}`.", ""]
    lines.append("| arm | service | variant | language | framework | log sink | runtime | limits asked | enforced (read back) |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for arm in exp.arms:
        m = get_manifest(arm.service)
        enf = enforced.get(arm.name) or (f"not run: {run.unavailable[arm.name]}" if arm.name in run.unavailable
                                         else "–")
        lines.append(f"| {arm.name} | `{arm.service}` | {arm.variant or m.default_variant} | {m.language} | "
                     f"{m.framework} | {arm.log_sink} | {arm.runtime or exp.runtime} | "
                     f"{_limits_text(arm.limits or exp.limits)} | {enf} |")
    lines.append("")
    for c in exp.conditions:
        lines.append(f"- condition **{c.name}**: {c.load.describe()}" + (f", endpoint `{c.endpoint}`" if c.endpoint else "")
                     + (f"; cross-check: {c.cross_check.tool}" if c.cross_check else ""))
    lines += [
        f"- design: {exp.trials} randomized, counterbalanced blocks per condition; each trial is a fresh service "
        "start with a fresh client and its own warm-up; the analysis pairs trials by block",
        f"- CPUs: service on {_cpus(cpus.get('server', []))}, load generator on "
        f"{_cpus(cpus.get('client', []))}, dependencies on {_cpus(cpus.get('dependencies', []))}",
        f"- baseline: **{exp.baseline_arm}**; seed {exp.seed}",
    ]
    return "\n".join(lines)


def provenance_markdown(run: Run) -> str:
    """The machine and software facts of the run, from run.json."""
    p = run.provenance
    git = p.get("git", {})
    tools = ", ".join(f"{k}: {v}" for k, v in p.get("toolchains", {}).items()) or "none"
    pk = p.get("packages", {})
    pkgs = ", ".join(f"{k} {pk[k]}" for k in ("benchlib", "numpy", "scipy", "pandas", "uvloop") if k in pk)
    default = run.runtime.get("runtime")
    own: dict[str, list[str]] = {}
    for arm in run.require_experiment().arms:
        if arm.runtime and arm.runtime != default:
            own.setdefault(arm.runtime, []).append(arm.name)
    per_arm = "".join(f", arms {', '.join(names)} on {name}" for name, names in own.items())
    return "\n".join([
        f"- machine: {p.get('cpu_model')} x {p.get('cpu_count')} CPUs, {p.get('memory_gb')} GB, kernel "
        f"{p.get('kernel')}, {p.get('os')}; governor {sorted(set(p.get('governor', {}).values()))}; "
        f"load average at start {p.get('loadavg_at_start')}",
        f"- runtime: {default}" + (f" (the default{per_arm})" if per_arm else "") + f"; cgroups {p.get('cgroups')}"
        + (f"; engine {run.runtime.get('engine_version')}" if run.runtime.get("engine_version") else ""),
        f"- toolchains: {tools}",
        f"- Python {p.get('python')}; {pkgs}",
        f"- benchlib git {str(git.get('sha'))[:12]}" + (" (uncommitted changes)" if git.get("dirty") else ""),
        f"- run started {p.get('collected_utc')}, finished {run.run.get('finished_utc', 'not finished')}",
    ])
