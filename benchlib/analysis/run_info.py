"""How a run was measured and on what, as Markdown for the report: the design (arms, limits
asked and enforced, loads, blocks, CPUs) and the provenance (machine, runtime, toolchains,
packages, git), with the parameters the run was made with, the two commands that rebuild its
report and measure it again, and every trial's rate and p99 over its time (a plot)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from benchlib.analysis.disturbed import machine_during_trials
from benchlib.store.results import Run

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["design_markdown", "parameters_markdown", "planned_design_parameters", "provenance_markdown",
           "seed_stacks_markdown", "stored_where", "timeline_markdown", "trial_windows"]


def _cpus(cpus: Any) -> str:
    return ",".join(str(c) for c in cpus)


def _limits_text(lim: Any) -> str:
    parts = [f"{lim.cpus:g} CPU" if lim.cpus else "", f"{lim.memory_mb} MB" if lim.memory_mb else ""]
    return ", ".join(p for p in parts if p) or "none requested"


def _project_relative(path: str) -> str | None:
    """``path`` relative to the project (POSIX), or ``None`` when it lies outside it."""
    from pathlib import Path

    from benchlib.runtime.manifest import find_services_dir

    try:
        return Path(path).resolve().relative_to(find_services_dir().parent.resolve()).as_posix()
    except (ValueError, OSError):
        return None


def stored_where(run: Run) -> str:
    """Where the run is stored, relative to the project (``data/runs/<study>/<run_id>``); a run
    stored outside the project is named ``<runs folder>/<study>/<run_id>``, so that no absolute
    path of the machine that measured it reaches a report."""
    return _project_relative(str(run.path)) or f"<runs folder>/{run.path.parent.name}/{run.path.name}"


#: Notebook parameters that describe where and how a run was shown, not what it measured.
_NOT_MEASUREMENT = ("progress", "run_id")


def run_parameters(run: Run) -> dict[str, Any]:
    """The notebook parameters the run was made with (run.json's ``notebook_parameters``, as
    :func:`~benchlib.analysis.params.as_asked` gives them: a run stored before it may hold a
    ``budget_min`` of ``None``), with ``out_dir`` relative to the project (``<runs folder>`` when
    outside it) and without ``progress`` and ``run_id``."""
    from benchlib.analysis.params import as_asked

    out: dict[str, Any] = {}
    for name, value in as_asked(run.notebook_parameters).items():
        if name in _NOT_MEASUREMENT:
            continue
        if name == "out_dir" and value:
            value = _project_relative(str(value)) or "<runs folder>"
        out[name] = value
    return out


def _command(study: str, params: Mapping[str, Any]) -> str:
    words = ["benchlib", "run", study]
    for name, value in params.items():
        words += ["-p", name, str(value)]
    return " ".join(shlex.quote(w) for w in words)


#: The notebook parameters that set a design's blocks, measured seconds and warm-up.
_DESIGN_PARAMETERS = ("trials", "duration_s", "warmup_s")


def planned_design_parameters(run: Run) -> dict[str, Any] | None:
    """For a run planned within a budget (:attr:`Run.plan`): its notebook parameters with the
    design that ran in place of the budget (``trials``, ``duration_s``, ``warmup_s`` as planned,
    ``budget_min`` 0), the parameters that measure that design again without a pilot; ``None``
    without a plan, or when the notebook does not take all three (its trial length is set
    otherwise, e.g. a ``scale``)."""
    plan = run.plan
    params = run_parameters(run)
    if plan is None or not all(k in params for k in _DESIGN_PARAMETERS):
        return None
    exp = run.experiment
    loads = [c.load for c in exp.conditions] if exp is not None else []
    if any(ld.duration_s is None or ld.requests is not None or ld.stages for ld in loads):
        return None  # a request-count load kept its length: no duration_s to ask for
    out = {**params, "trials": plan.trials, "duration_s": plan.duration_s, "warmup_s": plan.warmup_s,
           "budget_min": 0}
    out.pop("target_mde", None)
    return out


def parameters_markdown(run: Run) -> str:
    """The parameters the run was made with and the two commands: one that rebuilds this report
    from the stored trials (``-p run_id <id>`` resumes the run: every trial is stored, so
    nothing is measured again) and one that measures it again (a new run id, the same
    parameters). A run planned within a budget also says the design that ran (the pilot, the
    planned blocks, measured seconds and warm-up: :attr:`Run.plan`) and, where the notebook
    takes them, the command that measures that design again without a pilot."""
    params = run_parameters(run)
    shown = ", ".join(f"`{n}={v!r}`" for n, v in params.items()) or "the notebook's defaults"
    outside = " (`<runs folder>`: the folder it was stored in, outside the project)" \
        if params.get("out_dir") == "<runs folder>" else ""
    plan = run.plan
    lines = [
        f"- parameters asked: {shown}{outside}" if plan is not None else f"- parameters: {shown}{outside}",
        f"- rebuild this report from the stored trials: `{_command(run.study, {**params, 'run_id': run.run_id})}`",
        (f"- measure it again (a new run id, the same parameters: a new pilot plans the design again): "
         f"`{_command(run.study, params)}`" if plan is not None else
         f"- measure it again (a new run id, the same parameters): `{_command(run.study, params)}`"),
    ]
    if plan is not None:
        lines.insert(1, f"- design that ran: {plan.describe()}")
        fixed = planned_design_parameters(run)
        if fixed is not None:
            lines.append(f"- measure the design that ran again, without a pilot: `{_command(run.study, fixed)}`")
    return "\n".join(lines)


def design_markdown(run: Run) -> str:
    """How the run was measured: arms (runtime, limits as requested and as enforced), load,
    design, CPUs, where stored."""
    from benchlib.runtime.manifest import get_manifest

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
                     + (f"; cross-check: {', '.join(x.tool for x in c.cross_checks)}" if c.cross_checks else ""))
    lines += [
        f"- design: {exp.trials} randomized, counterbalanced blocks per condition; each trial is a fresh service "
        "start with a fresh client and its own warm-up; the analysis pairs trials by block",
        f"- CPUs: service on {_cpus(cpus.server)}, load generator on "
        f"{_cpus(cpus.client)}, dependencies on {_cpus(cpus.dependencies)}",
        f"- baseline: **{exp.baseline_arm}**; seed {exp.seed}",
    ]
    return "\n".join(lines)


def provenance_markdown(run: Run) -> str:
    """The machine and software facts of the run, from run.json."""
    p = run.provenance
    tools = ", ".join(f"{k}: {v}" for k, v in p.toolchains.items()) or "none"
    pk = p.packages
    pkgs = ", ".join(f"{k} {pk[k]}" for k in ("benchlib", "numpy", "scipy", "pandas", "uvloop") if k in pk)
    services = "; ".join(f"{name}: " + ", ".join(b.toolchains.values())
                         for name, b in run.record.builds.items() if b.toolchains)
    default = run.record.runtime.name or None
    own: dict[str, list[str]] = {}
    for arm in run.require_experiment().arms:
        if arm.runtime and arm.runtime != default:
            own.setdefault(arm.runtime, []).append(arm.name)
    per_arm = "".join(f", arms {', '.join(names)} on {name}" for name, names in own.items())
    return "\n".join([
        parameters_markdown(run),
        f"- benchlib {pk.get('benchlib', '?')}, git {str(p.git_sha)[:12]}"
        + (" (uncommitted changes)" if p.git_dirty else ""),
        f"- machine: {p.cpu_model} x {p.cpu_count} CPUs, {p.memory_gb} GB, kernel "
        f"{p.kernel}, {p.os}; governor {sorted(set(p.governor.values()))}; "
        f"load average at start {list(p.loadavg_at_start)}",
        machine_during_trials(run),
        f"- runtime: {default}" + (f" (the default{per_arm})" if per_arm else "") + f"; cgroups {p.cgroups}"
        + (f"; engine {run.record.runtime.engine_version}" if run.record.runtime.engine_version else ""),
        f"- toolchains: {tools}",
        *([f"- services built with: {services}"] if services else []),
        f"- Python {p.python}; {pkgs}",
        f"- run started {p.collected_utc or None}, finished {run.record.finished_utc or 'not finished'}",
        "", timeline_markdown(run),
    ])


def trial_windows(run: Run, *, windows: int = 30) -> pd.DataFrame:
    """Every stored trial's time course: per trial ``windows`` equal windows of its time (by
    each request's completion, s since the trial's start), with the completed requests per
    second (``rate_rps``), the p99 latency of the successful ones (``p99_ms``; NaN in a window
    with none) and whether the window lies in the warm-up. Columns ``trial``
    (``condition/arm/b<block>``), ``condition``, ``arm``, ``block``, ``t_s``, ``rate_rps``,
    ``p99_ms``, ``warmup``."""
    import numpy as np
    import pandas as pd

    from benchlib.core.errors import StorageError
    from benchlib.store.records import rows as R

    frames = []
    for t in run.trials:
        try:
            rows = t.rows()
        except StorageError:
            continue
        if not len(rows):
            continue
        end = float(rows["t_done_ns"].max()) / 1e9
        if not end > 0:
            continue
        edges = np.linspace(0.0, end, windows + 1)
        def window_of(r: np.ndarray, edges: np.ndarray = edges) -> np.ndarray:
            return np.clip(np.searchsorted(edges, r["t_done_ns"] / 1e9, side="right") - 1, 0, windows - 1)

        good = R.ok(rows)
        good_idx, good_lat = window_of(good), R.latency_ms(good)
        counts = np.bincount(window_of(rows), minlength=windows)
        warm = R.warmup(rows)
        warm_end = float(warm["t_done_ns"].max()) / 1e9 if len(warm) else 0.0
        width = end / windows
        rate, p99 = counts / width, np.full(windows, np.nan)
        for w in range(windows):
            lat = good_lat[good_idx == w]
            if len(lat):
                p99[w] = float(np.quantile(lat, 0.99))
        centres = (edges[:-1] + edges[1:]) / 2
        frames.append(pd.DataFrame({"trial": f"{t.condition}/{t.arm}/b{t.block:03d}", "condition": t.condition,
                                    "arm": t.arm, "block": t.block, "t_s": centres, "rate_rps": rate,
                                    "p99_ms": p99, "warmup": edges[1:] <= warm_end}))
    if not frames:
        return pd.DataFrame(columns=["trial", "condition", "arm", "block", "t_s", "rate_rps", "p99_ms", "warmup"])
    return pd.concat(frames, ignore_index=True)


def timeline_markdown(run: Run) -> str:
    """The section "Each trial over time": every trial's completion rate and p99 latency over
    its time (:func:`benchlib.analysis.plots.trial_timeline` of :func:`trial_windows`), per condition, as
    Markdown with the figure inline (a PNG data URI: the report stays one file); "" when no
    trial has rows."""
    import base64
    import io

    import matplotlib.pyplot as plt

    from benchlib.analysis import plots

    windows = trial_windows(run)
    if windows.empty:
        return ""
    parts = ["**Each trial over time**: completed requests per second and p99 latency in 30 windows of "
             "each trial (warm-up shaded), one line per trial; a trial that drifts, stalls or starts "
             "slowly shows here, where its summary cannot."]
    for condition, w in windows.groupby("condition", sort=False):
        fig, axes = plt.subplots(2, 1, figsize=(11, 4.6), sharex=True)
        plots.trial_timeline(w, axes=axes)
        axes[0].set_title(f"condition {condition}", fontsize="medium")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=72)
        plt.close(fig)
        data = base64.b64encode(buf.getvalue()).decode("ascii")
        parts.append(f'<img alt="each trial over time, condition {condition}" src="data:image/png;base64,{data}"/>')
    return "\n\n".join(parts)
def seed_stacks_markdown(run: Run, stacks: Mapping[str, Sequence[str]]) -> str:
    """Which of the seed's stacks ran here and which did not, for a report's first lines, from
    the run's arms and its arms not run (``stacks``: the study's ``SEED_STACKS``, the seed's
    stack in words -> the prefixes of this study's arm names that run it)."""
    exp = run.require_experiment()
    ran_arms = {t.arm for t in run.trials}
    ran, missing = [], []
    for label, prefixes in stacks.items():
        arms = [a.name for a in exp.arms if a.name.startswith(tuple(prefixes))]
        if any(a in ran_arms for a in arms):
            ran.append(label)
            continue
        why = sorted({run.unavailable[a] for a in arms if a in run.unavailable})
        missing.append(f"{label} ({'; '.join(why) if why else 'not selected in this run' if not arms else 'no trial'})")
    out = "**The seed's stacks in this run**: ran here: " + (", ".join(ran) or "none")
    out += "; did not run here: " + (", ".join(missing) if missing else "none") + "."
    if missing:
        out += " Nothing in this report measures a stack that did not run: a result for another stack is no result for it."
    return out
