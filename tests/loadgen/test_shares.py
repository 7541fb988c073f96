"""Hosts' shares of one trial's load (pure): disjoint, and together exactly one generator's."""

from __future__ import annotations

import numpy as np
import pytest

from benchlib.core.model import LoadSpec, Stage, Target
from benchlib.loadgen.launch import _worker_configs
from benchlib.loadgen.schedule import arrival_offsets_ns, arrivals_in_window, segments_for
from benchlib.loadgen.shares import HostShare


def _host_arrivals(segs: list[tuple[float, float]], arrival: str, share: HostShare, workers: int,
                   seed: int) -> np.ndarray:
    """Every intended time one host's workers would send (as the engine asks the schedule)."""
    parts = [a for g in share.global_workers(workers)
             for a in arrival_offsets_ns(segs, arrival=arrival, worker=g, workers=share.total_workers(workers),
                                         seed=seed)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


@pytest.mark.parametrize("hosts", [1, 2, 3, 5])
@pytest.mark.parametrize("workers", [1, 2])
def test_constant_shares_are_disjoint_and_their_union_is_the_single_generator_schedule(hosts: int,
                                                                                        workers: int) -> None:
    segs = segments_for(None, None, [(997.0, 1.3), (3001.0, 0.7)], warmup_s=0.25)
    single = arrivals_in_window(segs, arrival="constant", workers=1)
    per_host = [_host_arrivals(segs, "constant", HostShare(h, hosts), workers, seed=3) for h in range(hosts)]
    union = np.sort(np.concatenate(per_host))
    assert np.array_equal(union, single)  # no slot twice, none missing
    assert sum(len(p) for p in per_host) == len(single)
    sizes = [len(p) for p in per_host]
    assert max(sizes) - min(sizes) <= 2 * workers * len(segs)  # an even share, up to each segment's remainder


@pytest.mark.parametrize("hosts", [2, 3])
def test_poisson_shares_union_is_one_generator_of_all_the_workers(hosts: int) -> None:
    segs = segments_for(2000.0, 1.0, [], warmup_s=0.2)
    W = 2
    per_host = [_host_arrivals(segs, "poisson", HostShare(h, hosts), W, seed=11) for h in range(hosts)]
    union = np.sort(np.concatenate(per_host))
    assert np.array_equal(union, arrivals_in_window(segs, arrival="poisson", workers=hosts * W, seed=11))
    assert len(np.unique(union)) == len(union) or len(union) - len(np.unique(union)) < 3  # ns ties only by chance
    assert abs(len(union) / 1.2 - 2000) < 5 * np.sqrt(2000 * 1.2) / 1.2


def test_closed_connections_requests_and_connection_numbers_add_up_across_hosts() -> None:
    spec = LoadSpec(model="closed", connections=11, requests=1001, warmup_requests=51, workers=2)
    target = Target("127.0.0.1", 1)
    cfgs = [c for h in range(3) for c in _worker_configs(spec, target, 0, HostShare(h, 3))]
    assert sum(c["connections"] for c in cfgs) == 11
    assert sum(c["requests"] for c in cfgs) == 1001
    assert sum(c["warmup_requests"] for c in cfgs) == 51
    assert [c["worker"] for c in cfgs] == list(range(6)) and {c["workers"] for c in cfgs} == {6}
    # the engine numbers a worker's connections g, g + G, ...: disjoint across every host's workers
    ids = [set(range(c["worker"], c["worker"] + 6 * c["connections"], 6)) for c in cfgs]
    assert sum(len(s) for s in ids) == len(set().union(*ids)) == 11


def test_one_host_is_the_single_machine_split() -> None:
    spec = LoadSpec(model="open", rate_rps=100, duration_s=1, connections=4, workers=2,
                    stages=(Stage(100, 1.0),))
    target = Target("127.0.0.1", 1)
    assert _worker_configs(spec, target, 5) == _worker_configs(spec, target, 5, HostShare(0, 1))


@pytest.mark.parametrize("host, hosts", [(2, 2), (-1, 2), (0, 0), (True, 2), (0, 1.5)])
def test_bad_shares_are_refused_naming_the_valid_range(host: object, hosts: object) -> None:
    with pytest.raises(ValueError, match="HostShare"):
        HostShare(host, hosts)  # type: ignore[arg-type]
