"""One local Ray cluster for every test module of this folder that needs one (a start costs
25-55 s on a busy machine): two nodes, the head and one more, each a load node named by its
resource (``benchlib_host_0``, ``benchlib_host_1``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def session() -> Iterator[object]:
    pytest.importorskip("ray")
    from benchlib.core.placement import parse_cluster
    from benchlib.run.cluster.session import ClusterSession

    with ClusterSession(parse_cluster("local:2")) as s:  # type: ignore[arg-type]
        yield s
