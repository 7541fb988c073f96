"""Peer load tools (wrk, ab, hey, h2load): run them pinned to the client's CPUs and parse
their reports into dicts, for cross-checks in notebooks and for ``bench/``.

Every ``run_*`` refuses non-loopback URLs (like :func:`benchlib.loadgen.validate`), raises
:class:`~benchlib.core.errors.ToolchainMissing` with the install command when the tool is absent,
and adds ``command``, ``wall_s``, ``cpu_s``, ``cpu_fraction`` and ``stdout`` to the parsed dict.
"""

from __future__ import annotations

from benchlib.loadgen.peers.ab import parse_ab, run_ab
from benchlib.loadgen.peers.h2load import parse_h2load, run_h2load
from benchlib.loadgen.peers.hey import parse_hey, run_hey
from benchlib.loadgen.peers.wrk import parse_wrk, run_wrk

__all__ = ["parse_ab", "parse_h2load", "parse_hey", "parse_wrk", "run_ab", "run_h2load", "run_hey", "run_wrk"]
