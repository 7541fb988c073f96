"""Study 03, "FastCGI-Bench - NodeJS vs .NET Core" (bolner/FastCGI-bench): what is its own in
``notebooks/03_fastcgi_nginx.ipynb``: the arms, the seed's loads (ab without keep-alive) and
ab beside benchlib, the four questions, the seed's "best of 10" beside ours, the plateau
hypothesis in words and the conclusion. Everything generic comes from :mod:`benchlib.analysis`.

Arms are named ``<app>-nginx-<keep_conn>`` (the application behind Debian's nginx, with
``fastcgi_keep_conn`` off as the seed or on) or ``<app>-http`` (the same handler over plain
HTTP, no nginx); ``go4`` is Go in the seed's 4-process shape. Each question is one Holm family
(:func:`families`); a trial answered mostly with errors (node-fastcgi behind keep-conn-on
answers 502) counts in the error-rate rows only (``Family.max_error_rate``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from benchlib.analysis import Answer, Contrast, Family, params, tables
from benchlib.analysis import conclusion as say
from benchlib.analysis import formats as fmt
from benchlib.analysis.params import Runtime, Sequential, StudyParameters
from benchlib.analysis.planned import StudyDesign
from benchlib.core.errors import ParameterError
from benchlib.core.model import Arm, Condition, CrossCheck, Experiment, LoadSpec
from benchlib.store.results import Run

__all__ = ["ARMS", "BASELINE", "DEFAULT_ARMS", "FULL_SCALE", "LIBRARY_ARMS", "MAX_ERROR_RATE", "METRICS", "Parameters",
           "SEED_LOADS", "STUDY", "best_of_n_markdown", "conclusion_markdown", "design", "families", "limits_markdown",
           "original_vs_ours", "plateau_markdown", "run_scale", "scaled_load", "study_arms", "study_conditions"]

STUDY = "03_fastcgi_nginx"
FRONT = "nginx-fastcgi"


def _behind(name: str, service: str, variant: str, keep_conn: str) -> Arm:
    return Arm(name, service, variant, front=FRONT, front_variant=f"keep-conn-{keep_conn}")


ARMS: tuple[Arm, ...] = (
    _behind("node-nginx-off", "node-fastcgi", "fastcgi", "off"),
    _behind("dotnet-nginx-off", "dotnet-asyncfastcgi", "fastcgi", "off"),
    _behind("go-nginx-off", "go-fcgi", "fcgi", "off"),
    _behind("go4-nginx-off", "go-fcgi", "fcgi-4", "off"),
    _behind("php-nginx-off", "php-fpm-hello", "fpm", "off"),
    Arm("node-http", "node-fastcgi", "http"),
    Arm("go-http", "go-fcgi", "http"),
    _behind("node-nginx-on", "node-fastcgi", "fastcgi", "on"),
    _behind("go-nginx-on", "go-fcgi", "fcgi", "on"),
)
DEFAULT_ARMS = "node-nginx-off,dotnet-nginx-off,go-nginx-off,php-nginx-off,node-http,go-http,node-nginx-on,go-nginx-on"
BASELINE = "node-nginx-off"
#: condition -> (ab -c, ab -n) of the seed's two tables
SEED_LOADS: dict[str, tuple[int, int]] = {"c20": (20, 20_000), "c400": (400, 200_000)}
#: p90 needs 500 requests per trial and p99 5,000: at the default scale the p99 rows are left out
METRICS: tuple[str, ...] = ("goodput_rps", "p50_ms", "p90_ms", "p99_ms", "error_rate", "server_cpu_us_per_req")
#: above this error rate a trial counts in the error-rate rows only (its rates are those of 502s)
MAX_ERROR_RATE = 0.05
#: the seed's libraries -> our arms (LB FastCGI, the seed's strawman, is not reproduced)
LIBRARY_ARMS: dict[str, str] = {"AsyncFastCGI.NET": "dotnet-nginx-off", "NodeJS": "node-nginx-off"}


def study_arms(names: str | Sequence[str] = DEFAULT_ARMS) -> tuple[Arm, ...]:
    """The arms named (comma-separated), in table order; an unknown name is one error line."""
    chosen = params.choices(names, [a.name for a in ARMS], "arm(s)", canonical=True)
    return tuple(a for a in ARMS if a.name in chosen)


def scaled_load(condition: str, scale: float, *, warmup_s: float = 1.0) -> LoadSpec:
    """benchlib's equivalent of the seed's ``ab -c C -n N`` at ``scale`` of its requests: a
    closed loop of C connections, ``round(N x scale)`` measured requests (at least C), a new
    connection per request in HTTP/1.0 (ab without ``-k``), after ``warmup_s`` of warm-up."""
    params.positive("scale", scale, "1.0 = the seed's request count")
    if condition not in SEED_LOADS:
        raise ParameterError(f"unknown condition {condition!r}; valid: {', '.join(SEED_LOADS)}")
    c, n = SEED_LOADS[condition]
    return LoadSpec(model="closed", connections=c, requests=max(c, round(n * scale)), duration_s=None,
                    warmup_s=warmup_s, keep_alive=False, http_version="1.0")


def study_conditions(scale: float, c400_scale: float, *, warmup_s: float = 1.0,
                     ab: bool = True) -> tuple[Condition, ...]:
    """``c20`` at ``scale`` and ``c400`` at ``c400_scale`` (0 leaves it out), each with ab
    exactly as the seed ran it (``ab -c C -n N``, no ``-k``) on the same instance (in the
    blocks the experiment's ``cross_check_blocks`` picks: :func:`run_scale`)."""
    out = []
    for name, s in (("c20", scale), ("c400", c400_scale)):
        if name == "c400" and s == 0:
            continue
        load = scaled_load(name, s, warmup_s=warmup_s)
        check = CrossCheck("ab", (("connections", load.connections), ("requests", load.requests),
                                  ("keep_alive", False))) if ab else None
        out.append(Condition(name, load, cross_check=check))
    return tuple(out)


#: ``full=True``: the seed's request counts, ab in every block
FULL_SCALE: dict[str, float] = {"scale": 1.0, "c400_scale": 1.0}


def run_scale(*, full: bool, trials: int, scale: float, c400_scale: float, ab_blocks: int) -> dict[str, Any]:
    """The scale a run uses: the parameters as given, or with ``full`` the seed's (20,000 and
    200,000 requests, ab beside benchlib in every block). ``ab_blocks``: ab in that many
    blocks spread over the run (``Experiment.cross_check_blocks``), every block when
    ``>= trials``. Returns ``scale``, ``c400_scale`` and ``ab_blocks`` (a number, or ``"all"``)."""
    if isinstance(ab_blocks, bool) or not isinstance(ab_blocks, int) or ab_blocks < 1:
        raise ParameterError(f"ab_blocks must be a whole number >= 1 (ab in that many blocks; >= trials: in every "
                             f"block), got {ab_blocks!r}")
    out: dict[str, Any] = dict(FULL_SCALE) if full else {"scale": scale, "c400_scale": c400_scale}
    out["ab_blocks"] = "all" if full or ab_blocks >= trials else ab_blocks
    return out


@dataclass(frozen=True, kw_only=True)
class Parameters(StudyParameters):
    """Study 03's parameters (its notebook's ``parameters`` cell); ``full`` sets :data:`FULL_SCALE`
    and ab in every block.

    Attributes
    ----------
    runtime: ``local`` (processes) or ``docker``.
    scale, c400_scale: requests per trial of ``c20`` and ``c400`` as fractions of the seed's
        20,000 and 200,000 (``c400_scale`` 0 leaves ``c400`` out).
    warmup_s: benchlib's warm-up seconds before its measured requests.
    arms: the arms, comma-separated (:data:`ARMS`).
    ab_check: ab exactly as the seed ran it on the same instance, beside benchlib.
    ab_blocks: ab in that many blocks spread over the run (``trials`` or more: every block).
    sequential: stop a question at a planned look once settled (``auto``, ``yes``, ``no``).
    """

    runtime: Runtime = "local"
    trials: int = 10
    scale: float = 0.03
    c400_scale: float = 0.003
    warmup_s: float = 0.25
    arms: str = DEFAULT_ARMS
    ab_check: bool = True
    ab_blocks: int = 3
    sequential: Sequential = "auto"
    seed: int = 3

    FULL_SCALE: ClassVar[Mapping[str, Any]] = FULL_SCALE


def design(p: Parameters) -> StudyDesign:
    """The chosen arms under the seed's two loads at ``scale`` and ``c400_scale`` (ab beside
    benchlib in ``ab_blocks`` blocks), and the four questions."""
    chosen = study_arms(p.arms)
    size = run_scale(full=p.full, trials=p.trials, scale=p.scale, c400_scale=p.c400_scale, ab_blocks=p.ab_blocks)
    conditions = study_conditions(size["scale"], size["c400_scale"], warmup_s=p.warmup_s, ab=p.ab_check)
    names = [a.name for a in chosen]
    experiment = Experiment(study=STUDY, arms=chosen, conditions=conditions, trials=p.trials, seed=p.seed,
                            cross_check_blocks=size["ab_blocks"], runtime=p.runtime, cluster=p.cluster,
                            baseline=BASELINE if BASELINE in names else None)
    return StudyDesign(experiment=experiment, families=tuple(families(names, [c.name for c in conditions])),
                       sequential=p.sequential, requests={c.name: int(c.load.requests or 0) for c in conditions})


def families(arm_names: Sequence[str], conditions: Sequence[str]) -> list[Family]:
    """The four questions, each one Holm family over both conditions (rows whose arms were
    not chosen are left out; arms that could not run stay as ``not run`` rows)."""
    have = set(arm_names)
    spec = [
        ("seed", "1. The seed's question: AsyncFastCGI.NET against node-fastcgi, behind nginx (keep_conn off)",
         "Does the C# library serve as fast as Node's behind the seed's nginx? Baseline: node-nginx-off.",
         [Contrast(BASELINE, "dotnet-nginx-off")], {}),
        ("fastcgi", "2. FastCGI implementations behind the same nginx (keep_conn off)",
         "How do Go's net/http/fcgi and PHP-FPM, the classic FastCGI server, compare with node-fastcgi behind the "
         "same nginx? Baseline: node-nginx-off.",
         [Contrast(BASELINE, a) for a in ("go-nginx-off", "go4-nginx-off", "php-nginx-off")], {}),
        ("nginx", "3. What nginx and FastCGI cost: the same handler over plain HTTP and behind nginx",
         "How much rate and CPU does putting nginx and FastCGI (keep_conn off) in front of the same handler cost? "
         "Baseline: the plain-HTTP server of each language.",
         [Contrast("node-http", "node-nginx-off", question="node"), Contrast("go-http", "go-nginx-off", question="go")],
         {"node": "Node: behind nginx vs node:http", "go": "Go: behind nginx vs net/http"}),
        ("keepconn", "4. fastcgi_keep_conn on against off",
         "Does reusing nginx's backend connections (keep_conn on, upstream keepalive 400) help each application? "
         "Baseline: keep_conn off, the seed's.",
         [Contrast("go-nginx-off", "go-nginx-on", question="go"), Contrast(BASELINE, "node-nginx-on", question="node")],
         {"go": "Go: keep_conn on vs off", "node": "Node: keep_conn on vs off"}),
    ]
    out = []
    for key, title, text, contrasts, questions in spec:
        rows = tuple(c for c in contrasts if {c.baseline, c.arm} <= have)
        if rows:
            out.append(Family(key, rows, METRICS, title, text, tuple(conditions),
                              {k: v for k, v in questions.items() if any(c.question == k for c in rows)},
                              max_error_rate=MAX_ERROR_RATE))
    return out


# -- the seed's "best of 10" beside ours --------------------------------------------------------

def original_vs_ours(reference: Any, beside: Any, summaries: Any, *, unavailable: Mapping[str, str],
                     scales: Mapping[str, float]) -> Any:
    """The seed's two ab tables (best of 10 runs) beside ours for the same cells: ab's best
    of our trials, ab's median with its interval, benchlib's median with its interval (req/s:
    every response, as ab counts them; mean time per request; longest; errors). ``beside``:
    :func:`benchlib.analysis.peers.peer_beside` for ab; ``scales``: condition -> scale run."""
    import pandas as pd

    from benchlib.stats.verdict import Verdict, render

    valid = summaries[summaries["valid"].astype(bool)] if len(summaries) else summaries
    ok_ab = beside[(beside["status"] == "ok") & beside["peer_error"].isna()] if len(beside) else beside
    rows = []
    for _, r in reference.iterrows():
        cond = f"c{int(r['concurrency'])}"
        cell = {"concurrency": int(r["concurrency"]), "library": r["library"]}
        rows.append({**cell, "source": f"seed: ab -c {int(r['concurrency'])} -n {int(r['requests']):,}, best of 10",
                     "runs": 10, "req/s": fmt.num(r["requests_per_s"]) if r["status"] == "ok" else "fails",
                     "mean per request (ms)": fmt.num(r["time_per_request_ms"]), "longest (ms)": fmt.num(r["longest_ms"]),
                     "errors": fmt.num(r["failed"]) + " failed (non-2xx not counted)"})
        arm = LIBRARY_ARMS.get(str(r["library"]))
        why = (f"not reproduced: {r['library']} is the seed's non-async strawman (no service)" if arm is None else
               unavailable.get(arm) or (None if cond in scales else f"{cond} left out of this run"))
        if why is not None:
            rows.append({**cell, "source": "ours", "req/s": render(Verdict.not_run(why))})
            continue
        a = ok_ab[(ok_ab["condition"] == cond) & (ok_ab["arm"] == arm)] if len(ok_ab) else ok_ab
        s = valid[(valid["condition"] == cond) & (valid["arm"] == arm)] if len(valid) else valid
        n_ab = f"ab -c {int(r['concurrency'])} -n {round(int(r['requests']) * scales[cond]):,}"
        if len(a):
            best = a.loc[a["peer_rps"].astype(float).idxmax()]
            rows.append({**cell, "source": f"ours: {n_ab}, best of {len(a)} trials", "runs": len(a),
                         "req/s": fmt.num(float(best["peer_rps"])), "mean per request (ms)": fmt.num(float(best["peer_mean"])),
                         "longest (ms)": fmt.num(float(best["peer_max"])), "errors": fmt.num(best["peer_errors"])})
            rows.append({**cell, "source": f"ours: {n_ab}, {fmt.MEDIAN_CI}", "runs": len(a), "errors":
                         fmt.num(float(a["peer_errors"].astype(float).sum())) + " in all",
                         **{k: tables.median_of_trials(a[c].astype(float)).text for k, c in (
                             ("req/s", "peer_rps"), ("mean per request (ms)", "peer_mean"), ("longest (ms)", "peer_max"))}})
        if len(s):
            rows.append({**cell, "source": f"ours: benchlib, the same load, {fmt.MEDIAN_CI}", "runs": len(s),
                         "errors": fmt.num(float((s["error_rate"] * s["n"]).sum())) + " in all",
                         **{k: tables.median_of_trials(s[c].astype(float)).text for k, c in (
                             ("req/s", "throughput_rps"), ("mean per request (ms)", "mean_ms"), ("longest (ms)", "max_ms"))}})
    cols = ["concurrency", "library", "source", "runs", "req/s", "mean per request (ms)", "longest (ms)", "errors"]
    return pd.DataFrame([{c: r.get(c, "") for c in cols} for r in rows], columns=cols)


def best_of_n_markdown(beside: Any) -> str:
    """Why a best-of-N figure is biased, with this run's own numbers: ab's best trial over its
    median trial, per condition and arm."""
    ok = beside[(beside["status"] == "ok") & beside["peer_error"].isna()] if len(beside) else beside
    if not len(ok):
        return "_ab did not run in this run: no best-of-N figure to set beside the seed's._"
    g = ok.groupby(["condition", "arm"], sort=False)["peer_rps"]
    gap = (g.max() / g.median()).dropna()
    n = g.size()
    worst = gap.idxmax()
    return ("**Why \"best of 10\" is biased.** The best of N runs is the largest of N noisy draws: it estimates a high "
            "quantile of the run-to-run spread (about the N/(N+1)th), not a typical run; it grows with N, and it "
            "favours whichever setup is noisier, so two best-of-10 figures compare two upper tails. In this run "
            f"ab's best trial was {fmt.signed_pct(gap.min())} to {fmt.signed_pct(gap.max())} above its median trial "
            f"(the most at {worst[1]}, {worst[0]}, best of {int(n[worst])}). The verdicts below use every valid trial, "
            "paired by block, and report the median with its interval.")


# -- the plateau hypothesis ---------------------------------------------------------------------

def plateau_markdown(sat: Any, responses: Any) -> str:
    """The seed's plateau hypothesis (ab or nginx bound?) tested with this run's CPU figures:
    per condition, which side came near its CPU limit in each arm
    (:func:`benchlib.analysis.tables.saturation_table`), what nginx and ab could do at a full
    CPU, and whether the arms behind nginx share one rate."""
    if sat is None or not len(sat):
        return "_No trial ran: nothing to say about the plateau._"
    bad = set()
    if responses is not None and len(responses):
        bad = {(r["condition"], r["arm"]) for _, r in responses.iterrows() if r["error rate, median"] > MAX_ERROR_RATE}
    out = []
    for cond, g in sat.groupby("condition", sort=False):
        groups: dict[str, list[str]] = {}
        for _, r in g.iterrows():
            nginx = (f", nginx {r['front share of server CPU']:.0%} of it" if r["front share of server CPU"] == r[
                "front share of server CPU"] else "")
            ab = f", ab {r['ab CPU']:.2f}" if "ab CPU" in r and r["ab CPU"] == r["ab CPU"] else ""
            err = " (answers were errors)" if (cond, r["arm"]) in bad else ""
            groups.setdefault(r["near its CPU limit"], []).append(
                f"{r['arm']}{err} (server {r['server CPUs busy']:.2f} of {int(r['server CPUs'])} CPU{nginx}; "
                f"benchlib client {r['benchlib client CPU']:.2f}{ab})")
        parts = [f"near the limit: **{side}**: " + "; ".join(arms) if side != "none" else
                 "**no side** near its CPU limit (the CPU time neither used went to waiting or to other processes "
                 "on the same CPUs: see the load average under Provenance): " + "; ".join(arms)
                 for side, arms in groups.items()]
        line = f"- **{cond}**: " + ". ".join(parts) + "."
        fcgi = g[g["front share of server CPU"].notna() & g["arm"].str.endswith("-nginx-off")
                 & ~g["arm"].map(lambda a: (cond, a) in bad)]  # noqa: B023 - map runs at once
        if len(fcgi) > 1:
            lo, hi = fcgi["benchlib req/s"].min(), fcgi["benchlib req/s"].max()
            line += (f" Behind the same nginx (keep_conn off) benchlib's rates ran from {fmt.num(lo)} to {fmt.num(hi)} "
                     f"req/s, a factor {hi / lo:.2f}: " + ("no common plateau, so the applications, not nginx or the "
                                                           "client, set them." if hi / lo > 1.2 else
                                                           "about one rate, as a common bottleneck would give."))
        if len(fcgi):
            line += (f" nginx alone, at its CPU time per request here, could serve "
                     f"{fmt.num(fcgi['front req/s at full CPU'].min())}-{fmt.num(fcgi['front req/s at full CPU'].max())} "
                     "req/s with its CPU to itself.")
        if "ab req/s per CPU-second" in g.columns and g["ab req/s per CPU-second"].notna().any():
            line += (f" ab served at most {fmt.num(g['ab req/s per CPU-second'].max())} requests per CPU-second of its "
                     "own (one thread: its ceiling on this CPU).")
        out.append(line)
    return "\n".join(out)


# -- limits found -------------------------------------------------------------------------------

def limits_markdown(run: Run, responses: Any, requests: Mapping[str, int]) -> str:
    """What limits this run's answers, each item from the run's own records: arms that could
    not run, arms that answered errors (their rates are those of error pages), what ab's
    "Failed requests" left out, arms whose client came near its CPU limit (their rates are
    lower bounds), the trials ab ran in, and what the request counts (``requests``:
    condition -> measured requests per trial) leave unsupported."""
    from benchlib.analysis.tables import client_cpu_table, client_limited

    out = [f"- **not run**: {arm}: {why}" for arm, why in run.unavailable.items()]
    if responses is not None and len(responses):
        for _, r in responses[responses["error rate, median"] > MAX_ERROR_RATE].iterrows():
            out.append(f"- **answered errors**: {r['arm']} ({r['condition']}): {r['HTTP statuses']} over "
                       f"{r['trials']} trials (median error rate {r['error rate, median']:.0%}); its rate and "
                       "latency are those of error answers, so only its error-rate rows compare it")
    peers = [t.peer for t in run.trials if t.peer is not None and t.peer.tool == "ab" and not t.peer.failure]
    failed = sum(int(p.raw.get("failed") or 0) for p in peers)
    non_2xx = sum(int(p.raw.get("non_2xx") or 0) for p in peers)
    if non_2xx:
        out.append(f"- **ab's \"Failed requests\"** counted {failed:,} of this run's {failed + non_2xx:,} error "
                   f"answers to ab; the other {non_2xx:,} were only in its \"Non-2xx responses\" line, which the "
                   "seed's tables do not show: a best-of-N by ab's req/s alone can pick a run of error pages")
    for cond in requests:
        limited = client_limited(client_cpu_table(run, condition=cond))
        if limited:
            out.append(f"- **client near its CPU limit** ({cond}): {', '.join(limited)}: benchlib's rate there is "
                       "a lower bound of what the server could do")
    blocks = sorted({t.block for t in run.trials})
    ab_blocks = sorted({t.block for t in run.trials if t.peer is not None})
    if blocks and ab_blocks != blocks:
        out.append(f"- **ab ran in {len(ab_blocks)} of {len(blocks)} blocks** (blocks "
                   f"{', '.join(map(str, ab_blocks)) or 'none'}): its figures are medians of fewer trials")
    for cond, n in requests.items():
        c = SEED_LOADS[cond][0]
        short = [m for m, need in (("p99_ms", 5000), ("p90_ms", 500)) if n < need]
        out.append(f"- **{cond}**: {n:,} measured requests per trial ({n / c:.1f} per connection; the seed: "
                   f"{SEED_LOADS[cond][1] // c:,})" + (f"; too few for {' and '.join(short)} (rows left out)"
                                                       if short else ""))
    return "\n".join(out) if out else "_Nothing limited this run's answers._"


# -- the conclusion -----------------------------------------------------------------------------

def _row_text(answer: Answer, c: Contrast, group: str) -> str:
    bits = []
    for metric, word in (("goodput_rps", "goodput"), ("server_cpu_us_per_req", "server CPU per request"),
                         ("error_rate", "error rate")):
        v = answer.verdict(c.arm, metric, group=group, baseline=c.baseline)
        if v is not None:
            bits.append(say.sentence(v, c.arm, c.baseline, word))
    return f"- *{group}*: " + "; ".join(bits or [say.sentence(None, c.arm, c.baseline)]) + "."


def conclusion_markdown(answers: Mapping[str, Answer], reference: Any, sat: Any, responses: Any,
                        ab_by_arm: Any = None) -> str:
    """The answers in words, every figure from the typed verdicts (goodput, server CPU per
    request, error rate) and from this run's tables."""
    out = []
    seed = answers.get("seed")
    if seed is not None:
        v = seed.verdict("dotnet-nginx-off", "goodput_rps", group="c20")
        ref = reference.set_index(["concurrency", "library"])["requests_per_s"]
        out.append(f"**The seed's question** (can AsyncFastCGI.NET match node-fastcgi behind nginx?): "
                   f"{say.sentence(v, 'AsyncFastCGI.NET behind nginx', 'node-fastcgi behind nginx', 'goodput')}. "
                   f"The seed's best-of-10 figures were {fmt.num(ref[(20, 'AsyncFastCGI.NET')])} "
                   f"against {fmt.num(ref[(20, 'NodeJS')])} req/s at c=20, {fmt.num(ref[(400, 'AsyncFastCGI.NET')])} "
                   f"against {fmt.num(ref[(400, 'NodeJS')])} at c=400.")
    for key, head in (("fastcgi", "**FastCGI implementations behind the same nginx**"),
                      ("nginx", "**What nginx and FastCGI cost**"), ("keepconn", "**fastcgi_keep_conn on against off**")):
        if key in answers:
            a = answers[key]
            out += ["", head, ""] + [_row_text(a, c, str(c.group)) for c in a.family.rows()]
            out += [f"- {n}" for n in a.notes if "answered errors" in n]
    out += ["", "**The plateau**: which side set the rate, by the CPU figures of this run:", "",
            plateau_markdown(sat, responses)]
    if ab_by_arm is not None and len(ab_by_arm):
        r = ab_by_arm["rps_ratio"].astype(float)
        out += ["", f"**ab beside benchlib** (the same instances, the same load, one after the other): ab's req/s over "
                f"benchlib's, median per-trial ratio per arm and condition, ran from {r.min():.2f} to {r.max():.2f} "
                "(the notes under the ab table say what this run measured about why)."]
    return "\n".join(out)

