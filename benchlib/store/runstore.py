"""Storage of runs: ``run.json`` plus one Parquet file per trial, written atomically.

Layout (see docs/architecture.md)::

    <root>/<study>/<run_id>/
      run.json                                         parameters, plan, provenance (a RunRecord)
      trials/<condition>/<arm>/b<block:03d>.parquet    one trial: its rows + metadata
      logs/<condition>/<arm>/b<block:03d>.log          the service's log during that trial
      derived/summaries.parquet                        per-trial summaries (recomputable)

A trial file is written to a temporary name, fsynced and renamed, and never rewritten: a
re-run with the same ``run_id`` skips stored trials. A failed trial is stored too (with what
was measured before the failure and ``status="failed"``); re-running it moves the old file
aside (``.failed-N.parquet``), so nothing already measured is lost.

Study names and run ids are plain folder names (:data:`benchlib.core.model.NAME_PATTERN`: no ``/``, not ``.`` or
``..``, no leading dot or dash), so a run never writes outside ``<root>/<study>/``. Every
read error names the file it came from (:class:`~benchlib.core.errors.StorageError`). Trial files
carry a CRC32 checksum per page, verified on every read, so damaged bytes are an error, never
silently different numbers.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import secrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from benchlib.core import settings
from benchlib.core.errors import StorageError
from benchlib.core.model import check_name
from benchlib.core.schema import (
    ERROR_NAMES,
    HOST_COLUMN,
    HOST_DTYPE,
    NO_SLICE,
    PHASE_NAMES,
    READABLE_SCHEMA_VERSIONS,
    ROW_DTYPE,
    SCHEMA_VERSION,
    SLICE_COLUMN,
    SLICE_DTYPE,
)
from benchlib.store.records.run import RunRecord

__all__ = ["RunStore", "StoredTrial", "default_runs_root", "new_run_id", "rows_to_table", "table_to_rows"]


_META_TRIAL = b"benchlib.trial"
_META_VERSION = b"benchlib.schema_version"


def default_runs_root() -> Path:
    """``$BENCHLIB_DATA`` or ``data/runs`` under the project (the current folder's project)."""
    root = settings.DATA.get()
    if root is not None:
        return root
    from benchlib.runtime.manifest import find_services_dir

    return find_services_dir().parent / "data" / "runs"


def new_run_id() -> str:
    """A fresh run id: UTC time plus 4 random hex digits, e.g. ``20261202-131500-a3f9``."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:  # a full disk, Ctrl-C, SIGTERM: no half-written file stays behind
        tmp.unlink(missing_ok=True)
        raise


def rows_to_table(rows: np.ndarray, metadata: Mapping[bytes, bytes] | None = None, *,
                  hosts: np.ndarray | None = None, slices: np.ndarray | None = None) -> Any:
    """A ``pyarrow.Table`` of ``rows`` (:data:`~benchlib.core.schema.ROW_DTYPE`); ``error`` and
    ``phase`` become dictionary-encoded strings; ``hosts`` (one load-host index per row,
    default 0 for every row) becomes the column :data:`~benchlib.core.schema.HOST_COLUMN`;
    ``slices`` (an interleaved trial's slice index per row, default
    :data:`~benchlib.core.schema.NO_SLICE`) the column :data:`~benchlib.core.schema.SLICE_COLUMN`."""
    import pyarrow as pa

    if rows.dtype != ROW_DTYPE:
        raise StorageError(f"rows must have benchlib.core.schema.ROW_DTYPE, got {rows.dtype}")
    for name, col in (("hosts", hosts), ("slices", slices)):
        if col is not None and len(col) != len(rows):
            raise StorageError(f"{name} must have one entry per row: {len(col)} for {len(rows)} rows")
    cols: dict[str, Any] = {}
    for name in ROW_DTYPE.names or ():
        col = np.ascontiguousarray(rows[name])
        if name == "error":
            cols[name] = pa.DictionaryArray.from_arrays(pa.array(col.astype(np.int8)), pa.array(ERROR_NAMES))
        elif name == "phase":
            cols[name] = pa.DictionaryArray.from_arrays(pa.array(col.astype(np.int8)), pa.array(PHASE_NAMES))
        else:
            cols[name] = pa.array(col)
    host = np.zeros(len(rows), HOST_DTYPE) if hosts is None else np.ascontiguousarray(hosts, dtype=HOST_DTYPE)
    cols[HOST_COLUMN] = pa.array(host)
    sl = (np.full(len(rows), NO_SLICE, SLICE_DTYPE) if slices is None
          else np.ascontiguousarray(slices, dtype=SLICE_DTYPE))
    cols[SLICE_COLUMN] = pa.array(sl)
    table = pa.table(cols)
    if metadata:
        table = table.replace_schema_metadata(dict(metadata))
    return table


def table_to_rows(table: Any) -> np.ndarray:
    """Back from a table (as written by :func:`rows_to_table`) to a ROW_DTYPE array."""
    import pyarrow as pa

    n = table.num_rows
    rows = np.zeros(n, dtype=ROW_DTYPE)
    for name in ROW_DTYPE.names or ():
        col = table.column(name).combine_chunks()
        if name in ("error", "phase"):
            names = ERROR_NAMES if name == "error" else PHASE_NAMES
            if pa.types.is_dictionary(col.type):
                dictionary = [str(x) for x in col.dictionary.to_pylist()]
                lookup = np.array([names.index(d) for d in dictionary], dtype=np.uint8)
                rows[name] = lookup[col.indices.to_numpy(zero_copy_only=False)]
            else:
                rows[name] = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.uint8)
        else:
            rows[name] = col.to_numpy(zero_copy_only=False)
    return rows


def table_to_hosts(table: Any) -> np.ndarray:
    """The load host of each row (:data:`~benchlib.core.schema.HOST_DTYPE`); a table stored before
    the column existed (schema version 1, one machine) gives 0 for every row."""
    if HOST_COLUMN not in table.column_names:
        return np.zeros(table.num_rows, HOST_DTYPE)
    return np.asarray(table.column(HOST_COLUMN).combine_chunks().to_numpy(zero_copy_only=False), dtype=HOST_DTYPE)


def table_to_slices(table: Any) -> np.ndarray:
    """Each row's slice index in an interleaved trial (:data:`~benchlib.core.schema.SLICE_DTYPE`;
    :data:`~benchlib.core.schema.NO_SLICE` outside one, and for a table stored before the column
    existed: schema versions 1 and 2)."""
    if SLICE_COLUMN not in table.column_names:
        return np.full(table.num_rows, NO_SLICE, SLICE_DTYPE)
    return np.asarray(table.column(SLICE_COLUMN).combine_chunks().to_numpy(zero_copy_only=False), dtype=SLICE_DTYPE)


@dataclass(frozen=True)
class StoredTrial:
    """A trial on disk: where it is and its metadata (read without loading the rows)."""

    path: Path
    meta: Mapping[str, Any]

    @property
    def condition(self) -> str:
        return str(self.meta["condition"])

    @property
    def arm(self) -> str:
        return str(self.meta["arm"])

    @property
    def block(self) -> int:
        return int(self.meta["block"])

    def read_table(self, columns: list[str] | None = None) -> Any:
        """The trial's rows as a ``pyarrow.Table`` (``columns``: only those).

        Raises
        ------
        StorageError
            the file is unreadable (damaged, truncated, gone), naming it.
        """
        import pyarrow.parquet as pq

        try:
            return pq.read_table(self.path, columns=columns, page_checksum_verification=True)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises OSError, ArrowInvalid, ...
            raise _unreadable(self.path, exc) from None

    def rows(self) -> np.ndarray:
        """The trial's rows as a ROW_DTYPE array."""
        return table_to_rows(self.read_table())

    def hosts(self) -> np.ndarray:
        """The load host of each row, in the order of :meth:`rows` (see :func:`table_to_hosts`)."""
        return table_to_hosts(self.read_table())

    def slices(self) -> np.ndarray:
        """Each row's slice index, in the order of :meth:`rows` (see :func:`table_to_slices`)."""
        return table_to_slices(self.read_table())

    def frame(self) -> Any:
        """The trial's rows as a pandas DataFrame (``error``/``phase`` categorical)."""
        return self.read_table().to_pandas()


def _unreadable(path: Path, exc: BaseException) -> StorageError:
    why = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
    return StorageError(f"{path}: unreadable trial file ({type(exc).__name__}: {why}); move it aside "
                        f"(e.g. rename it to {path.stem}.damaged.parquet) and resume the run to measure that "
                        "trial again")


class RunStore:
    """One run's folder. Create with :meth:`open` (new or resumed)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    # -- run.json --------------------------------------------------------------------------
    @classmethod
    def open(cls, study: str, run_id: str | None = None, *, root: str | Path | None = None) -> RunStore:
        """The run folder ``<root>/<study>/<run_id>`` (a new run id when ``None`` or ``""``).

        Raises :class:`ParameterError` for a study name or run id that is not a plain folder
        name (:data:`benchlib.core.model.NAME_PATTERN`)."""
        check_name("study name", study)
        rid = check_name("run id", run_id or new_run_id())
        path = Path(root or default_runs_root()) / study / rid
        path.mkdir(parents=True, exist_ok=True)
        return cls(path)

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def study(self) -> str:
        return self.path.parent.name

    def read_run(self) -> RunRecord | None:
        """The run's ``run.json``, typed (any format so far, brought to the current one:
        :mod:`benchlib.store.records.run`); ``None`` when not written yet.

        Raises
        ------
        StorageError  an unreadable file, or a format or schema version this benchlib does not
            read, naming the file.
        """
        p = self.path / "run.json"
        if not p.exists():
            return None
        try:
            data = json.loads(p.read_text())
        except (ValueError, OSError) as exc:
            raise StorageError(f"{p}: unreadable run.json ({type(exc).__name__}: {exc})") from None
        if not isinstance(data, dict):
            raise StorageError(f"{p}: expected a JSON object, got {type(data).__name__}")
        return RunRecord.from_json(data, where=str(p))

    def write_run(self, record: RunRecord) -> RunRecord:
        """Write ``run.json`` atomically (:meth:`RunRecord.to_json`); returns the record as a
        reader reads it back."""
        p = self.path / "run.json"
        text = json.dumps(record.to_json(), indent=1, sort_keys=True, default=str)
        _atomic_write_bytes(p, text.encode() + b"\n")
        return RunRecord.from_json(json.loads(text), where=str(p))

    def update_run(self, **changes: Any) -> RunRecord:
        """Change fields of the stored :class:`RunRecord` (e.g. ``status="complete"``) and
        write it back; returns the record written.

        Raises
        ------
        StorageError  no run.json yet (write one first), or a field :class:`RunRecord` does not have.
        """
        record = self.read_run()
        if record is None:
            raise StorageError(f"{self.path}: no run.json to update")
        try:
            record = replace(record, **changes)
        except TypeError as exc:
            raise StorageError(f"{self.path}: run.json has no such field ({exc})") from None
        return self.write_run(record)

    # -- trials ----------------------------------------------------------------------------
    def trial_path(self, condition: str, arm: str, block: int) -> Path:
        return self.path / "trials" / condition / arm / f"b{block:03d}.parquet"

    def log_path(self, condition: str, arm: str, block: int) -> Path:
        return self.path / "logs" / condition / arm / f"b{block:03d}.log"

    def has_trial(self, condition: str, arm: str, block: int) -> bool:
        return self.trial_path(condition, arm, block).exists()

    def has_data(self) -> bool:
        """Does the folder hold any trial or log file (set-aside trials included)?"""
        return any(p.is_file() for d in ("trials", "logs") for p in (self.path / d).rglob("*"))

    def set_aside(self, condition: str, arm: str, block: int) -> Path | None:
        """Move a stored trial out of the way (``.failed-N.parquet``) so it can be re-run."""
        p = self.trial_path(condition, arm, block)
        if not p.exists():
            return None
        n = 1
        while (dest := p.with_name(f"{p.stem}.failed-{n}.parquet")).exists():
            n += 1
        os.replace(p, dest)
        return dest

    def write_trial(self, rows: np.ndarray, meta: Mapping[str, Any], *, hosts: np.ndarray | None = None,
                    slices: np.ndarray | None = None) -> StoredTrial:
        """Store one trial (rows + metadata); ``meta`` must name condition, arm and block;
        ``hosts``: each row's load host (default 0: one machine); ``slices``: each row's slice
        index in an interleaved trial (default: none). Returns the trial as stored
        (its file, and its metadata as a reader reads it back).

        Raises StorageError if that trial is already stored (trials are never rewritten).
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        for key in ("condition", "arm", "block"):
            if key not in meta:
                raise StorageError(f"trial metadata needs {key!r}")
        path = self.trial_path(str(meta["condition"]), str(meta["arm"]), int(meta["block"]))
        if path.exists():
            raise StorageError(f"{path} already exists; stored trials are never rewritten")
        text = json.dumps(dict(meta), sort_keys=True, default=str)
        table = rows_to_table(rows, {_META_TRIAL: text.encode(), _META_VERSION: str(SCHEMA_VERSION).encode()},
                              hosts=hosts, slices=slices)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd", write_page_checksum=True)
        _atomic_write_bytes(path, sink.getvalue().to_pybytes())
        return StoredTrial(path, json.loads(text))

    def trials(self, *, verify: bool = False) -> list[StoredTrial]:
        """Every stored trial (set-aside failures excluded), in execution order (``seq``).

        Only the files' metadata is read, unless ``verify``: then every file is read in full,
        so a damaged one is found now (a resume does this before it writes anything).

        Raises
        ------
        StorageError
            an unreadable file, metadata that is not benchlib's, or an unknown schema
            version, naming the file.
        """
        import pyarrow.parquet as pq

        out = []
        for p in sorted((self.path / "trials").glob("*/*/b[0-9][0-9][0-9].parquet")):
            try:
                md = pq.read_metadata(p).metadata or {}
            except Exception as exc:  # noqa: BLE001 - pyarrow raises several types
                raise _unreadable(p, exc) from None
            version = md.get(_META_VERSION, b"?").decode(errors="replace")
            if version not in {str(v) for v in READABLE_SCHEMA_VERSIONS}:
                raise StorageError(f"{p}: schema_version {version}; this benchlib reads "
                                   f"{', '.join(map(str, READABLE_SCHEMA_VERSIONS))}")
            try:
                meta = json.loads(md[_META_TRIAL])
                if not isinstance(meta, dict):
                    raise ValueError(f"expected a JSON object, got {type(meta).__name__}")
            except (KeyError, ValueError) as exc:
                raise StorageError(f"{p}: trial metadata unreadable ({type(exc).__name__}: {exc})") from None
            trial = StoredTrial(p, meta)
            if verify:
                trial.read_table()
            out.append(trial)
        out.sort(key=lambda t: (int(t.meta.get("seq", 0)), str(t.path)))
        return out

    def __iter__(self) -> Iterator[StoredTrial]:
        return iter(self.trials())

    # -- derived ---------------------------------------------------------------------------
    def summaries(self, summarize: Callable[[StoredTrial], Mapping[str, Any]], *, version: str = "") -> Any:
        """Per-trial summaries as a DataFrame, cached in ``derived/summaries.parquet``.

        The cache is keyed by the stored trial files (names, sizes, times) and ``version``
        (the summarizer's own version: a summarizer that adds columns bumps it); any change
        recomputes it with ``summarize(trial) -> dict``.
        """
        import pandas as pd

        trials = self.trials()
        key = json.dumps([version, [[str(t.path.relative_to(self.path)), t.path.stat().st_size,
                                     t.path.stat().st_mtime_ns] for t in trials]])
        cache = self.path / "derived" / "summaries.parquet"
        key_file = cache.with_suffix(".key")
        if cache.exists() and key_file.exists() and key_file.read_text() == key:
            try:
                return pd.read_parquet(cache)
            except Exception:  # noqa: BLE001 - a damaged cache is recomputed (it is derived data)
                pass
        frame = pd.DataFrame([dict(summarize(t)) for t in trials])
        if len(frame):
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
            frame.to_parquet(tmp)
            os.replace(tmp, cache)
            key_file.write_text(key)
        return frame
