"""The report's load-hosts section: the per-host figures of the trials whose load came from
more than one host (``cluster=``, ``docs/cluster.md``), read from the stored run.

:func:`load_hosts_section` gives the section (a heading, a paragraph in words, the host set of
each block (:func:`host_sets`) with the hosts lost mid-run, and
:func:`~benchlib.analysis.tables.load_hosts_table` of those trials); it is empty for a run on
one machine, so a notebook shows it with one line, ``load_hosts_section(result).show()``,
and a run without a cluster shows nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from benchlib.analysis.display import show, table
from benchlib.analysis.tables import load_hosts_table, trial_cluster
from benchlib.store.records import TrialRecord
from benchlib.store.results import Run

__all__ = ["LoadHostsSection", "HostSet", "host_sets", "load_hosts_section", "multi_host_trials"]

#: The section's heading (Markdown).
HEADING = "## Load hosts"


def _hosts(trial: TrialRecord) -> list[dict[str, Any]]:
    """The trial's stored load hosts (``load.cluster.hosts``; empty on one machine)."""
    return list(trial_cluster(trial).get("hosts") or ())


def multi_host_trials(run: Run) -> list[TrialRecord]:
    """The stored trials of ``run`` whose load came from more than one host."""
    return [t for t in run.trials if len(_hosts(t)) > 1]


def _node(h: dict[str, Any]) -> str:
    """A host's node as the per-host table names it: ``myhost (6793dfde)``."""
    return f"{h.get('hostname')} ({str(h['node_id'])[:8]})" if h.get("node_id") else str(h.get("hostname"))


@dataclass(frozen=True)
class HostSet:
    """Blocks whose trials sent their load from the same hosts: ``blocks`` (their numbers, as
    the trials' ``block``) and ``nodes`` (each host's node, in host order)."""

    blocks: tuple[int, ...]
    nodes: tuple[str, ...]

    def words(self) -> str:
        """``b0-b1: 2 hosts (myhost (0e872291), myhost (6793dfde))``."""
        first, last = self.blocks[0], self.blocks[-1]
        which = f"b{first}" if first == last else f"b{first}-b{last}"
        return f"{which}: {len(self.nodes)} host{'s' if len(self.nodes) != 1 else ''} ({', '.join(self.nodes)})"


def host_sets(run: Run) -> list[HostSet]:
    """The load hosts of each block of ``run`` (from its stored trials: a block's trials all
    ran on one host set, :mod:`benchlib.run.runner`), consecutive blocks with the same set
    together; empty for a run on one machine."""
    per_block: dict[int, tuple[str, ...]] = {}
    for t in sorted(run.trials, key=lambda t: t.block):
        nodes = tuple(_node(h) for h in sorted(_hosts(t), key=lambda h: int(h.get("host") or 0)))
        if nodes:
            per_block.setdefault(t.block, nodes)
    out: list[HostSet] = []
    for block, nodes in sorted(per_block.items()):
        if out and out[-1].nodes == nodes:
            out[-1] = HostSet(out[-1].blocks + (block,), nodes)
        else:
            out.append(HostSet((block,), nodes))
    return out


@dataclass(frozen=True)
class LoadHostsSection:
    """The load-hosts section of a report.

    Attributes
    ----------
    markdown: the heading and the paragraph ("" when no trial had more than one host).
    table: :func:`~benchlib.analysis.tables.load_hosts_table` of the run (one row per trial
        and host; empty when no trial had more than one host).
    """

    markdown: str
    table: Any

    def __bool__(self) -> bool:
        return bool(self.markdown)

    def show(self) -> None:
        """Show the section in a notebook (nothing when it is empty)."""
        if self.markdown:
            show(self.markdown)
            show(table(self.table))


def load_hosts_section(run: Run) -> LoadHostsSection:
    """The load-hosts section of ``run`` (a :class:`~benchlib.store.results.Run`: what the runner
    returns, or :func:`~benchlib.store.results.open_run` of a stored run): empty unless a trial's
    load came from more than one host or the hosts changed between blocks; else the heading,
    how many trials ran from how many hosts, in how many every host's guard kept the trial
    valid, the largest start skew, the host set of each block with the hosts lost mid-run
    (run.json's ``host_losses``), and the per-host table."""
    import pandas as pd

    sets = host_sets(run)
    trials = [t for t in run.trials if _hosts(t)] if len(sets) > 1 else multi_host_trials(run)
    if not trials:
        return LoadHostsSection("", pd.DataFrame())
    hosts = {(str(h.get("hostname")), h.get("node_id")) for t in trials for h in _hosts(t)}
    kept = sum(all(h.get("valid") and not h.get("failed") for h in _hosts(t)) for t in trials)
    skews = [float(s) for t in trials if (s := trial_cluster(t).get("start_skew_ns")) is not None]
    skews = [s for s in skews if math.isfinite(s)]
    cluster = run.experiment.cluster if run.experiment is not None else None
    where = f" (`cluster={cluster!r}`)" if cluster else ""
    counts = sorted({len(_hosts(t)) for t in trials})
    n_hosts = " or ".join(str(n) for n in counts)
    text = [
        HEADING,
        f"{len(trials)} trial(s) sent their load from {n_hosts} hosts{where}, {len(hosts)} distinct node(s) in all; "
        f"each host ran its share of the load and its own guard judged it (schedule lag and client CPU). A trial "
        f"counts only when every host kept up, none failed and they started within the skew bound: every host "
        f"kept up in {kept} of {len(trials)}. Largest start skew between hosts: "
        + (f"{max(skews) / 1e6:.2f} ms." if skews else "not measured."),
        "Load hosts per block (a block that lost a host ran again in full on the hosts left; blocks never mix "
        "host sets): " + "; ".join(h.words() for h in sets) + "."
        + "".join(f" {_lost_words(line)}" for line in _losses(run)),
        "One row per trial and host, from the stored trials: its rows and measured requests, achieved rate, "
        "schedule lag p99, busiest client CPU, the share of its load CPUs other processes took (foreign CPU; "
        "Ray's own daemons not counted; reported, not judged), its guard's verdict (valid, or why not), its "
        "clock offset and round trip to this machine, and the trial's start skew.",
    ]
    return LoadHostsSection("\n\n".join(text), load_hosts_table(run))


def _losses(run: Run) -> list[str]:
    """The run's one-line notes of hosts lost mid-run (run.json's ``host_losses``)."""
    return [h.line for h in run.record.host_losses]


def _lost_words(line: str) -> str:
    return f"Lost mid-run: {line}."
