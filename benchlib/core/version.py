"""benchlib's version (``benchlib.__version__`` re-exports it): what run.json, the cluster's
version check and ``benchlib --version`` read."""

from __future__ import annotations

__all__ = ["VERSION"]

#: the released version of the package (Keep a Changelog: CHANGELOG.md)
VERSION = "0.2.0"
