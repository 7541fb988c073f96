"""Stored runs: written once, read through one typed model.

``runstore`` (:class:`~benchlib.store.runstore.RunStore`: run folders, run.json, one Parquet
file per trial written atomically), ``records`` (the typed, versioned records of a trial and
what it carries, and of run.json), ``results`` (:func:`~benchlib.store.results.open_run` -> ``Run``,
the read model every reader uses) and ``derived`` (the verdict tables a notebook stored beside
its trials, read without opening them).
"""
