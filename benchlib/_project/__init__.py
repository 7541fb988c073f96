"""The project's own tooling, not part of the library's API: the quoted times
(``measurements``: data/measurements.json into README, notebooks and pages) and the study
pages' generated blocks (``studypages``: data/findings.json into docs/studies/).
"""
