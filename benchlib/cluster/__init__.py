"""Load from many hosts on a Ray cluster (the optional extra ``benchlib[cluster]``).

``Experiment(cluster=...)`` (:mod:`benchlib.cluster.spec`) chooses where the load runs;
:class:`~benchlib.cluster.session.ClusterSession` starts or joins the cluster for a run;
:class:`~benchlib.cluster.load.ClusterLoad` runs each trial's load from every load host;
with ``?service=<resource>`` :mod:`~benchlib.cluster.service` runs the services on that node.
The pure parts (:mod:`~benchlib.cluster.spec`, :mod:`~benchlib.cluster.clock`) import no Ray;
the others import it only when used. See ``docs/cluster.md``.
"""

from benchlib.cluster.spec import ClusterSpec, parse_cluster

__all__ = ["ClusterSpec", "parse_cluster"]
