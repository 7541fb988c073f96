"""The per-request record: one row per request, the raw material of every number.

Pure: numpy only. The load generator fills arrays of :data:`ROW_DTYPE`; the store writes
them to Parquet (``error`` and ``phase`` as dictionary-encoded strings there); the
statistics read them back.

Times are integer nanoseconds on the monotonic clock (``CLOCK_MONOTONIC``, shared by all
worker processes of one machine), relative to the trial's start:

* ``t_intended_ns``: when the request was due (open model: its schedule slot; closed model:
  when its connection became free, so equal to ``t_sent_ns`` up to the client's own delay);
* ``t_sent_ns``: when its first byte was handed to the kernel;
* ``t_done_ns``: when the last byte of the response arrived, or the error was detected.

Latency = ``t_done_ns - t_intended_ns`` (coordinated-omission-correct);
service time = ``t_done_ns - t_sent_ns``.

Memory: :data:`ROW_DTYPE` is 38 bytes per request, so a 10-million-request trial holds in
380 MB (the recorder measured 41 bytes per request with its growth slack; docs/loadgen.md).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "ERROR_CODES",
    "ERROR_NAMES",
    "PHASE_CODES",
    "PHASE_NAMES",
    "ROW_DTYPE",
    "ROW_BYTES",
    "SCHEMA_VERSION",
    "SCHEMA_HISTORY",
    "READABLE_SCHEMA_VERSIONS",
    "HOST_COLUMN",
    "NO_SLICE",
    "SLICE_COLUMN",
    "SLICE_DTYPE",
    "HOST_DTYPE",
]

#: Version of the stored trial and run formats. Bump it, and add a line to
#: :data:`SCHEMA_HISTORY`, whenever a stored column or run.json field changes meaning.
SCHEMA_VERSION = 3

#: Every stored version this benchlib reads (older runs are read as they are, never migrated).
READABLE_SCHEMA_VERSIONS: tuple[int, ...] = (1, 2, 3)

SCHEMA_HISTORY = """\
1 - (benchlib 0.1) first version: rows t_intended_ns, t_sent_ns, t_done_ns, status, error,
    bytes, conn, worker, phase; run.json with parameters, plan and provenance. Error kinds
    none, connect, reset, timeout, protocol, truncated, closed (the last two appended before
    any run was published).
    Appended later within version 1 (older files read unchanged: ``error`` is stored by name):
    error kind ``grpc`` (a gRPC call that ended with a non-OK grpc-status, that status in
    ``status``; or an HTTP status other than 200 without a gRPC response, that HTTP status in
    ``status``).
2 - stored trials gain the column ``host`` (uint16): the load host that sent the request, an
    index into the trial metadata's ``load.cluster.hosts`` (0 on a single machine). A version-1
    trial is read with ``host`` 0 for every row. The in-memory row (:data:`ROW_DTYPE`) is
    unchanged: the host is a column of the stored trial, beside the rows
    (``LoadResult.hosts``, ``StoredTrial.hosts()``).
3 - stored trials gain the column ``slice`` (uint16): in an interleaved trial (several arms
    measured side by side, each arm's rows stored as its own trial), the index of the arm's
    slice the request was due in (its windows: the trial metadata's ``interleave``);
    :data:`NO_SLICE` (65535) for a request of a trial that measured its arm alone, and for
    every row of a trial stored before version 3.
"""

#: The stored trial's column with the index of the arm's slice each request was due in (schema
#: version 3; :data:`NO_SLICE` outside an interleaved trial).
SLICE_COLUMN = "slice"
#: Its type, and its value for a request not in an interleaved trial.
SLICE_DTYPE = np.dtype(np.uint16)
NO_SLICE = 65535

#: The stored trial's column naming the load host of each request (schema version 2).
HOST_COLUMN = "host"
#: Its type: an index into the trial's ``load.cluster.hosts`` (0 on a single machine).
HOST_DTYPE = np.dtype(np.uint16)

#: Error kinds, by code. ``none`` = a complete response was received (any status);
#: ``connect`` = the connection could not be opened (refused, unreachable); ``reset`` = the
#: connection was reset; ``timeout`` = no complete response within the response timeout (or
#: the connect timeout); ``protocol`` = a malformed response (bad status line, header,
#: length or chunk; a head over the size limit; bytes after the response); ``truncated`` =
#: the connection ended before the response head was complete; ``closed`` = the connection
#: ended in the middle of the body; ``grpc`` = a complete gRPC response whose grpc-status is
#: not 0 (``OK``): ``status`` holds that grpc-status (1-16), or, for an answer that was no
#: gRPC response (no grpc-status) with an HTTP status other than 200, that HTTP status
#: (>= 100). New kinds are only ever appended (codes are stable).
ERROR_NAMES: tuple[str, ...] = ("none", "connect", "reset", "timeout", "protocol", "truncated", "closed", "grpc")
ERROR_CODES: dict[str, int] = {name: i for i, name in enumerate(ERROR_NAMES)}

#: Phases, by code.
PHASE_NAMES: tuple[str, ...] = ("warmup", "measure")
PHASE_CODES: dict[str, int] = {name: i for i, name in enumerate(PHASE_NAMES)}

#: One request. ``status`` is the HTTP status (0 when no response; for gRPC calls see
#: ``grpc`` above: a call with grpc-status 0 has HTTP status 200 there); ``bytes`` counts the
#: response bytes received (headers and body; HTTP/2: the HEADERS and DATA frames, with
#: their 9-byte frame headers); ``conn`` numbers connections within the
#: trial (unique across workers); ``worker`` the client worker process.
ROW_DTYPE = np.dtype(
    [
        ("t_intended_ns", np.int64),
        ("t_sent_ns", np.int64),
        ("t_done_ns", np.int64),
        ("bytes", np.int32),
        ("conn", np.int32),
        ("status", np.int16),
        ("error", np.uint8),
        ("phase", np.uint8),
        ("worker", np.uint16),
    ],
    align=False,
)

ROW_BYTES = ROW_DTYPE.itemsize
assert ROW_BYTES <= 64, ROW_BYTES
