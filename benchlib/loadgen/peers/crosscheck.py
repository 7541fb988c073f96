"""Running a cross-check's peer tool: the one function the runner calls on this machine and a
cluster's load host calls on its own (:mod:`benchlib.run.cluster.cluster_peer`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchlib.core.errors import BenchlibError
from benchlib.core.model import CrossCheck

__all__ = ["run_cross_check"]


def run_cross_check(check: CrossCheck, url: str, cpus: Sequence[int], *, order: str) -> dict[str, Any]:
    """Run ``check``'s peer tool against ``url`` pinned to ``cpus``; its parsed report plus
    ``order`` (before/after benchlib's load). A tool that is missing or fails is recorded as
    ``{"error": ...}``: the trial itself stands. (For a gRPC endpoint, the runner passes
    ``check`` through :func:`benchlib.run.runner.cross_check_for` first.)"""
    import importlib

    options = dict(check.options)
    module = importlib.import_module(f"benchlib.loadgen.peers.{check.tool}")
    func = getattr(module, f"run_{check.tool}")
    try:
        out = dict(func(url, cpus=list(cpus), **options))
    except BenchlibError as exc:
        return {"tool": check.tool, "order": order, "error": f"{type(exc).__name__}: {exc}"}
    out.pop("stdout", None) if len(str(out.get("stdout", ""))) > 20_000 else None
    return {**out, "tool": check.tool, "order": order}
