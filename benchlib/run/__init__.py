"""Running an experiment: the plan's trials, one by one, on this machine or a Ray cluster.

``runner`` (:func:`~benchlib.run.runner.run_experiment`), ``cpus`` (which CPUs the service,
the load and dependencies get), ``settle`` (a quiet machine before the first trial),
``sampler`` (what the machine did to each trial), ``progress`` (the progress events and their
renderers), ``runlog`` (the run's own log), ``cluster`` (load and services on a Ray cluster)
and ``testing`` (stand-ins for the runner's seams, for tests).
"""
