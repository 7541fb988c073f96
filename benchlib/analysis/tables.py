"""The tables every study report shows about its run, from the stored records.

Each function takes the run (a :class:`~benchlib.store.results.Run`: what the runner returns, or
:func:`~benchlib.store.results.open_run` of a stored one) and returns a DataFrame; arms that did not run appear as
"not run: why" wherever a table
lists arms. Rows follow the experiment's arm order.

* :func:`status_table`: trials ok / failed / invalid per condition and arm, with reasons;
* :func:`contracts_table`: what each arm answered at its contract check;
* :func:`repeats_table`: trials the guard invalidated and the runner repeated in place;
* :func:`limits_table`: what the runtime enforced (CPUs, quota, memory, swap; where the
  dependencies ran);
* :func:`warmup_table`: what the warm-up kept out (first request, warm-up and measured medians);
* :func:`client_cpu_table` and :func:`client_limited`: whether benchlib's client came near its
  CPU limit (then the measured rate is a lower bound);
* :func:`server_cpu_table` and :func:`server_unsaturated`: the server's CPU time per request
  with its interval, and whether the server's CPUs were busy (if not, something else, often
  the client, set the rate);
* :func:`responses_table`: what each arm answered under load (HTTP statuses, transport
  errors, error rate; the peer tool's failures);
* :func:`saturation_table`: which side came near its CPU limit (the server with its front,
  benchlib's client, the peer tool) and the rate each could serve at full CPU;
* :func:`log_lines_table`: log lines written per request sent;
* :func:`measured_minutes`: how long the trials took;
* :func:`short_reasons`: why arms did not run, short enough for verdict tables and sentences;
* :func:`median_of_trials`: a median of per-trial values with its interval and its achieved level;
* :func:`percentile_support`: which percentiles a trial supports at each size;
* :func:`add_trial_metric`: a study's own per-trial metric as a summaries column.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchlib.store.records import TrialRecord
from benchlib.store.records import rows as R
from benchlib.store.results import Run

__all__ = ["CLIENT_NEAR_LIMIT", "SERVER_BUSY", "TrialMedian", "add_trial_metric", "client_cpu_table", "client_limited",
           "contracts_table", "invalid_for_client_cpu", "near_client_limit", "load_hosts_table", "trial_cluster",
           "limits_table", "log_lines_table", "logged_lines", "measured_minutes", "median_of_trials", "percentile_support",
           "repeats_table", "responses_table", "saturation_table", "server_cpu_table", "server_unsaturated",
           "short_reasons", "status_table", "warmup_table"]

#: A client CPU busier than this (share of one CPU) means the client may have set the rate;
#: the load generator's guard marks a trial invalid at 0.90.
CLIENT_NEAR_LIMIT = 0.8
#: A server whose CPUs were busy less than this share of the measured window had CPU to spare:
#: it did not set the rate itself (see :func:`server_cpu_table`).
SERVER_BUSY = 0.9


def invalid_for_client_cpu(reason: object) -> bool:
    """Whether a trial's invalid reason is the guard's busy client CPU (``"client CPU 1 was 91%
    busy (limit 90%) ..."``, :mod:`benchlib.loadgen.guard`)."""
    return "client CPU" in str(reason)


def near_client_limit(trials: int, near: int, invalid_for_client: int) -> bool:
    """The one rule for an arm whose client may have set its rate (its measured rate then a
    lower bound of the server's): of its ``trials`` (those with a client CPU measure), ``near``
    had the busiest client CPU at :data:`CLIENT_NEAR_LIMIT` (share of one CPU) or more, in half
    of them or more; or the guard invalidated ``invalid_for_client`` > 0 of its trials for the
    client's CPU."""
    return invalid_for_client > 0 or (trials > 0 and 2 * near >= trials)


def _sorted(df: Any, run: Run, by: Sequence[str] = ("condition", "arm")) -> Any:
    """``df`` sorted by condition name, then in the experiment's arm order."""
    import pandas as pd

    if not len(df):
        return df
    df = df.copy()
    df["arm"] = pd.Categorical(df["arm"], run.arm_order(df["arm"]), ordered=True)
    df = df.sort_values(list(by)).reset_index(drop=True)
    df["arm"] = df["arm"].astype(str)
    return df


def status_table(run: Run) -> Any:
    """Per condition and arm: trials ok / failed / invalid (with reasons), and arms not run."""
    import pandas as pd

    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for t in run.trials:
        r = rows.setdefault((t.condition, t.arm), {"condition": t.condition, "arm": t.arm, "ok": 0, "failed": 0,
                                                   "invalid": 0, "reasons": set()})
        r[t.status] = r.get(t.status, 0) + 1
        if t.status != "ok" and t.reason:
            r["reasons"].add(str(t.reason)[:160])
    out = [{**r, "reasons": "; ".join(sorted(r["reasons"]))} for r in rows.values()]
    for arm, why in run.unavailable.items():
        out += [{"condition": c, "arm": arm, "ok": 0, "failed": 0, "invalid": 0, "reasons": f"not run: {why}"}
                for c in run.conditions]
    return pd.DataFrame(out, columns=["condition", "arm", "ok", "failed", "invalid", "reasons"])


def contracts_table(run: Run) -> Any:
    """What each arm answered at its contract check (first stored trial per arm and condition)."""
    import pandas as pd

    seen = set()
    out = []
    for t in run.trials:
        c = t.contract
        if (t.condition, t.arm) in seen or not c:
            continue
        seen.add((t.condition, t.arm))
        out.append({"condition": t.condition, "arm": t.arm, "endpoint": c.get("url", "").split("/", 3)[-1],
                    "status": c.get("status"), "content_type": c.get("content_type"),
                    "body": c.get("body_head"), "bytes": c.get("body_bytes"),
                    "contract": "ok" if c.get("ok") else "; ".join(c.get("problems", []))})
    out += [{"condition": "-", "arm": arm, "contract": f"not run: {why}"} for arm, why in run.unavailable.items()]
    return pd.DataFrame(out).fillna("")


def repeats_table(run: Run) -> Any:
    """Per condition and arm: how many trials the load generator's guard invalidated and the
    runner repeated in place (``Experiment.repeat_invalid``), the attempts set aside, and the
    trials still invalid after their repeats (left out of the analysis). Empty when none."""
    import pandas as pd

    acc: dict[tuple[str, str], dict[str, int]] = {}
    for t in run.trials:
        d = acc.setdefault((t.condition, t.arm), {"trials": 0, "repeated": 0, "attempts set aside": 0,
                                                  "still invalid": 0})
        d["trials"] += 1
        d["repeated"] += t.repeated
        d["attempts set aside"] += len(t.attempts)
        d["still invalid"] += t.status == "invalid"
    rows = [{"condition": c, "arm": a, **v} for (c, a), v in acc.items() if v["repeated"] or v["still invalid"]]
    cols = ["condition", "arm", "trials", "repeated", "attempts set aside", "still invalid"]
    return _sorted(pd.DataFrame(rows, columns=cols), run)


def limits_table(run: Run, *, unavailable: Mapping[str, str] | None = None) -> Any:
    """What the runtime enforced on each arm's service, as read back in its trials (CPU set,
    CPU quota, memory cap, swap), where its dependencies ran (``<name> cpus``), and the
    runtime; arms not run say why (``unavailable`` overrides the run's reasons, e.g. shorter)."""
    import pandas as pd

    from benchlib.stats.verdict import Verdict, render

    acc: dict[str, dict[str, set[str]]] = {}
    for t in run.trials:
        e = t.enforced
        if e is None:
            continue
        d = acc.setdefault(t.arm, {k: set() for k in ("cpus", "cpu", "memory", "swap")})
        d["cpus"].add(",".join(map(str, e.cpus or ())))
        d["cpu"].add(e.cpu_text)
        d["memory"].add(e.memory_text)
        d["swap"].add(str(e.swap if e.swap is not None else "–"))
        if t.dependencies:
            d.setdefault(f"{', '.join(t.dependencies)} cpus", set()).add(
                ",".join(map(str, t.cpus.get("dependencies", ()))))
        d.setdefault("runtime", set()).add(e.runtime or t.runtime)
    rows = [{"arm": a, **{k: "; ".join(sorted(v)) for k, v in acc[a].items()}} for a in run.arm_order(acc)]
    why = dict(run.unavailable if unavailable is None else unavailable)
    rows += [{"arm": a, "cpus": render(Verdict.not_run(w))} for a, w in why.items()]
    return pd.DataFrame(rows).fillna("")


def warmup_table(run: Run) -> Any:
    """What the warm-up kept out of the analysis, per condition and arm (medians over valid
    trials): the first request of a fresh instance (what a run without warm-up would have
    included), the warm-up's median and the measured median, all from the due time, in ms."""
    import pandas as pd

    acc: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for t in run.trials:
        if not t.valid:
            continue
        rows = t.rows()
        warm, meas = R.ok(R.warmup(rows)), R.ok_measured(rows)
        if not len(warm) or not len(meas):
            continue
        lat_w = R.latency_ms(warm)
        first = float(lat_w[np.argmin(warm["t_intended_ns"])])
        acc.setdefault((t.condition, t.arm), []).append((first, float(np.median(lat_w)),
                                                          float(np.median(R.latency_ms(meas)))))
    out = [{"condition": c, "arm": a, "trials": len(v), "first request": float(np.median([x[0] for x in v])),
            "warm-up median": float(np.median([x[1] for x in v])), "measured median": float(np.median([x[2] for x in v]))}
           for (c, a), v in acc.items()]
    return _sorted(pd.DataFrame(out), run).round(3)


def client_cpu_table(run: Run, *, condition: str | None = None) -> Any:
    """Per arm: how busy benchlib's client CPU was in its trials (share of one CPU, the load
    generator's workers summed; median and max over trials), how many trials came near the
    limit (:data:`CLIENT_NEAR_LIMIT`) and how many the guard marked invalid for it.
    ``condition``: only that condition's trials."""
    import pandas as pd

    per: dict[str, list[float]] = {}
    invalid: dict[str, int] = {}
    for t in run.trials:
        if condition is not None and t.condition != condition:
            continue
        if t.client_cpu == t.client_cpu:
            per.setdefault(t.arm, []).append(t.client_cpu)
        if t.status == "invalid" and invalid_for_client_cpu(t.reason):
            invalid[t.arm] = invalid.get(t.arm, 0) + 1
    rows = []
    for arm, vals in per.items():
        v = pd.Series(vals)
        rows.append({"arm": arm, "trials": len(v), "client CPU, median": round(float(v.median()), 2),
                     "client CPU, max": round(float(v.max()), 2),
                     f"trials at ≥ {CLIENT_NEAR_LIMIT:.0%}": int((v >= CLIENT_NEAR_LIMIT).sum()),
                     "invalid (client CPU ≥ 90%)": invalid.get(arm, 0)})
    return pd.DataFrame(rows)


def trial_cluster(trial: TrialRecord) -> Mapping[str, Any]:
    """The trial's stored ``load.cluster`` (its load hosts, start skew...; ``{}`` for a trial
    whose load came from this machine alone)."""
    return (trial.load.extra.get("cluster") if trial.load is not None else None) or {}


def load_hosts_table(run: Run, *, condition: str | None = None) -> Any:
    """One row per trial and load host of trials run from several hosts (``cluster=``,
    ``docs/cluster.md``): the host and its node (host name and the start of its Ray node id),
    its rows and measured requests, achieved rate, schedule lag
    p99 (ms), busiest client CPU (share of one CPU), the share of its load CPUs other processes
    took (``foreign CPU``, 0..1, Ray's daemons not counted; blank for trials stored before it
    was measured), whether its guard kept it valid (and why not), its clock offset and round
    trip (ms), and the trial's start skew (ms). Empty for trials run on one machine.
    ``condition``: only that condition's trials."""
    import pandas as pd

    rows = []
    for t in run.trials:
        if condition is not None and t.condition != condition:
            continue
        cluster = trial_cluster(t)
        skew = cluster.get("start_skew_ns")
        for h in cluster.get("hosts") or ():
            lag = (h.get("schedule_lag_ns") or {}).get("p99")
            cpu = ((h.get("client_cpu") or {}).get("per_cpu") or {}).values()
            foreign = (h.get("foreign_cpu") or {}).get("foreign")
            rows.append({
                "condition": t.condition, "arm": t.arm, "block": t.block, "host": h.get("host"),
                "node": f"{h.get('hostname')} ({str(h['node_id'])[:8]})" if h.get("node_id") else h.get("hostname"),
                "rows": h.get("rows"),
                "measured requests": (h.get("requests") or {}).get("measure"),
                "achieved req/s": round(float(h["achieved_rps"]), 1) if h.get("achieved_rps") is not None else None,
                "lag p99, ms": round(lag / 1e6, 2) if lag is not None else None,
                "client CPU, max": round(max(cpu), 2) if cpu else None,
                "foreign CPU": round(float(foreign), 2) if foreign is not None else None,
                "valid": bool(h.get("valid")), "why not": h.get("failure") or h.get("invalid_reason"),
                "clock offset, ms": round(h["clock_offset_ns"] / 1e6, 3) if h.get("clock_offset_ns") is not None else None,
                "round trip, ms": round(h["clock_rtt_ns"] / 1e6, 3) if h.get("clock_rtt_ns") is not None else None,
                "start skew, ms": round(skew / 1e6, 3) if skew is not None else None,
            })
    return pd.DataFrame(rows)


def client_limited(table: Any) -> list[str]:
    """The arms of :func:`client_cpu_table` whose client came near its limit in half of the
    trials or more, or had a trial marked invalid for it (:func:`near_client_limit`): their
    measured rate is a lower bound."""
    if table is None or not len(table):
        return []
    return [str(arm) for arm, n, near, bad in zip(table["arm"], table["trials"], table[f"trials at ≥ {CLIENT_NEAR_LIMIT:.0%}"],
                                                  table["invalid (client CPU ≥ 90%)"], strict=True)
            if near_client_limit(int(n), int(near), int(bad))]


def server_cpu_table(run: Run, summaries: Any, *, condition: str | None = None) -> Any:
    """Per condition and arm, over the valid trials: the server's CPU time per request
    (``server_cpu_us_per_req``, the service and its front, µs), median with its
    interval at its achieved level (:func:`median_of_trials`), and how busy the server's
    CPUs were over the measured window (``server_cpu_frac`` over the run's server CPUs: 1.0 = all of them,
    median and minimum over trials) with the trials below :data:`SERVER_BUSY`: there the
    server had CPU to spare, so the client (or anything but the server's CPU) set the rate,
    and the arm compares on its CPU per request rather than on its throughput.
    ``condition``: only that condition's trials. Trials without CPU samples are left out."""
    import pandas as pd

    from benchlib.analysis.formats import MEDIAN_CI

    cpus = max(1, len(run.cpus.server))
    cols = ["condition", "arm", "trials", f"server CPU per request (µs), {MEDIAN_CI}",
            f"server CPUs busy (share of {cpus}), median", "busy, min", f"trials below {SERVER_BUSY:.0%}"]
    if summaries is None or not len(summaries) or "server_cpu_us_per_req" not in summaries.columns:
        return pd.DataFrame(columns=cols)
    s = summaries[summaries["valid"].astype(bool)] if "valid" in summaries.columns else summaries
    if condition is not None:
        s = s[s["condition"] == condition]
    rows = []
    for (cond, arm), g in s.groupby(["condition", "arm"], sort=False):
        g = g[g["server_cpu_us_per_req"].notna()]
        if not len(g):
            continue
        busy = g["server_cpu_frac"].astype(float) / cpus
        rows.append(dict(zip(cols, (cond, arm, len(g), median_of_trials(g["server_cpu_us_per_req"]).text,
                                    round(float(busy.median()), 2), round(float(busy.min()), 2),
                                    int((busy < SERVER_BUSY).sum())), strict=True)))
    return _sorted(pd.DataFrame(rows, columns=cols), run)


def server_unsaturated(table: Any) -> list[str]:
    """The arms of :func:`server_cpu_table` whose server CPUs were busy less than
    :data:`SERVER_BUSY` in half of their trials or more: the server did not set their rate."""
    if table is None or not len(table):
        return []
    below = table[f"trials below {SERVER_BUSY:.0%}"] * 2 >= table["trials"]
    return list(dict.fromkeys(table.loc[below, "arm"]))


_INSTALL_HINT = re.compile(r"^(no \S+ toolchain) \(.*\)$", re.S)


def short_reasons(unavailable: Mapping[str, str]) -> dict[str, str]:
    """Why each arm did not run, for verdict tables and sentences: a missing toolchain without
    its install hint (``"no dotnet toolchain (install the .NET 8 SDK ...)"`` -> ``"no dotnet
    toolchain"``; :func:`status_table` keeps the hint), other reasons cut to their first line
    and 160 characters."""
    out = {}
    for arm, why in unavailable.items():
        m = _INSTALL_HINT.match(why)
        out[arm] = m.group(1) if m else why.splitlines()[0][:160] if why else why
    return out


def responses_table(run: Run, *, condition: str | None = None) -> Any:
    """Per condition and arm, over the trials that ran (ok or invalid): the measured requests,
    their HTTP statuses summed (``200: 49,990; 502: 10``), transport errors by kind, the error
    rate (median and max over trials; a non-2xx/3xx answer or a transport error is an error),
    and, when a peer tool ran, its requests and errors (for ab: failed plus non-2xx)."""
    import pandas as pd

    acc: dict[tuple[str, str], dict[str, Any]] = {}
    for t in run.trials:
        if not t.ran or t.load is None or (condition is not None and t.condition != condition):
            continue
        d = acc.setdefault((t.condition, t.arm), {"trials": 0, "requests": 0, "status": {}, "transport": {},
                                                  "rates": [], "peer_requests": 0.0, "peer_errors": 0.0,
                                                  "peer_runs": 0, "tool": ""})
        d["trials"] += 1
        n = t.load.requests_measured
        d["requests"] += n
        for k, v in t.load.status_counts.items():
            d["status"][k] = d["status"].get(k, 0) + v
        for k, v in t.load.errors.items():
            if v:
                d["transport"][k] = d["transport"].get(k, 0) + v
        good = sum(v for k, v in t.load.status_counts.items() if 100 <= int(k) < 400)
        if n:
            d["rates"].append(1 - good / n)
        if t.peer is not None and t.peer.ok:
            d.update(peer_runs=d["peer_runs"] + 1, tool=t.peer.tool)
            d["peer_requests"] += t.peer.requests if t.peer.requests == t.peer.requests else 0
            d["peer_errors"] += t.peer.errors if t.peer.errors == t.peer.errors else 0

    def counts(c: Mapping[str, int]) -> str:
        return "; ".join(f"{k}: {v:,}" for k, v in sorted(c.items())) or "none"

    rows = []
    for (cond, arm), d in acc.items():
        r = {"condition": cond, "arm": arm, "trials": d["trials"], "requests": d["requests"],
             "HTTP statuses": counts(d["status"]), "transport errors": counts(d["transport"]),
             "error rate, median": float(np.median(d["rates"])) if d["rates"] else math.nan,
             "error rate, max": max(d["rates"]) if d["rates"] else math.nan}
        if d["peer_runs"]:
            r.update({f"{d['tool']} requests": int(d["peer_requests"]), f"{d['tool']} errors": int(d["peer_errors"])})
        rows.append(r)
    return _sorted(pd.DataFrame(rows), run)


def saturation_table(run: Run, summaries: Any, *, condition: str | None = None,
                     near: float = CLIENT_NEAR_LIMIT) -> Any:
    """Which side set the rate? Per condition and arm, medians over the trials that ran (ok or
    invalid: a client the guard stopped is part of the answer):

    * benchlib's rate (``throughput_rps``, every response), its client CPU (busiest CPU, share
      of one) and the rate it could send at a full CPU (rate / client CPU);
    * the server's CPUs busy (``server_cpu_frac``: service and front), of how many it was
      pinned to, the front's share of it, and the rate the server side could serve with all
      its CPUs busy at the measured CPU time per request (``server_cpu_us_per_req``), and its
      front alone (``front_cpu_us_per_req``);
    * the peer tool's rate, CPU and rate per CPU-second (requests / CPU s), when it ran;
    * ``near its CPU limit``: the sides at ``near`` or more of their CPUs (``none``: the rate
      was set by something else: connections, waiting, the other processes on the machine).
    """
    import pandas as pd

    index = summaries.set_index(["condition", "arm", "block"]) if summaries is not None and len(summaries) else None
    acc: dict[tuple[str, str], dict[str, list[float]]] = {}
    tools: dict[tuple[str, str], str] = {}

    def col(s: Any, name: str) -> float:
        return float(s[name]) if s is not None and name in s.index and s[name] == s[name] else math.nan

    for t in run.trials:
        key = (t.condition, t.arm, t.block)
        if not t.ran or (condition is not None and t.condition != condition) or index is None or key not in index.index:
            continue
        s = index.loc[key]
        n_cpus = len(t.cpus.get("server") or ()) or 1
        rps, client = col(s, "throughput_rps"), t.client_cpu
        total, front = col(s, "server_cpu_us_per_req"), col(s, "front_cpu_us_per_req")
        vals = {"rps": rps, "client": client, "client_ceiling": rps / client if client > 0 else math.nan,
                "server": col(s, "server_cpu_frac"), "cpus": float(n_cpus),
                "front_share": front / total if total > 0 else math.nan,
                "server_ceiling": n_cpus * 1e6 / total if total > 0 else math.nan,
                "front_ceiling": n_cpus * 1e6 / front if front > 0 else math.nan, "invalid": float(t.status == "invalid")}
        p = t.peer
        if p is not None and p.ok:
            tools[(t.condition, t.arm)] = p.tool
            vals.update(peer_rps=p.requests_per_s, peer_cpu=p.cpu_fraction,
                        peer_ceiling=p.requests / p.cpu_s if p.cpu_s and p.cpu_s > 0 else math.nan)
        d = acc.setdefault((t.condition, t.arm), {})
        for k, v in vals.items():
            d.setdefault(k, []).append(v)
    rows = []
    for (cond, arm), d in acc.items():
        med = {k: float(np.nanmedian(v)) if np.isfinite(v).any() else math.nan for k, v in d.items()}
        tool = tools.get((cond, arm), "peer")
        bound = [name for name, busy in (("server", med["server"] / med["cpus"]), ("benchlib client", med["client"]),
                                         (tool, med.get("peer_cpu", math.nan))) if busy >= near]
        r = {"condition": cond, "arm": arm, "trials": len(d["rps"]), "invalid": int(sum(d["invalid"])),
             "benchlib req/s": med["rps"], "benchlib client CPU": med["client"],
             "benchlib req/s at full client CPU": med["client_ceiling"], "server CPUs busy": med["server"],
             "server CPUs": int(med["cpus"]), "front share of server CPU": med["front_share"],
             "server req/s at full CPU": med["server_ceiling"], "front req/s at full CPU": med["front_ceiling"]}
        if "peer_rps" in d:
            r.update({f"{tool} req/s": med["peer_rps"], f"{tool} CPU": med["peer_cpu"],
                      f"{tool} req/s per CPU-second": med["peer_ceiling"]})
        r["near its CPU limit"] = ", ".join(bound) or "none"
        rows.append(r)
    return _sorted(pd.DataFrame(rows), run)


def measured_minutes(run: Run) -> float:
    """Minutes from the first stored trial's start to the last one's end (NaN when nothing
    is stored)."""
    starts = [t.started for t in run.trials if t.started]
    ends = [t.finished for t in run.trials if t.finished]
    if not starts or not ends:
        return math.nan
    return (max(ends) - min(starts)).total_seconds() / 60.0


_CUT = re.compile(rb"^\[benchlib: log cut here: ([0-9,]+) lines \([0-9,]+ bytes\) left out\]$", re.M)


def logged_lines(trial: TrialRecord) -> int | None:
    """Lines the service wrote in ``trial``: the runtime's count, else the lines of its kept
    log, where a cut marker (:mod:`benchlib.runtime.logs`) adds back the lines it stands for (the
    marker itself is a blank line and one line); ``None`` when neither exists."""
    if trial.service_log is not None and trial.service_log.lines:
        return int(trial.service_log.lines)
    path = trial.log_path
    if path is None or not path.exists():
        return None
    n = 0
    with open(path, "rb") as fh:
        for line in fh:
            n += line.endswith(b"\n")
            if line.startswith(b"[benchlib: log cut here"):
                m = _CUT.match(line.rstrip(b"\n"))
                if m:
                    n += int(m.group(1).replace(b",", b"")) - 2
    return n


def log_lines_table(run: Run, *, expected: Mapping[str, float], condition: str | None = None) -> Any:
    """Per arm: the log lines its service wrote per request it was sent (benchlib's warm-up and
    measured requests plus a peer tool's), median over trials, against ``expected`` (arm ->
    lines per request); discarded logs are reported as such. Trials the guard marked invalid
    count (they sent real requests and their service logged them); failed ones do not."""
    import pandas as pd

    per_arm: dict[str, list[float]] = {}
    sinks: dict[str, str] = {}
    for t in run.trials:
        if (condition is not None and t.condition != condition) or not t.ran:
            continue
        sinks[t.arm] = t.log_sink
        if t.log_sink == "discard":
            per_arm.setdefault(t.arm, [])
            continue
        lines = logged_lines(t)
        if lines is None:
            continue
        reqs = (t.load.requests_total if t.load is not None else 0) + int(
            t.peer.requests if t.peer is not None and t.peer.requests == t.peer.requests else 0)
        if reqs:
            per_arm.setdefault(t.arm, []).append(lines / reqs)
    rows = []
    for arm, vals in per_arm.items():
        exp = float(expected.get(arm, math.nan))
        med = round(float(pd.Series(vals).median()), 4) if vals else math.nan
        if not vals:
            note = "log discarded (/dev/null): nothing to count"
        elif med < 0.95 * exp:
            note = ("fewer lines than requests: the rest had not reached the log when the service was stopped "
                    "(its logger buffers in the process instead of waiting for the pipe)")
        elif med > 1.05 * exp:
            note = "more lines than requests: the service logs more than its requests"
        else:
            note = "every request logged"
        rows.append({"arm": arm, "log sink": sinks[arm], "log lines per request (median over trials)": med,
                     "expected": expected.get(arm, math.nan), "trials": len(vals), "note": note})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class TrialMedian:
    """A median of per-trial values with its order-statistic interval.

    Attributes
    ----------
    median:
        The median of the values (their unit; NaN when there is none).
    lo, hi:
        The interval ``[x(k), x(n-k+1)]`` (NaN when too few values: fewer than 6 at 95%).
    level:
        The interval's achieved confidence, at least the nominal one and never exactly it
        (96.9% for 6 values, 99.2% for 8, 97.9% for 10 at 95%; NaN without interval).
    n:
        How many values there were (NaN left out).
    """

    median: float
    lo: float
    hi: float
    level: float
    n: int

    @property
    def text(self) -> str:
        """As a table cell: ``0.509 [0.475, 2.23] (97.9% CI)`` (:func:`~benchlib.analysis.formats.median_ci`)."""
        from benchlib.analysis.formats import median_ci

        return median_ci(self.median, self.lo, self.hi, self.level)


def median_of_trials(values: Iterable[float], confidence: float = 0.95) -> TrialMedian:
    """The median of per-trial values (NaN ignored) with its order-statistic interval and
    that interval's achieved level (:func:`benchlib.stats.exact.median_interval_rank`, the
    interval the verdict tables' ``±`` come from)."""
    from benchlib.stats.exact import median_interval_rank

    x = np.sort(np.asarray([v for v in values if v == v], dtype=float))
    if not x.size:
        return TrialMedian(math.nan, math.nan, math.nan, math.nan, 0)
    med = float(np.median(x))
    k, level = median_interval_rank(int(x.size), float(confidence))
    if k == 0:
        return TrialMedian(med, math.nan, math.nan, math.nan, int(x.size))
    return TrialMedian(med, float(x[k - 1]), float(x[x.size - k]), float(level), int(x.size))


def add_trial_metric(summaries: Any, run: Run, name: str, value: Callable[[TrialRecord], float]) -> Any:
    """``summaries`` with one more per-trial column ``name``: ``value(trial)`` of each stored
    trial's record (NaN where it gives none), matched by condition, arm and block. For a
    study's own metric, compared like any other (e.g. the server's CPU time per request from
    the trial's resource samples; give its direction with ``Family(better=...)`` unless its
    name says it: ``*_ms``, ``*_us``, ``*_rps``)."""
    got = {(t.condition, t.arm, t.block): value(t) for t in run.trials}
    out = summaries.copy()
    out[name] = [float(got.get((c, a, int(b)), math.nan))
                 for c, a, b in zip(out["condition"], out["arm"], out["block"], strict=True)]
    return out


def percentile_support(loads: Mapping[str, Mapping[str, Any]], *, labels: Mapping[str, str] | None = None,
                       quantiles: Sequence[float] = (0.5, 0.9, 0.95, 0.99, 0.999)) -> Any:
    """Which latency percentiles a trial supports (at least 50 requests beyond, ``n (1 - q) >=
    50``): ``loads`` maps a size label (``"1"``, ``"0.5 (this run)"``) to {condition:
    :class:`~benchlib.core.model.LoadSpec`} (open model: rate x duration requests); ``labels``
    names the conditions (e.g. their paths)."""
    import pandas as pd

    from benchlib.stats import required_requests

    rows = []
    for size, per in loads.items():
        for cond, load in per.items():
            n = int(round((load.rate_rps or 0) * (load.duration_s or 0)))
            rows.append({"scale": size, "endpoint": (labels or {}).get(cond, cond), "rate (req/s)": load.rate_rps,
                         "seconds": load.duration_s, "requests per trial": n,
                         "percentiles supported": ", ".join(f"p{100 * q:g}" for q in quantiles
                                                            if n >= required_requests(q)) or "none"})
    return pd.DataFrame(rows)
