"""Running an experiment: the plan's trials, one by one, on this machine or a Ray cluster.

``runner`` (:func:`~benchlib.run.runner.run_experiment`: the plan in order, repeats, the
make-up pass, lost load hosts), ``executor`` (one trial, run and stored), ``services`` (the
services under test: runtimes, builds, starts and stops), ``resume`` (what a run folder holds
and what is left; the trials a run holds while it runs), ``hooks`` (the stopping rule, the
``decided`` hook, the load hosts, the run-folder list), ``events`` and ``progress`` (the typed
progress events and their renderers), ``cpus`` (which CPUs the service, the load and
dependencies get), ``settle`` (a quiet machine before the first trial), ``sampler`` (what the
machine did to each trial), ``runlog`` (the run's own log), ``cluster`` (load and services on a
Ray cluster) and ``testing`` (stand-ins for the runner's seams, for tests).
"""
