"""The foundation every other package stands on, importing none of them.

``model`` (the experiment: :class:`~benchlib.core.model.Arm`, ``LoadSpec``, ``Condition``,
``Experiment``, strictly validated), ``schema`` (the per-request row), ``design`` (randomized,
counterbalanced blocks), ``sweep`` (open-model rates from a measured capacity), ``placement``
(where the load and the services run: the ``cluster=`` values), ``errors`` (the exception
tree), ``settings`` (every ``BENCHLIB_*`` variable), ``signals`` (stopping cleanly),
``provenance`` (machine and package facts) and ``buildcache`` (build folders and records).
"""
