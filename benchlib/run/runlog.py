"""The run's log: ``logs/run.log`` in the run folder, the full text behind what the progress
says in one line (e.g. Ray's error when a cluster's host is lost: :mod:`benchlib.run.cluster.faults`).

While a run executes, :func:`run_log` sends the records of benchlib's loggers (``benchlib.*``,
level INFO and above) to that file, appended on a resume. The file is made at the first record:
a run without one has none.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

__all__ = ["run_log", "RUN_LOG"]

#: The run's log, relative to its run folder.
RUN_LOG = Path("logs") / "run.log"


class _LazyFile(logging.FileHandler):
    """A file handler that makes the file's folder at its first record."""

    def _open(self):  # type: ignore[no-untyped-def]  # logging's own signature
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()


@contextlib.contextmanager
def run_log(run_folder: Path) -> Iterator[Path]:
    """Send benchlib's log records (INFO and above) to ``run_folder / RUN_LOG`` until the block
    ends; yields that path."""
    path = run_folder / RUN_LOG
    logger = logging.getLogger("benchlib")
    handler = _LazyFile(path, encoding="utf-8", delay=True)
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    level = logger.level
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield path
    finally:
        logger.removeHandler(handler)
        handler.close()
        logger.setLevel(level)
