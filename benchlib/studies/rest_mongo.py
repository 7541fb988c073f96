"""Study 01, "the same REST API in Go, .NET and Rust with MongoDB" (DotnetGoRustBenchmark):
the arms, loads, contrasts and tables of ``notebooks/01_rest_mongo_go_dotnet_rust.ipynb``.

The seed ran k6 ``constant-arrival-rate`` (100 pre-allocated VUs, 10 s) at 100 requests/s
on ``GET /helloWorld`` and 10/s on ``GET /users/1`` against three APIs, each limited to
1 CPU and 512 MB, and reported k6's ``http_req_duration`` once per cell. Here every
implementation runs in a ``faithful`` variant (the study's code behaviour) and a ``fair`` one
(release build, one pooled client, no per-request log, identical bodies); see
``docs/studies/01_rest_mongo.md``.

Three questions, each a set of (baseline, arm) contrasts compared in one Holm family
(:func:`benchlib.stats.compare` with ``contrasts=``):

* ``language``: every fair variant against Go fair (what the languages and frameworks do
  when the code does the same thing);
* ``implementation``: each language's faithful variant against its own fair variant (what
  per-request connections, debug builds and per-request logging cost);
* ``original``: the faithful variants against faithful Go (the original's own comparison,
  reproduced).

Arms that cannot run here (.NET without an SDK) stay in every table as "not run: why".
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from benchlib.errors import ParameterError
from benchlib.model import Arm, Condition, CrossCheck, LoadSpec, Limits

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from benchlib.runner import ExperimentResult
    from benchlib.stats import Comparison

__all__ = [
    "BASELINE", "CONDITIONS", "Contrast", "IMPLEMENTATIONS", "Implementation", "LIMITS", "METRICS", "QUESTIONS",
    "REPEAT_INVALID", "SEED_DURATION_S", "SEED_IN_FLIGHT", "SEED_RATE_RPS", "VARIANTS", "WARMUP_S", "arm_order",
    "compare_study", "conclusion_markdown", "database_info", "k6_setup", "k6_summary_table", "k6_trial_table",
    "limits_table", "not_run_reason", "original_vs_ours", "parse_variants", "percentile_support", "planned_family",
    "repeats_table", "runnable_contrasts", "scaled_load", "study_arms", "study_conditions", "study_contrasts",
    "table", "verdict_tables", "warmup_table",
]


@dataclass(frozen=True)
class Implementation:
    """One implementation of the study's API: ``key`` prefixes its arm names (``go-fair``)."""

    key: str
    label: str
    service: str
    variants: tuple[str, ...]
    in_original: bool


IMPLEMENTATIONS: tuple[Implementation, ...] = (
    Implementation("go", "Go", "go-gin-mongo", ("faithful", "fair"), True),
    Implementation("dotnet", ".NET", "dotnet-mvc-mongo", ("faithful", "fair"), True),
    Implementation("rust", "Rust", "rust-rocket-mongo", ("faithful", "fair"), True),
    Implementation("python", "Python", "python-starlette-mongo", ("fair",), False),
    Implementation("node", "Node.js", "node-fastify-mongo", ("fair",), False),
)
VARIANTS: tuple[str, ...] = ("faithful", "fair")
#: condition name (= manifest endpoint) -> path, as the seed's two tables
CONDITIONS: dict[str, str] = {"helloWorld": "/helloWorld", "users": "/users/1"}
SEED_RATE_RPS: dict[str, int] = {"helloWorld": 100, "users": 10}
SEED_DURATION_S = 10.0
SEED_IN_FLIGHT = 100  # k6 preAllocatedVUs, maxVUs unset
#: the seed had none; 1 s at the trial's rate (100 and 10 requests at scale 1), recorded, not analysed
WARMUP_S = 1.0
#: a trial the load generator's guard invalidates (the client could not keep the schedule) is run again
REPEAT_INVALID = 2
LIMITS = Limits(cpus=1, memory_mb=512)
BASELINE = "go-fair"
METRICS: tuple[str, ...] = ("p50_ms", "p90_ms", "p99_ms")
QUESTIONS: dict[str, str] = {
    "language": "languages: fair variant vs Go fair",
    "implementation": "implementation: faithful vs fair, same language",
    "original": "the original's code: faithful vs Go faithful",
}


@dataclass(frozen=True)
class Contrast:
    """One comparison of the study: ``arm`` against ``baseline``, answering ``question``."""

    question: str
    baseline: str
    arm: str


def _num(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        if v != v:
            return "–"
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
    return str(v)


def table(df: pd.DataFrame) -> Any:
    """``df`` for display in the report: no index column, numbers to 3 significant digits
    (thousands separated, no decimals from 100 up), missing values as "–", cells never
    truncated."""
    floats = [c for c in df.columns if df[c].dtype.kind == "f"]
    others = [c for c in df.columns if c not in floats]
    return (df.style.hide(axis="index").format(_num, subset=floats)
            .format(lambda v: "" if v is None or (isinstance(v, float) and v != v) else v, subset=others))


def parse_variants(text: str | Sequence[str]) -> tuple[str, ...]:
    """``"faithful,fair"`` (or a list) as a tuple in the canonical order.

    Raises
    ------
    ParameterError  for an empty selection or an unknown variant (naming the valid ones).
    """
    items = [v.strip() for v in (text.split(",") if isinstance(text, str) else text) if v.strip()]
    bad = sorted(set(items) - set(VARIANTS))
    if bad or not items:
        raise ParameterError(f"variants must name one or more of {', '.join(VARIANTS)} (comma-separated), "
                             f"got {text!r}")
    return tuple(v for v in VARIANTS if v in items)


def study_arms(variants: Sequence[str] = VARIANTS) -> tuple[Arm, ...]:
    """Every implementation in every selected variant it has, in table order
    (``go-faithful``, ``go-fair``, ``dotnet-faithful``, ...)."""
    return tuple(Arm(f"{impl.key}-{v}", impl.service, v) for impl in IMPLEMENTATIONS for v in impl.variants
                 if v in variants)


def arm_order(names: Iterable[str]) -> list[str]:
    """``names`` in the study's table order."""
    order = [a.name for a in study_arms()]
    names = list(names)
    return [a for a in order if a in names] + sorted(set(names) - set(order))


def _check_scale(scale: float) -> None:
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise ParameterError(f"scale must be a positive number (1.0 = the seed's size), got {scale!r}")


def scaled_load(condition: str, scale: float = 1.0, *, warmup_s: float = WARMUP_S) -> LoadSpec:
    """The seed's load for ``condition`` at ``scale``: open model, constant arrivals at
    ``round(seed rate x scale)`` per second (at least 1) for ``10 s x scale``, at most 100 in
    flight, keep-alive (k6's VUs keep their connections), ``warmup_s`` of warm-up first.
    Requests per trial therefore grow as ``scale**2``."""
    _check_scale(scale)
    if condition not in SEED_RATE_RPS:
        raise ParameterError(f"unknown condition {condition!r}; valid: {', '.join(SEED_RATE_RPS)}")
    rate = max(1, int(round(SEED_RATE_RPS[condition] * scale)))
    return LoadSpec(model="open", arrival="constant", rate_rps=rate, duration_s=SEED_DURATION_S * scale,
                    connections=SEED_IN_FLIGHT, warmup_s=warmup_s, keep_alive=True)


def study_conditions(scale: float = 1.0, *, k6_arms: Sequence[str] | None = None,
                     warmup_s: float = WARMUP_S) -> tuple[Condition, ...]:
    """The two conditions, ``helloWorld`` and ``users``, each on its own endpoint; with
    ``k6_arms``, k6 runs the study's script at the same rate and duration on those arms'
    instances in every trial (before or after benchlib's load, alternating by block)."""
    out = []
    for name in CONDITIONS:
        load = scaled_load(name, scale, warmup_s=warmup_s)
        check = None
        if k6_arms:
            check = CrossCheck("k6", (("rate_rps", int(load.rate_rps or 1)), ("duration_s", float(load.duration_s or 0)),
                                      ("pre_allocated_vus", SEED_IN_FLIGHT)), arms=tuple(k6_arms))
        out.append(Condition(name, load, endpoint=name, cross_check=check))
    return tuple(out)


def study_contrasts(variants: Sequence[str] = VARIANTS) -> list[Contrast]:
    """The study's three questions as (baseline, arm) contrasts, for the selected variants
    (arms that cannot run here included: they are reported as not run)."""
    have = {a.name for a in study_arms(variants)}
    out: list[Contrast] = []
    for impl in IMPLEMENTATIONS:
        if impl.key != "go":
            out.append(Contrast("language", BASELINE, f"{impl.key}-fair"))
    for impl in IMPLEMENTATIONS:
        out.append(Contrast("implementation", f"{impl.key}-fair", f"{impl.key}-faithful"))
    for impl in IMPLEMENTATIONS:
        if impl.in_original and impl.key != "go":
            out.append(Contrast("original", "go-faithful", f"{impl.key}-faithful"))
    return [c for c in out if c.baseline in have and c.arm in have]


def runnable_contrasts(contrasts: Sequence[Contrast], unavailable: Mapping[str, str]) -> list[Contrast]:
    """The contrasts whose two arms both ran."""
    return [c for c in contrasts if c.baseline not in unavailable and c.arm not in unavailable]


def k6_setup(arms: Sequence[Arm], variants: Sequence[str], enabled: bool = True) -> tuple[tuple[str, ...], str]:
    """Which arms k6 cross-checks, and a sentence saying so: the arms of the original's
    cells (Go, .NET, Rust) in their faithful variant (fair when only fair runs). k6 v0.50.0
    is built here, before any trial, if it is missing; when it cannot be, no arm is
    cross-checked and the sentence says why."""
    if not enabled:
        return (), "k6 cross-check off (`k6_check=False`)."
    from benchlib.errors import BuildError, ToolchainMissing
    from benchlib.peers.k6 import ensure_k6, k6_version

    try:
        version = k6_version(ensure_k6()) or "k6"
    except (ToolchainMissing, BuildError) as exc:
        return (), f"k6 cross-check not run: {exc}"
    variant = "faithful" if "faithful" in variants else "fair"
    chosen = tuple(a.name for a in arms if a.variant == variant and
                   any(a.service == i.service and i.in_original for i in IMPLEMENTATIONS))
    return chosen, f"{version} on {', '.join(chosen)}"


def planned_family(contrasts: Sequence[Contrast], unavailable: Mapping[str, str], scale: float,
                   metrics: Sequence[str] = METRICS) -> int:
    """Rows of the Holm family the design will produce: runnable contrasts x the metrics
    each endpoint's trials support at ``scale``."""
    from benchlib.stats import required_requests

    qs = {m: float(m[1:-3]) / 10 ** (len(m[1:-3])) for m in metrics}  # p50_ms -> 0.5, p999_ms -> 0.999
    n = len(runnable_contrasts(contrasts, unavailable))
    total = 0
    for cond in CONDITIONS:
        load = scaled_load(cond, scale)
        requests = (load.rate_rps or 0) * (load.duration_s or 0)
        total += n * sum(1 for q in qs.values() if requests >= required_requests(q))
    return total


def not_run_reason(why: str) -> str:
    """The runner's reason an arm did not run, shortened for tables (the rendered
    :meth:`~benchlib.stats.verdict.Verdict.not_run` verdict)."""
    from benchlib.stats.verdict import Verdict, render

    if why.startswith("no dotnet toolchain"):
        why = "no .NET SDK (no `dotnet` on PATH)"
    return render(Verdict.not_run(why))


def compare_study(summaries: pd.DataFrame, contrasts: Sequence[Contrast], unavailable: Mapping[str, str], *,
                  seed: int = 0, metrics: Sequence[str] = METRICS) -> Comparison | None:
    """:func:`benchlib.stats.compare` over the runnable contrasts, one Holm family over both
    endpoints and every metric; ``None`` when no contrast can be computed."""
    from benchlib import stats

    pairs = [(c.baseline, c.arm) for c in runnable_contrasts(contrasts, unavailable)]
    valid = summaries[summaries["valid"].astype(bool)] if "valid" in summaries.columns else summaries
    arms = set(valid["arm"])
    if not any(b in arms and a in arms for b, a in pairs):
        return None
    present = tuple(m for m in metrics if m in summaries.columns)
    return stats.compare(summaries, contrasts=pairs, metrics=present, seed=seed)


def verdict_tables(comparison: Comparison | None, contrasts: Sequence[Contrast], unavailable: Mapping[str, str]
                   ) -> dict[str, pd.DataFrame]:
    """One verdict table per condition (:func:`benchlib.notebook.verdict_table` with the
    question in front), rows for metrics no trial could support left out, and a "not run"
    row for every contrast whose arm could not run here."""
    import pandas as pd

    from benchlib.notebook import verdict_table
    from benchlib.stats.verdict import VerdictKind

    question_of = {(c.baseline, c.arm): QUESTIONS[c.question] for c in contrasts}
    out: dict[str, pd.DataFrame] = {}
    base = pd.DataFrame()
    if comparison is not None:
        base = verdict_table(comparison)
        t = comparison.table
        base.insert(0, "question", [question_of.get((b, a), "") for b, a in zip(t["baseline"], t["arm"], strict=True)])
        base = base[(t["verdict_kind"] != VerdictKind.OMITTED).to_numpy()]
    for cond in CONDITIONS:
        rows = base[base["condition"] == cond].drop(columns=["condition"]) if len(base) else pd.DataFrame()
        missing = []
        for c in contrasts:
            gone = [x for x in (c.baseline, c.arm) if x in unavailable]
            if gone:
                missing.append({"question": QUESTIONS[c.question], "metric": "all",
                                "baseline": f"{c.baseline}" + (" (not run)" if c.baseline in unavailable else ""),
                                "arm": f"{c.arm}" + (" (not run)" if c.arm in unavailable else ""),
                                "verdict": not_run_reason(unavailable[gone[0]])})
        table = pd.concat([rows, pd.DataFrame(missing)], ignore_index=True) if missing else rows.reset_index(drop=True)
        if len(table):
            order = {q: i for i, q in enumerate(QUESTIONS.values())}
            table = table.sort_values("question", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)
        out[cond] = table.fillna("")
    return out


def percentile_support(scales: Sequence[float] = (0.2, 1.0, 2.0, 3.0, 5.0, 8.0), *,
                       current: float | None = None) -> pd.DataFrame:
    """Which latency percentiles a trial supports at each scale: at least 50 requests must
    lie beyond a percentile (``n (1 - q) >= 50``, benchlib's rule for per-trial summaries)."""
    import pandas as pd

    from benchlib.stats import required_requests

    qs = (0.5, 0.9, 0.95, 0.99, 0.999)
    rows = []
    for s in scales:
        for cond in CONDITIONS:
            load = scaled_load(cond, s)
            n = int(round((load.rate_rps or 0) * (load.duration_s or 0)))
            rows.append({"scale": f"{s:g}" + (" (this run)" if current is not None and s == current else ""),
                         "endpoint": CONDITIONS[cond], "rate (req/s)": load.rate_rps,
                         "seconds": load.duration_s, "requests per trial": n,
                         "percentiles supported": ", ".join(f"p{100 * q:g}" for q in qs if n >= required_requests(q))
                         or "none"})
    return pd.DataFrame(rows)


# -- per-trial figures ------------------------------------------------------------------------

def _ok_measured(rows: np.ndarray) -> np.ndarray:
    return rows[(rows["phase"] == 1) & (rows["error"] == 0) & (rows["status"] >= 100) & (rows["status"] < 400)]


def _quantiles_supported(x: np.ndarray, qs: Sequence[float]) -> list[float]:
    from benchlib.stats import required_requests
    from benchlib.stats.summary import trial_quantiles

    vals, _ = trial_quantiles(x, qs)
    return [float(v) if x.size >= required_requests(q) else math.nan for q, v in zip(qs, vals, strict=True)]


def _trial_figures(rows: np.ndarray, *, since: str = "sent") -> dict[str, float]:
    """min, avg, med, max, p95, p99 (ms) of one trial's successful measured requests, from the
    send time (``since="sent"``, as k6's http_req_duration) or the intended time."""
    ok = _ok_measured(rows)
    start = ok["t_sent_ns"] if since == "sent" else ok["t_intended_ns"]
    x = np.sort((ok["t_done_ns"] - start).astype(np.float64) / 1e6)
    if not x.size:
        return {k: math.nan for k in ("min", "avg", "med", "max", "p95", "p99")} | {"n": 0}
    med, p95, p99 = _quantiles_supported(x, (0.5, 0.95, 0.99))
    return {"n": int(x.size), "min": float(x[0]), "avg": float(x.mean()), "med": med, "max": float(x[-1]),
            "p95": p95, "p99": p99}


def _median_ci(values: Iterable[float]) -> tuple[float, float, float, int]:
    """Median of the trials' values with its 95% order-statistic interval (NaN when fewer than
    6 trials), and how many values there were."""
    from scipy.stats import quantile_test

    x = np.asarray([v for v in values if v == v], dtype=float)
    if not x.size:
        return math.nan, math.nan, math.nan, 0
    med = float(np.median(x))
    if x.size < 6:
        return med, math.nan, math.nan, int(x.size)
    ci = quantile_test(x, p=0.5).confidence_interval(0.95)
    return med, float(ci.low), float(ci.high), int(x.size)


def _fmt_ms(v: float) -> str:
    if v != v:
        return "–"
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def _fmt_ci(med: float, lo: float, hi: float) -> str:
    if med != med:
        return "–"
    return _fmt_ms(med) + (f" [{_fmt_ms(lo)}, {_fmt_ms(hi)}]" if lo == lo else "")


def _ok_trials(result: ExperimentResult) -> list[Any]:
    return [t for t in result.trials() if t.meta.get("status") == "ok"]


def original_vs_ours(result: ExperimentResult, reference: pd.DataFrame) -> pd.DataFrame:
    """The seed's k6 table beside ours, for the same cells (endpoint x implementation):
    the original's single run; our k6 runs on the faithful services (median over trials);
    benchlib on the faithful and on the fair services (median over trials [95% interval]),
    measured from the send time as k6's ``http_req_duration`` is. Percentiles a trial cannot
    support are "–"; arms not run here say why."""
    import pandas as pd

    stats_cols = ("min", "avg", "med", "max", "p95", "p99")
    per_trial: dict[tuple[str, str], list[dict[str, float]]] = {}
    k6: dict[tuple[str, str], list[dict[str, float]]] = {}
    for t in _ok_trials(result):
        per_trial.setdefault((t.condition, t.arm), []).append(_trial_figures(t.rows(), since="sent"))
        x = t.meta.get("cross_check") or {}
        d = x.get("http_req_duration_ms")
        if d and not x.get("error"):
            k6.setdefault((t.condition, t.arm), []).append(
                {"min": d.get("min"), "avg": d.get("avg"), "med": d.get("med"), "max": d.get("max"),
                 "p95": d.get("p(95)"), "p99": d.get("p(99)")})
    unavailable = result.unavailable
    arms = {a.name for a in result.experiment.arms}
    rows = []
    for cond, path in CONDITIONS.items():
        for impl in IMPLEMENTATIONS:
            ref = reference[(reference["endpoint"] == path) & (reference["service"] == impl.service)]
            if len(ref):
                r = ref.iloc[0]
                rows.append({"endpoint": path, "implementation": impl.label, "source": "original: k6, one run",
                             "trials": 1, **{c: _fmt_ms(float(r[f"{c}_ms"])) for c in stats_cols}})
            for variant in impl.variants:
                arm = f"{impl.key}-{variant}"
                if arm not in arms:
                    continue
                if arm in unavailable:
                    rows.append({"endpoint": path, "implementation": impl.label, "source": f"ours: {variant}",
                                 "trials": 0, "min": not_run_reason(unavailable[arm])})
                    continue
                if (cond, arm) in k6:
                    vals = k6[(cond, arm)]
                    rows.append({"endpoint": path, "implementation": impl.label, "source": f"ours: {variant}, k6",
                                 "trials": len(vals),
                                 **{c: _fmt_ci(*_median_ci(float(v[c]) for v in vals if v[c] is not None)[:3])
                                    for c in stats_cols}})
                vals = per_trial.get((cond, arm), [])
                rows.append({"endpoint": path, "implementation": impl.label, "source": f"ours: {variant}, benchlib",
                             "trials": len(vals), **{c: _fmt_ci(*_median_ci(v[c] for v in vals)[:3])
                                                     for c in stats_cols}})
    return pd.DataFrame(rows, columns=["endpoint", "implementation", "source", "trials", *stats_cols]).fillna("")


def k6_trial_table(result: ExperimentResult) -> pd.DataFrame:
    """k6's ``http_req_duration`` beside benchlib's figures for the same trial (same service
    instance, one run after the other): per trial, k6's requests, dropped iterations, median,
    p95 and max, and benchlib's from the send time (as k6 measures) and from the intended time.
    Both sides use linear-interpolated percentiles of the same kind of sample here."""
    import pandas as pd

    rows = []
    for t in result.trials():
        x = t.meta.get("cross_check")
        if not x:
            continue
        rec: dict[str, Any] = {"condition": t.condition, "arm": t.arm, "block": t.block, "k6 ran": x.get("order"),
                               "status": t.meta.get("status")}
        if x.get("error"):
            rows.append({**rec, "k6 error": x["error"]})
            continue
        d = x.get("http_req_duration_ms") or {}
        ok = _ok_measured(t.rows())
        sent = np.sort((ok["t_done_ns"] - ok["t_sent_ns"]) / 1e6) if len(ok) else np.zeros(0)
        due = np.sort((ok["t_done_ns"] - ok["t_intended_ns"]) / 1e6) if len(ok) else np.zeros(0)

        def q(v: np.ndarray, p: float) -> float:
            return float(np.quantile(v, p)) if v.size else math.nan

        rows.append({**rec, "k6 requests": x.get("http_reqs"), "k6 dropped": x.get("dropped_iterations"),
                     "k6 med": d.get("med"), "k6 p95": d.get("p(95)"), "k6 max": d.get("max"),
                     "benchlib requests": int(sent.size), "benchlib med (from send)": q(sent, 0.5),
                     "benchlib p95 (from send)": q(sent, 0.95), "benchlib max (from send)": q(sent, 1.0),
                     "benchlib med (from due time)": q(due, 0.5),
                     "k6 med / benchlib med": (d.get("med") / q(sent, 0.5)) if sent.size and d.get("med") else math.nan})
    return pd.DataFrame(rows)


def k6_summary_table(trials: pd.DataFrame) -> pd.DataFrame:
    """Per condition and arm (and k6's position, before or after benchlib's load): the
    medians over trials of k6's and benchlib's median and p95 and of their ratio."""
    import pandas as pd

    if not len(trials) or "k6 med" not in trials.columns:
        return pd.DataFrame()
    ok = trials[trials["k6 med"].notna() & (trials["status"] == "ok")]
    cols = ["k6 med", "benchlib med (from send)", "k6 p95", "benchlib p95 (from send)", "k6 max",
            "benchlib max (from send)", "k6 med / benchlib med"]
    g = ok.groupby(["condition", "arm", "k6 ran"], sort=False)[cols].median().reset_index()
    g.insert(3, "trials", ok.groupby(["condition", "arm", "k6 ran"], sort=False).size().to_numpy())
    return g.round(3)


def warmup_table(result: ExperimentResult) -> pd.DataFrame:
    """What the warm-up kept out of the analysis, per condition and arm (medians over trials):
    the first request of a fresh instance (what the seed's max and tail included), the
    warm-up's median and the measured median, all from the intended send time, in ms."""
    import pandas as pd

    acc: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for t in _ok_trials(result):
        rows = t.rows()
        warm = rows[(rows["phase"] == 0) & (rows["error"] == 0)]
        meas = _ok_measured(rows)
        if not len(warm) or not len(meas):
            continue
        lat_w = (warm["t_done_ns"] - warm["t_intended_ns"]) / 1e6
        lat_m = (meas["t_done_ns"] - meas["t_intended_ns"]) / 1e6
        first = float(lat_w[np.argmin(warm["t_intended_ns"])])
        acc.setdefault((t.condition, t.arm), []).append((first, float(np.median(lat_w)), float(np.median(lat_m))))
    out = [{"condition": c, "arm": a, "trials": len(v), "first request": float(np.median([x[0] for x in v])),
            "warm-up median": float(np.median([x[1] for x in v])), "measured median": float(np.median([x[2] for x in v]))}
           for (c, a), v in acc.items()]
    df = pd.DataFrame(out)
    if len(df):
        df["arm"] = pd.Categorical(df["arm"], arm_order(df["arm"]), ordered=True)
        df = df.sort_values(["condition", "arm"]).reset_index(drop=True)
        df["arm"] = df["arm"].astype(str)
    return df.round(3)


def repeats_table(result: ExperimentResult) -> pd.DataFrame:
    """Per condition and arm: how many trials the load generator's guard invalidated and the
    runner repeated in place (``Experiment.repeat_invalid``), the attempts set aside, and the
    trials still invalid after their repeats (left out of the analysis). Empty when none."""
    import pandas as pd

    acc: dict[tuple[str, str], dict[str, int]] = {}
    for t in result.trials():
        prev = t.meta.get("previous_attempts") or []
        d = acc.setdefault((t.condition, t.arm), {"trials": 0, "repeated": 0, "attempts set aside": 0,
                                                  "still invalid": 0})
        d["trials"] += 1
        d["repeated"] += bool(prev)
        d["attempts set aside"] += len(prev)
        d["still invalid"] += t.meta.get("status") == "invalid"
    rows = [{"condition": c, "arm": a, **v} for (c, a), v in acc.items() if v["repeated"] or v["still invalid"]]
    df = pd.DataFrame(rows, columns=["condition", "arm", "trials", "repeated", "attempts set aside", "still invalid"])
    if len(df):
        df["arm"] = pd.Categorical(df["arm"], arm_order(df["arm"]), ordered=True)
        df = df.sort_values(["condition", "arm"]).reset_index(drop=True)
        df["arm"] = df["arm"].astype(str)
    return df


def limits_table(result: ExperimentResult) -> pd.DataFrame:
    """What the runtime enforced on each arm's service, as read back in its trials (CPU
    set, CPU quota, memory cap, swap), and where the dependency (FerretDB) ran."""
    import pandas as pd

    acc: dict[str, dict[str, set[str]]] = {}
    for t in result.trials():
        e = t.meta.get("enforced") or {}
        if not e:
            continue
        d = acc.setdefault(t.arm, {k: set() for k in ("cpus", "cpu", "memory", "swap", "ferretdb cpus", "runtime")})
        d["cpus"].add(",".join(map(str, e.get("cpus_read_back", e.get("cpus", [])))))
        d["cpu"].add(f"{e.get('cpu_quota', '–')} CPU: {e.get('cpu', '–')}")
        d["memory"].add(f"{e.get('memory_mb', '–')} MB: {e.get('memory', '–')}")
        d["swap"].add(str(e.get("swap", "–")))
        d["ferretdb cpus"].add(",".join(map(str, (t.meta.get("cpus") or {}).get("dependencies", []))))
        d["runtime"].add(str(e.get("runtime", t.meta.get("runtime"))))
    rows = [{"arm": a, **{k: "; ".join(sorted(v)) for k, v in acc[a].items()}} for a in arm_order(acc)]
    rows += [{"arm": a, "cpus": not_run_reason(why)} for a, why in result.unavailable.items()]
    return pd.DataFrame(rows).fillna("")


def database_info(result: ExperimentResult, *, timeout_s: float = 60.0) -> dict[str, Any]:
    """Which MongoDB server ran: ``services/ferretdb/seed.py info`` against one extra start of
    the arms' dependency (same runtime, same build), plus the version line of the FerretDB
    log of every trial. Stored as ``derived/database.json`` in the run folder (read from
    there on resume)."""
    from benchlib.cpus import plan_cpus
    from benchlib.manifest import get_manifest
    from benchlib.runtime import StartOptions, get_runtime
    from benchlib.runtime.local import free_port

    path = result.store.path / "derived" / "database.json"
    if path.exists():
        return dict(json.loads(path.read_text()))
    info: dict[str, Any] = {}
    try:
        manifest = get_manifest("ferretdb")
        svc = manifest.resolve()
        rt = get_runtime(result.experiment.runtime)
        deps_cpus = tuple((result.store.read_run().get("cpus") or {}).get("dependencies") or plan_cpus().dependencies)
        with rt.start(rt.prepare(svc), StartOptions(port=free_port(), cpus=deps_cpus, log_sink="discard",
                                                     run_id=result.run_id)) as h:
            out = subprocess.run([sys.executable, str(manifest.directory / "seed.py"), "info", "--host", h.host,
                                  "--port", str(h.port)], capture_output=True, text=True, timeout=timeout_s, check=False)
        if out.returncode == 0:
            info.update(json.loads(out.stdout))
        else:
            info["error"] = (out.stderr or out.stdout).strip()[-500:]
        info["variant"] = svc.variant
    except Exception as exc:  # noqa: BLE001 - provenance must not break the report; the reason is shown
        info["error"] = f"{type(exc).__name__}: {exc}"
    versions: Counter[str] = Counter()
    for log in sorted((result.store.path / "logs").rglob("*.ferretdb.log")):
        m = re.search(r"Starting FerretDB (v\d+(?:\.\d+)*)", log.read_text(errors="replace")[:20_000])
        versions[m.group(1) if m else "no version line"] += 1
    info["trial_logs"] = dict(versions)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(info, indent=1, sort_keys=True, default=str) + "\n")
    return info


# -- the conclusion ---------------------------------------------------------------------------

def _row(comparison: Comparison, condition: str, baseline: str, arm: str, metric: str = "p50_ms") -> Any:
    t = comparison.table
    hit = t[(t["condition"] == condition) & (t["baseline"] == baseline) & (t["arm"] == arm) & (t["metric"] == metric)]
    return hit.iloc[0] if len(hit) else None


def _effect(r: Any) -> str:
    if r is None:
        return "not compared"
    if r["ratio"] != r["ratio"]:
        return f"**{r['verdict']}**"
    return (f"{r['ratio']:.2f}× [{r['ci_lo']:.2f}, {r['ci_hi']:.2f}], Holm p = {r['p_adj']:.2g} → "
            f"**{r['verdict']}**")


def _decided(r: Any) -> bool:
    return r is not None and bool(r["significant"]) and bool(r["practical"])


def conclusion_markdown(comparison: Comparison | None, reference: pd.DataFrame, unavailable: Mapping[str, str],
                        variants: Sequence[str] = VARIANTS) -> str:
    """The conclusion in words, every figure from ``comparison`` (median latency, p50): per
    endpoint, the original's ratio, ours with the original's code, the part the languages
    explain (fair vs fair) and the part the implementation explains (faithful vs fair)."""
    if comparison is None:
        return "_No comparison could be computed (fewer than two arms ran)._"
    lines = []
    labels = {i.key: i.label for i in IMPLEMENTATIONS}
    for cond, path in CONDITIONS.items():
        lines.append(f"**`GET {path}`**, median latency (p50) ratios with exact 95% intervals:")
        ref = reference[reference["endpoint"] == path].set_index("service")
        r_orig = _row(comparison, cond, "go-faithful", "rust-faithful")
        if {"go-gin-mongo", "rust-rocket-mongo"} <= set(ref.index):
            orig = float(ref.loc["rust-rocket-mongo", "med_ms"]) / float(ref.loc["go-gin-mongo", "med_ms"])
            lines.append(f"- the original: Rust / Go medians {ref.loc['rust-rocket-mongo', 'med_ms']:g} / "
                         f"{ref.loc['go-gin-mongo', 'med_ms']:g} ms = {orig:.2f}× (one run each); ours with the "
                         f"original's code (faithful): {_effect(r_orig)}")
        lang = []
        for key in ("rust", "python", "node", "dotnet"):
            arm = f"{key}-fair"
            if arm in unavailable:
                lang.append(f"{labels[key]} {not_run_reason(unavailable[arm])}")
            elif "fair" in variants:
                lang.append(f"{labels[key]} {_effect(_row(comparison, cond, BASELINE, arm))}")
        if lang:
            lines.append("- **languages** (fair variants, vs Go fair): " + "; ".join(lang))
        impl = []
        for key in ("go", "rust", "dotnet"):
            if f"{key}-faithful" in unavailable:
                impl.append(f"{labels[key]} {not_run_reason(unavailable[key + '-faithful'])}")
            elif set(variants) == set(VARIANTS):
                impl.append(f"{labels[key]} {_effect(_row(comparison, cond, key + '-fair', key + '-faithful'))}")
        if impl:
            lines.append("- **implementation** (faithful / fair, same language: per-request clients, debug build, "
                         "per-request logs, bodies): " + "; ".join(impl))
        r_lang = _row(comparison, cond, BASELINE, "rust-fair")
        r_rust = _row(comparison, cond, "rust-fair", "rust-faithful")
        r_go = _row(comparison, cond, "go-fair", "go-faithful")
        if all(r is not None and r["ratio"] == r["ratio"] for r in (r_orig, r_lang, r_rust, r_go)):
            parts = []
            if _decided(r_lang):
                parts.append(f"the languages/frameworks account for a factor {r_lang['ratio']:.2f} "
                             "(Rust fair / Go fair)")
            else:
                parts.append(f"fair Rust and fair Go do not differ detectably ({r_lang['verdict']})")
            impl_bits = [f"{name} {r['ratio']:.2f}×" for name, r in (("Rust", r_rust), ("Go", r_go)) if _decided(r)]
            if impl_bits:
                parts.append("the implementations' own choices change the faithful variants by "
                             + " and ".join(impl_bits) + " against their fair versions")
            else:
                parts.append("the faithful-vs-fair differences are not decided at this design")
            lines.append(f"- so the faithful Rust/Go ratio {r_orig['ratio']:.2f}× decomposes (approximately, on the "
                         f"log scale: {r_lang['ratio']:.2f} × {r_rust['ratio']:.2f} / {r_go['ratio']:.2f} = "
                         f"{r_lang['ratio'] * r_rust['ratio'] / r_go['ratio']:.2f}) as: " + "; ".join(parts) + ".")
            lang_size = abs(math.log(r_lang["ratio"])) if _decided(r_lang) else 0.0
            impl_size = abs(math.log(r_rust["ratio"] / r_go["ratio"])) if (_decided(r_rust) or _decided(r_go)) else 0.0
            if not _decided(r_orig):
                alike = [f"{name} {r['ratio']:.2f}×" for name, r in (("Rust", r_rust), ("Go", r_go)) if _decided(r)]
                source = (f"with the original's code, Rust and Go do not differ detectably here ({r_orig['verdict']}), "
                          "so the original's Rust/Go difference on this endpoint does not hold up"
                          + (f"; the implementations' choices slow both alike ({' and '.join(alike)} against "
                             "their fair versions), and that cost, not the language, is what the columns measure"
                             if len(alike) == 2 else ""))
            elif lang_size == impl_size == 0.0:
                source = "neither part is decided at this design (see the MDEs)"
            elif impl_size >= lang_size:
                source = (f"the difference between the original's Rust and Go columns comes mostly from the "
                          f"implementations (faithful vs fair: a factor {math.exp(impl_size):.2f} between them), "
                          + (f"less from the languages (a factor {math.exp(lang_size):.2f})" if lang_size else
                             "not from the languages"))
            else:
                source = (f"the difference between the original's Rust and Go columns comes mostly from the languages "
                          f"and frameworks (a factor {math.exp(lang_size):.2f}), "
                          + (f"less from the implementations (a factor {math.exp(impl_size):.2f})" if impl_size else
                             "not from the implementations"))
            lines.append(f"- **in short**: {source}.")
        lines.append("")
    return "\n".join(lines)
