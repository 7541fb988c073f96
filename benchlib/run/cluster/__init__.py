"""Load from many hosts on a Ray cluster (the optional extra ``benchlib[cluster]``).

``Experiment(cluster=...)`` (:mod:`benchlib.core.placement`) chooses where the load runs;
:class:`~benchlib.run.cluster.session.ClusterSession` starts or joins the cluster for a run;
:class:`~benchlib.run.cluster.cluster_load.ClusterLoad` runs each trial's load from every load host;
with ``?service=<resource>`` :mod:`~benchlib.run.cluster.service` runs the services on that node.
The pure parts (:mod:`~benchlib.core.placement`, :mod:`~benchlib.run.cluster.clock`) import no Ray;
the others import it only when used. See ``docs/cluster.md``.
"""

from benchlib.core.placement import ClusterSpec, parse_cluster

__all__ = ["ClusterSpec", "parse_cluster"]
